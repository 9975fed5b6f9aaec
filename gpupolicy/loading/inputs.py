"""Where manifests come from: files, directories, stdin and kustomize directories.

Turns paths into `Resource`s and `LoadProblem`s. Directories are walked recursively for
*.yaml, *.yml and *.json, skipping hidden folders, excluded globs and files that are not
manifests (Chart.yaml, values files, kustomization files). A directory with a kustomization
is rendered with `kubectl kustomize` and its files are not linted one by one.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path

from gpupolicy.core.immutable import immutable, mutable, replace
from gpupolicy.core.wording import listed
from gpupolicy.loading.directives import InlineDirective, scan_comments
from gpupolicy.loading.documents import (
    DEFAULT_LIMITS,
    ChunkRead,
    LoadedText,
    LoadLimits,
    LoadProblem,
    Resource,
    Skipped,
    find_helm_action,
    find_jinja_statement,
    find_terraform_directive,
    helm_actions_only_in_strings,
    helm_names_in,
    iter_chosen_chunks,
    iter_chosen_documents,
    iter_parse,
    iter_parse_given,
    parse_text,
)
from gpupolicy.loading.kustomizations import (
    KUSTOMIZATION_FILES,
    Patch,
    Reach,
    direct_folders,
    kustomization_file,
    reach,
    remote_reference,
    resolved,
    resource_files,
)
from gpupolicy.loading.object_evidence import (
    GO,
    ObjectFilter,
    configuration_file,
    own_template_dialect,
    tries_to_be_object,
)
from gpupolicy.loading.rendering import (
    OverlayFindings,
    helm_directives,
    helm_origins,
    inside,
    source_directives,
    strip_build_metadata,
    trace,
    wrapper_kustomization,
)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
# Files that live beside manifests but are not Kubernetes objects.
NOT_MANIFESTS = frozenset(
    {
        "Chart.yaml", "Chart.lock", "values.schema.json", "values.yaml", "values.yml", ".gpupolicy.yaml", ".gpupolicy.yml",
        ".pre-commit-config.yaml", ".pre-commit-hooks.yaml", "package.json", "package-lock.json",
        "tsconfig.json", "SOURCES.tsv", ".yamllint.yaml", ".yamllint",
    }
)  # fmt: skip
KUSTOMIZE_TIMEOUT_SECONDS = 60


@mutable
class Loaded:
    resources: list[Resource] = field(default_factory=list)
    problems: list[LoadProblem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    directives: list[InlineDirective] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def extend(self, other: LoadedText, file: str) -> None:
        self.resources.extend(other.resources)
        self.problems.extend(other.problems)
        self.directives.extend(other.directives)
        self.skipped.extend(other.skipped)
        self.files.append(file)


def display_path(path: Path, *, here: Path | None = None) -> str:
    """Paths relative to the current directory where possible (what people click on). `here`: the
    current directory resolved (`resolved_cwd`), for a caller that names many paths."""
    try:
        # A link that leads nowhere is named as it is found: its target is no file of the repository.
        shown = (
            path.parent.resolve() / path.name if path.is_symlink() and not path.exists() else path.resolve()
        )
        return str(shown.relative_to(here or Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):  # elsewhere, or a symlink loop (RuntimeError in 3.11)
        return str(path)


def resolved_cwd() -> Path | None:
    """The current directory resolved once for a walk's many `display_path`s, which each resolved it
    again (with `is_excluded` resolving two paths per entry to match no pattern, a walk of 1,000
    files took 0.09 s of CPU, 0.04 s without both). None where it cannot be resolved: each path is
    then shown as `display_path` alone shows it."""
    try:
        return Path.cwd().resolve()
    except (OSError, RuntimeError):
        return None


def is_excluded(path: Path, root: Path, patterns: Iterable[str]) -> bool:
    patterns = list(patterns)
    if not patterns:  # nothing to match: the two paths need not be resolved
        return False
    try:
        relative = path.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # elsewhere, or a symlink loop (RuntimeError in 3.11)
        relative = path.as_posix()
    return any(
        fnmatch.fnmatch(relative, pattern)
        or fnmatch.fnmatch(path.name, pattern)
        or relative.startswith(pattern.rstrip("/") + "/")
        for pattern in patterns
    )


def iter_manifest_files(
    root: Path,
    exclude: Iterable[str] = (),
    *,
    base: Path | None = None,
    unreadable: list[LoadProblem] | None = None,
) -> Iterator[Path]:
    """Manifest files and kustomize directories below `root`, in a stable order. Exclude globs
    are matched against paths relative to `base` (the directory given on the command line).

    A folder that cannot be listed is skipped and, when `unreadable` is given, reported there;
    a manifest-named symlink that leads nowhere (a loop, a dangling link) is yielded, so that
    reading it gives a finding instead of silence."""
    patterns = list(exclude)
    base = root if base is None else base
    if is_chart(root):
        yield root  # rendered as one unit (helm template)
        yield from _files_helm_does_not_read(root, patterns, base, unreadable)
        return
    if any((root / name).is_file() for name in KUSTOMIZATION_FILES):
        # Rendered as one unit (kubectl kustomize); the walk goes on below it, and the caller
        # leaves out what the overlay reads: a manifest beside it that it does not list (a
        # kubebuilder project's config/samples/…) is linted on its own, not hidden.
        yield root
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        if unreadable is not None:
            reason = exc.strerror or type(exc).__name__
            unreadable.append(LoadProblem("GP001", f"cannot read directory: {reason}", display_path(root)))
        return
    for entry in entries:
        if entry.name.startswith(".") or is_excluded(entry, base, patterns) or is_vendored(entry):
            continue
        if entry.is_dir() and not entry.is_symlink():
            yield from iter_manifest_files(entry, patterns, base=base, unreadable=unreadable)
        elif (
            entry.suffix in MANIFEST_SUFFIXES
            and entry.name not in NOT_MANIFESTS
            and entry.name not in KUSTOMIZATION_FILES
            and (entry.is_file() or (entry.is_symlink() and not entry.exists()))
        ):
            # A `values-*.yaml` outside a chart is read too: Helm values hold no object and are
            # skipped and counted as such, where a name alone would have hidden rendered manifests.
            yield entry


# What Helm reads of a chart besides its own files (Chart.yaml, values files): the folders it
# renders or installs (https://helm.sh/docs/topics/charts/#the-chart-file-structure) and the
# chart-testing values of `ci/`. Anything else below a chart (an `examples/` of manifests applied
# with kubectl) is not rendered by Helm: linted as it is written.
CHART_FOLDERS = frozenset({"templates", "charts", "crds", "ci"})


def read_by_helm(chart: Path, path: Path) -> bool:
    """Whether Helm reads `path`, a file below the chart `chart`, as part of the chart."""
    try:
        parts = path.resolve().relative_to(chart.resolve()).parts
    except ValueError:
        return False
    if len(parts) > 1:
        return parts[0] in CHART_FOLDERS or is_values_file(parts[-1])
    return parts[-1] in NOT_MANIFESTS or is_values_file(parts[-1])


def is_values_file(name: str) -> bool:
    """`values.yaml`, `values-gpu.yaml`, `values.prod.yml`: a chart's values, never objects."""
    return name.startswith("values") and name.endswith(MANIFEST_SUFFIXES)


