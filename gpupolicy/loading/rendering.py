"""Objects rendered by Helm or kustomize, traced back to the file a person edits.

A chart is linted as `helm template` renders it and an overlay as `kubectl kustomize` builds it,
but a finding is only useful on the file that holds the field: the template, the base or the patch.

- Helm writes `# Source: <chart name>/templates/x.yaml` above each rendered document
  (https://helm.sh/docs/helm/helm_template/; a subchart's as `parent/charts/sub/templates/x.yaml`).
- kustomize writes `config.kubernetes.io/origin` (the file an object was read from) and
  `alpha.config.kubernetes.io/transformations` (the kustomizations whose patches changed it) when
  the kustomization sets `buildMetadata: [originAnnotations, transformerAnnotations]`
  (https://kubectl.docs.kubernetes.io/references/kustomize/kustomization/buildmetadata/). An overlay
  is rendered through a wrapper kustomization in a temporary folder that names it as its only
  resource (kustomize takes a relative folder outside its root as a resource, not an absolute one),
  and the annotations are removed before any rule sees the objects.

A traced object (`TracedResource`) is named by its source file; the line of a field is found by
reading the source text for the field's keys in order (best effort: a key written by a template
action is not in the text, and the search stops at the last key found), else the line of the
object's `kind:`, else line 1.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

from gpupolicy.core.findings import Finding, JsonPath
from gpupolicy.core.immutable import immutable, mutable, replace
from gpupolicy.core.wording import listed
from gpupolicy.loading.directives import InlineDirective, scan_comments
from gpupolicy.loading.documents import LoadedText, Resource
from gpupolicy.loading.positions import Place

HELM_SOURCE = "# Source: "
ORIGIN_ANNOTATION = "config.kubernetes.io/origin"
TRANSFORMATIONS_ANNOTATION = "alpha.config.kubernetes.io/transformations"
BUILD_METADATA = ("originAnnotations", "transformerAnnotations")
MAX_SOURCE_BYTES = 4 * 1024 * 1024  # a source file read for lines (bigger ones: kind line 1 only)
MAX_ANNOTATION_CHARS = 8192  # an origin annotation is a few lines


@mutable
class SourceText:
    """The lines of a source file and where each of its YAML documents starts."""

    lines: list[str]
    starts: list[int]  # 0-based index of the first line of each document
    kinds: dict[str, list[int]] | None = None  # the lines of each `kind:` value, read on first use

    @classmethod
    def read(cls, path: Path) -> SourceText:
        try:
            data = path.read_bytes()[:MAX_SOURCE_BYTES]
        except OSError:
            data = b""
        lines = data.decode("utf-8-sig", "replace").splitlines()
        starts = [0] + [index + 1 for index, line in enumerate(lines) if line.rstrip() == "---"]
        return cls(lines, starts)

    def kind_lines(self, kind: str) -> list[int]:
        """0-based lines that read `kind: <kind>` (quoted or not) at any indentation."""
        if self.kinds is None:
            self.kinds = {}
            for index, line in enumerate(self.lines):
                key, sep, value = line.strip().partition(":")
                if sep and key == "kind":
                    self.kinds.setdefault(value.split("#", 1)[0].strip().strip("'\""), []).append(index)
        return self.kinds.get(kind, [])

    def written_name(self, kind_line: int) -> str | None:
        """The `metadata.name` written as a plain value in the document whose `kind:` is on
        `kind_line` (None where a template action or nothing writes it)."""
        start, stop = self.document_span(kind_line)
        level = _indentation(self.lines[kind_line])
        metadata = self.key_position("metadata", start, stop) if level is not None else None
        if metadata is None or metadata[1] - 1 != level:
            return None
        child: int | None = None
        for index in range(metadata[0] + 1, stop):
            text = self.lines[index]
            indent = _indentation(text)
            if indent is None:
                continue
            if indent <= level:
                return None
            child = indent if child is None else child
            key, sep, value = text.strip().partition(":")
            if indent == child and sep and key.strip("'\"") == "name":
                return value.split(" #", 1)[0].strip().strip("'\"") or None
        return None

    def document_span(self, line: int) -> tuple[int, int]:
        """The lines [start, stop) of the document holding `line`."""
        index = bisect.bisect_right(self.starts, line) - 1
        start = self.starts[max(index, 0)]
        stop = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.lines)
        return start, stop

    def key_position(self, key: str, start: int, stop: int, parent: int = -1) -> tuple[int, int] | None:
        """0-based line and 1-based column of the first `key:` in lines [start, stop) inside the
        block of a key at indentation `parent` (-1: the document): the search ends at a line
        indented no deeper than it. The line at `start` may be a list item's `- key:` line."""
        candidates = (key, f'"{key}"', f"'{key}'")
        for index in range(start, stop):
            text = self.lines[index]
            indent = _indentation(text)
            if indent is None:
                continue
            if indent <= parent and index != start:
                return None
            stripped = text.lstrip(" -")
            for candidate in candidates:
                if stripped.startswith(candidate) and stripped[len(candidate) :].lstrip(" ").startswith(":"):
                    return index, len(text) - len(stripped) + 1
        return None

    def item_position(
        self, number: int, start: int, stop: int, parent: int, rendered: int | None = None
    ) -> tuple[int, int] | None:
        """0-based line and 1-based column of the dash of the item that rendered as item `number`
        of the list that is the value of a key at indentation `parent` (its items may be indented
        as deep as the key). `rendered`: how many items the list rendered to.

        A template action among the list's items (`{{- range .Values.sidecarContainers }}`, an
        `{{- if }}` around an item, `{{- toYaml .Values.extraContainers | nindent 8 }}`) writes
        any number of items, so the items written after it are counted from the list's end, and
        those written before it from its start; an item between two actions is found by its
        written place, the best left."""
        items, actions = self._list_items(start, stop, parent)
        if not actions:
            return items[number] if number < len(items) else None
        leading = [item for item in items if item[0] < actions[0]]  # no action written before them
        if number < len(leading):
            return leading[number]
        trailing = [item for item in items if item[0] > actions[-1]]  # no action written after them
        from_end = None if rendered is None else rendered - number
        if from_end is not None and 0 < from_end <= len(trailing):
            return trailing[-from_end]
        return items[number] if number < len(items) else None

    def _list_items(self, start: int, stop: int, parent: int) -> tuple[list[tuple[int, int]], list[int]]:
        """The written items of a list (line, column of the dash) and the lines of the template
        actions among them, at the items' level."""
        items: list[tuple[int, int]] = []
        actions: list[int] = []
        dash: int | None = None
        for index in range(start, stop):
            text = self.lines[index]
            indent = _indentation(text)
            if indent is None:
                if _list_action(text, parent, dash):
                    actions.append(index)
                continue
            is_item = text.lstrip(" ").startswith("-")
            if indent < parent or (indent == parent and not is_item):
                break
            if dash is None and is_item:
                dash = indent
            if is_item and indent == dash:
                items.append((index, indent + 1))
            elif dash is not None and indent < dash:
                break
        return items, actions


