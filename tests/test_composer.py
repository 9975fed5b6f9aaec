"""The loader's composer gives the node graphs PyYAML's safe loaders give: same tags, values,
styles and marks, on libyaml and on PyYAML's pure-Python parser."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpupolicy.loading import composer
from gpupolicy.loading.composer import LIBYAML, compose_document, compose_documents, resolve_tag
from tests.yaml_texts import TRICKY, manifests


def shape(node: yaml.Node | None) -> Iterator[Any]:
    """Everything a node graph says, in document order (an alias's anchor again in full)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if node is None:
            yield None
            continue
        start, end = node.start_mark, node.end_mark
        yield (
            type(node).__name__,
            node.tag,
            start.index,
            start.line,
            start.column,
            end.index,
            end.line,
            end.column,
        )
        if isinstance(node, yaml.ScalarNode):
            yield node.value, node.style
        elif isinstance(node, yaml.MappingNode):
            stack.extend(item for pair in reversed(node.value) for item in reversed(pair))
        else:
            stack.extend(reversed(node.value))


def graphs(nodes: Iterator[yaml.Node | None]) -> list[list[Any]]:
    try:
        return [list(shape(node)) for node in nodes]
    except yaml.YAMLError as exc:
        return [[type(exc).__name__, str(exc)]]


TEXTS = {**{str(path): path.read_text(encoding="utf-8") for path in manifests()}, **TRICKY}


@pytest.mark.parametrize("name", TEXTS)
def test_the_graphs_are_pyyamls(name: str) -> None:
    text = TEXTS[name]
    assert graphs(compose_documents(text)) == graphs(yaml.compose_all(text, Loader=yaml.CSafeLoader))
    python = graphs(compose_documents(text, pure_python=True))
    assert python == graphs(yaml.compose_all(text, Loader=yaml.SafeLoader))


def test_libyaml_is_here() -> None:
    assert LIBYAML  # PyYAML's wheels bundle it on every platform gpupolicy supports


def test_one_document() -> None:
    node = compose_document("a: [yes, '1', 1]\n")
    assert list(shape(node)) == list(shape(yaml.compose("a: [yes, '1', 1]\n", Loader=yaml.CSafeLoader)))
    assert compose_document("") is None
    with pytest.raises(yaml.composer.ComposerError):
        compose_document("a: 1\n---\nb: 2\n")


@pytest.mark.parametrize(
    "value",
    [
        "",
        "~",
        "null",
        "yes",
        "On",
        "n",
        "0755",
        "0o7",
        "1_000",
        "1:30",
        "-.inf",
        "<<",
        "=",
        "2024-01-01",
        "x",
    ],
)
def test_a_plain_scalars_tag_is_the_resolvers(value: str) -> None:
    resolver = yaml.resolver.Resolver()
    for implicit in ((True, False), (False, True), (False, False)):
        expected = resolver.resolve(yaml.ScalarNode, value, implicit)
        assert resolve_tag(yaml.ScalarNode, value, implicit) == expected
        assert resolve_tag(yaml.ScalarNode, value, implicit) == expected  # remembered the second time
    assert resolve_tag(yaml.SequenceNode, None, True) == resolver.resolve(yaml.SequenceNode, None, True)
    assert resolve_tag(yaml.MappingNode, None, True) == resolver.resolve(yaml.MappingNode, None, True)


def test_remembered_tags_stay_bounded_whatever_the_input() -> None:
    resolver = yaml.resolver.Resolver()
    values = [f"{number}" for number in range(3 * composer._REMEMBERED_MAX_TAGS)] + ["n" * 33, "1" * 40]
    for value in values:
        assert resolve_tag(yaml.ScalarNode, value, (True, False)) == resolver.resolve(
            yaml.ScalarNode, value, (True, False)
        )
        assert len(composer._REMEMBERED_TAGS) <= composer._REMEMBERED_MAX_TAGS
    assert "n" * 33 not in composer._REMEMBERED_TAGS and "1" * 40 not in composer._REMEMBERED_TAGS
    assert all(len(value) <= composer._REMEMBERED_MAX_CHARS for value in composer._REMEMBERED_TAGS)
