"""The walk over a node graph that cannot share nodes (a text without `&`, so without anchors or
aliases) keeps no memo of what it built: it must build what the walk with the memo builds."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpupolicy.loading.composer import compose_documents
from gpupolicy.loading.documents import (
    DEFAULT_LIMITS,
    ExcessiveAliasing,
    LoadLimits,
    construct_with_positions,
    may_share_nodes,
    parse_text,
)
from gpupolicy.loading.positions import LineStarts
from tests.yaml_texts import TRICKY, manifests

TREES = {
    **{str(path): text for path in manifests() if "&" not in (text := path.read_text(encoding="utf-8"))},
    **{name: text for name, text in TRICKY.items() if "&" not in text},
}


def walks(text: str, *, shared: bool, limits: LoadLimits = DEFAULT_LIMITS) -> list[Any]:
    """What each document's walk gives (values, root entry, repeated keys), or the error it raises."""
    found: list[Any] = []
    lines: LineStarts | None = None
    try:
        nodes = [node for node in compose_documents(text) if node is not None]
    except (yaml.YAMLError, UnicodeError):
        return found
    for node in nodes:
        lines = lines or LineStarts.of(text, node)
        try:
            value, entry, repeated = construct_with_positions(node, limits, lines, shared=shared)
        except (ValueError, TypeError) as exc:
            found.append((type(exc).__name__, str(exc)))
            continue
        found.append(
            (value, entry, [(key.key, key.first_line, key.node.start_mark.index) for key in repeated])
        )
    return found


def test_many_texts_are_trees() -> None:
    assert len(TREES) > 100


@pytest.mark.parametrize("name", TREES)
def test_a_tree_walks_as_a_graph_walks(name: str) -> None:
    text = TREES[name]
    assert not may_share_nodes(text)
    assert walks(text, shared=False) == walks(text, shared=True)


def test_only_an_ampersand_lets_nodes_be_shared() -> None:
    assert may_share_nodes("a: &x 1\nb: *x\n")
    assert may_share_nodes("url: http://x/?a=1&b=2\n")  # a scalar's & too: the memo is kept, as before
    assert not may_share_nodes("a: [1, {b: c}]\n")
    with pytest.raises(yaml.composer.ComposerError):  # an alias without its anchor is not composed
        list(compose_documents("a: *x\n"))


@pytest.mark.parametrize(
    "text",
    [
        "a:\n  b:\n    c:\n      d: 1\n",
        "- - - - 1\n",
        "{a: [[{b: [c]}]]}\n",
    ],
)
def test_a_tree_too_deep_is_refused_where_a_graph_is(text: str) -> None:
    limits = LoadLimits(max_depth=3)
    assert walks(text, shared=False, limits=limits) == walks(text, shared=True, limits=limits)
    assert walks(text, shared=False, limits=limits)[0][0] == ExcessiveAliasing.__name__


def test_duplicate_keys_of_a_tree_are_found() -> None:
    loaded = parse_text("a: 1\nb:\n  yes: 1\n  true: 2\na: 3\n", "dup.yaml")
    (resource,) = loaded.resources
    assert [(duplicate.key, duplicate.first_line, duplicate.path) for duplicate in resource.duplicates] == [
        ("True", 3, ("b", "true")),
        ("a", 1, ("a",)),
    ]


def test_repeated_keys_around_merge_keys_and_collection_keys() -> None:
    """A mapping finds a repeated key in the values it built until a merge key adds keys not written
    (`b` below is written once), a collection key or a first repeated key; then in a dict of the keys
    written before: every repeated key is found, in the order written, with its last earlier line."""
    text = (
        "a: 1\n<<: {a: 0, b: 0}\nb: 2\na: 3\n? [x]\n: 1\n? [x]\n: 2\n1: one\n01: two\n'1': s\n1: again\n"
        "c: {d: 1, <<: {d: 2}, d: 3}\ne: {f: 1, f: 2, ? [g]\n  : 3, f: 4}\n"
    )
    (resource,) = parse_text(text, "repeated.yaml").resources
    assert [(duplicate.key, duplicate.first_line, duplicate.path) for duplicate in resource.duplicates] == [
        ("a", 1, ("a",)),
        ("['x']", 5, ("?",)),
        ("1", 9, ("01",)),
        ("1", 10, ("1",)),
        ("d", 13, ("c", "d")),
        ("f", 14, ("e", "f")),
        ("f", 14, ("e", "f")),
    ]
    assert resource.obj == {
        "a": 3,
        "b": 2,
        "['x']": 2,
        1: "again",
        "1": "s",
        "c": {"d": 3},
        "e": {"f": 4, "['g']": 3},
    }
    assert walks(text, shared=False) == walks(text, shared=True)