def _files_helm_does_not_read(
    chart: Path, patterns: list[str], base: Path, unreadable: list[LoadProblem] | None
) -> Iterator[Path]:
    """The manifests below a chart that Helm neither renders nor reads (its examples, plain files
    applied beside it), walked as any folder is."""
    try:
        entries = sorted(chart.iterdir())
    except OSError:
        return  # the chart itself reports it cannot be read when rendered
    read = _template_text_of(chart)
    for entry in entries:
        if entry.name.startswith(".") or is_excluded(entry, base, patterns) or is_vendored(entry):
            continue
        if _named_by_templates(chart, entry, read):
            continue  # `.Files.Get "files/resources.yaml"`: judged as the chart renders it
        if entry.is_dir() and not entry.is_symlink():
            if entry.name not in CHART_FOLDERS:
                yield from (
                    path
                    for path in iter_manifest_files(entry, patterns, base=base, unreadable=unreadable)
                    if not _named_by_templates(chart, path, read)
                )
        elif entry.suffix in MANIFEST_SUFFIXES and entry.is_file() and not read_by_helm(chart, entry):
            yield entry


TEMPLATE_TEXT_READ = 1 << 22  # bytes of a chart's templates searched for the files they read


def _template_text_of(chart: Path) -> str:
    """The text of the chart's templates (helpers too), bounded, read once per chart walk."""
    parts: list[str] = []
    size = 0
    for path in sorted((chart / "templates").rglob("*")):
        if size >= TEMPLATE_TEXT_READ or not path.is_file():
            continue
        try:
            data = path.read_bytes()[: TEMPLATE_TEXT_READ - size]
        except OSError:
            continue
        size += len(data)
        parts.append(data.decode("utf-8", "replace"))
    text = "\n".join(parts)
    return text if ".Files" in text else ""


def _named_by_templates(chart: Path, path: Path, text: str) -> bool:
    """Whether a template reads `path` (a file or folder of the chart) through `.Files`: its path
    relative to the chart, or a folder of it, is written in the templates (`.Files.Get
    "files/resources.yaml"`, `.Files.Glob "files/llmisvcconfigs/*"`, a helper given the path).
    KServe's chart keeps its resources in files/ and renders them with its values' images."""
    if not text:
        return False
    try:
        relative = path.relative_to(chart).as_posix()
    except ValueError:
        return False
    return any(f"{quote}{relative}{end}" in text for quote in ('"', "'", "`") for end in (quote, "/", "*"))


def is_vendored(entry: Path) -> bool:
    """A folder of third-party code copied in by an ecosystem's convention, never the repository's
    manifests (apimachinery's test fixtures in a Go operator's `vendor/`): npm's `node_modules`, and
    Go's `vendor` beside a go.mod or holding its modules.txt. Named on the command line, it is linted."""
    if entry.name == "node_modules":
        return entry.is_dir()
    if entry.name != "vendor" or not entry.is_dir():
        return False
    return (entry.parent / "go.mod").is_file() or (entry / "modules.txt").is_file()


def _decode(data: bytes, file: str) -> tuple[str | None, LoadProblem | None]:
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, LoadProblem(
            "GP001", f"file is not UTF-8 text (byte 0x{data[exc.start]:02x})", file, line, column
        )


def render_hint(path: Path, *, helm: bool = False) -> str:
    """How to render a templated file, for the GP004 message."""
    for folder in path.resolve().parents:
        if (folder / "Chart.yaml").is_file():
            chart = display_path(folder)
            if is_chart(folder) and read_by_helm(folder, path):
                return f"render the chart first: helm template RELEASE {chart} | gpupolicy lint -"
            # NeMo's launcher copies such files into templates/ when it runs: helm template of
            # the folder as it stands renders nothing of them.
            return (
                f"Helm renders only the templates/ of the chart {chart}, and this file is outside them: "
                "lint the objects as the tool that puts it there renders them"
            )
    if helm:  # Helm actions outside a chart: envsubst would not render them
        return f"render it with helm template first (no Chart.yaml found above {display_path(path)})"
    return f"render it first, e.g. envsubst < {display_path(path)} | gpupolicy lint -"


def _helm_problem(
    text: str, file: str, hint_path: Path | None, limits: LoadLimits = DEFAULT_LIMITS
) -> LoadProblem | None:
    """GP004 for a file with Helm template actions, unless they are strings of a YAML file that
    holds no Kubernetes object (a .goreleaser.yaml's `"{{ .Version }}"`: its own template language)."""
    helm = find_helm_action(text)
    if helm is None or _actions_of_the_objects_own(text, file, limits):
        return None
    if hint_path is not None and not _in_a_chart(hint_path) and not helm_names_in(text, dot=False):
        # `{{ .Name }}`, `{{ .Namespace }}` outside a chart: an operator's own Go templates
        # (NVIDIA's NIM operator renders its manifests/ itself), not Helm's.
        return LoadProblem(
            "GP004",
            "file holds Go template actions ({{ ... }}) and names none of Helm's values or functions: the "
            "program that fills them in renders it; lint what it renders",
            file,
            *helm,
        )
    hint = render_hint(hint_path, helm=True) if hint_path else "render it with helm template first"
    return LoadProblem("GP004", f"file holds Helm template actions ({{{{ ... }}}}); {hint}", file, *helm)


def _in_a_chart(path: Path) -> bool:
    return any((folder / "Chart.yaml").is_file() for folder in path.resolve().parents)


def _actions_of_the_objects_own(text: str, file: str, limits: LoadLimits) -> bool:
    """Whether every Helm-looking action lies in a string of a file that parses, and none is Helm's:
    the file holds no object (a .goreleaser.yaml), or some object of it fills `{{…}}` in itself
    (Argo's Workflows, KServe's serving runtimes) and no action names Helm's objects or functions
    (`names_helm`; a leading dot is Helm's unless a Go-template object is there). Each other
    placeholder is then GP004's at its field: one never hides the file's other objects."""
    if not helm_actions_only_in_strings(text):
        return False
    loaded = parse_text(text, file, limits=limits)
    if loaded.problems:
        return False
    objects = ObjectFilter(file).take(loaded.resources)
    if not objects:
        return True
    dialects = {own_template_dialect(resource.api_version, resource.kind) for resource in objects} - {None}
    # A chart's template of a workflow (`image: "{{ .Values.image }}"`) is still Helm's to render.
    return bool(dialects) and not helm_names_in(text, dot=GO not in dialects)


def _template_text(text: str, file: str, hint_path: Path | None, limits: LoadLimits) -> LoadedText | None:
    """A templated file's outcome, or None for a file to read: GP004, or skipped when what the
    template makes is a configuration file no API server reads."""
    helm = _helm_problem(text, file, hint_path, limits) or _jinja_problem(text, file, limits)
    if helm is None:
        return None
    configuration = _configuration_template(text)
    if configuration is not None:
        return LoadedText(skipped=[Skipped(file, None, configuration)])
    if hint_path is not None and helm.rule_id == "GP004":
        chart = chart_of(hint_path)
        if chart is not None and not read_by_helm(chart, hint_path):
            return LoadedText(skipped=[Skipped(file, None, CHART_READS_IT)])
    return LoadedText(problems=[helm])


# A file below a chart, outside its templates, holding Helm's actions (`files/config.yaml`): a
# template reads it (`tpl (.Files.Get …)`), so the chart's rendering judges what it makes.
CHART_READS_IT = (
    "a file of a chart outside its templates/ holding Helm actions: Helm renders it only where a template "
    "reads it (.Files with tpl), and the chart is linted as rendered"
)


