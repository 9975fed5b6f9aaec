"""`scan_comments` skips a text without `#` (no comment, so no directive) before searching it for
"gpupolicy:"; a text with one is scanned as before."""

from __future__ import annotations

from gpupolicy.loading.directives import scan_comments


def test_a_text_without_a_hash_has_no_directive() -> None:
    assert scan_comments("a: gpupolicy: ignore GP102 -- quoted\nb: 1\n", "t.yaml") == []


def test_a_directive_is_still_found() -> None:
    (found,) = scan_comments("a: 1  # gpupolicy: ignore GP102 -- a reason\n", "t.yaml")
    assert (found.line, found.column, found.rules, found.reason, found.own_line) == (
        1,
        7,
        " GP102 ",
        "a reason",
        False,
    )


def test_a_hash_elsewhere_is_not_a_directive() -> None:
    assert scan_comments("a: 'x # y'\nb: gpupolicy: ignore\n", "t.yaml") == []
