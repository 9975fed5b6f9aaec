"""Tolerations against taints, as the scheduler matches them.

https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpupolicy.core.immutable import immutable


@immutable
class Taint:
    key: str
    effect: str
    value: str = ""


# `(dict, Mapping)`: parsed manifests hold dicts, which the tuple's first type answers at once;
# an ABC check alone goes through ABCMeta.__instancecheck__ in Python on every call.
def toleration_tolerates(toleration: Any, taint: Taint) -> bool:
    """An empty key with `Exists` tolerates everything; an empty effect matches every effect;
    `Equal` (the default operator) compares values, `Exists` ignores them."""
    if not isinstance(toleration, (dict, Mapping)):
        return False
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.key:
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return str(toleration.get("value") or "") == taint.value
    return False


def tolerates(tolerations: Any, taint: Taint) -> bool:
    if not isinstance(tolerations, list):
        return False
    return any(toleration_tolerates(item, taint) for item in tolerations)


def toleration_for(tolerations: Any, taint: Taint, *, match_value: bool) -> int | None:
    """Index of the first toleration that tolerates `taint`, matched on key and effect (and on the
    value too when `match_value`); a keyless `Exists` tolerates everything. None when none does."""
    if not isinstance(tolerations, list):
        return None
    for index, item in enumerate(tolerations):
        if match_value:
            if toleration_tolerates(item, taint):
                return index
            continue
        if not isinstance(item, (dict, Mapping)):
            continue
        effect = item.get("effect") or ""
        key = item.get("key") or ""
        if effect and effect != taint.effect:
            continue
        if (not key and (item.get("operator") or "Equal") == "Exists") or key == taint.key:
            return index
    return None