# A key every object's text holds (or its attempt at one: GP003 reports what it lacks), written as a
# key: the word, maybe quoted, then a colon, at a line's start or after a brace, comma or space
# (`"status_metadata":` or `a kind of` is no such key). One pass, linear in the text.
_OBJECT_KEY = re.compile(r"""(?:^|[\s{,"'])(?:apiVersion|kind|metadata)["']?[ \t]*:""", re.MULTILINE)
UNREADABLE = "not a Kubernetes object (it names no apiVersion, kind or metadata, and does not parse: "
NOT_YAML_OR_JSON = UNREADABLE + "{})"


def _unreadable_other_format(text: str, file: str, limits: LoadLimits) -> LoadedText | None:
    """A file that does not parse and holds none of the words of an object (a JSON-lines log,
    a broken CI file): skipped and counted, with what stops it, like the other files of other
    formats, where a broken manifest (it names its apiVersion and kind) is GP001's. None for a
    file to read."""
    json_without_objects = _json_without_objects(text, file)
    if _OBJECT_KEY.search(text) is not None and not json_without_objects:
        return None
    problems = parse_text(text, file, limits=limits).problems
    if not problems:
        return None
    first = problems[0]
    where = f"line {first.line}: " if first.line is not None else ""
    reason = JSON_WITHOUT_OBJECTS if json_without_objects else NOT_YAML_OR_JSON
    return LoadedText(skipped=[Skipped(file, None, reason.format(where + first.message))])


JSON_WITHOUT_OBJECTS = "JSON that holds no Kubernetes object (YAML 1.1 cannot read it: {})"


def _json_without_objects(text: str, file: str) -> bool:
    """A `.json` file that JSON reads (a tokenizer: a key longer than the 1,024 characters YAML 1.1
    allows an implicit key) and whose values have no object's shape (object_evidence)."""
    if not file.endswith(".json"):
        return False
    import json  # here: only a .json file that YAML cannot read comes this far

    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    items = value if isinstance(value, list) else [value]
    return not any(tries_to_be_object(item) for item in items)


def _jinja_problem(text: str, file: str, limits: LoadLimits) -> LoadProblem | None:
    """GP004 for a file that does not parse because Jinja statements make its structure (DeepOps'
    Ansible roles: `{% if nic_policy.ofed %}` between a manifest's keys), not GP001's syntax error."""
    jinja = find_jinja_statement(text)
    terraform = find_terraform_directive(text) if jinja is None else None
    if (jinja or terraform) is None or not parse_text(text, file, limits=limits).problems:
        return None
    if terraform is not None:
        return LoadProblem(
            "GP004",
            "file holds Terraform template directives (%{ ... }); render it first (Terraform's templatefile) "
            "and lint what it makes",
            file,
            *terraform,
        )
    assert jinja is not None
    return LoadProblem(
        "GP004",
        "file holds Jinja template statements ({% ... %}); render it first (Ansible's template module, or jinja2) "
        "and lint what it makes",
        file,
        *jinja,
    )


def _configuration_template(text: str) -> str | None:
    """What a templated file is when every top-level `apiVersion:` line of it names the
    configuration of a Kubernetes program (object_evidence.CONFIGURATION_GROUPS: kind, kubeadm,
    kubelet …), such as NVIDIA's nvkind cluster templates: a file no API server reads, skipped
    like the same file rendered. None for anything else (a template that may hold objects is
    GP004's)."""
    pairs: list[dict[str, str]] = [{}]
    for line in text.splitlines():
        if line.rstrip() == "---":
            pairs.append({})
            continue
        key, colon, value = line.partition(":")
        if colon and key in ("apiVersion", "kind"):
            pairs[-1].setdefault(key, value.split("#", 1)[0].strip().strip("'\""))
    what = [configuration_file(pair) for pair in pairs if "apiVersion" in pair]
    if not what or None in what:
        return None
    return f"a template of {what[0]}"


def load_text(
    text: str,
    file: str,
    *,
    hint_path: Path | None = None,
    rendered_from: str | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
) -> LoadedText:
    """Parse one file's text, reporting templates (GP004); documents that are not Kubernetes
    objects, and files that hold none (empty ones too), are skipped (object_evidence.py). Helm's
    output holds no Helm action: a `{{ .PodName }}` left in it is a value's text, filled in by a
    controller (soperator's NodeSet), never a template that hides the chart's objects."""
    template = (
        None if rendered_from == "helm" else _template_text(text, file, hint_path, limits)
    ) or _unreadable_other_format(text, file, limits)
    if template is not None:
        return template
    loaded = parse_text(text, file, rendered_from=rendered_from, limits=limits)
    loaded.directives = scan_comments(text, file)
    objects = ObjectFilter(file)
    loaded.resources = objects.take(loaded.resources, problems=bool(loaded.problems))
    loaded.skipped = objects.finish()
    return loaded


def iter_text(
    text: str,
    file: str,
    *,
    hint_path: Path | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
    given: Mapping[int, ChunkRead] | None = None,
) -> Iterator[LoadedText]:
    """What `load_text` finds, one document at a time (documents.iter_parse); the file's
    `# gpupolicy: ignore` comments come first, on their own, and what it skipped last. `given`:
    chunks of the text an earlier reading read apart (`iter_chosen_text`), whose documents are
    given as read, the others then read apart too (documents.iter_parse_given)."""
    template = _template_text(text, file, hint_path, limits) or _unreadable_other_format(text, file, limits)
    if template is not None:
        yield template
        return
    directives = scan_comments(text, file)
    if directives:
        yield LoadedText(directives=directives)
    objects = ObjectFilter(file)
    documents = iter_parse_given(text, file, given, limits=limits) if given else None
    yield from _objects_only(documents or iter_parse(text, file, limits=limits), objects)
    skipped = objects.finish()
    if skipped:
        yield LoadedText(skipped=skipped)


def iter_chosen_text(
    text: str,
    file: str,
    chosen: Callable[[str], bool],
    *,
    hint_path: Path | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
    chunks: dict[int, ChunkRead] | None = None,
) -> Iterator[LoadedText] | None:
    """The documents `iter_text` gives whose own text `chosen` accepts (its objects only: no
    comments' directives, no skipped documents), or None where the stream's documents cannot be
    read apart. A chart's template gives none (`iter_text` gives its GP004 problem). `chunks`:
    filled with each chunk read, by its place, as `iter_text` takes it back (`given`)."""
    if (
        _template_text(text, file, hint_path, limits) is not None
        or _unreadable_other_format(text, file, limits) is not None
    ):
        return iter(())
    if chunks is not None:
        read = iter_chosen_chunks(text, file, chosen, limits=limits)
        return None if read is None else _objects_of_chunks(read, ObjectFilter(file), chunks)
    documents = iter_chosen_documents(text, file, chosen, limits=limits)
    if documents is None:
        return None
    return _objects_only(documents, ObjectFilter(file))


def _objects_of_chunks(
    read: Iterable[tuple[int, ChunkRead]], objects: ObjectFilter, chunks: dict[int, ChunkRead]
) -> Iterator[LoadedText]:
    """`_objects_only` of the chunks' documents, each chunk noted in `chunks` as read: its
    documents keep all they hold, for the filter of a reading of the whole file to sort them
    (`iter_text`'s `given`), which sees the documents before them too."""
    for place, chunk in read:
        chunks[place] = chunk
        for document in chunk.documents:
            resources = objects.take(document.resources, problems=bool(document.problems))
            yield LoadedText(resources=resources, problems=document.problems)


