"""The policy's `exemptions`: findings its owners let pass, on chosen objects, until a date.

Parsed once, when the policy is compiled (gpupolicy/policy/loading.py); applied to findings by
gpupolicy/engine/suppressions.py.
"""

from __future__ import annotations

import datetime
import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpupolicy.core.findings import Finding
from gpupolicy.core.immutable import immutable


@immutable
class Exemption:
    index: int
    rules: tuple[str, ...]
    kinds: tuple[str, ...]
    namespaces: tuple[str, ...]
    names: tuple[str, ...]
    paths: tuple[str, ...]
    owner: str
    reason: str
    expires: datetime.date | None

    def label(self) -> str:
        return f"policy exemption #{self.index + 1} (owner {self.owner})"

    def matches(self, finding: Finding, rule_id: str | None) -> bool:
        if self.rules and rule_id not in self.rules:
            return False
        obj = finding.object
        if self.kinds and not (obj and _any_glob(obj.kind, self.kinds)):
            return False
        if self.namespaces and not (obj and _any_glob(obj.namespace or "default", self.namespaces)):
            return False
        if self.names and not (obj and _any_glob(obj.name, self.names)):
            return False
        return not self.paths or (finding.file is not None and _any_glob(finding.file, self.paths))


def _any_glob(value: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


def parse_exemptions(raw: Sequence[Mapping[str, Any]]) -> tuple[Exemption, ...]:
    """The `exemptions` section (its shape checked by the schema) as `Exemption`s."""
    return tuple(
        Exemption(
            index=index,
            rules=_strings(item.get("rules")),
            kinds=_strings(item.get("kinds")),
            namespaces=_strings(item.get("namespaces")),
            names=_strings(item.get("names")),
            paths=_strings(item.get("paths")),
            owner=str(item.get("owner", "")),
            reason=str(item.get("reason", "")).strip(),
            expires=_date(item.get("expires")),
        )
        for index, item in enumerate(raw)
    )


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def _date(value: Any) -> datetime.date | None:
    """`expires` as YAML gives it: a date, a timestamp, or a string the schema's pattern let through."""
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None