def _list_action(text: str, parent: int, dash: int | None) -> bool:
    """Whether a line that holds only a template action writes, or bounds, items of a list: a
    block (`range`, `if`, `with`, their `else` and `end`) or an action that writes text (`toYaml`,
    `include`, `tpl`), indented deeper than the list's key and no deeper than its items' dashes
    (`dash`, None before the first item); not a comment or a variable's assignment. An action
    indented deeper is inside an item, one shallower closes what holds the list."""
    stripped = text.lstrip(" ")
    if not stripped.startswith("{{"):
        return False
    indent = len(text) - len(stripped)
    if indent <= parent or (dash is not None and indent > dash):
        return False
    body = stripped[2:].lstrip("- ")
    return not body.startswith(("/*", "$"))


def _indentation(text: str) -> int | None:
    """Where a line's content starts; None for a line that holds no key (blank, a comment, or a
    template action alone, which Helm may indent anywhere)."""
    stripped = text.lstrip(" ")
    if not stripped or stripped.startswith(("#", "{{")):
        return None
    return len(text) - len(stripped)


@mutable
class Origin:
    """Where a rendered object comes from: its source file (as shown) and the document in it."""

    file: str
    text: SourceText
    anchor: int | None  # 0-based line of the object's `kind:` in the source, if found

    def position(self, path: JsonPath, obj: Any = None) -> tuple[int, int]:
        """The line and column of `path` in the source; `obj`: the rendered object, whose lists'
        lengths place an item written after a template action (`item_position`)."""
        if self.anchor is None:
            start, stop = 0, len(self.text.lines)
            found: tuple[int, int] = (0, 1)
        else:
            start, stop = self.text.document_span(self.anchor)
            found = (self.anchor, 1)
        cursor, parent = start, -1
        node = obj
        for step in path:
            if isinstance(step, str):
                position = self.text.key_position(step, cursor, stop, parent)
                node = node.get(step) if isinstance(node, dict) else None
            else:
                rendered = len(node) if isinstance(node, list) else None
                position = self.text.item_position(step, cursor, stop, parent, rendered)
                node = node[step] if rendered is not None and 0 <= step < rendered else None
            if position is None:
                break  # the rest is written by a template action (or not in this file)
            found = position
            # A key's value starts after its line; an item's first key is on the dash's line.
            cursor, parent = (position[0] + 1 if isinstance(step, str) else position[0]), position[1] - 1
        return found[0] + 1, found[1]


