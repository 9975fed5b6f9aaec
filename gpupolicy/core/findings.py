"""The records every shell reads: severities, object references and findings."""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Any

from gpupolicy.core.immutable import immutable

JsonPath = tuple[str | int, ...]


class Severity(enum.IntEnum):
    """Ordered so that `severity >= threshold` means "at least as bad as"."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> Severity:
        aliases = {"i": "info", "w": "warning", "warn": "warning", "e": "error"}
        key = aliases.get(text.strip().lower(), text.strip().lower())
        try:
            return cls[key.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use error, warning or info)") from None

    @property
    def label(self) -> str:
        return self.name.lower()


@immutable
class ObjectRef:
    kind: str
    namespace: str | None
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind} {self.namespace}/{self.name}"
        return f"{self.kind} {self.name}"


def format_path(path: JsonPath) -> str:
    """Render a JSON path the way people read them: `$.spec.containers[0].resources.limits["nvidia.com/gpu"]`."""
    parts = ["$"]
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        elif step.replace("_", "a").replace("-", "a").isalnum() and not step[:1].isdigit():
            parts.append(f".{step}")
        else:
            parts.append(f'["{step}"]')
    return "".join(parts)


@immutable
class Finding:
    rule_id: str
    rule_name: str
    severity: Severity
    message: str
    remediation: str
    object: ObjectRef | None
    path: JsonPath = ()
    file: str | None = None
    line: int | None = None
    column: int | None = None
    doc_index: int | None = None
    container: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def json_path(self) -> str:
        return format_path(self.path)

    def location(self) -> str:
        if self.file is None:
            return "<input>"
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.column or 1}"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.file or "", self.line or 0, self.column or 0, self.rule_id)

    @property
    def unknown(self) -> bool:
        """Whether it says a fact of the cluster is missing or could not be verified (such a
        finding is info whatever the policy says: gpupolicy/engine/unknowns.py)."""
        extra = self.extra
        return bool(extra) and ("clusterFact" in extra or bool(extra.get("unknown")))


EXCERPT_CHARS = 60


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """`repr(value)` cut to about `limit` characters: what a message may echo of the input (a 3 MB
    string or an expanded alias must never become a 3 MB message). Strings are cut before
    `repr`, so a huge one costs no more than a short one."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return repr(value[:limit]) + f"… ({len(value):,} characters)"
    if isinstance(value, int | float | bool) or value is None:
        text = (
            repr(value) if not isinstance(value, int) or value.bit_length() < 4 * limit else "a huge integer"
        )
        return text if len(text) <= limit else text[:limit] + "…"
    return type(value).__name__  # containers: their type, never their (possibly expanded) contents
