"""Load manifests into `Resource`s that remember where every field came from.

PyYAML's C parser composes each document's node graph (gpupolicy/loading/composer.py); we build
plain Python values from the nodes ourselves, which lets us see duplicate keys (kubectl silently
keeps the last one), and in the same walk a compact table of where each key and item is written
(gpupolicy/loading/positions.py). The nodes are dropped after it: a position is resolved from the
table, only for the fields a finding is about.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from typing import Any, NamedTuple

import yaml

from gpupolicy.core.findings import JsonPath, ObjectRef, excerpt
from gpupolicy.core.immutable import immutable, mutable
from gpupolicy.loading import direct
from gpupolicy.loading.composer import TAG_STR, compose_documents, resolve_tag
from gpupolicy.loading.direct import DirectDocument
from gpupolicy.loading.positions import (
    PLACE_BITS,
    Child,
    Entry,
    LineIndex,
    LineStarts,
    MergedMapping,
    Place,
    PositionTable,
    child_of,
    mark_position,
    span_of,
)

try:  # pragma: no cover - depends on how PyYAML was built
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

_SCALAR_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_TAG_STR = "tag:yaml.org,2002:str"
_TAG_INT = "tag:yaml.org,2002:int"
_TAG_FLOAT = "tag:yaml.org,2002:float"
_TAG_BOOL = "tag:yaml.org,2002:bool"
_TAG_NULL = "tag:yaml.org,2002:null"
_TAG_MERGE = "tag:yaml.org,2002:merge"


@immutable
class LoadProblem:
    """A problem found while reading input; the engine turns it into a GP0xx finding."""

    rule_id: str
    message: str
    file: str
    line: int | None = None
    column: int | None = None
    doc_index: int | None = None
    path: JsonPath = ()
    severity: str | None = None


@immutable
class Skipped:
    """A document that is not a Kubernetes object (gpupolicy/loading/object_evidence.py), or a whole file
    that holds none (`doc_index` None): not linted, counted in the report's summary."""

    file: str
    doc_index: int | None
    reason: str


@immutable
class DuplicateKey:
    """A mapping key written again: `first_line` is the line of its last earlier occurrence (as
    libyaml counts), `place` where it is written again (its mark's index), `path` the mapping's
    path in the object."""

    key: str
    first_line: int
    place: Place
    path: JsonPath


class Resource:
    """One Kubernetes object as loaded: the value, where it came from, and where its fields are."""

    __slots__ = (
        "_templates",
        "doc_index",
        "duplicates",
        "facts",
        "file",
        "in_list",
        "line_offset",
        "lines",
        "obj",
        "positions",
        "rendered_from",
        "text_marks",
    )

    def __init__(
        self,
        obj: Any,
        *,
        file: str,
        doc_index: int,
        positions: PositionTable | None = None,
        rendered_from: str | None = None,
        line_offset: int = 0,
        duplicates: list[DuplicateKey] | None = None,
        lines: LineStarts | None = None,
        in_list: bool = False,
        text_marks: frozenset[str] | None = None,
    ) -> None:
        self.obj = obj
        self.file = file
        self.doc_index = doc_index
        self.positions = positions
        self.rendered_from = rendered_from
        # Documents parsed one by one (after a syntax error) keep their first line here.
        self.line_offset = line_offset
        self.lines = lines  # the lines of its text, with `positions` (None without them)
        self.duplicates = duplicates or []
        self.in_list = in_list  # an item of a `kind: List` document (whose wrapper said it is an object)
        self._templates: Any = None  # memoised by pod_spec.workload_of
        self.facts: dict[Any, Any] | None = None  # engine.Context.object_fact's, made on first use
        # Which of TEXT_MARKS the object's text holds (None: not read from text, or not known).
        self.text_marks = text_marks

    # -- identity -------------------------------------------------------------
    @property
    def is_mapping(self) -> bool:
        return isinstance(self.obj, dict)

    def _field(self, key: str) -> Any:
        return self.obj.get(key) if isinstance(self.obj, dict) else None

    @property
    def api_version(self) -> str:
        value = self._field("apiVersion")
        return value if isinstance(value, str) else ""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    # The properties below are read dozens of times per evaluation: each is written out in full
    # (no helper calls) because they are hot, and nothing is cached (the value may be edited).
    @property
    def kind(self) -> str:
        obj = self.obj
        value = obj.get("kind") if isinstance(obj, dict) else None
        return value if isinstance(value, str) else ""

    @property
    def metadata(self) -> dict[str, Any]:
        obj = self.obj
        value = obj.get("metadata") if isinstance(obj, dict) else None
        return value if isinstance(value, dict) else {}

    @property
    def name(self) -> str:
        metadata = self.metadata
        name = metadata.get("name") or metadata.get("generateName") or ""
        return name if isinstance(name, str) else str(name)

    @property
    def namespace(self) -> str | None:
        obj = self.obj
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        value = metadata.get("namespace") if isinstance(metadata, dict) else None
        return value if isinstance(value, str) and value else None

    @property
    def labels(self) -> dict[str, Any]:
        obj = self.obj
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        value = metadata.get("labels") if isinstance(metadata, dict) else None
        return value if isinstance(value, dict) else {}

    @property
    def annotations(self) -> dict[str, Any]:
        obj = self.obj
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        value = metadata.get("annotations") if isinstance(metadata, dict) else None
        return value if isinstance(value, dict) else {}

    @property
    def ref(self) -> ObjectRef:
        return ObjectRef(self.kind or "<no kind>", self.namespace, self.name or "<no name>")

    def __repr__(self) -> str:
        return f"<Resource {self.ref} {self.file}#{self.doc_index}>"

    # -- positions --------------------------------------------------------------
    def position(self, path: JsonPath) -> tuple[int, int] | None:
        """1-based (line, column) of the field at `path`, or of its nearest existing ancestor."""
        if self.positions is None or self.lines is None:
            return None
        where, _ = self.positions.pointer(path)
        return self.position_of(self.lines.span_start(where))

    def last_line(self, path: JsonPath) -> int | None:
        """1-based last line of the scalar at `path` (a quoted or block scalar may span several)."""
        if self.positions is None or self.lines is None:
            return None
        where, scalar = self.positions.pointer(path)
        if not scalar:
            return None
        line, column = self.lines.position(self.lines.span_end(where))
        # A block scalar ends at the start of the next line.
        return line + (1 if column > 0 else 0) + self.line_offset

    def line_span(self) -> tuple[int, int] | None:
        """1-based first and last line of the object's text (None without positions)."""
        if self.positions is None or self.lines is None:
            return None
        lines, where = self.lines, span_of(self.positions.root)
        return self.position_of(lines.span_start(where))[0], self.position_of(lines.span_end(where))[0]

    def position_of(self, place: Place) -> tuple[int, int]:
        """1-based (line, column) in the file of a place the loader noted in this object (which has
        its positions, and so the lines of its text)."""
        if self.lines is None:
            raise ValueError(f"{self!r} has no positions")
        line, column = self.lines.position(place)
        return line + 1 + self.line_offset, column + 1

    def keep_own_lines(self) -> None:
        """Keep only its own lines of its text's line starts: an object kept after the text is read
        (a PDB, checked once every workload has been read) would keep the whole text's otherwise. An
        item of a List may point at anchors elsewhere in its document: it keeps them all."""
        if self.positions is not None and self.lines is not None and not self.in_list:
            where = span_of(self.positions.root)
            self.lines = self.lines.around(self.lines.span_start(where), self.lines.span_end(where))

    def has_path(self, path: JsonPath) -> bool:
        value: Any = self.obj
        for step in path:
            value = child_value(value, step)
            if value is MISSING:
                return False
        return True


