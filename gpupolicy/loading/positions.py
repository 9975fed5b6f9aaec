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

A place is the character index of a libyaml mark (one attribute read per mark, where a line and a
column are two); the text's `LineStarts`, made once per text, turn it into a line and column when
a finding asks. An alias shares the table of its anchor, so a field reached through one points
where the anchor wrote it.
"""

from __future__ import annotations

import bisect
import copy
import re
from array import array
from itertools import accumulate
from typing import TypeAlias

import yaml

from gpupolicy.core.findings import JsonPath

# A place in the text: the character index of a mark, as the parser counts (`yaml.Mark.index`).
Place: TypeAlias = int
# Bits of each place in a span, for a text of fewer than 2**30 characters: a span then fits a
# two-digit Python int (32 bytes; 48 for the four-digit ints of wider places). A longer text
# has wider places (`LineStarts.bits`).
PLACE_BITS = 30

# Where a key or item starts and ends: start << bits | end, `bits` those of its text's places.
Span: TypeAlias = int

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


class LineIndex:
    """Editor positions in a text where libyaml's differ. libyaml (YAML 1.1) also ends a line at
    a lone "\r", NEL, LS and PS, and skips a leading BOM; git, GitHub annotations, SARIF viewers
    and `# gpupolicy: ignore` comments count lines by "\n". In such a text a position is found
    from the character index of its mark."""

    __slots__ = ("_shift", "_size", "_starts")

    # What makes libyaml's line or column differ from counting "\n" (a "\r\n" is one break for both).
    _ALWAYS_DIFFER = ("\x85", "\u2028", "\u2029", "\ufeff")  # NEL, LS, PS; a BOM
    _LONE_CR = re.compile("\r(?!\n)")

    def __init__(self, text: str) -> None:
        self._starts = [0, *(match.end() for match in re.finditer("\n", text))]
        self._shift = 1 if text.startswith("\ufeff") else 0  # libyaml's index and columns skip it
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
        return self.at(mark.index + self._shift)

    def at(self, index: int) -> tuple[int, int]:
        """0-based editor (line, column) of an index into the text (past its end: the end)."""
        index = min(index, self._size)
        line = bisect.bisect_right(self._starts, index) - 1
        return line, index - self._starts[line]


def mark_position(mark: yaml.Mark, lines: LineIndex | None) -> tuple[int, int]:
    """0-based (line, column) of a libyaml mark, with `lines` where libyaml counts differently."""
    return lines.position(mark) if lines is not None else (mark.line, mark.column)


_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")  # libyaml's ("\r\n" ends in "\n")


class LineStarts:
    r"""Where the lines of one text start, in the indexes its parser gives marks: turns a place into
    the (line, column) the parser's mark had, or an editor's. Made once per text, an int of 4 bytes
    a line; the Resources of the text share it, and it goes with them.

    The parser counts lines where libyaml does: at "\n", "\r\n", a lone "\r", NEL, LS and PS (the
    breaks of `str.splitlines`, whose others, \x0b, \x0c and \x1c-\x1e, YAML does not allow in a
    text). libyaml's indexes and columns skip a leading BOM; PyYAML's Python parser counts it in
    its indexes but not in its columns. At the end of a text that does not end in a line break,
    libyaml puts the end of a block collection on a line of its own, one past the text's last: the
    walk marks such an end as `end + 1` (`moved_end`)."""

    __slots__ = ("_bom", "_first", "_starts", "bits", "editor", "end", "last_line")

    def __init__(self, text: str, *, skips_bom: bool, editor: LineIndex | None) -> None:
        lines = text.splitlines(keepends=True)
        bom = 1 if text.startswith("\ufeff") else 0
        skipped = bom if skips_bom else 0  # what the parser's indexes leave out of the text's
        if bom:
            lines[0] = lines[0][1:]  # line 0 starts after the BOM in the parser's columns
        self.end = len(text) - skipped  # the parser's index at the end of the text
        self.bits = max(PLACE_BITS, (self.end + 1).bit_length())  # room for `end + 1`
        starts = accumulate(map(len, lines), initial=bom - skipped)  # and where the text ends
        self._starts: array[int] = array("I" if self.end < 2**32 else "q", starts)
        if lines and lines[-1][-1:] not in _BREAKS:
            self._starts.pop()  # no line starts at the end of a text that does not end in a break
        self.last_line = len(self._starts) - 1
        self._first = 0  # the line of `_starts[0]` (`around` keeps a few lines)
        self._bom = skipped  # what to add to a place for an index into the text
        self.editor = editor  # where libyaml's lines and columns are not an editor's (None: they are)

    @classmethod
    def of(cls, text: str, node: yaml.Node) -> LineStarts:
        """The line starts of `text`, in the indexes of the parser that composed `node` (libyaml's
        marks hold no buffer; PyYAML's Python reader keeps the text in each)."""
        return cls(text, skips_bom=node.start_mark.buffer is None, editor=LineIndex.needed(text))

    def moved_end(self, mark: yaml.Mark) -> Place:
        """The place of a block collection's end mark: `end + 1` where libyaml moved it past the
        text's last line (a text that does not end in a line break), else its index."""
        index: int = mark.index
        return index + 1 if index == self.end and mark.line > self.last_line else index

    def parsed(self, where: Place) -> tuple[int, int]:
        """0-based (line, column) of a place, as the parser's mark had them."""
        if where > self.end:  # libyaml's end of a block collection, moved past the last line
            return self.last_line + 1, 0
        starts = self._starts
        line = bisect.bisect_right(starts, where) - 1
        return self._first + line, where - starts[line]

    def around(self, start: Place, end: Place) -> LineStarts:
        """These line starts, for places from `start` to `end` only (one object's): what an object
        kept after its text is read keeps, rather than the whole text's. (Where an editor counts
        lines differently, a rare text, its index is the whole text's: kept whole.)"""
        if self.editor is not None:
            return self
        first, last = self.parsed(start)[0], self.parsed(min(end, self.end))[0]
        narrowed = copy.copy(self)
        narrowed._starts = self._starts[first - self._first : last - self._first + 1]
        narrowed._first = first
        return narrowed

    def position(self, where: Place) -> tuple[int, int]:
        """0-based editor (line, column) of a place."""
        if self.editor is None:
            return self.parsed(where)
        return self.editor.at(where + self._bom)

    def span_start(self, where: Span) -> Place:
        return where >> self.bits

    def span_end(self, where: Span) -> Place:
        return where & ((1 << self.bits) - 1)


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

    def start(self, lines: LineStarts) -> tuple[int, int]:
        """0-based (line, column) where the object starts, as libyaml counts them."""
        return lines.parsed(lines.span_start(span_of(self.root)))

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
