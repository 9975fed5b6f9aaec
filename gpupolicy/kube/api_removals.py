"""API versions the Kubernetes API server no longer serves, or serves only until a release.

The table is `policies/api-removals.yaml`, transcribed from the Deprecated API Migration Guide
(https://kubernetes.io/docs/reference/using-api/deprecation-guide/), read once.
"""

from __future__ import annotations

import functools
from typing import Any

import yaml

from gpupolicy.core.immutable import immutable
from gpupolicy.core.packaged import policies_dir


@immutable
class Removal:
    api_version: str
    kind: str
    removed_in: tuple[int, int]
    replacement: str | None
    available_since: tuple[int, int] | None

    def status(self, version: tuple[int, int]) -> str | None:
        """ "removed" at or after the release that stops serving it, "deprecated" while its
        replacement is served too, None before that."""
        if version >= self.removed_in:
            return "removed"
        if self.available_since is not None and version >= self.available_since:
            return "deprecated"
        return None


def minor(text: str) -> tuple[int, int]:
    """`1.25` → (1, 25)."""
    major, _, rest = text.strip().lstrip("v").partition(".")
    return int(major), int(rest.partition(".")[0] or 0)


@functools.cache
def removals() -> dict[tuple[str, str], Removal]:
    """(apiVersion, kind) → its removal, from the shipped table."""
    text = (policies_dir() / "api-removals.yaml").read_text(encoding="utf-8")
    # PyYAML's C loader when it was built with libyaml: the pure-Python one takes tens of ms here.
    data: Any = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    table: dict[tuple[str, str], Removal] = {}
    for entry in data["removals"]:
        since = entry.get("availableSince")
        for kind in entry["kinds"]:
            table[(entry["apiVersion"], kind)] = Removal(
                api_version=entry["apiVersion"],
                kind=kind,
                removed_in=minor(entry["removedIn"]),
                replacement=entry.get("replacement"),
                available_since=minor(since) if since else None,
            )
    return table


def removal_of(api_version: str, kind: str) -> Removal | None:
    return removals().get((api_version, kind))
