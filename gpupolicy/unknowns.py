"""Saying "unknown" once: when the inventory cannot tell whether an object exists (a class defined
outside the repository, a cluster cache that has not synced), a rule reports that as one info
finding per missing name and evaluation, never as an error and never silently."""

from __future__ import annotations

from collections.abc import Hashable

from gpupolicy.engine import Context


def first_time(ctx: Context, key: Hashable) -> bool:
    """True the first time `key` is seen in this evaluation."""
    seen: set[Hashable] = ctx.memo("unknowns-said", set)
    if key in seen:
        return False
    seen.add(key)
    return True