class TracedResource(Resource):
    """A rendered object named by its source file, its positions read from that file."""

    __slots__ = ("origin", "rendered_by")

    def __init__(self, resource: Resource, origin: Origin, rendered_by: str) -> None:
        super().__init__(
            resource.obj,
            file=origin.file,
            doc_index=resource.doc_index,
            positions=resource.positions,
            rendered_from=resource.rendered_from,
            line_offset=resource.line_offset,
            duplicates=resource.duplicates,
            lines=resource.lines,
            text_marks=resource.text_marks,
        )
        self.origin = origin
        self.rendered_by = rendered_by  # the chart or overlay, as shown

    def position(self, path: JsonPath) -> tuple[int, int] | None:
        return self.origin.position(path, self.obj)

    def last_line(self, path: JsonPath) -> int | None:
        return self.origin.position(path, self.obj)[0]

    def position_of(self, place: Place) -> tuple[int, int]:
        # A place in the rendered text has none in the source: the object's own line stands in.
        return self.origin.position(())

    def line_span(self) -> tuple[int, int] | None:
        """The lines of its document in the source file (what a `# gpupolicy: ignore` comment in
        the file is matched against)."""
        anchor = self.origin.anchor
        if anchor is None:
            return None
        start, stop = self.origin.text.document_span(anchor)
        return start + 1, max(stop, start + 1)


class SourceTexts:
    """Source files read once per rendering."""

    def __init__(self) -> None:
        self._texts: dict[Path, SourceText] = {}

    def get(self, path: Path) -> SourceText:
        text = self._texts.get(path)
        if text is None:
            text = self._texts[path] = SourceText.read(path)
        return text


def trace(
    loaded: LoadedText,
    sources: Sequence[tuple[Resource, Path | None]],
    *,
    rendered_by: str,
    display: Callable[[Path], str],
) -> None:
    """Replace each object whose source file is known by its traced copy (in place)."""
    texts = SourceTexts()
    seen: dict[tuple[Path, str], int] = {}  # objects of one kind from one file so far
    traced: dict[int, Resource] = {}
    for resource, path in sources:
        if path is None:
            continue
        text = texts.get(path)
        count = seen.get((path, resource.kind), 0)
        seen[(path, resource.kind)] = count + 1
        kinds = text.kind_lines(resource.kind) if resource.kind else []
        anchor = _anchor_by_name(text, kinds, resource.name)
        if anchor is None:
            anchor = kinds[count] if count < len(kinds) else (kinds[0] if kinds else None)
        traced[id(resource)] = TracedResource(resource, Origin(display(path), text, anchor), rendered_by)
    loaded.resources = [traced.get(id(resource), resource) for resource in loaded.resources]


def _anchor_by_name(text: SourceText, kinds: Sequence[int], name: str) -> int | None:
    """The `kind:` line of the source document that wrote the object named `name`: kustomize
    sorts what it builds (by kind, then name), so the n-th Deployment built from a file need not
    be the file's n-th. The name written there, or the one document whose name the built one
    holds (a `namePrefix` or `nameSuffix` added to it); None when neither says (Helm's names are
    written by template actions: the order of the file is kept there)."""
    if not name or len(kinds) < 2:
        return None
    written = [(line, text.written_name(line)) for line in kinds]
    exact = [line for line, found in written if found == name]
    if len(exact) == 1:
        return exact[0]
    # With a prefix and a suffix, the longest written name the built one holds (`llm-2`, not `llm`).
    within = sorted(((len(found), line) for line, found in written if found and found in name), reverse=True)
    if within and (len(within) == 1 or within[0][0] > within[1][0]):
        return within[0][1]
    return None


# -- Helm ------------------------------------------------------------------------------------------


