"""A position table keeps each mark's character index; `LineStarts` turns it back into the line and
column the mark had (libyaml's, or PyYAML's Python parser's), or an editor's where they differ.
Compared here, mark by mark, with what the loader read from the marks before (their line and
column; `LineIndex.position` where libyaml counts lines differently from editors)."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest
import yaml

from gpupolicy.core.findings import JsonPath
from gpupolicy.loading.composer import LIBYAML, compose_documents
from gpupolicy.loading.documents import Resource, parse_text
from gpupolicy.loading.positions import LineIndex, LineStarts, mark_position, span_of

EDGE_TEXTS = {
    "a byte-order mark": "\ufeffa: b\nc:\n  - d\n",
    "a byte-order mark, no final newline": "\ufeffa: b\nc:\n  - d",
    "crlf": "a: b\r\nc:\r\n  - d\r\n",
    "crlf, no final newline": "a: b\r\nc:\r\n  d: e",
    "a lone cr": "a: 'x\ry'\nb: [1, 2]\n",
    "nel": 'a: "x\x85y"\nb: {c: d}\n',
    "ls and ps": 'a: "x\u2028y"\nb: "z\u2029w"\nc: 1\n',
    "ls, no final newline": 'a: "x\u2028y"\nb:\n- c',
    "tabs": "a: 'x\ty'  # c\t\nb: \"\\t\"\n'p\tq': 1\n",
    "non-ascii and astral characters": "é: ü😀\nname: 'ä\n  ö'\nlist: [😀, x]\n😀: [a, b]\n",
    "several documents": "a: 1\n---\nb:\n  - c\n---\n- d\n- e: f\n...\n---\n{g: h}\n",
    "a block collection at the end, no final newline": "a:\n  b:\n  - c\n  - d: e",
    "a flow collection at the end, no final newline": "{a: [1, 2], b: c}",
    "an empty item at the end, no final newline": "- a\n-",
    "an empty value at the end, no final newline": "a: 1\nb:",
    "a scalar document, no final newline": "just text",
    "a block scalar at the end, no final newline": "a: |\n  x\n  y",
    "a quoted scalar at the end, no final newline": "- 'x\n  y'",
}


def nodes(root: yaml.Node) -> Iterator[yaml.Node]:
    yield root
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            yield from nodes(key)
            yield from nodes(value)
    elif isinstance(root, yaml.SequenceNode):
        for item in root.value:
            yield from nodes(item)


def marks(text: str, *, pure_python: bool) -> Iterator[tuple[LineStarts, yaml.Mark]]:
    """Each mark of each node of `text`, with the text's line starts for the parser that made it."""
    lines: LineStarts | None = None
    for root in compose_documents(text, pure_python=pure_python):
        if root is None:
            continue
        lines = lines or LineStarts.of(text, root)
        for node in nodes(root):
            yield lines, node.start_mark
            yield lines, node.end_mark


PARSERS = [
    pytest.param(True, id="python"),
    pytest.param(False, id="libyaml", marks=pytest.mark.skipif(not LIBYAML, reason="no libyaml")),
]


@pytest.mark.parametrize("pure_python", PARSERS)
@pytest.mark.parametrize("name", EDGE_TEXTS)
def test_a_place_reads_as_its_mark(name: str, pure_python: bool) -> None:
    """The line and column of every mark, libyaml's end of a block collection moved past the last
    line of a text without a final newline among them."""
    text = EDGE_TEXTS[name]
    for lines, mark in marks(text, pure_python=pure_python):
        assert lines.parsed(lines.moved_end(mark)) == (mark.line, mark.column), mark


@pytest.mark.skipif(not LIBYAML, reason="no libyaml")
@pytest.mark.parametrize("name", EDGE_TEXTS)
def test_an_editor_position_is_as_before(name: str) -> None:
    """libyaml's line and column where an editor counts the same, else the editor's (LineIndex)."""
    text = EDGE_TEXTS[name]
    editor = LineIndex.needed(text)
    for lines, mark in marks(text, pure_python=False):
        assert lines.position(lines.moved_end(mark)) == mark_position(mark, editor), mark


