"""Where each field of a loaded object is written: a compact table made while its values are built.

A finding points at the key of the field it is about (or the list item), and at the nearest
existing ancestor when the field is absent. The loader used to keep each document's node graph
to answer that; the graph weighs about four times the values. The table keeps, of each node, only
what an answer reads: where it starts and ends, packed in one int (a span), and what is below it.
An entry is that span alone for a scalar that is not a block scalar (most entries), else a pair of
the span and what is below: a third less memory than a tuple of two places and what is below
(docs/performance.md, "Loader").

- a mapping's table is a dict from each key as written (a scalar key's text) to the entry of its
  value, placed at the key; the last of repeated keys wins, as in kubectl. A mapping with `<<`
  merge keys holds the tables of the mappings merged into it too (`MergedMapping`): a key it does
  not write is looked up there, the first source listed first, as its values were merged.
- a sequence's table is the list of the entries of its items, each placed at the item.
- a scalar has no table; a block scalar (`|`, `>`) keeps where its text starts (the lines of a
  rollback-criteria annotation are counted from there).

An alias shares the table of its anchor, so a field reached through one points where the anchor
wrote it.
"""

from __future__ import annotations

import bisect
import re
from typing import TypeAlias

import yaml

from gpupolicy.core.findings import JsonPath

# A place in the text: (line << 32) | column, both 0-based. No line of a text Python can hold in
# memory has 2**32 characters.
Place: TypeAlias = int
COLUMN_BITS = 32
_COLUMN_MASK = (1 << COLUMN_BITS) - 1

# Where a key or item starts and ends: start << 64 | end, each a Place (64 bits), so both are kept whole.
Span: TypeAlias = int
SPAN_BITS = 2 * COLUMN_BITS
_PLACE_MASK = (1 << SPAN_BITS) - 1

Child: TypeAlias = "MappingTable | list[Entry] | Place | None"
# A plain scalar's span alone, or (span, what is below: a table, or where a block scalar starts).
Entry: TypeAlias = "Span | tuple[Span, Child]"
MappingTable: TypeAlias = "dict[str, Entry]"


class MergedMapping(dict[str, Entry]):
    """The table of a mapping with merge keys: its written keys, and `sources`, the tables of the
    mappings merged into it in the order they are listed."""

    __slots__ = ("sources",)

    def __init__(self, written: dict[str, Entry], sources: list[MappingTable]) -> None:
        super().__init__(written)
        self.sources = sources


def place(line: int, column: int) -> Place:
    return line << COLUMN_BITS | column


def line_and_column(where: Place) -> tuple[int, int]:
    """0-based (line, column) of a place."""
    return where >> COLUMN_BITS, where & _COLUMN_MASK


class LineIndex:
    """Editor positions in a text where libyaml's differ. libyaml (YAML 1.1) also ends a line at
    a lone "\r", NEL, LS and PS, and skips a leading BOM; git, GitHub annotations, SARIF viewers
    and `# gpupolicy: ignore` comments count lines by "\n". In such a text a position is found
    from the character index libyaml's line and column (or its mark's index) stand for."""

    __slots__ = ("_libyaml_starts", "_shift", "_size", "_starts")

    # What makes libyaml's line or column differ from counting "\n" (a "\r\n" is one break for both).
    _ALWAYS_DIFFER = ("\x85", "\u2028", "\u2029", "\ufeff")  # NEL, LS, PS; a BOM
    _LONE_CR = re.compile("\r(?!\n)")
    _LIBYAML_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")

    def __init__(self, text: str) -> None:
        self._starts = [0, *(match.end() for match in re.finditer("\n", text))]
        self._shift = 1 if text.startswith("\ufeff") else 0  # libyaml's index and columns skip it
        self._libyaml_starts = [self._shift, *(match.end() for match in self._LIBYAML_BREAK.finditer(text))]
        self._size = len(text)

    @classmethod
    def needed(cls, text: str) -> LineIndex | None:
        """An index for `text` when libyaml's lines or columns would be wrong there, else None."""
        # `in` finds one character at C speed; one regular expression for all of them took 5 % of
        # the loader's time on plain text.
        differs = any(character in text for character in cls._ALWAYS_DIFFER) or (
            "\r" in text and cls._LONE_CR.search(text) is not None
        )
        return cls(text) if differs else None

    def position(self, mark: yaml.Mark) -> tuple[int, int]:
        """0-based editor (line, column) of `mark`; a mark past the end (the end of a stream that
        does not end in a newline) is the end of the text."""
        return self._at(mark.index + self._shift)

    def from_libyaml(self, line: int, column: int) -> tuple[int, int]:
        """0-based editor (line, column) of libyaml's 0-based (line, column). At the end of a
        stream that does not end in a line break libyaml counts one more line: the end of the text."""
        starts = self._libyaml_starts
        return self._at(starts[line] + column if line < len(starts) else self._size)

    def _at(self, index: int) -> tuple[int, int]:
        index = min(index, self._size)
        line = bisect.bisect_right(self._starts, index) - 1
        return line, index - self._starts[line]