def _objects_only(documents: Iterable[LoadedText], objects: ObjectFilter) -> Iterator[LoadedText]:
    """Each document with only the objects `objects` (the file's filter) lets through. Of some of
    a file's documents (`iter_chosen_text`): a mapping is an object or not by itself
    (object_evidence.py); only a document that is not a mapping waits on those after it, and no
    such document is an object of a kind."""
    for document in documents:
        document.resources = objects.take(document.resources, problems=bool(document.problems))
        yield document


def load_file(path: Path, limits: LoadLimits = DEFAULT_LIMITS) -> LoadedText:
    return Source(display_path(path), path=path).load(limits)


RENDER_TIMEOUT_SECONDS = KUSTOMIZE_TIMEOUT_SECONDS
CHART_FILE = "Chart.yaml"
# The release name used to render a chart for linting (names only show up in object names).
CHART_RELEASE = "gpupolicy-lint"
# Helm refuses a release name longer than this (helm install's "release name" validation).
RELEASE_NAME_LIMIT = 53


_KUBE_VERSION = re.compile(r"v?[0-9]{1,3}\.[0-9]{1,4}(?:\.[0-9]{1,4})?")  # never an option


def chart_release(folder: Path) -> str:
    """The release a chart is rendered as: `gpupolicy-lint-<its Chart.yaml name>`. Each chart its
    own, as each is installed as its own release: two charts rendered as one release name in one
    namespace had one's Service and PDB select the other's pods (`app: {{ .Release.Name }}`, NVIDIA's
    Triton tutorials). A chart named as the chart's common helpers expect makes the usual names
    (`fullname` is the release when it holds the chart's name)."""
    name = ""
    for line in _chart_file_text(folder).splitlines():
        key, sep, value = line.partition(":")
        if sep and key == "name":  # a top-level line
            name = value.split("#", 1)[0].strip().strip("'\"")
            break
    cleaned = "-".join(part for part in re.split(r"[^a-z0-9]+", name.lower()) if part)
    release = f"{CHART_RELEASE}-{cleaned}" if cleaned else CHART_RELEASE
    return release[:RELEASE_NAME_LIMIT].rstrip("-")


def is_chart(folder: Path) -> bool:
    """A Helm chart: Chart.yaml beside a templates/ folder."""
    return (folder / CHART_FILE).is_file() and (folder / "templates").is_dir()


LIBRARY_CHART = (
    "a Helm library chart (type: library): templates other charts include, nothing of its own to render"
)
CHART_FILE_READ = 1 << 20
_LIBRARY_TYPES = frozenset({"type: library", "type: 'library'", 'type: "library"'})


def is_library_chart(folder: Path) -> bool:
    """A chart whose Chart.yaml says `type: library` (a top-level line): Helm refuses to render it
    ("library charts are not installable"); the charts that depend on it render its templates.
    https://helm.sh/docs/topics/library_charts/"""
    return any(
        line.split("#", 1)[0].rstrip() in _LIBRARY_TYPES for line in _chart_file_text(folder).splitlines()
    )


STARTER_CHART = (
    "a Helm starter (name: <CHARTNAME>): a scaffold `helm create --starter` copies, <CHARTNAME> "
    "replaced by the new chart's name"
)
# helm's chartutil.CreateFrom replaces this in a starter's templates and values (chartutil.CHARTNAME).
_STARTER_NAME = "<CHARTNAME>"


def is_starter_chart(folder: Path) -> bool:
    """A chart named `<CHARTNAME>` (a top-level `name:` line): a starter scaffold, never installed
    as it is; `helm create --starter` makes charts from it, the placeholder replaced in every file
    (helm's pkg/chartutil/create.go), so its placeholders are not a deploy-time failure."""
    for line in _chart_file_text(folder).splitlines():
        key, _, value = line.split("#", 1)[0].partition(":")
        if key == "name":
            return value.strip().strip("'\"") == _STARTER_NAME
    return False


def _chart_file_text(folder: Path) -> str:
    """The chart's Chart.yaml, bounded (a Chart.yaml is a few lines); empty when it cannot be read."""
    try:
        with (folder / CHART_FILE).open("rb") as chart:
            return chart.read(CHART_FILE_READ).decode("utf-8", "replace")
    except OSError:
        return ""


@immutable
class Part:
    """Which objects of a rendered chart or overlay an input stands for, by the file they are traced
    to: those of the files in `only` (pre-commit passed them), or those not in `without` (the rest
    of the chart or overlay, loaded as context). An empty part stands for every object."""

    only: frozenset[str] | None = None
    without: frozenset[str] = frozenset()

    @property
    def focus(self) -> frozenset[str]:
        return self.only or self.without

    def keeps(self, file: str) -> bool:
        return (self.only is None or file in self.only) and file not in self.without


WHOLE = Part()


class RenderSession:
    """What the inputs of one run share: each renderer's output (a chart reported in part and
    loaded in part as context is rendered once), the policy's extra Helm values files, and which
    overlays rendered the objects of shared bases (`rendering.OverlayFindings`)."""

    def __init__(
        self,
        helm_values: Sequence[str] = (),
        helm_namespace: str | None = None,
        helm_api_versions: Sequence[str] = (),
        kube_version: str | None = None,
    ) -> None:
        self.helm_values = tuple(helm_values)
        self.helm_namespace = helm_namespace
        self.helm_api_versions = tuple(helm_api_versions)
        # The Kubernetes the policy judges against (`kubernetesVersion`): charts render for it, as a
        # chart's `kubeVersion` range and `.Capabilities.KubeVersion` read it (else Helm's own default).
        self.kube_version = kube_version
        self.outputs: dict[tuple[str, ...], str | LoadProblem] = {}
        self.overlays = OverlayFindings()
        self._tops: dict[Path, list[tuple[Path, Reach]]] = {}

    def render(self, key: tuple[str, ...], run: Callable[[], str | LoadProblem]) -> str | LoadProblem:
        if key not in self.outputs:
            self.outputs[key] = run()
        return self.outputs[key]

    def top_kustomizations(self, root: Path, exclude: Sequence[str]) -> list[tuple[Path, Reach]]:
        """The kustomizations below `root` that no other one names, with what each reads."""
        key = root.resolve()
        if key not in self._tops:
            folders = [
                item for item in iter_manifest_files(root, exclude) if item.is_dir() and not is_chart(item)
            ]
            self._tops[key] = [(folder, reach(folder)) for folder in top_level(folders)]
        return self._tops[key]


def top_level(folders: Sequence[Path]) -> list[Path]:
    """The kustomization folders that no other one of `folders` names (resources, bases,
    components): a base is linted through its overlays, not beside them."""
    resolved = {folder.resolve() for folder in folders}
    named: set[Path] = set()
    for folder in folders:
        named.update(
            found for found in direct_folders(folder) if found in resolved and found != folder.resolve()
        )
    return [folder for folder in folders if folder.resolve() not in named]


def load_directory(
    folder: Path,
    limits: LoadLimits = DEFAULT_LIMITS,
    *,
    allow_remote: bool = True,
    part: Part = WHOLE,
    session: RenderSession | None = None,
) -> LoadedText:
    """A directory that is one unit: a Helm chart, or a kustomization."""
    session = session or RenderSession()
    if is_chart(folder):
        return load_chart(folder, limits, part=part, session=session)
    return load_kustomization(folder, limits, allow_remote=allow_remote, part=part, session=session)


