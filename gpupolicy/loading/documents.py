"""Load manifests into `Resource`s that remember where every field came from.

PyYAML's C parser composes the node graph (with line/column marks) fast; we construct
plain Python values from those nodes ourselves, which lets us see duplicate keys (kubectl
silently keeps the last one) and keep the node tree to resolve any JSON path to a position
later, only for the fields a finding is about.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpupolicy.core.findings import JsonPath, ObjectRef, excerpt

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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Skipped:
    """A document that is not a Kubernetes object (gpupolicy/loading/object_evidence.py), or a whole file
    that holds none (`doc_index` None): not linted, counted in the report's summary."""

    file: str
    doc_index: int | None
    reason: str


class LineIndex:
    """Editor positions in a text where libyaml's differ. libyaml (YAML 1.1) also ends a line at
    a lone "\r", NEL, LS and PS, and skips a leading BOM; git, GitHub annotations, SARIF viewers
    and `# gpupolicy: ignore` comments count lines by "\n". In such a text a position is found
    from the mark's character index instead of its line and column."""

    __slots__ = ("_shift", "_size", "_starts")

    # What makes libyaml's line or column differ from counting "\n" (a "\r\n" is one break for both).
    _DIFFERS = re.compile("\r(?!\n)|[\x85\u2028\u2029\ufeff]")

    def __init__(self, text: str) -> None:
        self._starts = [0, *(match.end() for match in re.finditer("\n", text))]
        self._shift = 1 if text.startswith("\ufeff") else 0  # libyaml's index skips it
        self._size = len(text)

    @classmethod
    def needed(cls, text: str) -> LineIndex | None:
        """An index for `text` when libyaml's lines or columns would be wrong there, else None."""
        return cls(text) if cls._DIFFERS.search(text) else None

    def position(self, mark: yaml.Mark) -> tuple[int, int]:
        """0-based (line, column) of `mark`, as libyaml's marks count them; a mark past the end
        (the end of a stream that does not end in a newline) is the end of the text."""
        index = min(mark.index + self._shift, self._size)
        line = bisect.bisect_right(self._starts, index) - 1
        return line, index - self._starts[line]


def mark_position(mark: yaml.Mark, lines: LineIndex | None) -> tuple[int, int]:
    """0-based (line, column) of a libyaml mark, with `lines` where libyaml counts differently."""
    return lines.position(mark) if lines is not None else (mark.line, mark.column)


@dataclass(slots=True)
class DuplicateKey:
    key: str
    first_line: int
    node: yaml.Node


class Resource:
    """One Kubernetes object as loaded: the value, where it came from, and its node tree."""

    __slots__ = (
        "_templates",
        "doc_index",
        "duplicates",
        "facts",
        "file",
        "in_list",
        "line_offset",
        "lines",
        "node",
        "obj",
        "rendered_from",
    )

    def __init__(
        self,
        obj: Any,
        *,
        file: str,
        doc_index: int,
        node: yaml.Node | None = None,
        rendered_from: str | None = None,
        line_offset: int = 0,
        duplicates: list[DuplicateKey] | None = None,
        lines: LineIndex | None = None,
        in_list: bool = False,
    ) -> None:
        self.obj = obj
        self.file = file
        self.doc_index = doc_index
        self.node = node
        self.rendered_from = rendered_from
        # PyYAML's C marks are read-only: documents parsed one by one keep their offset here.
        self.line_offset = line_offset
        self.lines = lines  # where libyaml's line numbers are not the editor's (None: they are)
        self.duplicates = duplicates or []
        self.in_list = in_list  # an item of a `kind: List` document (whose wrapper said it is an object)
        self._templates: Any = None  # memoised by pod_spec.workload_of
        self.facts: dict[Any, Any] | None = None  # engine.Context.object_fact's, made on first use

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
        if self.node is None:
            return None
        return self.node_position(_node_at(self.node, path))

    def last_line(self, path: JsonPath) -> int | None:
        """1-based last line of the scalar at `path` (a quoted or block scalar may span several)."""
        if self.node is None:
            return None
        node = _node_at(self.node, path)
        if not isinstance(node, yaml.ScalarNode):
            return None
        line, column = mark_position(node.end_mark, self.lines)
        # A block scalar ends at the start of the next line.
        return line + (1 if column > 0 else 0) + self.line_offset

    def line_span(self) -> tuple[int, int] | None:
        """1-based first and last line of the object's text (None without a node tree)."""
        node = self.node
        if node is None:
            return None
        return self.mark_position(node.start_mark)[0], self.mark_position(node.end_mark)[0]

    def node_position(self, node: yaml.Node) -> tuple[int, int]:
        return self.mark_position(node.start_mark)

    def mark_position(self, mark: yaml.Mark) -> tuple[int, int]:
        """1-based (line, column) of a mark of this resource's nodes, in the file."""
        line, column = mark_position(mark, self.lines)
        return line + 1 + self.line_offset, column + 1

    def has_path(self, path: JsonPath) -> bool:
        value: Any = self.obj
        for step in path:
            value = child_value(value, step)
            if value is MISSING:
                return False
        return True