@pytest.mark.parametrize("name", [name for name, text in EDGE_TEXTS.items() if text.endswith("\n")])
def test_both_parsers_give_the_same_editor_positions(name: str) -> None:
    """PyYAML's Python parser counts a BOM in its indexes, libyaml does not: the same positions."""
    text = EDGE_TEXTS[name]
    by_python = [lines.position(lines.moved_end(mark)) for lines, mark in marks(text, pure_python=True)]
    by_libyaml = [lines.position(lines.moved_end(mark)) for lines, mark in marks(text, pure_python=False)]
    assert by_python == by_libyaml


def test_columns_count_characters() -> None:
    """A tab and an astral character are one column each, as libyaml counts (and as before)."""
    [resource] = parse_text("é: 😀\n😀: 'a\tb'\nc: [😀, d]\n", "wide.yaml").resources
    assert resource.position(("😀",)) == (2, 1)
    assert resource.position(("c", 1)) == (3, 8)
    assert resource.line_span() == (1, 4)


def test_the_end_of_a_text_without_a_final_newline() -> None:
    """libyaml ends a block mapping on a line past the last, a flow one after its bracket."""
    [block] = parse_text("a:\n  b: c", "block.yaml").resources
    [flow] = parse_text("{a: {b: c}}", "flow.yaml").resources
    assert (block.line_span(), flow.line_span()) == ((1, 3), (1, 1))
    [item] = parse_text("- a\n- b: c", "list.yaml").resources
    assert item.position((1,)) == (2, 3) and item.line_span() == (1, 3)


def test_a_bom_moves_columns_of_its_line_only_for_editors() -> None:
    [resource] = parse_text("\ufeffa: b\nc: d\n", "bom.yaml").resources
    assert (resource.position(("a",)), resource.position(("c",))) == ((1, 2), (2, 1))
    assert resource.positions is not None and resource.lines is not None
    assert resource.positions.start(resource.lines) == (0, 0)  # libyaml's column, as before


def test_the_documents_of_a_text_share_its_line_starts() -> None:
    """One table per text, shared by its objects, and pickled once with them."""
    text = "".join(f"---\nkind: Pod\nmetadata:\n  name: p{index}\n" for index in range(50))
    resources = parse_text(text, "pods.yaml").resources
    assert len({id(resource.lines) for resource in resources}) == 1
    one = pickle.dumps(resources[0].lines)
    together = pickle.loads(pickle.dumps([resource.lines for resource in resources]))
    assert len({id(lines) for lines in together}) == 1
    assert len(pickle.dumps([resource.lines for resource in resources])) < len(one) + 200
    restored = pickle.loads(pickle.dumps((resources[7].positions, resources[7].lines)))
    assert restored[1].position(restored[1].span_start(span_of(restored[0].root))) == (29, 0)


def test_line_starts_weigh_4_bytes_a_line() -> None:
    text = "a: b\n" * 10_000
    lines = LineStarts(text, skips_bom=True, editor=None)
    assert lines._starts.itemsize == 4 and len(lines._starts) == 10_001


@pytest.mark.parametrize("name", EDGE_TEXTS)
def test_an_object_kept_with_its_own_lines_reads_the_same(name: str) -> None:
    """`keep_own_lines` (an object kept after its text is read) changes no position."""
    text = "kind: PodDisruptionBudget\nspec: {a: &x [1, 2], b: *x}\n---\n" + EDGE_TEXTS[name]
    for resource in parse_text(text, "kept.yaml").resources:
        before = described(resource)
        resource.keep_own_lines()
        assert described(resource) == before


def described(resource: Resource) -> list[object]:
    found: list[object] = [resource.line_span()]
    found.extend((resource.position(path), resource.last_line(path)) for path in paths(resource.obj))
    found.extend(resource.position_of(duplicate.place) for duplicate in resource.duplicates)
    return found


def paths(value: object, path: JsonPath = ()) -> Iterator[JsonPath]:
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*path, index))


def test_an_object_kept_with_its_own_lines_keeps_a_few() -> None:
    text = "".join(f"---\nkind: PodDisruptionBudget\nmetadata:\n  name: p{index}\n" for index in range(100))
    resource = parse_text(text, "pdbs.yaml").resources[50]
    assert resource.lines is not None and len(resource.lines._starts) == 401
    resource.keep_own_lines()
    assert len(resource.lines._starts) == 4
    assert resource.position(("metadata", "name")) == (204, 3)
