"""The loader against a reference: values and the position of every path, object by object.

The loader composes with PyYAML's C parser under its own resolver hooks (loading/composer.py) and
keeps a compact position table instead of the node graph (loading/positions.py). The reference
here is what the loader did before: `yaml.compose_all` with `yaml.CSafeLoader` (PyYAML's own
resolver), the node graph kept, and a path resolved by walking it. Both must give the same
values, problems, spans, duplicate keys, and for every path in every object (and for paths that
stop short of one) the same position and last line. So must the loader on PyYAML's pure-Python
parser, the fallback where PyYAML was built without libyaml.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpupolicy.core.findings import JsonPath
from gpupolicy.loading import composer, direct, documents
from gpupolicy.loading.documents import Resource, construct, parse_text, path_to_node, split_documents
from gpupolicy.loading.positions import LineIndex, mark_position
from tests.conftest import CORPUS
from tests.yaml_texts import TRICKY, manifests

TAG_MERGE = "tag:yaml.org,2002:merge"


# -- the reference: node graphs from yaml.CSafeLoader, walked -------------------------------------


def node_at(root: yaml.Node, path: JsonPath) -> yaml.Node:
    node = pointer = root
    for step in path:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            found = entry_nodes(node, step)
            if found is None:
                return pointer
            pointer, node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            node = pointer = node.value[step]
        else:
            return pointer
    return pointer


def entry_nodes(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    merges: list[yaml.Node] = []
    for key_node, value_node in reversed(node.value):
        if key_node.tag == TAG_MERGE:
            merges.append(value_node)
        elif isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return key_node, value_node
    for merged in reversed(merges):
        for source in merged.value if isinstance(merged, yaml.SequenceNode) else [merged]:
            if isinstance(source, yaml.MappingNode):
                found = entry_nodes(source, key)
                if found is not None:
                    return found
    return None


class Reference:
    """One object as the node-graph loader saw it."""

    def __init__(self, obj: Any, node: yaml.Node, lines: LineIndex | None, offset: int) -> None:
        self.obj, self.node, self.lines, self.offset = obj, node, lines, offset

    def at(self, mark: yaml.Mark) -> tuple[int, int]:
        line, column = mark_position(mark, self.lines)
        return line + 1 + self.offset, column + 1

    def position(self, path: JsonPath) -> tuple[int, int]:
        return self.at(node_at(self.node, path).start_mark)

    def last_line(self, path: JsonPath) -> int | None:
        node = node_at(self.node, path)
        if not isinstance(node, yaml.ScalarNode):
            return None
        line, column = mark_position(node.end_mark, self.lines)
        return line + (1 if column > 0 else 0) + self.offset

    def line_span(self) -> tuple[int, int]:
        return self.at(self.node.start_mark)[0], self.at(self.node.end_mark)[0]


def reference_documents(text: str) -> Iterator[tuple[int, yaml.Node, LineIndex | None, int]]:
    """(document index, root node, line index, line offset), as the loader numbers documents."""
    try:
        nodes = [node for node in yaml.compose_all(text, Loader=yaml.CSafeLoader) if node is not None]
    except (yaml.YAMLError, UnicodeError):
        nodes = None
    if nodes is not None:
        lines = LineIndex.needed(text)
        yield from ((index, node, lines, 0) for index, node in enumerate(nodes))
        return
    index = 0
    for offset, chunk in split_documents(text):
        try:
            chunk_nodes = list(yaml.compose_all(chunk, Loader=yaml.CSafeLoader))
        except (yaml.YAMLError, UnicodeError):
            index += 1
            continue
        for node in chunk_nodes:
            if node is not None:
                yield index, node, LineIndex.needed(chunk), offset
                index += 1


def reference_objects(node: yaml.Node) -> Iterator[tuple[Any, yaml.Node, bool, list[Any]]]:
    """(object, its node, whether it is a List item, its repeated keys) of a document."""
    try:
        obj, repeated = construct(node)
    except (ValueError, TypeError):
        return
    if obj is None:
        return
    kind = obj.get("kind") if isinstance(obj, dict) else None
    items = obj.get("items") if isinstance(obj, dict) else None
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        value_node = next(
            (v for k, v in reversed(node.value) if isinstance(k, yaml.ScalarNode) and k.value == "items"),
            None,
        )
        for index, item in enumerate(items):
            child = value_node.value[index] if isinstance(value_node, yaml.SequenceNode) else node
            below = [
                r
                for r in repeated
                if child.start_mark.index <= r.node.start_mark.index < child.end_mark.index
            ]
            yield item, child, True, (repeated if child is node else below)
        return
    yield obj, node, False, repeated


# -- what is compared ----------------------------------------------------------------------------


def paths(value: Any, path: JsonPath = ()) -> Iterator[JsonPath]:
    """Every path in `value`, and past each collection a step that is not there."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*path, key if isinstance(key, str) else str(key)))
        yield (*path, "not-a-key")
        yield (*path, 0)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*path, index))
        yield (*path, len(value))
        yield (*path, "not-an-index")