def helm_sources(text: str) -> list[tuple[int, str]]:
    """(1-based line, source path) of each `# Source:` comment of `helm template` output."""
    found = []
    for index, line in enumerate(text.splitlines()):
        if line.startswith(HELM_SOURCE):
            found.append((index + 1, line[len(HELM_SOURCE) :].strip()))
    return found


def helm_template_file(chart: Path, source: str) -> Path | None:
    """The file a `# Source:` path names: its first segment is the chart's name (not its folder),
    the rest is relative to the chart. None when it is not a file inside the chart (a packaged
    subchart, or a path that leaves the chart)."""
    _name, sep, rest = source.partition("/")
    if not sep or not rest:
        return None
    root = chart.resolve()
    try:
        path = (root / rest).resolve()
        path.relative_to(root)
    except (ValueError, OSError, RuntimeError):
        return None
    return path if path.is_file() else None


def helm_directives(
    directives: Sequence[InlineDirective], text: str, chart: Path, display: Callable[[Path], str]
) -> list[InlineDirective]:
    """The `# gpupolicy: ignore` comments of the rendered chart (Helm keeps a template's comments),
    each moved to the line of its template that holds the same comment (a template itself is no
    YAML a scanner can read for comments). One found in no template stays where it is."""
    comments = helm_sources(text)
    rendered = text.splitlines()
    texts = SourceTexts()
    moved = []
    for directive in directives:
        source = _source_above(comments, directive.line)
        path = helm_template_file(chart, source) if source else None
        line = rendered[directive.line - 1] if 0 < directive.line <= len(rendered) else ""
        comment = line[directive.column - 1 :].strip()
        found = None
        if path is not None and comment:
            lines = texts.get(path).lines
            found = next((index for index, candidate in enumerate(lines) if comment in candidate), None)
        if path is None or found is None:
            moved.append(directive)
            continue
        column = lines[found].index(comment) + 1
        moved.append(replace(directive, file=display(path), line=found + 1, column=column))
    return moved


def source_directives(paths: Iterable[Path], display: Callable[[Path], str]) -> list[InlineDirective]:
    """The `# gpupolicy: ignore` comments of the files kustomize read (it keeps no comments)."""
    found: list[InlineDirective] = []
    for path in dict.fromkeys(paths):
        found.extend(scan_comments("\n".join(SourceText.read(path).lines) + "\n", display(path)))
    return found


def _source_above(comments: Sequence[tuple[int, str]], line: int) -> str | None:
    """The path of the last `# Source:` comment above `line` (comments in line order)."""
    index = bisect.bisect_left(comments, (line, "")) - 1
    return comments[index][1] if index >= 0 else None


def helm_origins(loaded: LoadedText, text: str, chart: Path) -> list[tuple[Resource, Path | None]]:
    """Each rendered object with the template file of the last `# Source:` comment above it."""
    comments = helm_sources(text)
    files: dict[str, Path | None] = {}
    pairs: list[tuple[Resource, Path | None]] = []
    for resource in loaded.resources:
        start = resource.position(())
        source = _source_above(comments, start[0] if start else 0)
        if source is not None and source not in files:
            files[source] = helm_template_file(chart, source)
        pairs.append((resource, files.get(source) if source is not None else None))
    return pairs


# -- kustomize -------------------------------------------------------------------------------------


def wrapper_kustomization(overlay: Path, wrapper: Path) -> str:
    """A kustomization in `wrapper` that builds `overlay` with its build metadata."""
    relative = Path(os.path.relpath(overlay.resolve(), wrapper.resolve())).as_posix()
    return yaml.safe_dump({"resources": [relative], "buildMetadata": list(BUILD_METADATA)}, sort_keys=False)


def _annotation_mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, str) or len(value) > MAX_ANNOTATION_CHARS:
        return {}
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _annotation_list(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, str) or len(value) > MAX_ANNOTATION_CHARS:
        return []
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return []
    return [item for item in parsed if isinstance(item, dict)] if isinstance(parsed, list) else []


@immutable
class BuildMetadata:
    """What kustomize's build annotations said of one object (they are removed from it)."""

    origin: str | None  # the source file, relative to the wrapper folder
    patched_in: tuple[str, ...] = field(default=())  # kustomization files whose patches changed it


