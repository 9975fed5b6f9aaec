"""YAML text to PyYAML node graphs, with none of PyYAML's per-node Python machinery but the tags.

PyYAML's C parser (`yaml.CParser`, libyaml) composes the node graph inside its Cython code, and
calls back into Python for every node: `descend_resolver` and `ascend_resolver` (for path
resolvers, which nothing registers) and `resolve` (the implicit tag of a scalar, a walk over a
list of regular expressions). Those calls cost more than the composition itself. Here the two
path-resolver hooks are C functions that do nothing, and `resolve` looks at the resolvers of the
scalar's first character only, as PyYAML's own does, without the rest: it gives the tags
`yaml.CSafeLoader` gives (YAML 1.1: `yes`/`no`/`on`/`off`, `0755`, `1:30`, `<<`). PyYAML's `resolve`
also makes a list per plain scalar, which sets off the cyclic collector where it runs (the webhook):
there this composer takes half the time, and a sixth less where batch runs pause the collector
(docs/performance.md, "Loader").

Where PyYAML was built without libyaml, its pure-Python parser composes with the same hooks: the
same nodes, more slowly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from yaml.composer import Composer
from yaml.nodes import Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import BaseResolver, Resolver
from yaml.scanner import Scanner

TAG_STR = BaseResolver.DEFAULT_SCALAR_TAG
_TAG_SEQ = BaseResolver.DEFAULT_SEQUENCE_TAG
_TAG_MAP = BaseResolver.DEFAULT_MAPPING_TAG
# The YAML 1.1 implicit resolvers of yaml.SafeLoader and yaml.CSafeLoader, by first character
# ("" for the empty scalar). Read at each call: what PyYAML holds at the time is what it would use.
_IMPLICIT: dict[str, list[tuple[str, Any]]] = Resolver.yaml_implicit_resolvers


# The tags of short plain scalars that a resolver's first character claims (`name`, `namespace`,
# `nvidia.com/gpu`, `true`, `1`): 82,000 of the 282,000 plain scalars of 2,000 GPU Deployments,
# each matched against one to four regular expressions, and in manifests the same few recur.
# Bounded whatever the input: scalars of up to 32 characters, 4,096 of them at most (emptied
# when full), about half a megabyte. (What PyYAML's resolvers claim is read once per scalar not
# remembered; nothing adds a resolver to PyYAML's Resolver after start-up.)
_REMEMBERED_TAGS: dict[str, str] = {}
_REMEMBERED_MAX_CHARS = 32
_REMEMBERED_MAX_TAGS = 4_096


def resolve_tag(kind: type[Node], value: Any, implicit: Any) -> str:
    """The tag `yaml.resolver.Resolver.resolve` gives a node without an explicit tag, when no
    path resolver is registered (none is: gpupolicy registers none, and neither does PyYAML)."""
    if kind is ScalarNode:
        if implicit[0]:  # a plain scalar: a quoted one is a string
            resolvers = _IMPLICIT.get(value[:1])  # "" for the empty scalar
            if resolvers:
                return _REMEMBERED_TAGS.get(value) or _implicit_tag(value, resolvers)
        return TAG_STR
    return _TAG_SEQ if kind is SequenceNode else _TAG_MAP


def _implicit_tag(value: str, resolvers: list[tuple[str, Any]]) -> str:
    """The tag of the first resolver whose expression matches the plain scalar, else a string's."""
    found = next((tag for tag, pattern in resolvers if pattern.match(value)), TAG_STR)
    if len(value) <= _REMEMBERED_MAX_CHARS:
        if len(_REMEMBERED_TAGS) >= _REMEMBERED_MAX_TAGS:
            _REMEMBERED_TAGS.clear()
        _REMEMBERED_TAGS[value] = found
    return found


# The composer calls `descend_resolver(parent, index)` before and `ascend_resolver()` after each
# node; with no path resolvers PyYAML's versions return at once, after a Python call each. These
# are C callables that return at once without one. (`get` of an empty dict takes the parent as
# the key and the index as the default, and hashes only the parent: a node or None. A dict's own
# `get`: a read-only mapping proxy's looks `get` up on the dict it wraps and calls it, at every
# node: 116 M of the 4,102 M instructions of composing 2,000 GPU Deployments. Nothing is ever
# added to the dict: it is this module's alone.)
_NO_PATH_RESOLVERS: dict[object, object] = {}
_NOTHING: frozenset[object] = frozenset()


class _LeanHooks:
    """The hooks above, in place of PyYAML's resolver (first in the method resolution order)."""

    descend_resolver = _NO_PATH_RESOLVERS.get
    ascend_resolver = _NOTHING.copy
    resolve = staticmethod(resolve_tag)


class _PurePythonParser(_LeanHooks, Reader, Scanner, Parser, Composer):
    """PyYAML's parser and composer written in Python, as where libyaml is missing."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)


try:
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    LIBYAML = False
    _Parser: Any = _PurePythonParser
else:
    LIBYAML = True

    class _LibyamlParser(_LeanHooks, CParser):
        """PyYAML's parser and composer in C (libyaml and Cython)."""

    _Parser = _LibyamlParser


def compose_documents(text: str, *, pure_python: bool = False) -> Iterator[Node | None]:
    """The root node of each document of `text` (None for an empty one), as `yaml.compose_all`
    with `yaml.CSafeLoader` gives them; raises yaml.YAMLError (and UnicodeError) as it does.
    `pure_python`: PyYAML's Python parser, as where libyaml is missing (tests compare the two)."""
    parser = (_PurePythonParser if pure_python else _Parser)(text)
    try:
        while parser.check_node():
            node: Node | None = parser.get_node()
            yield node
    finally:
        parser.dispose()


def compose_document(text: str) -> Node | None:
    """The root node of the only document of `text`, as `yaml.compose` gives it."""
    parser = _Parser(text)
    try:
        node: Node | None = parser.get_single_node()
        return node
    finally:
        parser.dispose()
