"""How a finding's message names several things: the first few, and how many more, so that a list
of any length is one bounded line."""

from __future__ import annotations

from collections.abc import Sequence


def listed(names: Sequence[str], separator: str = "; ", shown: int = 3) -> str:
    """The first `shown` names, and how many more there are (`a, b, c and 4 more`)."""
    more = len(names) - shown
    return separator.join(names[:shown]) + (f" and {more} more" if more > 0 else "")