def strip_build_metadata(resource: Resource) -> BuildMetadata:
    """Remove kustomize's build annotations from the object (no rule must see them)."""
    metadata = resource.obj.get("metadata") if isinstance(resource.obj, dict) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict):
        return BuildMetadata(None)
    origin = _annotation_mapping(annotations.pop(ORIGIN_ANNOTATION, None))
    transformations = _annotation_list(annotations.pop(TRANSFORMATIONS_ANNOTATION, None))
    if not annotations and isinstance(metadata, dict):
        del metadata["annotations"]
    path = origin.get("path") if not origin.get("repo") else None
    patched = tuple(
        str(item.get("configuredIn"))
        for item in transformations
        if isinstance(item.get("configuredBy"), dict)
        and item["configuredBy"].get("kind") == "PatchTransformer"
    )
    return BuildMetadata(path if isinstance(path, str) else None, patched)


def inside(path: Path, roots: Iterable[Path]) -> bool:
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError in Python 3.11)
        return False
    for root in roots:
        try:
            resolved.relative_to(root.resolve())
        except (ValueError, OSError, RuntimeError):
            continue
        return True
    return False


# -- one finding for the same field of the same base object, whatever overlays render it ------------


class OverlayFindings:
    """Which overlays rendered each traced object of a shared base, so that a finding the same in
    several overlays is reported once, naming them, and one of a single overlay names it."""

    def __init__(self) -> None:
        self._overlays: dict[tuple[str, int, str], list[str]] = {}

    def note(self, resource: Resource, overlay: str) -> None:
        overlays = self._overlays.setdefault((resource.file, resource.doc_index, str(resource.ref)), [])
        if overlay not in overlays:
            overlays.append(overlay)

    def __bool__(self) -> bool:
        return bool(self._overlays)

    def merge(self, findings: list[Finding]) -> list[Finding]:
        return [finding for finding, _ in self.merge_pairs([(finding, "") for finding in findings])]

    def merge_pairs(self, items: list[tuple[Finding, str]]) -> list[tuple[Finding, str]]:
        """Findings (with what goes with them: a suppressed finding's reason) merged: one per
        rule, field and message of a traced base object, naming the overlays it came from."""
        merged: dict[tuple[Any, ...], tuple[Finding, str, list[str]]] = {}
        out: list[tuple[Finding, str] | tuple[Any, ...]] = []
        for finding, extra in items:
            overlays = self._overlays.get((finding.file or "", finding.doc_index or 0, str(finding.object)))
            if not overlays:
                out.append((finding, extra))
                continue
            key = (finding.rule_id, finding.severity, finding.file, finding.line, finding.column,
                   finding.path, finding.container, finding.message, extra)  # fmt: skip
            if key in merged:
                names = merged[key][2]
                names.extend(name for name in overlays if name not in names)
            else:
                merged[key] = (finding, extra, list(overlays))
                out.append(key)
        result: list[tuple[Finding, str]] = []
        for item in out:
            if item in merged:
                finding, extra, names = merged[item]
                if finding.unknown:  # about the cluster, said once per run: no overlay to name
                    result.append((finding, extra))
                    continue
                note = f" (as rendered by {', '.join(names)})"
                result.append((replace(finding, message=finding.message + note), extra))
            else:
                result.append(item)
        return result


# What stops a kustomize build, when it names a file: kustomize's "lstat <path>: no such file or
# directory" (a base's generated .env, operator-sdk's CSV base). Linear: a bounded run of one class.
_MISSING_FILE = re.compile(r"lstat ([^:\s']{1,4096}): no such file or directory")


def merge_unbuilt_overlays(findings: list[Finding]) -> list[Finding]:
    """One GP004 per missing file that stops several overlays' builds, naming the others (GKE's
    reference architecture: 66 overlays of one base that misses its Terraform-generated
    `deployment.env`); the first overlay's finding stands for all, in the report's order."""
    first: dict[str, int] = {}
    others: dict[int, list[str]] = {}
    kept: list[Finding] = []
    for finding in findings:
        missing = _missing_file(finding)
        if missing is None:
            kept.append(finding)
        elif missing in first:
            others[first[missing]].append(finding.file or "?")
        else:
            first[missing] = len(kept)
            others[len(kept)] = []
            kept.append(finding)
    for index, names in others.items():
        if names:
            overlays = "overlay" if len(names) == 1 else "overlays"
            message = (
                f"{kept[index].message}; the same missing file stops {len(names)} other {overlays} "
                f"({listed(names, ', ')})"
            )
            kept[index] = replace(kept[index], message=message)
    return kept


def _missing_file(finding: Finding) -> str | None:
    if finding.rule_id != "GP004" or not finding.message.startswith("kubectl kustomize "):
        return None
    found = _MISSING_FILE.search(finding.message)
    return found.group(1) if found is not None else None
