"""`documents.holds_mark` finds a text mark of two characters (`{{`, `__`) by its first character, as
`str.find` finds it, within the same bounds (negative and past-the-end ones too)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpupolicy.loading.documents import TEXT_MARKS, holds_mark, text_marks

TEXTS = st.text(alphabet="_{}$<\\ax\n", max_size=60)
BOUNDS = st.integers(min_value=-70, max_value=70)


@settings(max_examples=2000, deadline=None)
@given(TEXTS, BOUNDS, BOUNDS)
def test_a_mark_is_held_where_find_finds_it(text: str, start: int, end: int) -> None:
    for mark in TEXT_MARKS:
        assert holds_mark(text, mark, start, end) == (text.find(mark, start, end) >= 0)


def test_a_pair_after_many_first_characters_is_found() -> None:
    text = "_a" * 50 + "__" + "a_" * 50
    assert holds_mark(text, "__", 0, len(text))
    assert not holds_mark(text, "__", 0, 100)  # the pair starts at 100
    assert not holds_mark(text, "__", 101, len(text))  # only its second character is inside
    assert holds_mark(text, "__", 99, 102)
    assert not holds_mark("{" * 9 + "x{", "{{", 8, 11)


def test_a_documents_marks_are_those_its_range_holds() -> None:
    text = "a: {x}\n---\nb: {{ y }}\n---\nc: _z_\n"
    assert text_marks(text, 0, 7) == frozenset()
    assert text_marks(text, 11, 22) == frozenset({"{{"})
    assert text_marks(text, 26, len(text)) == frozenset()