def _keep(loaded: LoadedText, part: Part) -> LoadedText:
    if part == WHOLE:
        return loaded
    loaded.resources = [resource for resource in loaded.resources if part.keeps(resource.file)]
    if part.without:  # the rest of a chart or overlay, as context: its problems are not the change's
        loaded.problems, loaded.directives = [], []
    return loaded


def load_kustomization(
    folder: Path,
    limits: LoadLimits = DEFAULT_LIMITS,
    *,
    allow_remote: bool = True,
    part: Part = WHOLE,
    session: RenderSession | None = None,
) -> LoadedText:
    """`kubectl kustomize` of the folder, each object traced to its base, resource or patch file
    (rendering.py). Without `allow_remote` (`--no-remote`), a kustomization that names a remote
    base, component or file is refused before kubectl runs (GP004)."""
    shown = display_path(folder)
    if not allow_remote:
        problem = remote_reference(folder, display=display_path, limits=limits)
        if problem is not None:
            return LoadedText(problems=[problem])
    session = session or RenderSession()
    command = f"kubectl kustomize {shown}"

    def run() -> str | LoadProblem:
        import tempfile  # here: only an overlay is rendered in a temporary folder

        with tempfile.TemporaryDirectory(prefix="gpupolicy-kustomize-") as wrapper:
            Path(wrapper, "kustomization.yaml").write_text(wrapper_kustomization(folder, Path(wrapper)))
            output = _run(["kubectl", "kustomize", wrapper], shown, command)
            if isinstance(output, str):
                return f"{wrapper}\n{output}"  # origins are relative to the wrapper folder
        # A kustomize older than buildMetadata (v4.5), or an error of the overlay itself: the
        # overlay rendered as it is, untraced, or kustomize's own error about it.
        output = _run(["kubectl", "kustomize", str(folder)], shown, command)
        return f"\n{output}" if isinstance(output, str) else output

    output = session.render(("kustomize", str(folder.resolve())), run)
    if isinstance(output, LoadProblem):
        return _keep(_unbuilt_overlay(folder, output, limits, session), part)
    wrapper, _, text = output.partition("\n")
    loaded = load_text(text, shown, rendered_from="kustomize", limits=limits)
    if wrapper:
        _trace_kustomization(loaded, folder, Path(wrapper), part, session, limits)
    return _keep(loaded, part)


def _unbuilt_overlay(
    folder: Path, problem: LoadProblem, limits: LoadLimits, session: RenderSession
) -> LoadedText:
    """An overlay kustomize cannot build (a file it names is missing, as operator-sdk's generated
    CSV base is until `make bundle`): its GP004, and the local files it names as resources linted
    as written, so that a broken build hides none of the objects a person wrote (semantic-router's
    OpenShift overlay held two GPU servers). What the overlay would change of them is unknown.
    A base several such overlays name is reported once, naming them (`OverlayFindings`)."""
    files = [path for path in resource_files(folder, limits) if path.suffix in MANIFEST_SUFFIXES]
    loaded = LoadedText()
    unbuilt = f"{display_path(folder)} [not built]"
    for path in files:
        shown = display_path(path)
        text, _unreadable = _read(path, shown)
        if text is None:
            continue  # the build's error already says so
        part = load_text(text, shown, limits=limits, hint_path=path)
        for resource in part.resources:
            session.overlays.note(resource, unbuilt)
        loaded.resources.extend(part.resources)
        loaded.problems.extend(part.problems)
        loaded.directives.extend(part.directives)
        loaded.skipped.extend(part.skipped)
    if files:
        problem = replace(
            problem,
            message=f"{problem.message}; the files it names as resources are linted as written, without what "
            f"the overlay would change of them ({listed([display_path(path) for path in files], ', ')})",
        )
    loaded.problems.insert(0, problem)
    return loaded


def _trace_kustomization(
    loaded: LoadedText, folder: Path, wrapper: Path, part: Part, session: RenderSession, limits: LoadLimits
) -> None:
    roots = _trusted_roots(folder)
    focus = {resolved(Path(file)) for file in part.focus} - {None}
    patches = [patch for patch in reach(folder, limits).patches if patch.file in focus] if focus else []
    names = {patch.file: _patched_names(patch.file, limits) for patch in patches}
    pairs: list[tuple[Resource, Path | None]] = []
    for resource in loaded.resources:
        metadata = strip_build_metadata(resource)
        origin = None
        if metadata.origin is not None:
            candidate = Path(os.path.normpath(wrapper / metadata.origin))
            if candidate.is_file() and inside(candidate, roots):
                origin = candidate
        patched_in = {Path(os.path.normpath(wrapper / item)) for item in metadata.patched_in}
        patch = next(
            (patch for patch in patches if _patches_object(patch, resource, patched_in, names)), None
        )
        pairs.append((resource, patch.file if patch is not None else origin))
    shown = display_path(folder)
    trace(loaded, pairs, rendered_by=shown, display=display_path)
    loaded.directives.extend(source_directives([path for _, path in pairs if path is not None], display_path))
    overlay = folder.resolve()
    for resource, (_, path) in zip(loaded.resources, pairs, strict=True):
        if path is not None and not inside(path, [overlay]):
            session.overlays.note(resource, shown)


def _patched_names(file: Path, limits: LoadLimits) -> list[tuple[str, str]]:
    """The kinds and names of a strategic-merge patch file's documents."""
    text, _problem = _read(file, str(file))
    if text is None:
        return []
    return [(doc.kind, doc.name) for doc in parse_text(text, str(file), limits=limits).resources]


def _patches_object(
    patch: Patch, resource: Resource, patched_in: set[Path], names: dict[Path, list[tuple[str, str]]]
) -> bool:
    """Whether `patch` changed the object: its kustomization patched it, and the patch's target
    (or, for a strategic-merge patch, one of its documents) names the object's kind and name
    (contained in the rendered name: overlays add prefixes and suffixes)."""
    if patch.kustomization not in patched_in:
        return False
    if patch.target:
        kind, name = patch.target.get("kind"), patch.target.get("name")
        return (kind is None or kind == resource.kind) and (name is None or name in resource.name)
    return any(kind == resource.kind and name and name in resource.name for kind, name in names[patch.file])


def _trusted_roots(folder: Path) -> list[Path]:
    """Where traced source files may be: below the current directory or the folder's repository
    (a path named by a kustomization is read only there)."""
    roots = [Path.cwd()]
    for parent in [folder.resolve(), *folder.resolve().parents]:
        if (parent / ".git").exists():
            roots.append(parent)
            break
    return roots