MISSING: Any = object()

# What a deploy-time placeholder starts with (`$VAR`, `${VAR}`, `<VAR>`, `{{ var }}`, `__VAR__`),
# and the backslash of a double-quoted escape, which may write any of them (`"\x24{VAR}"`). A text
# that holds none of them holds no key or string that does (an alias repeats text of its own
# document; line folding joins lines with a space, or with an escape): rules that look for a
# placeholder in every field (GP004) skip such objects without serialising them.
TEXT_MARKS = ("$", "<", "{{", "__", "\\")
_NO_MARKS: frozenset[str] = frozenset()
_marks_made: dict[tuple[str, ...], frozenset[str]] = {}


def text_marks(text: str, start: int, end: int) -> frozenset[str]:
    """Which of TEXT_MARKS `text[start:end]` holds (one frozenset per combination, shared)."""
    return _shared_marks(tuple(mark for mark in TEXT_MARKS if holds_mark(text, mark, start, end)))


def _shared_marks(found: tuple[str, ...]) -> frozenset[str]:
    """The one frozenset of these marks (a handful of combinations, each made once)."""
    if not found:
        return _NO_MARKS
    marks = _marks_made.get(found)
    if marks is None:
        marks = _marks_made[found] = frozenset(found)
    return marks


_BYTE_MARKS = tuple((mark, mark.encode()) for mark in TEXT_MARKS if mark != "\\")


def json_text_marks(text: bytes) -> frozenset[str]:
    """Which of TEXT_MARKS the values serialised as `text` (JSON, UTF-8) hold. JSON escapes none of
    `$`, `<`, `{` and `_` (orjson, and the standard library without ASCII escapes), so every one a
    key or string holds is in the text as written; an escape there (`\n`) writes none of them
    into the values, which are already decoded: the backslash is no mark of theirs."""
    return _shared_marks(tuple(mark for mark, needle in _BYTE_MARKS if needle in text))


# `str.find` of two characters scans about 40 times slower than of one (memchr): 3.5 against 0.09 us
# in a GPU Deployment's 2.6 KB (*one-off*, timeit), and `{{` and `__` cost a lint of 2,000 of them
# 14 ms. Their first character is found first, and the second checked beside it, this many times;
# past that (a text full of `_`), the two-character search goes on from there, in C.
_PAIR_TRIES = 8


