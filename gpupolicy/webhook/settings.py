"""The policy's `webhook` section, read once at start-up: modes, excluded namespaces, body limit.

Exemptions are not here: the policy's top-level `exemptions` (owner, reason, `expires`) and the
`gpupolicy.io/ignore` annotation (where the policy's `suppressions` section allows it) are applied
inside `engine.evaluate()` by `gpupolicy.engine.suppressions`, the same for lint and for the webhook.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Sequence

from gpupolicy.core import vocabulary
from gpupolicy.core.immutable import immutable
from gpupolicy.kube.pod_spec import as_list, as_mapping
from gpupolicy.policy.loading import Policy

DEFAULT_MAX_BODY_BYTES = 7 * 1024 * 1024
DEFAULT_DECISION_CACHE_BYTES = 32 * 1024 * 1024


class Mode(enum.StrEnum):
    ENFORCE = vocabulary.ENFORCE  # deny on error findings
    WARN = vocabulary.WARN  # allow; findings as warnings
    AUDIT = vocabulary.AUDIT  # allow; record only

    @classmethod
    def parse(cls, text: str) -> Mode:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(
                f"unknown webhook mode {text!r} (use {', '.join(vocabulary.MODES[:-1])} or {vocabulary.MODES[-1]})"
            ) from None


def _matches(value: str | None, patterns: Sequence[str]) -> bool:
    text = value or ""
    return any(pattern == text or fnmatch.fnmatchcase(text, pattern) for pattern in patterns)


class OnRuleError(enum.StrEnum):
    """Enforce mode's decision for an object a rule failed on (`webhook.onRuleError`)."""

    DENY = "deny"
    ALLOW = "allow"


@immutable
class WebhookSettings:
    default_mode: Mode = Mode.ENFORCE
    namespace_modes: tuple[tuple[tuple[str, ...], Mode], ...] = ()
    excluded_namespaces: tuple[str, ...] = ("kube-system",)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    on_rule_error: OnRuleError = OnRuleError.DENY
    decision_cache_bytes: int = DEFAULT_DECISION_CACHE_BYTES  # 0: every admission is evaluated

    @classmethod
    def from_policy(cls, policy: Policy, *, mode: Mode | None = None) -> WebhookSettings:
        """`mode` (from `--mode`) replaces the policy's default mode; namespace modes still win."""
        section = policy.section("webhook")
        namespace_modes = tuple(
            (tuple(str(item) for item in as_list(entry.get("namespaces"))), Mode.parse(str(entry["mode"])))
            for entry in (as_mapping(raw) for raw in as_list(section.get("namespaceModes")))
            if "mode" in entry
        )
        return cls(
            default_mode=mode or Mode.parse(str(section.get("mode", vocabulary.ENFORCE))),
            namespace_modes=namespace_modes,
            excluded_namespaces=tuple(str(item) for item in as_list(section.get("excludedNamespaces"))),
            max_body_bytes=int(section.get("maxBodyBytes", DEFAULT_MAX_BODY_BYTES)),
            on_rule_error=OnRuleError(str(section.get("onRuleError", OnRuleError.DENY.value))),
            decision_cache_bytes=int(section.get("decisionCacheBytes", DEFAULT_DECISION_CACHE_BYTES)),
        )

    def mode_for(self, namespace: str | None) -> Mode:
        for patterns, mode in self.namespace_modes:
            if _matches(namespace, patterns):
                return mode
        return self.default_mode

    def excluded(self, namespace: str | None) -> bool:
        return namespace is not None and _matches(namespace, self.excluded_namespaces)
