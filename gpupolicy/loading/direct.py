"""The documents of a text read straight from libyaml's events, where the extension is built.

`gpupolicy/loading/_direct.c` makes the values and the position table of a document in one pass
over libyaml's events, without PyYAML's node objects (docs/performance.md, "Loader"). It reads
what most manifests are made of and raises `Unsupported` at anything else (an anchor, a tag, a
merge key, a key that is not a string or is written twice, a syntax error, nesting past the
limit): the caller then reads the text with the Python loader, which gives the same values and
positions and every problem. Where the extension is not built (no C compiler or no libyaml
headers at install), or PyYAML has no libyaml (the marks would be counted otherwise), `AVAILABLE`
is False and every text is read the Python way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from gpupolicy.loading.composer import LIBYAML
from gpupolicy.loading.positions import Entry, LineStarts, Place

try:
    from gpupolicy.loading import _direct
except ImportError:  # pragma: no cover - the extension is optional: see the module's docstring
    _direct = None  # type: ignore[assignment]


class _NeverRaised(Exception):
    """Unsupported where the extension is missing: nothing raises it."""


AVAILABLE = _direct is not None and LIBYAML
# What the direct reader leaves to the Python loader.
Unsupported: type[Exception] = _direct.Unsupported if _direct is not None else _NeverRaised


class DirectDocument(NamedTuple):
    """A document read directly: its value, the root entry of its position table, and where its
    root node starts and ends (the marks' indexes, the end as libyaml puts it)."""

    value: Any
    entry: Entry
    start: Place
    end: Place


def read_documents(
    text: str, lines: LineStarts, max_depth: int, resolve: Callable[[str], Any]
) -> Iterator[DirectDocument]:
    """Each document of `text`, read directly; raises Unsupported where the Python loader must read
    the text (some documents may have been given before). `lines`: the text's, as libyaml counts;
    `resolve`: the value of a plain scalar that only PyYAML's implicit resolvers can type."""
    reader = _direct.documents(text, resolve, lines.bits, lines.end, lines.last_line, max_depth)
    return (DirectDocument(*document) for document in reader)