def holds_mark(text: str, mark: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` holds `mark` (one or two characters): `text.find(mark, start, end) >= 0`."""
    if len(mark) != 2:
        return text.find(mark, start, end) >= 0
    first, second = mark[0], mark[1]
    start, end, _ = slice(start, end).indices(len(text))  # as `find` reads them
    if end - start < 2:
        return False
    at = text.find(first, start, end - 1)  # a first character with room for the second
    for _ in range(_PAIR_TRIES):
        if at < 0:
            return False
        if text[at + 1] == second:
            return True
        at = text.find(first, at + 1, end - 1)
    return at >= 0 and text.find(mark, at, end) >= 0


def child_value(value: Any, step: str | int) -> Any:
    """`value[step]` for a mapping key or list index, or MISSING."""
    if isinstance(value, list):
        return value[step] if isinstance(step, int) and 0 <= step < len(value) else MISSING
    if isinstance(value, dict):
        return value.get(step, MISSING)
    return MISSING


def path_to_node(root: yaml.Node, target: yaml.Node) -> JsonPath | None:
    """The JSON path under which `target` (a key or value node) sits below `root`."""
    stack: list[tuple[yaml.Node, JsonPath]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                step = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                if key_node is target or value_node is target:
                    return (*path, step)
                stack.append((value_node, (*path, step)))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                if item is target:
                    return (*path, index)
                stack.append((item, (*path, index)))
    return None


# -- construction -----------------------------------------------------------------


class UnreadableValue(ValueError):
    """A value the loader refuses, with the node it is about (for the finding's line)."""

    def __init__(self, message: str, node: yaml.Node) -> None:
        super().__init__(message)
        self.node = node


class ExcessiveAliasing(UnreadableValue):
    """A document whose aliases expand beyond the limits (billion laughs, or nesting hidden in
    aliases): refused before anything walks the expansion."""


_SCALAR_KINDS = {_TAG_INT: "integer", _TAG_BOOL: "boolean", _TAG_FLOAT: "number"}
_BOOLEAN_WORDS: dict[str, bool] = yaml.constructor.SafeConstructor.bool_values
_SHORT_INTEGER = 19  # digits: far below what int() refuses (4,300)


def _scalar_value(node: yaml.ScalarNode) -> Any:
    tag = node.tag
    if tag == _TAG_STR:
        return node.value
    if tag == _TAG_NULL:
        return None
    value = node.value
    # The common cases without PyYAML's constructor (its result, in a tenth of the time): a
    # decimal integer with no sign, underscore or leading zero (octal), and a boolean word.
    if tag == _TAG_INT and len(value) < _SHORT_INTEGER and value.isascii() and value.isdigit():
        if value[0] != "0" or value == "0":
            return int(value)
    elif tag == _TAG_BOOL and (word := _BOOLEAN_WORDS.get(value.lower())) is not None:
        return word
    kind = _SCALAR_KINDS.get(tag)
    if kind is None:
        # timestamps, binary and custom tags (`!Ref`) stay text: Kubernetes treats them as strings.
        return value
    try:
        if tag == _TAG_INT:
            return _SCALAR_CONSTRUCTOR.construct_yaml_int(node)
        if tag == _TAG_BOOL:
            return _SCALAR_CONSTRUCTOR.construct_yaml_bool(node)
        return _SCALAR_CONSTRUCTOR.construct_yaml_float(node)
    except (ValueError, KeyError, TypeError):
        # `!!bool maybe` (PyYAML raises KeyError), `!!int x`, and integers longer than Python
        # converts (4,300 digits): a finding at the value, never an exception out of the loader.
        digits = sum(character.isdigit() for character in node.value[:5000])
        if tag == _TAG_INT and digits >= 4000:
            message = f"an integer of {len(node.value):,} characters (no Kubernetes field holds one)"
        else:
            message = f"{excerpt(node.value)} is not a valid {kind} (tagged {tag.rpartition(':')[2]})"
        raise UnreadableValue(message, node) from None


@immutable
class LoadLimits:
    """What one YAML document may cost, from the policy's `limits` section, the same in the
    linter and the webhook.

    Aliases share their anchor's value instead of copying it, but whatever walks the value (the
    rules, the schema validator, a JSON dump) sees the expansion: each alias counts as a copy of
    its anchor's whole value. go-yaml refuses "excessive aliasing" for the same reason
    (https://github.com/go-yaml/yaml/blob/v3.0.1/decode.go, allowedAliasRatio); so do we, with a
    finding. Depth is counted through aliases too: a chain of anchors each holding the previous
    one nests as deep as the chain is long, however flat the text looks."""

    max_alias_expansion: int = 100_000
    max_depth: int = 200


DEFAULT_LIMITS = LoadLimits()
_EXTENT_CAP = 1 << 62  # sizes of a billion-laughs anchor grow as 10^n: capped, only the comparison matters


def _extent(root: yaml.Node, extents: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(values, levels) of `root` once every alias below it is expanded, memoised per node in
    `extents` and found without recursion; an anchor whose value holds an alias of itself is
    refused (it would expand forever)."""
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        children = _children(node)
        if leaving:
            open_nodes.discard(key)
            size, height = 1, 1
            for child in children:
                child_size, child_height = extents[id(child)]
                size += child_size
                height = max(height, child_height + 1)
            extents[key] = (min(size, _EXTENT_CAP), height)
            continue
        if key in extents:
            continue
        if key in open_nodes:
            raise ExcessiveAliasing(
                f"the anchor at line {node.start_mark.line + 1} holds an alias of itself "
                "(its value would expand forever)",
                node,
            )
        if not children:  # a scalar is no level of nesting; an empty collection is one
            extents[key] = (1, 0 if isinstance(node, yaml.ScalarNode) else 1)
            continue
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in extents)
    return extents[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


@immutable
class RepeatedKey:
    """A mapping key written again, as construction meets it (`first_line`: 1-based, of its last
    earlier occurrence); documents turn it into a DuplicateKey."""

    key: str
    first_line: int
    node: yaml.Node


_BLOCK_STYLES = frozenset({"|", ">"})


def construct(root: yaml.Node, limits: LoadLimits = DEFAULT_LIMITS) -> tuple[Any, list[RepeatedKey]]:
    """Plain Python values of a node graph, and the mapping keys it repeats."""
    value, _, repeated = construct_with_positions(root, limits)
    return value, repeated


def may_share_nodes(text: str) -> bool:
    """Whether a node graph composed from `text` may reach a node twice: only an alias does, and
    only of an anchor, which is written with `&`. A text without one composes into trees."""
    return "&" in text


def construct_with_positions(
    root: yaml.Node,
    limits: LoadLimits = DEFAULT_LIMITS,
    lines: LineStarts | None = None,
    *,
    shared: bool = True,
) -> tuple[Any, Entry, list[RepeatedKey]]:
    """Plain Python values of a node graph, the root entry of its position table
    (gpupolicy/loading/positions.py; its places read with `lines`, those of the text composed) and
    the mapping keys it repeats, in one walk.

    Depth is tracked during the walk (no second traversal on the hot path). An alias is charged
    where it is met: the expanded size of its anchor's value is added to a running count and its
    expanded depth to the depth it is used at, so a bomb stops at its first excess, before
    anything expands it. A scalar is built where it is met, without a call: most nodes are.

    `shared`: whether the graph may reach a node twice (`may_share_nodes` of its text). A tree
    (False) needs no memo of what each collection built, which is where aliases are found: without
    it the walk of 2,000 GPU Deployments took 0.123 s of CPU instead of 0.146 s (*one-off*: this
    function over the pre-composed graphs of `bench/lint_stages.py`'s tree, median of 7 runs a
    process, two rounds; `bench/lint_stages.py --against`: load 0.505 -> 0.479 s)."""
    repeated: list[RepeatedKey] = []
    memo: dict[int, tuple[Any, Child]] = {}
    extents: dict[int, tuple[int, int]] = {}
    expanded = 0
    max_depth, max_expansion = limits.max_depth, limits.max_alias_expansion
    scalar_node, mapping_node, tag_merge = yaml.ScalarNode, yaml.MappingNode, _TAG_MERGE
    # The tag object the composer gives a string (composer.resolve_tag): `is` it, the hot path, is one
    # comparison of pointers; any other tag, even an equal string (`!!str` written), goes through
    # scalar_value, which gives the same value.
    tag_str = TAG_STR
    scalar_value, block_styles = _scalar_value, _BLOCK_STYLES
    # A span is start << bits | end, each a mark's index (positions.py): one attribute read per mark.
    bits = lines.bits if lines is not None else PLACE_BITS
    collection_end = lines.moved_end if lines is not None else _mark_index

    def charge_alias(node: yaml.Node, depth: int) -> None:
        nonlocal expanded
        size, height = _extent(node, extents)
        expanded += size
        anchor_line = node.start_mark.line + 1
        if expanded > max_expansion:
            raise ExcessiveAliasing(
                f"the document's aliases expand to more than {max_expansion:,} values (the anchor at "
                f"line {anchor_line} among them; policy limits.maxAliasExpansion)",
                node,
            )
        if depth + height - 1 > max_depth:
            raise ExcessiveAliasing(
                f"the document nests deeper than {max_depth} levels through the alias of the anchor "
                f"at line {anchor_line} (policy limits.maxDepth)",
                node,
            )

    def too_deep(node: yaml.Node) -> ExcessiveAliasing:
        return ExcessiveAliasing(
            f"the document nests deeper than {max_depth} levels (policy limits.maxDepth)", node
        )

    def value_of(node: yaml.Node, depth: int) -> tuple[Any, Child]:
        if type(node) is scalar_node:
            value = node.value if node.tag is tag_str else scalar_value(node)
            return value, (node.start_mark.index if node.style in block_styles else None)
        return (mapping_of if type(node) is mapping_node else sequence_of)(node, depth)

    # A collection first checks its depth, then, where nodes may be shared, whether it was built
    # already (an alias: charged, and its anchor's value shared instead of expanded again), inline.
    def mapping_of(node: yaml.Node, depth: int) -> tuple[Any, Child]:
        if depth > max_depth:
            raise too_deep(node)
        if shared and (found := memo.get(id(node))) is not None:
            charge_alias(node, depth)
            return found
        result: dict[Any, Any] = {}
        table: dict[str, Entry] = {}
        if shared:
            memo[id(node)] = result, table
        # Where a repeated key is found: the values built so far, which hold only the keys written
        # before until a merge key adds others; from a merge key, a collection key or a first
        # repeated key on (rare), `earlier`, each written key's last node. A dict less per mapping.
        earlier: dict[Any, yaml.Node] | None = None
        sources: list[dict[str, Entry]] | None = None  # made at a merge key: most mappings have none
        for key_node, value_node in node.value:
            if key_node.tag is tag_str:  # the tag object the composer gives a string: the hot path
                key: Any
                written: str | None
                key = written = key_node.value
            elif key_node.tag == tag_merge:
                if earlier is None:
                    earlier = _keys_written_before(node, key_node)
                merged, merged_table = value_of(value_node, depth + 1)
                _merge_into(result, merged)
                if sources is None:
                    sources = []
                sources.extend(_merge_sources(merged_table))
                continue
            elif type(key_node) is scalar_node:  # a typed key (`1:`, `true:`), or `!!str` written
                written = key_node.value
                key = scalar_value(key_node)
            else:  # a collection as a key: its text stands in
                if earlier is None:
                    earlier = _keys_written_before(node, key_node)
                written, key = None, str(value_of(key_node, depth + 1)[0])
            if earlier is None:
                if key in result:
                    earlier = _keys_written_before(node, key_node)
                    repeated.append(RepeatedKey(str(key), earlier[key].start_mark.line + 1, key_node))
                    earlier[key] = key_node
            else:
                if key in earlier:
                    repeated.append(RepeatedKey(str(key), earlier[key].start_mark.line + 1, key_node))
                earlier[key] = key_node
            if type(value_node) is scalar_node:  # inline: the hot path, its entry made here
                tag = value_node.tag
                result[key] = value_node.value if tag is tag_str else scalar_value(value_node)
                if written is not None:  # spans computed inline: a call per span cost a fifth of the walk
                    where = key_node.start_mark.index << bits | key_node.end_mark.index
                    # A plain scalar's style is "" (None from PyYAML's Python parser): no set lookup,
                    # and its entry is its key's span alone.
                    style = value_node.style
                    if style and style in block_styles:
                        table[written] = where, value_node.start_mark.index
                    else:
                        table[written] = where
                continue
            collection = mapping_of if type(value_node) is mapping_node else sequence_of
            result[key], child = collection(value_node, depth + 1)
            if written is not None:
                where = key_node.start_mark.index << bits | key_node.end_mark.index
                table[written] = where if child is None else (where, child)
        if sources:
            table = MergedMapping(table, sources)
            if shared:
                memo[id(node)] = result, table
        return result, table

    def sequence_of(node: yaml.Node, depth: int) -> tuple[Any, Child]:
        if depth > max_depth:
            raise too_deep(node)
        if shared and (found := memo.get(id(node))) is not None:
            charge_alias(node, depth)
            return found
        items: list[Any] = []
        table: list[Entry] = []
        if shared:
            memo[id(node)] = items, table
        for item in node.value:  # a loop, not a generator: one stack frame per level
            if type(item) is scalar_node:  # inline: the hot path, its entry made here
                tag = item.tag
                items.append(item.value if tag is tag_str else scalar_value(item))
                start = item.start_mark.index
                where = start << bits | item.end_mark.index
                style = item.style
                table.append((where, start) if style and style in block_styles else where)
                continue
            value, child = (mapping_of if type(item) is mapping_node else sequence_of)(item, depth + 1)
            items.append(value)
            end = collection_end(item.end_mark)  # libyaml may move it past the last line
            where = item.start_mark.index << bits | end
            table.append(where if child is None else (where, child))
        return items, table

    try:
        value, child = value_of(root, 1)
    finally:
        # The nested builders refer to one another through their cells: a reference cycle, freed
        # only by the cyclic collector, which batch runs pause. Rebinding their names empties the
        # cells and breaks it; what the builders held goes now, not at the next collection.
        memo.clear()
        extents.clear()
        charge_alias = too_deep = value_of = mapping_of = sequence_of = None  # type: ignore[assignment]
    where = root.start_mark.index << bits | collection_end(root.end_mark)
    return value, (where if child is None else (where, child)), repeated


def _keys_written_before(node: yaml.Node, stop: yaml.Node) -> dict[Any, yaml.Node]:
    """Each key of a mapping before the key `stop`, with the node of its last occurrence there, when
    those keys are all scalars and none is a merge key (`construct_with_positions` asks then)."""
    written: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node is stop:
            break
        written[key_node.value if key_node.tag is TAG_STR else _scalar_value(key_node)] = key_node
    return written


def _mark_index(mark: yaml.Mark) -> Place:
    """A mark's place where no text's lines are given (values only: its positions unread)."""
    index: int = mark.index
    return index


def _merge_sources(merged: Child) -> list[dict[str, Entry]]:
    """The tables of the mappings a merge key's value merges: a mapping, or a list of them."""
    if isinstance(merged, dict):
        return [merged]
    if isinstance(merged, list):
        return [table for table in map(child_of, merged) if isinstance(table, dict)]
    return []


def _merge_into(target: dict[Any, Any], merged: Any) -> None:
    sources = merged if isinstance(merged, list) else [merged]
    for source in sources:
        if isinstance(source, dict):
            for key, value in source.items():
                target.setdefault(key, value)


# -- templates ---------------------------------------------------------------------

# Helm actions start with a dot, a variable or a template keyword; Argo (`{{args.x}}`,
# `{{inputs.parameters.y}}`) and Flagger (`{{ namespace }}`) placeholders are theirs to fill.
_HELM_ACTION = re.compile(
    r"\{\{-?\s*(?:\.|\$|/\*|\(+\s*[.$]|(?:include|template|if|else|end|range|with|define|block|toYaml|tpl|"
    r"printf|default|quote|required|lookup|nindent|indent|fail)\b)"
)
_ENV_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
# Fields where `${VAR}` is the program's own business (shell, env expansion, scripts).
_PLACEHOLDER_EXEMPT_KEYS = frozenset(
    {"command", "args", "env", "data", "stringData", "binaryData", "annotations", "script", "source", "query"}
)


# Go templates that are an object's own text, not Helm: Prometheus alert annotations
# (`{{ $labels.gpu }}` in DCGM alert rules), Alertmanager and Grafana configs in ConfigMap or
# Secret data. In a file that parses as YAML, an action inside a string under one of these keys
# is left alone; an action anywhere else (names, images, `{{- toYaml ... }}` blocks) is Helm.
_GO_TEMPLATE_TEXT_KEYS = frozenset(
    {"annotations", "data", "stringData", "binaryData", "expr", "description", "summary", "message", "query"}
)


# A program's arguments hold templates of the controllers that start it: KServe's ServingRuntime
# args (`--model_name={{.Name}}`), Argo Workflows (`{{inputs.parameters.lr}}`). There, an action
# is Helm's only when it names one of Helm's built-in objects or functions.
_PROGRAM_TEXT_KEYS = frozenset({"command", "args"})
_HELM_WORDS = (".Values", ".Release", ".Chart", ".Capabilities", ".Files", "include ", "toYaml", "tpl ")
_ACTION_START = re.compile(r"\{\{-?\s*")


def names_helm(action: str, *, dot: bool = True) -> bool:
    """Whether a `{{…}}` is Helm's as a controller's own template language cannot be: it names one
    of Helm's objects or functions (`.Values`, `include`), or, where the controller's language
    never starts with a dot (`dot`: Argo's `{{inputs.parameters.x}}`, `{{item}}`, Kubeflow
    Pipelines' `{{$}}`), it starts with one. KServe's Go templates (`{{.Name}}`) do."""
    inner = action.split("}}", 1)[0]
    if any(word in inner for word in _HELM_WORDS):
        return True
    start = _ACTION_START.match(inner)
    return dot and inner[start.end() if start else 0 :].startswith(".")


def helm_names_in(text: str, *, dot: bool = True) -> bool:
    """Whether some `{{…}}` of `text` is Helm's by `names_helm` (one pass over its actions)."""
    return any(
        names_helm(text[match.start() : match.start() + 200], dot=dot)
        for match in _HELM_ACTION.finditer(text)
    )


# A Jinja statement opening a line (`{% if gpu %}`, `{%- for x in y %}`): Ansible's template
# module and other Jinja renderers write manifests with them. Inside a block scalar the same line
# is text (a vLLM chat template in a ConfigMap): only a file that does not parse is a template.
_JINJA_STATEMENT = re.compile(
    r"^[ \t]*\{%-?[ \t]*(?:if|elif|else|endif|for|endfor|set|endset|macro|endmacro|block|endblock|include|"
    r"import|from|raw|endraw|with|endwith|filter|endfilter|call|endcall)\b",
    re.MULTILINE,
)


# Terraform's template directives (`%{ if … }`, `%{ for … }`: templatefile, *.tftpl), a line of
# their own as Jinja's statements are. One line, literal words: linear.
_TERRAFORM_DIRECTIVE = re.compile(r"^[ \t]*%\{~?[ \t]*(?:if|else|endif|for|endfor)\b", re.MULTILINE)


def find_terraform_directive(text: str) -> tuple[int, int] | None:
    """1-based position of the first line that opens with a Terraform template directive, if any
    (a text without `%{`, most of them, is not searched line by line)."""
    return _line_opening(_TERRAFORM_DIRECTIVE, text) if "%{" in text else None


def find_jinja_statement(text: str) -> tuple[int, int] | None:
    """1-based position of the first line that opens with a Jinja statement, if any."""
    return _line_opening(_JINJA_STATEMENT, text)


def _line_opening(pattern: re.Pattern[str], text: str) -> tuple[int, int] | None:
    found = pattern.search(text)
    if found is None:
        return None
    start = found.start() + (len(found.group(0)) - len(found.group(0).lstrip(" \t")))
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


def find_helm_action(text: str) -> tuple[int, int] | None:
    """1-based position of the first Helm template action in `text`, if any."""
    matches = list(_HELM_ACTION.finditer(text))
    if not matches:
        return None
    literal = _go_template_text_ranges(text)
    program = (_go_template_text_ranges(text, _PROGRAM_TEXT_KEYS) if literal is not None else None) or []
    strings: list[tuple[tuple[int, int], tuple[int, int]]] | None = None  # every string, when needed
    starts: list[tuple[int, int]] = []
    for match in matches:
        line = text.count("\n", 0, match.start()) + 1
        line_start = text.rfind("\n", 0, match.start()) + 1
        column = match.start() - line_start + 1
        if any(start <= (line, column) < end for start, end in literal or []):
            continue
        before = text[line_start : match.start()]
        if literal is not None and "#" in before:
            if strings is None:
                strings = sorted(_go_template_text_ranges(text, None) or [])
                starts = [start for start, _ in strings]
            if _in_comment(before, line, strings, starts):
                continue  # `# named {{ .Release.Name }}-x by the chart`: a note in a file that parses
        action = text[match.start() : match.start() + 200]
        if any(start <= (line, column) < end for start, end in program) and not any(
            word in action.split("}}", 1)[0] for word in _HELM_WORDS
        ):
            continue
        return line, column
    return None


def helm_actions_only_in_strings(text: str) -> bool:
    """Whether `text` reads as YAML and every Helm-looking action in it lies inside a string: the
    template language of the file's own program (GoReleaser's `name_template: "{{ .Version }}"`),
    not actions that make the file's structure, as Helm's do (`{{ include "x" . }}` alone reads
    as a flow mapping)."""
    spans = _go_template_text_ranges(text, None)
    if spans is None:
        return False
    spans.sort()
    starts = [start for start, _ in spans]
    line, line_start, counted = 1, 0, 0  # counted once, left to right: linear in the text
    for match in _HELM_ACTION.finditer(text):
        start = match.start()
        newlines = text.count("\n", counted, start)
        if newlines:
            line += newlines
            line_start = text.rfind("\n", counted, start) + 1
        counted = start
        position = (line, start - line_start + 1)
        index = bisect.bisect_right(starts, position) - 1
        if index < 0 or not position < spans[index][1]:
            if _in_comment(text[line_start:start], line, spans, starts):
                continue  # a commented-out line of the program's own text
            return False
    return True


def _in_comment(
    before: str,
    line: int,
    spans: list[tuple[tuple[int, int], tuple[int, int]]],
    starts: list[tuple[int, int]],
) -> bool:
    """Whether a line's text `before` a position opens a YAML comment: a `#` at its start or after
    a space or tab, outside every string scalar (`spans`: theirs, sorted and disjoint, of a text
    that parses; `starts`: their starts), each `#` looked up by bisection."""
    index = before.find("#")
    while index >= 0:
        if index == 0 or before[index - 1] in " \t":
            position = (line, index + 1)
            found = bisect.bisect_right(starts, position) - 1
            if found < 0 or not position < spans[found][1]:
                return True
        index = before.find("#", index + 1)
    return False


def _go_template_text_ranges(
    text: str, keys: frozenset[str] | None = _GO_TEMPLATE_TEXT_KEYS
) -> list[tuple[tuple[int, int], tuple[int, int]]] | None:
    """(line, column) spans of string scalars under `keys` (None: every string scalar); None when
    the text is not valid YAML (a Helm template usually is not)."""
    nodes = _compose_stream(text)
    if nodes is None:
        return None
    spans: list[tuple[tuple[int, int], tuple[int, int]]] = []
    stack: list[tuple[yaml.Node, bool]] = [(node, keys is None) for node in nodes]
    seen: set[int] = set()
    while stack:
        node, literal = stack.pop()
        if id(node) in seen:
            continue  # aliases: each node once
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if literal and node.tag == _TAG_STR:
                start, end = node.start_mark, node.end_mark
                spans.append(((start.line + 1, start.column + 1), (end.line + 1, end.column + 1)))
        elif isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
                stack.append((value_node, literal or (keys is not None and key in keys)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, literal) for item in node.value)
    return spans


def find_env_placeholders(value: Any, path: JsonPath = ()) -> Iterator[tuple[JsonPath, str]]:
    """`${VAR}` placeholders in structural fields (names, images, quantities, selectors...)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _PLACEHOLDER_EXEMPT_KEYS:
                continue
            yield from find_env_placeholders(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from find_env_placeholders(item, (*path, index))
    elif isinstance(value, str) and "${" in value:
        match = _ENV_PLACEHOLDER.search(value)
        if match:
            yield path, match.group(0)


@mutable
class LoadedText:
    resources: list[Resource] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    # `# gpupolicy: ignore` comments (directives.InlineDirective), filled in by inputs.load_text
    directives: list[Any] = field(default_factory=list)
    # documents and files that hold no Kubernetes object, filled in by inputs.load_text
    skipped: list[Skipped] = field(default_factory=list)


def _error_at(exc: Exception, chunk: str, line_offset: int) -> tuple[int | None, int | None, str]:
    """Line, column and message of a parse error in `chunk` (which starts at `line_offset`)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        line, column = _line_col(exc, line_offset, LineIndex(chunk))
        conflict = _conflict_marker(chunk, None if line is None else line - line_offset)
        if conflict is not None:
            number, marker = conflict
            return (
                number + line_offset,
                1,
                f"YAML syntax error: merge conflict marker {marker!r} left in the file",
            )
        return line, column, _syntax_message(exc, line_offset)
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow (no mark)
        prefix = chunk.encode("utf-8", "surrogatepass")[: max(exc.position, 0)]
        line = prefix.count(b"\n") + 1 + line_offset
        column = len(prefix[prefix.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
        character = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        return line, column, f"YAML syntax error: unacceptable character #x{character:04x}: {exc.reason}"
    if isinstance(exc, UnicodeEncodeError):  # a lone surrogate, e.g. from an API caller's text
        line = chunk.count("\n", 0, exc.start) + 1 + line_offset
        column = exc.start - (chunk.rfind("\n", 0, exc.start) + 1) + 1
        return line, column, "YAML syntax error: text holds a lone UTF-16 surrogate, not a character"
    return None, None, _syntax_message(exc) if isinstance(exc, yaml.YAMLError) else f"cannot read text: {exc}"


# The lines git writes around a conflict it could not merge (git-merge(1), "How conflicts are
# presented"; `|||||||` opens the common ancestor's part in the diff3 style).
_CONFLICT_MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")
_MARKER_SHOWN = 60


def _conflict_marker(chunk: str, error_line: int | None) -> tuple[int, str] | None:
    """The first line of `chunk` up to the error's that is a merge conflict marker, as (line
    number in the chunk, the line cut short), or None. A file committed in the middle of a merge
    fails as YAML somewhere after its first marker; the marker is what its author must fix."""
    for number, text in enumerate(chunk.splitlines()[:error_line], start=1):
        marker, rest = text[:7], text[7:].rstrip()
        if marker not in _CONFLICT_MARKERS:
            continue
        # `=======` stands alone; the others carry the side's name after a space.
        if (marker == "=======" and not rest) or (marker != "=======" and (not rest or rest[0] == " ")):
            return number, text[:_MARKER_SHOWN].rstrip()
    return None


def _line_col(
    exc: yaml.MarkedYAMLError, line_offset: int, lines: LineIndex | None
) -> tuple[int | None, int | None]:
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return None, None
    line, column = mark_position(mark, lines)
    return line + 1 + line_offset, column + 1


def _syntax_message(exc: yaml.YAMLError, line_offset: int = 0) -> str:
    if isinstance(exc, yaml.MarkedYAMLError):
        parts = [part for part in (exc.context, exc.problem) if part]
        message = "YAML syntax error: " + "; ".join(parts) if parts else "YAML syntax error"
        started, found = exc.context_mark, exc.problem_mark
        if started is not None and found is not None and started.line != found.line:
            message += (
                f" (the construct started at line {started.line + 1 + line_offset}, "
                f"column {started.column + 1})"
            )
        return message
    return f"YAML syntax error: {exc}"


def _expand_lists(
    obj: Any, node: yaml.Node | None, entry: Entry
) -> Iterator[tuple[Any, yaml.Node | None, Entry]]:
    """`kind: List` and `*List` wrap their objects in `items` (an OpenShift Template in `objects`,
    made with its parameters' values); each item is an object of its own,
    with its node and its entry in the position table (the List's own where `items` is merged).
    `node` None: a document read directly (no node graph, no merge key: `items` is written)."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    key = "objects" if is_openshift_template(obj) else "items"
    items = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(kind, str) and (kind.endswith("List") or key == "objects") and isinstance(items, list):
        if key == "objects":
            items = _processed(items, _template_parameters(obj))
        value_node = _mapping_value(node, key)
        table = child_of(entry)
        written = table.get(key) if isinstance(table, dict) else None
        item_entries = child_of(written) if written is not None else None
        for index, item in enumerate(items):
            if node is None and isinstance(item_entries, list):
                yield item, None, item_entries[index]
            elif isinstance(value_node, yaml.SequenceNode) and isinstance(item_entries, list):
                yield item, value_node.value[index], item_entries[index]
            else:
                yield item, node, entry
        return
    yield obj, node, entry


def is_openshift_template(obj: Any) -> bool:
    """An OpenShift Template (template.openshift.io/v1, a built-in type of OpenShift's API): its
    `objects` are what `oc process` makes, each an object of its own, as a List's items are."""
    if not isinstance(obj, dict) or obj.get("kind") != "Template":
        return False
    api_version = obj.get("apiVersion")
    return isinstance(api_version, str) and api_version.startswith("template.openshift.io/")


# `${NAME}` (text) and `${{NAME}}` (a value of its own type): a Template's parameter references
# (https://docs.okd.io/latest/openshift_images/using-templates.html). Linear: no nested repetition.
_TEMPLATE_PARAMETER = re.compile(r"\$\{(\{?)([A-Za-z0-9_]{1,253})\}(\}?)")


def _template_parameters(obj: dict[str, Any]) -> dict[str, str]:
    """The Template's parameters that have a value: what `oc process` writes without `-p`. A
    parameter without one (required, or generated) stays a reference, GP004's to name."""
    found: dict[str, str] = {}
    for item in obj.get("parameters") or ():
        if (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("value"), str)
        ):
            found[item["name"]] = item["value"]
    return found


def _processed(items: list[Any], parameters: dict[str, str]) -> list[Any]:
    """The Template's objects as `oc process` makes them with its parameters' values (copies;
    the positions of the fields are the written ones)."""
    if not parameters:
        return items
    return [_substituted(item, parameters) for item in items]


def _substituted(value: Any, parameters: dict[str, str]) -> Any:
    if isinstance(value, str):
        if "${" not in value:
            return value
        whole = _TEMPLATE_PARAMETER.fullmatch(value)
        if whole is not None and whole.group(1) and whole.group(3) and whole.group(2) in parameters:
            return _typed(parameters[whole.group(2)])  # `${{REPLICAS}}`: the value, not its text
        return _TEMPLATE_PARAMETER.sub(lambda found: parameters.get(found.group(2), found.group(0)), value)
    if isinstance(value, dict):
        return {key: _substituted(item, parameters) for key, item in value.items()}
    if isinstance(value, list):
        return [_substituted(item, parameters) for item in value]
    return value


def _typed(text: str) -> Any:
    """A `${{…}}` parameter's value as the JSON it is written in: a number, a boolean, else text."""
    if text in ("true", "false"):
        return text == "true"
    if text.lstrip("-").isdigit() and len(text) <= 18:
        return int(text)
    return text


def _mapping_value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    """The value of the last `key` written in a mapping node (not merged into it)."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in reversed(node.value):
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key and key_node.tag != _TAG_MERGE:
                found: yaml.Node = value_node
                return found
    return None


_DOCUMENT_START = re.compile(r"^---(?=\s|$)", re.MULTILINE)


def split_documents(text: str) -> list[tuple[int, str]]:
    """Split a stream at `---` lines, keeping each chunk's starting line (0-based)."""
    chunks: list[tuple[int, str]] = []
    starts = _document_starts(text)
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    line = 0
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        chunk = text[start:end]
        chunks.append((line, chunk))
        line += chunk.count("\n")  # counted once per chunk: linear in the stream
    return chunks


def _document_starts(text: str) -> list[int]:
    """Where the `---` lines of a stream start (`_DOCUMENT_START`): found with `str.find`, which
    skips to each line that starts so, where the expression is tried at every place of the text."""
    starts = [0] if _DOCUMENT_START.match(text) else []
    at = text.find("\n---")
    while at >= 0:
        if _DOCUMENT_START.match(text, at + 1):
            starts.append(at + 1)
        at = text.find("\n---", at + 4)
    return starts


# -- comments ------------------------------------------------------------------------------


def comment_starts(text: str, offsets: Sequence[int]) -> set[int]:
    """Of `offsets` (ascending positions of `#` in `text`), those where a YAML comment starts.

    A `#` starts a comment at the start of a line or after white space, outside every scalar: not
    inside a quoted or plain scalar, not in the lines of a block scalar (its header line may end in
    a comment). https://yaml.org/spec/1.2.2/#66-comments. The scalars' extents come from libyaml's
    scanner, run once over each document that holds one of the offsets (linear in the text).
    Where a document cannot be scanned, nothing after the error counts as a comment: a comment
    there cannot be told from text.
    """
    candidates = [offset for offset in offsets if offset == 0 or text[offset - 1] in " \t\r\n"]
    found: set[int] = set()
    base, next_candidate = 0, 0
    for _, chunk in split_documents(text) if candidates else ():
        end = base + len(chunk)
        mine = []
        while next_candidate < len(candidates) and candidates[next_candidate] < end:
            mine.append(candidates[next_candidate] - base)
            next_candidate += 1
        if mine:
            starts, ends = _opaque_spans(chunk)
            for offset in mine:
                index = bisect.bisect_right(starts, offset) - 1  # the last span starting at or before it
                if index < 0 or offset >= ends[index]:
                    found.add(base + offset)
        base = end
    return found


def _opaque_spans(document: str) -> tuple[list[int], list[int]]:
    """Starts and ends (ascending) of the parts of `document` where `#` is not a comment: its
    scalars, and what follows a scanner error."""
    starts: list[int] = []
    ends: list[int] = []
    try:
        for token in yaml.scan(document, Loader=_Loader):
            if isinstance(token, yaml.ScalarToken):
                start, end = token.start_mark.index, token.end_mark.index
                if token.style in ("|", ">"):  # the header line (`key: |  # comment`) is not content
                    newline = document.find("\n", start, end)
                    start = newline + 1 if newline >= 0 else end
                starts.append(start)
                ends.append(end)
    except (yaml.YAMLError, UnicodeError):
        starts.append(ends[-1] if ends else 0)
        ends.append(len(document))
    return starts, ends


def _roots(text: str) -> Iterator[yaml.Node]:
    """The root node of each document of `text` that is not empty."""
    return (node for node in compose_documents(text) if node is not None)


Root = yaml.Node | DirectDocument


def _documents_of(text: str, limits: LoadLimits) -> Iterator[tuple[Root, LineStarts]]:
    """Each document of `text`, with the text's line starts: read directly where the extension
    can (gpupolicy/loading/direct.py), else, and from the document where it cannot, as the node
    graph PyYAML composes (the documents already given skipped: both read them alike). Raises
    yaml.YAMLError (and UnicodeError) where PyYAML's composer does."""
    given = 0
    lines: LineStarts | None = None
    if direct.AVAILABLE:
        lines = LineStarts(text, skips_bom=True, editor=LineIndex.needed(text))
        try:
            for document in direct.read_documents(text, lines, limits.max_depth, _plain_value):
                yield document, lines
                given += 1
            return
        except direct.Unsupported:
            pass
    for node in itertools.islice(_roots(text), given, None):
        lines = lines or LineStarts.of(text, node)
        yield node, lines


_PLAIN = (True, False)  # a plain scalar's `implicit`, as the composer gives it to `resolve`


def _plain_value(text: str) -> Any:
    """The value of a plain scalar with no tag that only PyYAML's implicit resolvers can type
    (`0755`, `1:30`, `1e3`, `2026-12-06`), for the direct reader; direct.Unsupported where the
    Python loader must say why it cannot be read (`!!int`-like text too long for an int)."""
    tag = resolve_tag(yaml.ScalarNode, text, _PLAIN)
    if tag is TAG_STR:
        return text
    try:
        return _scalar_value(yaml.ScalarNode(tag, text))
    except UnreadableValue:
        raise direct.Unsupported("a scalar the Python loader reports") from None


def _compose_stream(text: str) -> list[yaml.Node] | None:
    try:
        return list(_roots(text))
    except (yaml.YAMLError, UnicodeError):
        return None


def parse_text(
    text: str, file: str, *, rendered_from: str | None = None, limits: LoadLimits = DEFAULT_LIMITS
) -> LoadedText:
    """Parse a YAML/JSON stream. A broken document is reported and the others still load."""
    loaded = LoadedText()
    shared = may_share_nodes(text)
    try:  # each document built as it is composed: one node graph at a time
        for index, (node, lines) in enumerate(_documents_of(text, limits)):
            _add_document(
                loaded, text, node, file, index, rendered_from, limits=limits, lines=lines, shared=shared
            )
        return loaded
    except (yaml.YAMLError, UnicodeError):
        pass
    # Slow path, only for streams with an error: parse document by document so that
    # one broken document does not take the others with it.
    loaded = LoadedText()
    for document in _documents_one_by_one(text, file, rendered_from, limits):
        loaded.resources.extend(document.resources)
        loaded.problems.extend(document.problems)
    return loaded


class StreamReadsDifferently(Exception):
    """`iter_parse` met a syntax error after giving documents that, read on their own as
    `parse_text` then reads every document, come out differently."""


def iter_parse(
    text: str, file: str, *, rendered_from: str | None = None, limits: LoadLimits = DEFAULT_LIMITS
) -> Iterator[LoadedText]:
    """What `parse_text` finds, one document at a time: a reader that releases each document once
    used holds one document's values and positions, not the whole file's.

    `parse_text` reads a stream with a syntax error anywhere document by document on its own (the
    slow path). Here the error shows only when it is reached: the documents not given yet then come
    from the slow path, and those already given must read the same there (objects, positions and
    problems), else StreamReadsDifferently is raised."""
    given = 0
    shared = may_share_nodes(text)
    try:
        for index, (node, lines) in enumerate(_documents_of(text, limits)):
            document = LoadedText()
            _add_document(
                document, text, node, file, index, rendered_from, limits=limits, lines=lines, shared=shared
            )
            given += 1
            yield document
        return
    except (yaml.YAMLError, UnicodeError):
        pass
    # Only now are the documents given compared, read again: reading is deterministic, and a
    # fingerprint of every document given, in case an error follows, cost the streaming lint 0.6 %
    # of its instructions (docs/performance.md, "The CLI beside the in-process lint").
    readings = _fingerprints_before_error(text, file, rendered_from, limits, given)
    for index, document in enumerate(_documents_one_by_one(text, file, rendered_from, limits)):
        if index >= given:
            yield document
        elif _fingerprint(document) != readings[index]:
            raise StreamReadsDifferently(f"{file}: document {index} reads differently on its own")


def _fingerprints_before_error(
    text: str, file: str, rendered_from: str | None, limits: LoadLimits, count: int
) -> list[tuple[Any, ...]]:
    """The fingerprints of the first `count` documents `iter_parse` gave, read again as it read them
    (the error comes after them)."""
    readings: list[tuple[Any, ...]] = []
    if count == 0:
        return readings
    shared = may_share_nodes(text)
    for index, (node, lines) in enumerate(_documents_of(text, limits)):
        document = LoadedText()
        _add_document(
            document, text, node, file, index, rendered_from, limits=limits, lines=lines, shared=shared
        )
        readings.append(_fingerprint(document))
        if len(readings) == count:
            break
    return readings


def _fingerprint(document: LoadedText) -> tuple[Any, ...]:
    """What tells two readings of one document apart: its problems, and its objects' names and spans."""
    objects = tuple(
        (resource.ref, resource.position(()), resource.line_span(), len(resource.duplicates))
        for resource in document.resources
    )
    return tuple(document.problems), objects


def _documents_one_by_one(
    text: str, file: str, rendered_from: str | None, limits: LoadLimits
) -> Iterator[LoadedText]:
    """The documents of a stream with an error, each parsed on its own (one LoadedText per document
    index): a broken document is a GP001 problem and the others still load."""
    index = 0
    for line_offset, chunk in split_documents(text):
        for document in _chunk_documents(chunk, file, index, rendered_from, line_offset, limits):
            yield document
            index += 1


def _chunk_documents(
    chunk: str, file: str, index: int, rendered_from: str | None, line_offset: int, limits: LoadLimits
) -> Iterator[LoadedText]:
    """The documents of one chunk of `split_documents`, from document `index` on (one LoadedText
    each; a chunk that cannot be parsed is one, its GP001 problem)."""
    try:
        chunk_nodes = list(_documents_of(chunk, limits))
    except (yaml.YAMLError, UnicodeError) as exc:
        line, column, message = _error_at(exc, chunk, line_offset)
        yield LoadedText(problems=[LoadProblem("GP001", message, file, line, column, index)])
        return
    shared = may_share_nodes(chunk)
    for node, lines in chunk_nodes:
        document = LoadedText()
        _add_document(
            document,
            chunk,
            node,
            file,
            index,
            rendered_from,
            line_offset,
            limits=limits,
            lines=lines,
            shared=shared,
        )
        yield document
        index += 1


# Line breaks other than "\n" and "\r\n", at which `split_documents` does not look for `---`.
_OTHER_BREAKS = ("\x85", "\u2028", "\u2029")


def _read_apart(text: str) -> bool:
    """Whether `split_documents` cuts the stream into its documents: it holds no directive (`%YAML`,
    `%TAG`: it belongs to the document after it), no document end marker (`...`: a document may
    follow it without `---`) and no other line break than "\n" and "\r\n"
    (https://yaml.org/spec/1.2.2/#91-documents). A line that only starts like a marker says no too.
    String searches, not an expression: a regular expression tried at every place of a 14 MB
    repository took a third of a second. A directive's `%` is looked for alone first, a search that
    skips at memchr's speed: one for a line break and `%` stops at every line (12.5 ms over those
    14 MB, 0.4 alone)."""
    if text.startswith(("%", "...", "\ufeff%", "\ufeff...")):
        return False
    if ("%" in text and "\n%" in text) or "\n..." in text:
        return False
    if "\r" in text and text.count("\r") != text.count("\r\n"):
        return False
    return not any(other in text for other in _OTHER_BREAKS)


def iter_chosen_documents(
    text: str, file: str, chosen: Callable[[str], bool], *, limits: LoadLimits = DEFAULT_LIMITS
) -> Iterator[LoadedText] | None:
    """Of the documents `iter_parse` gives, those whose own text `chosen` accepts, each parsed on its
    own: the same values, positions and document indexes, without parsing the others. For a reader
    that wants a few kinds out of large files and can tell them from a document's text. None where
    the stream's documents cannot be read apart (`_read_apart`)."""
    if not _read_apart(text):
        return None
    return _chosen_documents(text, file, chosen, limits)


def _chosen_documents(
    text: str, file: str, chosen: Callable[[str], bool], limits: LoadLimits
) -> Iterator[LoadedText]:
    for _, read in _chosen_chunks(text, file, chosen, limits):
        yield from read.documents


class ChunkRead(NamedTuple):
    """A chunk of a stream (`split_documents`) read on its own: where it starts, its text's hash
    and its documents, each as `iter_parse` gives it. What pass 1 of a streaming lint read of a
    large file, kept for pass 2 to read the file's other chunks only (`iter_parse_given`)."""

    line_offset: int
    length: int  # of the chunk's text: what keeping its documents costs is about five times that
    digest: int  # hash() of the chunk's text: pass 2 gives the documents only for the same text
    documents: list[LoadedText]


def iter_chosen_chunks(
    text: str, file: str, chosen: Callable[[str], bool], *, limits: LoadLimits = DEFAULT_LIMITS
) -> Iterator[tuple[int, ChunkRead]] | None:
    """`iter_chosen_documents` chunk by chunk: each chunk `chosen` accepts, by its place among the
    stream's chunks, with its documents. None where the stream cannot be read apart."""
    if not _read_apart(text):
        return None
    return _chosen_chunks(text, file, chosen, limits)


def _chosen_chunks(
    text: str, file: str, chosen: Callable[[str], bool], limits: LoadLimits
) -> Iterator[tuple[int, ChunkRead]]:
    index = 0
    for place, (line_offset, chunk) in enumerate(split_documents(text)):
        if not chosen(chunk):
            index += _documents_in(chunk)
            continue
        documents = list(_chunk_documents(chunk, file, index, None, line_offset, limits))
        index += len(documents)
        yield place, ChunkRead(line_offset, len(chunk), hash(chunk), documents)


def iter_parse_given(
    text: str, file: str, given: Mapping[int, ChunkRead], *, limits: LoadLimits = DEFAULT_LIMITS
) -> Iterator[LoadedText] | None:
    """What `iter_parse` gives, every document read on its own (as `iter_chosen_documents` reads
    them, which gives the same), but those of the chunks in `given` (by their place, from
    `iter_chosen_chunks` over the same text) as that reading gave them: a large file that a
    streaming lint's first pass read in part is not parsed twice there. A given chunk whose line or
    text differ (the file changed between the readings) is read again. None where the stream
    cannot be read apart."""
    if not _read_apart(text):
        return None
    return _given_documents(text, file, given, limits)


def _given_documents(
    text: str, file: str, given: Mapping[int, ChunkRead], limits: LoadLimits
) -> Iterator[LoadedText]:
    index = 0
    for place, (line_offset, chunk) in enumerate(split_documents(text)):
        read = given.get(place)
        if read is not None and read.line_offset == line_offset and read.digest == hash(chunk):
            documents: Iterable[LoadedText] = read.documents
        else:
            documents = _chunk_documents(chunk, file, index, None, line_offset, limits)
        for document in documents:
            yield document
            index += 1


def _documents_in(chunk: str) -> int:
    """How many documents a chunk of `split_documents` of a stream `_read_apart` holds,
    unread: one from a `---` line; before the first such line, one if anything is written there
    besides comments (a stream of comments alone holds no document)."""
    if _DOCUMENT_START.match(chunk):
        return 1
    for line in chunk.removeprefix("\ufeff").split("\n"):
        written = line.strip(" \t\r")
        if written and not written.startswith("#"):
            return 1
    return 0


def _add_document(
    loaded: LoadedText,
    text: str,
    root: Root,
    file: str,
    index: int,
    rendered_from: str | None,
    line_offset: int = 0,
    *,
    limits: LoadLimits = DEFAULT_LIMITS,
    lines: LineStarts,
    shared: bool = True,
) -> None:
    node: yaml.Node | None = None
    repeated: list[RepeatedKey]
    if isinstance(root, DirectDocument):  # read directly: nothing repeated, nothing it cannot read
        obj, entry, repeated = root.value, root.entry, []
        start, end = root.start, root.end
    else:
        node = root
        try:
            obj, entry, repeated = construct_with_positions(node, limits, lines, shared=shared)
        except (ValueError, TypeError) as exc:  # `!!bool maybe`, a 5,000-digit integer, an alias bomb
            mark = exc.node.start_mark if isinstance(exc, UnreadableValue) else node.start_mark
            line, column = mark_position(mark, lines.editor)
            line, column = line + 1 + line_offset, column + 1
            loaded.problems.append(
                LoadProblem("GP001", f"cannot read value: {exc}", file, line, column, index)
            )
            return
        start, end = node.start_mark.index, node.end_mark.index
    if obj is None:
        return  # an empty document between separators: kubectl skips it too
    # The document's text, for every object of it: an item of a List may merge or alias text
    # written elsewhere in its document, never outside it.
    marks = text_marks(text, start, end)
    for item, item_node, item_entry in _expand_lists(obj, node, entry):
        loaded.resources.append(
            Resource(
                item,
                file=file,
                doc_index=index,
                positions=PositionTable(item_entry),
                rendered_from=rendered_from,
                line_offset=line_offset,
                duplicates=_duplicates_in(
                    repeated,
                    item_node,
                    lines.span_start(span_of(item_entry)),
                    lines.span_end(span_of(item_entry)),
                    whole=item_node is node,
                ),
                lines=lines,
                in_list=item is not obj,
                text_marks=marks,
            )
        )


def _duplicates_in(
    repeated: list[RepeatedKey], root: yaml.Node | None, start: Place, end: Place, *, whole: bool
) -> list[DuplicateKey]:
    """The keys repeated in the object at `root`, which spans `start` to `end` (all of the
    document's when it is `whole`), each with its path there, found while the node graph is at hand
    (`root` None: a document read directly, which repeats nothing)."""
    found: list[DuplicateKey] = []
    if root is None:
        return found
    for key in repeated:
        place: Place = key.node.start_mark.index
        if whole or start <= place < end:
            found.append(DuplicateKey(key.key, key.first_line, place, path_to_node(root, key.node) or ()))
    return found