def load_chart(
    folder: Path,
    limits: LoadLimits = DEFAULT_LIMITS,
    *,
    part: Part = WHOLE,
    session: RenderSession | None = None,
) -> LoadedText:
    """A Helm chart is linted as `helm template` renders it with its default values and the
    values files the policy names (`helm.valuesFiles`, globs relative to the chart), in the
    policy's `helm.namespace` if it names one, each object traced to its template by Helm's
    `# Source:` comments."""
    session = session or RenderSession()
    shown = display_path(folder)
    if is_library_chart(folder):
        return LoadedText(skipped=[Skipped(shown, None, LIBRARY_CHART)])
    if is_starter_chart(folder):
        return LoadedText(skipped=[Skipped(shown, None, STARTER_CHART)])
    values = chart_values_files(folder, session.helm_values)
    options = [item for path in values for item in ("--values", str(path))]
    if session.helm_namespace is not None:  # a DNS label (the policy's schema): never an option
        options.append(f"--namespace={session.helm_namespace}")
    # The policy's API versions are many, and rarely why a chart fails: not spelt out in messages.
    release = chart_release(folder)
    command = " ".join(["helm", "template", release, shown, *options])
    served = [f"--api-versions={version}" for version in session.helm_api_versions]
    if session.kube_version is not None and _KUBE_VERSION.fullmatch(session.kube_version):
        served.append(f"--kube-version={session.kube_version}")
    argv = ["helm", "template", release, str(folder), *options, *served]
    output = session.render(("helm", *argv), lambda: _run(argv, shown, command))
    if isinstance(output, LoadProblem):
        return LoadedText(problems=[_with_chart_settings(output)])
    loaded = load_text(output, shown, rendered_from="helm", limits=limits)
    if not loaded.resources and not loaded.problems:
        loaded.skipped = []
        loaded.problems.append(_rendered_nothing(folder, values, command, shown))
    trace(loaded, helm_origins(loaded, output, folder), rendered_by=shown, display=display_path)
    loaded.directives = helm_directives(loaded.directives, output, folder, display_path)
    return _keep(loaded, part)


def _rendered_nothing(chart: Path, used: Sequence[Path], command: str, shown: str) -> LoadProblem:
    """An info GP004 for a chart that renders no object with the values it was given (a chart whose
    defaults choose nothing, and whose values files beside it each choose a framework): nothing of
    it was linted, which a pass must not hide."""
    others = sorted(
        path.name
        for path in chart.resolve().glob("values*.y*ml")
        if path.name not in ("values.yaml", "values.yml")
        and path.resolve() not in {item.resolve() for item in used}
    )
    hint = ""
    if others:
        named = listed(others, ", ", shown=5)
        hint = (
            f"; name the values files that choose what to deploy ({named}) in the policy's helm.valuesFiles"
        )
    message = f"{command} renders no object: nothing of the chart was linted{hint}"
    return LoadProblem("GP004", message, shown, severity="info")


# A template's `fail` or `required` (Helm's "execution error at"), or a value it reads below one the
# chart's values.yaml does not give ("nil pointer evaluating … .Values.job.gpus": a chart its
# recipes install with -f their values): the chart refuses the values or the namespace it was given,
# which a lint sets through its policy, not on a command line.
_CHART_SETTINGS_HINT = " (gpupolicy renders a chart with the policy's helm.valuesFiles and helm.namespace)"
_VALUES_ERRORS = ("Error: execution error at", "nil pointer evaluating")


def _with_chart_settings(problem: LoadProblem) -> LoadProblem:
    if "requires kubeVersion" in problem.message:  # the chart's `kubeVersion` range
        return replace(problem, message=problem.message + _KUBE_VERSION_HINT)
    if not any(error in problem.message for error in _VALUES_ERRORS):
        return problem
    return replace(problem, message=problem.message + _CHART_SETTINGS_HINT)


_KUBE_VERSION_HINT = " (gpupolicy renders charts for the policy's kubernetesVersion)"


def chart_values_files(chart: Path, patterns: Sequence[str]) -> list[Path]:
    """The files below the chart that the globs match, in order (a glob that leaves the chart matches nothing)."""
    root = chart.resolve()
    found: list[Path] = []
    for pattern in patterns:
        try:
            matches = sorted(root.glob(pattern))
        except (ValueError, NotImplementedError):  # an absolute or malformed glob
            continue
        for match in matches:
            if match.is_file() and inside(match, [root]) and match not in found:
                found.append(match)
    return found