def described(obj: Any, where: Resource | Reference) -> dict[JsonPath, tuple[Any, ...]]:
    return {path: (where.position(path), where.last_line(path)) for path in paths(obj)}


def reference_view(text: str) -> list[tuple[Any, ...]]:
    view = []
    for index, node, lines, offset in reference_documents(text):
        for obj, item_node, in_list, repeated in reference_objects(node):
            reference = Reference(obj, item_node, lines, offset)
            duplicates = sorted(
                (r.key, r.first_line, reference.at(r.node.start_mark), path_to_node(item_node, r.node) or ())
                for r in repeated
            )
            view.append((index, obj, in_list, reference.line_span(), duplicates, described(obj, reference)))
    return view


def loader_view(text: str) -> list[tuple[Any, ...]]:
    view = []
    for resource in parse_text(text, "equivalence.yaml").resources:
        duplicates = sorted(
            (d.key, d.first_line, resource.position_of(d.place), d.path) for d in resource.duplicates
        )
        view.append(
            (
                resource.doc_index,
                resource.obj,
                resource.in_list,
                resource.line_span(),
                duplicates,
                described(resource.obj, resource),
            )
        )
    return view


def problems(text: str) -> list[tuple[Any, ...]]:
    """Where the problems are (the two parsers word a syntax error differently)."""
    found = parse_text(text, "equivalence.yaml").problems
    return [(problem.rule_id, problem.doc_index, problem.line, problem.column) for problem in found]


def loaded_on_pure_python(text: str, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    with monkeypatch.context() as patch:
        patch.setattr(direct, "AVAILABLE", False)  # as where neither libyaml nor the extension is
        patch.setattr(
            documents, "compose_documents", lambda t: composer.compose_documents(t, pure_python=True)
        )
        return [*loader_view(text), problems(text)]


def assert_equivalent(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert loader_view(text) == reference_view(text)
    # At the end of a text without a final line break, libyaml counts one line more than PyYAML's
    # Python parser does (the last object's span ends there): compared with one.
    ended = text if text.endswith("\n") else text + "\n"
    assert [*loader_view(ended), problems(ended)] == loaded_on_pure_python(ended, monkeypatch)


# -- the texts -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", manifests(), ids=lambda path: str(path.relative_to(path.parents[1])))
def test_a_manifest_loads_as_the_reference_loads_it(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_equivalent(path.read_text(encoding="utf-8"), monkeypatch)


def test_the_real_corpus_is_among_the_manifests() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"{CORPUS} is not here")
    assert sum(1 for path in manifests() if CORPUS in path.parents) >= 100


@pytest.mark.parametrize("name", TRICKY)
def test_a_tricky_text_loads_as_the_reference_loads_it(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_equivalent(TRICKY[name], monkeypatch)


def test_the_yaml_1_1_scalars_are_kubectls() -> None:
    [resource] = parse_text(TRICKY["yaml 1.1 scalars"], "scalars.yaml").resources
    obj = resource.obj
    assert (obj["a"], obj["b"], obj["c"], obj["d"]) == (True, False, True, False)
    assert (obj["f"], obj["g"], obj["h"], obj["i"], obj["t"]) == (493, 31, 90, 1000, 5)
    assert (obj["j"], obj["k"], obj["l"]) == (None, None, None)
    assert (obj["m"], obj["n"], obj["q"], obj["s"]) == ("yes", "0755", "2024-01-01", "=")
    assert obj["o"] == float("inf") and obj["p"] == -500.0
    assert (obj["e"], obj["u"]) == (
        "y",
        "-.5e3",
    )  # PyYAML: no `y` boolean; a float needs a digit before its dot after a sign


def test_merged_fields_point_where_the_anchor_wrote_them() -> None:
    [resource] = parse_text(TRICKY["merge keys"], "merge.yaml").resources
    assert resource.obj["one"] == {"cpu": 4, "memory": "2Gi"}
    assert resource.obj["two"] == {"gpu": 1, "cpu": 9, "memory": "2Gi", "extra": "x"}
    assert resource.obj["three"] == {"cpu": 5, "memory": "2Gi", "gpu": 1}
    assert resource.position(("one", "cpu")) == (5, 3)  # written in the mapping: it wins
    assert resource.position(("one", "memory")) == (1, 22)  # merged: where the anchor wrote it
    assert resource.position(("two", "cpu")) == (2, 22)  # the first source listed wins
    assert resource.position(("three", "cpu")) == (10, 3)  # written before the merge: it wins
    assert resource.position(("three", "gpu")) == (2, 14)  # from the second merge key
    assert resource.position(("four", "cpu")) == (1, 14)  # merged into a merged mapping