def mark_position(mark: yaml.Mark, lines: LineIndex | None) -> tuple[int, int]:
    """0-based (line, column) of a libyaml mark, with `lines` where libyaml counts differently."""
    return lines.position(mark) if lines is not None else (mark.line, mark.column)


def mark_place(mark: yaml.Mark) -> Place:
    """The place of a mark as libyaml counts (a LineIndex turns it into an editor's)."""
    return mark.line << COLUMN_BITS | mark.column


def span(start: Place, end: Place) -> Span:
    return start << SPAN_BITS | end


def span_start(where: Span) -> Place:
    return where >> SPAN_BITS


def span_end(where: Span) -> Place:
    return where & _PLACE_MASK


def span_of(entry: Entry) -> Span:
    return entry if isinstance(entry, int) else entry[0]


def child_of(entry: Entry) -> Child:
    """What is below an entry: a collection's table, a block scalar's start, else None."""
    return None if isinstance(entry, int) else entry[1]


def entry_of(table: MappingTable, key: str) -> Entry | None:
    """The entry of `key` in a mapping's table: written there, or else merged into it."""
    found = table.get(key)
    if found is not None or type(table) is not MergedMapping:
        return found
    for source in table.sources:
        found = entry_of(source, key)
        if found is not None:
            return found
    return None


def is_table(child: Child) -> bool:
    """Whether an entry's child is a collection's table (else the entry is a scalar's)."""
    return isinstance(child, dict | list)


class PositionTable:
    """The positions of one object: its root entry (the object's own start and end) and below."""

    __slots__ = ("root",)

    def __init__(self, root: Entry) -> None:
        self.root = root

    def start(self) -> tuple[int, int]:
        """0-based (line, column) where the object starts, as libyaml counts them."""
        return line_and_column(span_start(span_of(self.root)))

    def pointer(self, path: JsonPath) -> tuple[Span, bool]:
        """The span of what a finding about `path` points at (the key of a mapping entry, the item
        of a list; the nearest existing ancestor when the field is absent), and whether that span
        is a scalar's (a key, or a scalar item)."""
        pointer, is_key = self.root, False
        child = child_of(pointer)
        for step in path:
            if isinstance(child, dict) and isinstance(step, str):
                found = entry_of(child, step)
                if found is None:
                    break
                pointer, is_key = found, True
            elif isinstance(child, list) and isinstance(step, int) and 0 <= step < len(child):
                pointer, is_key = child[step], False
            else:
                break
            child = child_of(pointer)
        return span_of(pointer), is_key or not is_table(child)

    def written(self, keys: tuple[str, ...]) -> Entry | None:
        """The entry at `keys` through mapping keys written in the text (not merged), if any."""
        entry: Entry | None = self.root
        for key in keys:
            child = child_of(entry) if entry is not None else None
            if not isinstance(child, dict):
                return None
            entry = child.get(key)
        return entry