def _run(argv: list[str], shown: str, command: str) -> str | LoadProblem:
    """Run a renderer (kubectl kustomize, helm template): its output, or a GP004 problem that
    names the directory."""
    import subprocess  # here: only a chart or an overlay runs a renderer

    tool = shutil.which(argv[0])
    if tool is None:
        message = f"{shown} must be rendered and {argv[0]} is not on PATH; render it with: {command} | gpupolicy lint -"
        return LoadProblem("GP004", message, shown)
    try:
        completed = subprocess.run(
            [tool, *argv[1:]], capture_output=True, timeout=RENDER_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        return LoadProblem("GP004", f"{command} timed out", shown)
    if completed.returncode != 0:
        said = _relative(completed.stderr.decode("utf-8", "replace"))
        detail = renderer_error(said) or f"exit code {completed.returncode}"
        if any(failure in said for failure in _NETWORK_FAILURES):
            detail += " (a remote resource could not be fetched from here: the network, not the manifest)"
        return LoadProblem("GP004", f"{command} failed: {detail}", shown)
    return completed.stdout.decode("utf-8", "replace")


# What Go's resolver and dialer, git and curl say when the network, not the manifest, failed a
# remote base's fetch.
_NETWORK_FAILURES = (
    "Could not resolve host", "no such host", "dial tcp", "i/o timeout", "connection refused",
    "network is unreachable", "TLS handshake timeout", "Temporary failure in name resolution",
)  # fmt: skip


def _relative(text: str) -> str:
    """A renderer's message with the current directory's absolute path left out of the paths it
    names (kustomize names every file absolutely): the paths read as the findings' do, and more
    of a bounded message is the error's."""
    cwd = resolved_cwd()
    return text.replace(f"{cwd}{os.sep}", "") if cwd is not None and str(cwd) != os.sep else text


RENDERER_ERROR_CHARS = 500


def renderer_error(stderr: str) -> str:
    """What a renderer said went wrong, on one line: its `Error:` paragraph (Helm writes a chart's
    `fail` message there, over several lines, then a hint to use --debug; kubectl kustomize writes
    `error: ...`, or, logging through klog, `"command failed" err=<` with the error on the lines
    up to a lone `>`), else its last line. Bounded: the finding's message is one line of a report;
    a long one keeps its end too, where a nested error's innermost cause is."""
    lines = [line.strip() for line in stderr.strip().splitlines()]
    said = _klog_error(lines) or _go_panic(lines)
    if said is None:
        said = _error_paragraph(lines)
    if len(said) <= RENDERER_ERROR_CHARS:
        return said
    head = RENDERER_ERROR_CHARS // 3
    return said[:head] + "…" + said[len(said) - (RENDERER_ERROR_CHARS - head - 1) :]


KLOG_ERROR_QUOTED = ' err="'


def _klog_error(lines: list[str]) -> str | None:
    """kubectl's klog line `E1206 … "command failed" err="<Go-quoted error>"`, or, for an error of
    several lines, `err=<` with the error on the next lines up to a lone `>`."""
    for index, line in enumerate(lines):
        if line.endswith("err=<"):
            body = lines[index + 1 :]
            end = body.index(">") if ">" in body else len(body)
            return " ".join(part for part in body[:end] if part)
        quoted = line.find(KLOG_ERROR_QUOTED)
        if quoted >= 0 and line.endswith('"'):
            text = line[quoted + len(KLOG_ERROR_QUOTED) : -1]
            return text.replace("\\n", " ").replace('\\"', '"').replace("\\\\", "\\")
    return None


def _go_panic(lines: list[str]) -> str | None:
    """A renderer that crashed (`panic: runtime error: invalid memory address …`, then a stack):
    its panic line, said to be the tool's crash, not the manifest's error (whose last line, a stack
    frame, said nothing)."""
    found = next((line for line in lines if line.startswith("panic: ")), None)
    if found is None:
        return None
    return f"the renderer crashed ({found}); a bug of the tool on this input, not an error it reports"


def _error_paragraph(lines: list[str]) -> str:
    start = next((index for index, line in enumerate(lines) if line.lower().startswith("error:")), None)
    if start is None:
        return lines[-1] if lines else ""
    first, rest = lines[start], lines[start + 1 :]
    # A chart's `fail` text may open with blank lines ("execution error at (…): \n\nThe driver …"):
    # when the Error line stops at its colon, its paragraph is the first one after them.
    while rest and not rest[0] and first.endswith(":"):
        rest = rest[1:]
    end = rest.index("") if "" in rest else len(rest)
    return " ".join([first, *rest[:end]])


@immutable
class Source:
    """One input of a lint run, named as its findings name it: a manifest file, a directory rendered
    as one unit (kustomize, Helm), stdin's text (read once), or only a problem met while walking
    (a folder that cannot be listed, stdin that is not UTF-8), which is no file of its own."""

    name: str
    path: Path | None = None
    text: str | None = None
    problem: LoadProblem | None = None
    allow_remote: bool = True  # False: a kustomization naming remote content is refused (--no-remote)
    part: Part = WHOLE  # of a rendered directory: the objects this input stands for
    session: RenderSession | None = field(default=None, compare=False)

    @property
    def is_file(self) -> bool:
        return self.problem is None

    @property
    def rendered(self) -> bool:
        return self.path is not None and self.path.is_dir()

    def load(self, limits: LoadLimits = DEFAULT_LIMITS) -> LoadedText:
        if self.problem is not None:
            return LoadedText(problems=[self.problem])
        if self.text is not None:
            return load_text(self.text, self.name, limits=limits)
        assert self.path is not None
        if self.rendered:
            return load_directory(
                self.path, limits, allow_remote=self.allow_remote, part=self.part, session=self.session
            )
        text, problem = _read(self.path, self.name)
        if text is None:
            return LoadedText(problems=[problem] if problem else [])
        return load_text(text, self.name, hint_path=self.path, limits=limits)

    def iter_load(
        self, limits: LoadLimits = DEFAULT_LIMITS, *, given: Mapping[int, ChunkRead] | None = None
    ) -> Iterator[LoadedText]:
        """What `load` finds, one document at a time where the input is a file or stdin (a rendered
        directory comes whole: its renderer's output is read at once anyway). `given`: the chunks
        `iter_load_chosen` read and noted, whose documents are not read again (`iter_text`)."""
        if self.problem is not None or self.rendered:
            yield self.load(limits)
        elif self.text is not None:
            yield from iter_text(self.text, self.name, limits=limits, given=given)
        else:
            assert self.path is not None
            data, problem = _read(self.path, self.name)
            if data is None:
                yield LoadedText(problems=[problem] if problem else [])
            else:
                yield from iter_text(data, self.name, hint_path=self.path, limits=limits, given=given)

    def iter_load_chosen(
        self,
        chosen: Callable[[str], bool],
        limits: LoadLimits = DEFAULT_LIMITS,
        *,
        chunks: dict[int, ChunkRead] | None = None,
    ) -> Iterator[LoadedText] | None:
        """What `iter_load` finds in the documents whose own text `chosen` accepts, the others left
        unparsed (documents.iter_chosen_documents): for a reader that wants a few kinds out of large
        files. None where the input is not a file's or stdin's text, or its documents cannot be
        read apart: `iter_load` reads it. `chunks`: filled with the chunks read, for `iter_load`'s
        `given`."""
        if self.problem is not None or self.rendered:
            return None
        if self.text is not None:
            return iter_chosen_text(self.text, self.name, chosen, limits=limits, chunks=chunks)
        assert self.path is not None
        text, _ = _read(self.path, self.name)
        if text is None:
            return None  # unreadable: `iter_load` says so
        return iter_chosen_text(text, self.name, chosen, hint_path=self.path, limits=limits, chunks=chunks)

    def peek(self) -> str | None:
        """The text, for a quick look before loading (None for a rendered directory, or when the
        file cannot be read: only loading it tells what it holds)."""
        if self.problem is not None:
            return ""
        if self.text is not None:
            return self.text
        if self.path is None or self.rendered:
            return None
        try:
            return self.path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return None


def _read(path: Path, file: str) -> tuple[str | None, LoadProblem | None]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror
        if path.is_symlink() and not path.exists():
            reason = f"a broken symlink (to {str(path.readlink())[:200]}, which does not exist)"
        return None, LoadProblem("GP001", f"cannot read file: {reason}", file)
    return _decode(data, file)


def iter_sources(
    paths: Iterable[str],
    *,
    exclude: Iterable[str] = (),
    allow_remote: bool = True,
    session: RenderSession | None = None,
    root: Path | None = None,
) -> Iterator[Source]:
    """The inputs of the paths given on the command line (`-` is stdin), in the order `load_paths`
    reads them: directories walked, kustomizations and charts as one unit each, and a kustomization
    that another one below the same directory names only through that one.

    A file of a chart (a template, values.yaml, Chart.yaml) stands for its chart, rendered: a
    template for the objects rendered from it, the others for the whole chart; several templates
    of one chart make one input. A file that a kustomization below `root` (default: the current
    directory, if the file is below it) reads, as a resource or a patch, stands for the objects
    of the overlays that read it (those that no other kustomization names); the kustomization
    file itself for the whole overlay."""
    patterns = list(exclude)
    session = session or RenderSession()
    groups: dict[Path, set[str] | None] = {}
    seen: set[tuple[int, int]] = set()  # files read: a file and a symlink to it are one input
    for raw in paths:
        if raw == "-":
            text, problem = _decode(sys.stdin.buffer.read(), "<stdin>")
            yield Source("<stdin>", text=text) if text is not None else Source("<stdin>", problem=problem)
            continue
        path = Path(raw)
        if not path.is_dir():
            rendered = _rendering_units(path, root, patterns, session)
            if not rendered and _first_time(path, seen):
                yield Source(display_path(path), path=path)
            for folder, file in rendered:
                _add_to_group(groups, folder, file)
            continue
        unreadable: list[LoadProblem] = []
        items = list(iter_manifest_files(path, patterns, unreadable=unreadable))
        here = resolved_cwd()
        tops = set(top_level([item for item in items if item.is_dir() and not is_chart(item)]))
        read = {file for top in tops for file in reach(top).files}
        for item in items:
            yield from _problem_sources(unreadable)
            if item.is_dir() and not is_chart(item) and item not in tops:
                continue  # a base of another kustomization here: linted through it
            if read and not item.is_dir() and resolved(item) in read:
                continue  # a resource of a kustomization here: linted as it renders it
            if not item.is_dir() and not _first_time(item, seen):
                continue  # reached again through a symlink: its findings are already the first's
            yield Source(display_path(item, here=here), path=item, allow_remote=allow_remote, session=session)
        yield from _problem_sources(unreadable)
    for folder, files in groups.items():
        # A chart or overlay given in part is named by its first file given: the in-memory path
        # leaves out of the context the objects of the files reported on, by name.
        part = WHOLE if files is None else Part(only=frozenset(files))
        name = display_path(folder) if files is None else min(files)
        yield Source(name, path=folder, allow_remote=allow_remote, part=part, session=session)


def _first_time(path: Path, seen: set[tuple[int, int]]) -> bool:
    """Whether the file `path` leads to (its device and inode, one `stat` that follows links) is
    read for the first time in this walk. A symlink loop or a dangling link is always read:
    reading it gives its finding."""
    try:
        status = path.stat()
    except (OSError, RuntimeError):
        return True
    identity = (status.st_dev, status.st_ino)
    if identity in seen:
        return False
    seen.add(identity)
    return True


def _add_to_group(groups: dict[Path, set[str] | None], folder: Path, file: str | None) -> None:
    if folder in groups and groups[folder] is None:
        return
    if file is None:
        groups[folder] = None
    else:
        groups.setdefault(folder, set()).add(file)  # type: ignore[union-attr]


def chart_of(path: Path) -> Path | None:
    """The chart a file belongs to: its nearest folder above that is a chart, or the chart whose
    `charts/` folder holds that one (a subchart is rendered with its parent's values)."""
    real = resolved(path)
    chart = next((folder for folder in real.parents if is_chart(folder)), None) if real else None
    while chart is not None and chart.parent.name == "charts" and is_chart(chart.parent.parent):
        chart = chart.parent.parent
    return chart


def rendered_context(sources: Sequence[Source]) -> list[Source]:
    """For each chart or overlay given in part (a template, a base file), the rest of its objects,
    as context: cross-object rules judge the part with the rest of what is deployed with it."""
    return [
        replace(source, part=Part(without=source.part.only))
        for source in sources
        if source.part.only is not None
    ]


def _rendering_units(
    path: Path, root: Path | None, exclude: Sequence[str], session: RenderSession
) -> list[tuple[Path, str | None]]:
    """The charts and overlays a given file is linted through, each with the file its objects are
    reported on (None: every object of it)."""
    if not path.is_file():
        return []
    chart = chart_of(path)
    if chart is not None and read_by_helm(chart, path):
        in_templates = "templates" in path.resolve().relative_to(chart).parts
        return [(_as_given(chart, path), display_path(path) if in_templates else None)]
    if root is None:
        # Without a context root the current directory is searched for the overlays, but only for
        # a file in a kustomize tree (a kustomization beside it or above it): a plain file given
        # on the command line does not make gpupolicy walk the whole directory.
        root = Path.cwd() if inside(path, [Path.cwd()]) else path.parent
        if not _in_kustomize_tree(path, root):
            return []
    if not inside(path, [root]):
        return []
    real = path.resolve()
    whole = path.name in KUSTOMIZATION_FILES
    units: list[tuple[Path, str | None]] = [
        (_as_given(folder, path), None if whole else display_path(path))
        for folder, reached in session.top_kustomizations(root, exclude)
        if real in reached.files or any(patch.file == real for patch in reached.patches)
    ]
    if whole and not units:  # a kustomization no walk below the root found: rendered on its own
        units.append((path.parent, None))
    return units


def _in_kustomize_tree(path: Path, root: Path) -> bool:
    top = root.resolve()
    for folder in path.resolve().parents:
        if kustomization_file(folder) is not None:
            return True
        if folder == top:
            break
    return False


def _as_given(folder: Path, file: Path) -> Path:
    """The folder, relative like the file it was found from."""
    if file.is_absolute():
        return folder
    try:
        return Path(os.path.relpath(folder, Path.cwd()))
    except ValueError:
        return folder


def _problem_sources(problems: list[LoadProblem]) -> Iterator[Source]:
    """Problems met while walking, in the order met (the list is emptied)."""
    for problem in problems:
        yield Source(problem.file, problem=problem)
    problems.clear()


def load_paths(
    paths: Iterable[str],
    *,
    exclude: Iterable[str] = (),
    limits: LoadLimits = DEFAULT_LIMITS,
    allow_remote: bool = True,
) -> Loaded:
    """Load every path given on the command line (`-` is stdin). `limits` are the policy's;
    `allow_remote` False refuses kustomizations that name remote content (`--no-remote`)."""
    loaded = Loaded()
    for source in iter_sources(paths, exclude=exclude, allow_remote=allow_remote):
        if source.is_file:
            loaded.extend(source.load(limits), source.name)
        else:
            loaded.problems.append(source.problem)  # type: ignore[arg-type]
    return loaded


def is_manifest_name(name: str) -> bool:
    """Whether a file name given explicitly (pre-commit passes every changed YAML file) can hold
    manifests: the names a folder's walk reads, so a `values-*.yaml` outside a chart is read here
    too and what it holds decides."""
    return name.endswith(MANIFEST_SUFFIXES) and name not in NOT_MANIFESTS and name not in KUSTOMIZATION_FILES


def _chosen(paths: Iterable[str]) -> list[str]:
    """The given paths that can hold manifests or stand for a chart or overlay (a chart's
    values.yaml and Chart.yaml, a kustomization file): other files pre-commit passes are skipped."""
    return [
        raw
        for raw in paths
        if raw == "-"
        or Path(raw).is_dir()
        or is_manifest_name(Path(raw).name)
        or (Path(raw).name.endswith(MANIFEST_SUFFIXES) and chart_of(Path(raw)) is not None)
        or Path(raw).name in KUSTOMIZATION_FILES
    ]


def sources_with_context(
    paths: Iterable[str],
    root: Path,
    *,
    exclude: Iterable[str] = (),
    allow_remote: bool = True,
    session: RenderSession | None = None,
) -> tuple[list[Source], list[Source]]:
    """The inputs of the given paths (to report on) and the other inputs below `root` (context
    only), chosen as `load_with_context` chooses them. A chart or overlay reported in part (the
    objects of the given templates, bases or patches) is context for the rest of its objects."""
    patterns = list(exclude)
    session = session or RenderSession()
    sources = list(
        iter_sources(_chosen(paths), exclude=patterns, allow_remote=allow_remote, session=session, root=root)
    )
    given = {source.name for source in sources if source.is_file}
    parts: dict[Path, set[str]] = {}
    for source in sources:
        if source.part.only is not None and source.path is not None:
            parts.setdefault(source.path.resolve(), set()).update(source.part.only)
    context = []
    for source in iter_sources([str(root)], exclude=patterns, allow_remote=allow_remote, session=session):
        if not source.is_file or source.name in given:
            continue
        reported = parts.get(source.path.resolve()) if source.path is not None else None
        if reported is not None:
            source = replace(source, part=Part(without=frozenset(reported)))
        context.append(source)
    return sources, context


def load_with_context(
    paths: Iterable[str],
    root: Path,
    *,
    exclude: Iterable[str] = (),
    limits: LoadLimits = DEFAULT_LIMITS,
    allow_remote: bool = True,
) -> tuple[Loaded, list[Resource]]:
    """The given paths (to report on) and the other objects below `root` (context only).

    pre-commit passes only the changed files; cross-object rules (a Deployment's PDB, a
    workload's PriorityClass or experiment ConfigMap) need the rest of the repository. Files
    that cannot hold manifests (.pre-commit-config.yaml, values files outside charts) are skipped.
    Problems in context files are not reported: they are not the change being judged.
    """
    sources, context = sources_with_context(paths, root, exclude=exclude, allow_remote=allow_remote)
    loaded = Loaded()
    for source in sources:
        if source.is_file:
            loaded.extend(source.load(limits), source.name)
        else:
            loaded.problems.append(source.problem)  # type: ignore[arg-type]
    others = [resource for source in context for resource in source.load(limits).resources]
    return loaded, others