MISSING: Any = object()


def child_value(value: Any, step: str | int) -> Any:
    """`value[step]` for a mapping key or list index, or MISSING."""
    if isinstance(value, list):
        return value[step] if isinstance(step, int) and 0 <= step < len(value) else MISSING
    if isinstance(value, dict):
        return value.get(step, MISSING)
    return MISSING


def _node_at(root: yaml.Node, path: JsonPath) -> yaml.Node:
    """The node a finding about `path` points at: the key node for a mapping entry, the item for a
    list entry, and the nearest existing ancestor when the field is absent."""
    node = root
    pointer = root
    for step in path:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            found = _entry_nodes(node, step)
            if found is None:
                return pointer
            pointer, node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            node = node.value[step]
            pointer = node
        else:
            return pointer
    return pointer


def _entry_nodes(node: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The key and value nodes of `key`: written in the mapping (the last duplicate wins, as in
    kubectl), or else merged into it with `<<: *anchor` (pointing where the anchor wrote it)."""
    merges: list[yaml.Node] = []
    for key_node, value_node in reversed(node.value):
        if key_node.tag == _TAG_MERGE:
            merges.append(value_node)
        elif isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return key_node, value_node
    for merged in reversed(merges):  # the first merge source listed wins, as in construct()
        sources = merged.value if isinstance(merged, yaml.SequenceNode) else [merged]
        for source in sources:
            if isinstance(source, yaml.MappingNode):
                found = _entry_nodes(source, key)
                if found is not None:
                    return found
    return None


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


def _scalar_value(node: yaml.ScalarNode) -> Any:
    tag = node.tag
    if tag == _TAG_STR:
        return node.value
    if tag == _TAG_NULL:
        return None
    kind = _SCALAR_KINDS.get(tag)
    if kind is None:
        # timestamps, binary and custom tags (`!Ref`) stay text: Kubernetes treats them as strings.
        return node.value
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


@dataclass(frozen=True, slots=True)
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


def construct(root: yaml.Node, limits: LoadLimits = DEFAULT_LIMITS) -> tuple[Any, list[DuplicateKey]]:
    """Build plain Python values from a node tree, noting repeated mapping keys.

    Depth is tracked during the one walk (no second traversal on the hot path). An alias is
    charged where it is met: the expanded size of its anchor's value is added to a running count
    and its expanded depth to the depth it is used at, so a bomb stops at its first excess,
    before anything expands it."""
    duplicates: list[DuplicateKey] = []
    memo: dict[int, Any] = {}
    extents: dict[int, tuple[int, int]] = {}
    expanded = 0
    max_depth, max_expansion = limits.max_depth, limits.max_alias_expansion
    scalar_node = yaml.ScalarNode
    mapping_node = yaml.MappingNode

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

    def build(node: yaml.Node, depth: int) -> Any:
        if type(node) is scalar_node:
            tag = node.tag
            if tag == _TAG_STR:
                return node.value
            return _scalar_value(node)
        if depth > max_depth:
            raise ExcessiveAliasing(
                f"the document nests deeper than {max_depth} levels (policy limits.maxDepth)", node
            )
        known = memo.get(id(node))
        if known is not None:
            charge_alias(node, depth)
            return known  # an alias: share the value instead of expanding it again
        if type(node) is mapping_node:
            result: dict[Any, Any] = {}
            memo[id(node)] = result
            seen_lines: dict[Any, int] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _TAG_MERGE:
                    _merge_into(result, build(value_node, depth + 1))
                    continue
                key = build(key_node, depth + 1)
                if not isinstance(key, str | int | float | bool) and key is not None:
                    key = str(key)
                if key in seen_lines:
                    duplicates.append(DuplicateKey(str(key), seen_lines[key], key_node))
                seen_lines[key] = key_node.start_mark.line + 1
                result[key] = build(value_node, depth + 1)
            return result
        items: list[Any] = []
        memo[id(node)] = items
        for item in node.value:  # a loop, not a generator: one stack frame per level
            items.append(build(item, depth + 1))
        return items

    return build(root, 1), duplicates


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
    r"\{\{-?\s*(?:\.|\$|/\*|(?:include|template|if|else|end|range|with|define|block|toYaml|tpl|"
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


def find_helm_action(text: str) -> tuple[int, int] | None:
    """1-based position of the first Helm template action in `text`, if any."""
    matches = list(_HELM_ACTION.finditer(text))
    if not matches:
        return None
    literal = _go_template_text_ranges(text)
    program = (_go_template_text_ranges(text, _PROGRAM_TEXT_KEYS) if literal is not None else None) or []
    for match in matches:
        line = text.count("\n", 0, match.start()) + 1
        column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
        if any(start <= (line, column) < end for start, end in literal or []):
            continue
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
            return False
    return True


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


@dataclass(slots=True)
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
        return (*_line_col(exc, line_offset, LineIndex(chunk)), _syntax_message(exc, line_offset))
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


def _expand_lists(obj: Any, node: yaml.Node) -> Iterator[tuple[Any, yaml.Node]]:
    """`kind: List` and `*List` wrap their objects in `items`; each item is an object of its own."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    items = obj.get("items") if isinstance(obj, dict) else None
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        value_node = _mapping_value(node, "items")
        for index, item in enumerate(items):
            child = value_node.value[index] if isinstance(value_node, yaml.SequenceNode) else node
            yield item, child
        return
    yield obj, node


def _mapping_value(node: yaml.Node, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in reversed(node.value):
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                found: yaml.Node = value_node
                return found
    return None


_DOCUMENT_START = re.compile(r"^---(?=\s|$)", re.MULTILINE)


def split_documents(text: str) -> list[tuple[int, str]]:
    """Split a stream at `---` lines, keeping each chunk's starting line (0-based)."""
    chunks: list[tuple[int, str]] = []
    starts = [match.start() for match in _DOCUMENT_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    line = 0
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(text)
        chunk = text[start:end]
        chunks.append((line, chunk))
        line += chunk.count("\n")  # counted once per chunk: linear in the stream
    return chunks


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


def _compose_stream(text: str) -> list[yaml.Node] | None:
    try:
        return [node for node in yaml.compose_all(text, Loader=_Loader) if node is not None]
    except (yaml.YAMLError, UnicodeError):
        return None


def parse_text(
    text: str, file: str, *, rendered_from: str | None = None, limits: LoadLimits = DEFAULT_LIMITS
) -> LoadedText:
    """Parse a YAML/JSON stream. A broken document is reported and the others still load."""
    loaded = LoadedText()
    nodes = _compose_stream(text)
    if nodes is not None:
        lines = LineIndex.needed(text)
        for index, node in enumerate(nodes):
            _add_document(loaded, node, file, index, rendered_from, limits=limits, lines=lines)
        return loaded
    # Slow path, only for streams with an error: parse document by document so that
    # one broken document does not take the others with it.
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
    used holds one node tree, not the whole file's.

    `parse_text` reads a stream with a syntax error anywhere document by document on its own (the
    slow path). Here the error shows only when it is reached: the documents not given yet then come
    from the slow path, and those already given must read the same there (objects, positions and
    problems), else StreamReadsDifferently is raised."""
    given: list[tuple[Any, ...]] = []
    lines = LineIndex.needed(text)
    try:
        nodes = (node for node in yaml.compose_all(text, Loader=_Loader) if node is not None)
        for index, node in enumerate(nodes):
            document = LoadedText()
            _add_document(document, node, file, index, rendered_from, limits=limits, lines=lines)
            given.append(_fingerprint(document))
            yield document
        return
    except (yaml.YAMLError, UnicodeError):
        pass
    for index, document in enumerate(_documents_one_by_one(text, file, rendered_from, limits)):
        if index >= len(given):
            yield document
        elif _fingerprint(document) != given[index]:
            raise StreamReadsDifferently(f"{file}: document {index} reads differently on its own")


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
        try:
            chunk_nodes = list(yaml.compose_all(chunk, Loader=_Loader))
        except (yaml.YAMLError, UnicodeError) as exc:
            line, column, message = _error_at(exc, chunk, line_offset)
            yield LoadedText(problems=[LoadProblem("GP001", message, file, line, column, index)])
            index += 1
            continue
        lines = LineIndex.needed(chunk)
        for node in chunk_nodes:
            if node is None:
                continue
            document = LoadedText()
            _add_document(document, node, file, index, rendered_from, line_offset, limits=limits, lines=lines)
            yield document
            index += 1


def _add_document(
    loaded: LoadedText,
    node: yaml.Node,
    file: str,
    index: int,
    rendered_from: str | None,
    line_offset: int = 0,
    *,
    limits: LoadLimits = DEFAULT_LIMITS,
    lines: LineIndex | None = None,
) -> None:
    try:
        obj, duplicates = construct(node, limits)
    except (ValueError, TypeError) as exc:  # `!!bool maybe`, a 5,000-digit integer, an alias bomb
        mark = exc.node.start_mark if isinstance(exc, UnreadableValue) else node.start_mark
        line, column = mark_position(mark, lines)
        line, column = line + 1 + line_offset, column + 1
        loaded.problems.append(LoadProblem("GP001", f"cannot read value: {exc}", file, line, column, index))
        return
    if obj is None:
        return  # an empty document between separators: kubectl skips it too
    for item, item_node in _expand_lists(obj, node):
        loaded.resources.append(
            Resource(
                item,
                file=file,
                doc_index=index,
                node=item_node,
                rendered_from=rendered_from,
                line_offset=line_offset,
                duplicates=duplicates if item_node is node else _duplicates_below(duplicates, item_node),
                lines=lines,
                in_list=item is not obj,
            )
        )


def _duplicates_below(duplicates: list[DuplicateKey], root: yaml.Node) -> list[DuplicateKey]:
    start, end = root.start_mark.index, root.end_mark.index
    return [dup for dup in duplicates if start <= dup.node.start_mark.index < end]
