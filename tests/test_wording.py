"""One way a message names several things (gpupolicy/core/wording.py)."""

from __future__ import annotations

from gpupolicy.core.wording import listed


def test_the_first_names_and_how_many_more() -> None:
    assert listed(["a", "b"]) == "a; b"
    assert listed(["a", "b", "c", "d", "e"], ", ") == "a, b, c and 2 more"
    assert listed(["a", "b", "c", "d", "e", "f"], ", ", shown=5) == "a, b, c, d, e and 1 more"
