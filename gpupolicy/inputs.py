"""Where manifests come from: files, directories, stdin and kustomize directories.

Turns paths into `Resource`s and `LoadProblem`s. Directories are walked recursively for
*.yaml, *.yml and *.json, skipping hidden folders, excluded globs and files that are not
manifests (Chart.yaml, values files, kustomization files). A directory with a kustomization
is rendered with `kubectl kustomize` and its files are not linted one by one.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gpupolicy.documents import (
    DEFAULT_LIMITS,
    LoadedText,
    LoadLimits,
    LoadProblem,
    Resource,
    Skipped,
    find_helm_action,
    helm_actions_only_in_strings,
    iter_parse,
    parse_text,
)
from gpupolicy.kustomizations import KUSTOMIZATION_FILES, remote_reference
from gpupolicy.object_evidence import ObjectFilter
from gpupolicy.suppressions import InlineDirective, scan_comments

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


@dataclass(slots=True)
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


def display_path(path: Path) -> str:
    """Paths relative to the current directory where possible (what people click on)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError, RuntimeError):  # elsewhere, or a symlink loop (RuntimeError in 3.11)
        return str(path)


def is_excluded(path: Path, root: Path, patterns: Iterable[str]) -> bool:
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


def _values_file(name: str) -> bool:
    return (
        name.startswith("values") and name.endswith(MANIFEST_SUFFIXES) and name.count(".") == 1
    ) or name in NOT_MANIFESTS


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
    if any((root / name).is_file() for name in KUSTOMIZATION_FILES) or is_chart(root):
        yield root  # rendered as one unit (kubectl kustomize, helm template)
        return
    try:
        entries = sorted(root.iterdir())
    except OSError as exc:
        if unreadable is not None:
            reason = exc.strerror or type(exc).__name__
            unreadable.append(LoadProblem("GP001", f"cannot read directory: {reason}", display_path(root)))
        return
    for entry in entries:
        if entry.name.startswith(".") or is_excluded(entry, base, patterns):
            continue
        if entry.is_dir() and not entry.is_symlink():
            yield from iter_manifest_files(entry, patterns, base=base, unreadable=unreadable)
        elif (
            entry.suffix in MANIFEST_SUFFIXES
            and not _values_file(entry.name)
            and (entry.is_file() or (entry.is_symlink() and not entry.exists()))
        ):
            yield entry


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
            return f"render the chart first: helm template RELEASE {chart} | gpupolicy lint -"
    if helm:  # Helm actions outside a chart: envsubst would not render them
        return f"render it with helm template first (no Chart.yaml found above {display_path(path)})"
    return f"render it first, e.g. envsubst < {display_path(path)} | gpupolicy lint -"


def _helm_problem(
    text: str, file: str, hint_path: Path | None, limits: LoadLimits = DEFAULT_LIMITS
) -> LoadProblem | None:
    """GP004 for a file with Helm template actions, unless they are strings of a YAML file that
    holds no Kubernetes object (a .goreleaser.yaml's `"{{ .Version }}"`: its own template language)."""
    helm = find_helm_action(text)
    if helm is None or _holds_no_object(text, file, limits):
        return None
    hint = render_hint(hint_path, helm=True) if hint_path else "render it with helm template first"
    return LoadProblem("GP004", f"file holds Helm template actions ({{{{ ... }}}}); {hint}", file, *helm)


def _holds_no_object(text: str, file: str, limits: LoadLimits) -> bool:
    if not helm_actions_only_in_strings(text):
        return False
    loaded = parse_text(text, file, limits=limits)
    return not loaded.problems and not ObjectFilter(file).take(loaded.resources)


def load_text(
    text: str,
    file: str,
    *,
    hint_path: Path | None = None,
    rendered_from: str | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
) -> LoadedText:
    """Parse one file's text, reporting templates (GP004); documents that are not Kubernetes
    objects, and files that hold none (empty ones too), are skipped (object_evidence.py)."""
    helm = _helm_problem(text, file, hint_path, limits)
    if helm is not None:
        return LoadedText(problems=[helm])
    loaded = parse_text(text, file, rendered_from=rendered_from, limits=limits)
    loaded.directives = scan_comments(text, file)
    objects = ObjectFilter(file)
    loaded.resources = objects.take(loaded.resources, problems=bool(loaded.problems))
    loaded.skipped = objects.finish()
    return loaded


def iter_text(
    text: str, file: str, *, hint_path: Path | None = None, limits: LoadLimits = DEFAULT_LIMITS
) -> Iterator[LoadedText]:
    """What `load_text` finds, one document at a time (documents.iter_parse); the file's
    `# gpupolicy: ignore` comments come first, on their own, and what it skipped last."""
    helm = _helm_problem(text, file, hint_path, limits)
    if helm is not None:
        yield LoadedText(problems=[helm])
        return
    directives = scan_comments(text, file)
    if directives:
        yield LoadedText(directives=directives)
    objects = ObjectFilter(file)
    for document in iter_parse(text, file, limits=limits):
        document.resources = objects.take(document.resources, problems=bool(document.problems))
        yield document
    skipped = objects.finish()
    if skipped:
        yield LoadedText(skipped=skipped)


def load_file(path: Path, limits: LoadLimits = DEFAULT_LIMITS) -> LoadedText:
    return Source(display_path(path), path=path).load(limits)


RENDER_TIMEOUT_SECONDS = KUSTOMIZE_TIMEOUT_SECONDS
CHART_FILE = "Chart.yaml"
# The release name used to render a chart for linting (names only show up in object names).
CHART_RELEASE = "gpupolicy-lint"


def is_chart(folder: Path) -> bool:
    """A Helm chart: Chart.yaml beside a templates/ folder."""
    return (folder / CHART_FILE).is_file() and (folder / "templates").is_dir()


def load_directory(
    folder: Path, limits: LoadLimits = DEFAULT_LIMITS, *, allow_remote: bool = True
) -> LoadedText:
    """A directory that is one unit: a Helm chart, or a kustomization."""
    if is_chart(folder):
        return load_chart(folder, limits)
    return load_kustomization(folder, limits, allow_remote=allow_remote)


def load_kustomization(
    folder: Path, limits: LoadLimits = DEFAULT_LIMITS, *, allow_remote: bool = True
) -> LoadedText:
    """`kubectl kustomize` of the folder. Without `allow_remote` (`--no-remote`), a kustomization
    that names a remote base, component or file is refused before kubectl runs (GP004)."""
    shown = display_path(folder)
    if not allow_remote:
        problem = remote_reference(folder, display=display_path, limits=limits)
        if problem is not None:
            return LoadedText(problems=[problem])
    command = f"kubectl kustomize {shown}"
    return _render(["kubectl", "kustomize", str(folder)], shown, command, "kustomize", limits)


def load_chart(folder: Path, limits: LoadLimits = DEFAULT_LIMITS) -> LoadedText:
    """A Helm chart is linted as `helm template` renders it with its default values."""
    shown = display_path(folder)
    command = ["helm", "template", CHART_RELEASE, str(folder)]
    return _render(command, shown, f"helm template {CHART_RELEASE} {shown}", "helm", limits)


def _render(
    argv: list[str], shown: str, command: str, rendered_from: str, limits: LoadLimits = DEFAULT_LIMITS
) -> LoadedText:
    """Run a renderer (kubectl kustomize, helm template) and lint its output; positions refer to
    the rendered stream, and the directory is named as the file."""
    tool = shutil.which(argv[0])
    if tool is None:
        message = f"{shown} must be rendered and {argv[0]} is not on PATH; render it with: {command} | gpupolicy lint -"
        return LoadedText(problems=[LoadProblem("GP004", message, shown)])
    try:
        completed = subprocess.run(
            [tool, *argv[1:]], capture_output=True, timeout=RENDER_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        return LoadedText(problems=[LoadProblem("GP004", f"{command} timed out", shown)])
    if completed.returncode != 0:
        reason = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = reason[-1] if reason else f"exit code {completed.returncode}"
        return LoadedText(problems=[LoadProblem("GP004", f"{command} failed: {detail}", shown)])
    text = completed.stdout.decode("utf-8", "replace")
    return load_text(text, shown, rendered_from=rendered_from, limits=limits)


@dataclass(frozen=True, slots=True)
class Source:
    """One input of a lint run, named as its findings name it: a manifest file, a directory rendered
    as one unit (kustomize, Helm), stdin's text (read once), or only a problem met while walking
    (a folder that cannot be listed, stdin that is not UTF-8), which is no file of its own."""

    name: str
    path: Path | None = None
    text: str | None = None
    problem: LoadProblem | None = None
    allow_remote: bool = True  # False: a kustomization naming remote content is refused (--no-remote)

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
            return load_directory(self.path, limits, allow_remote=self.allow_remote)
        text, problem = _read(self.path, self.name)
        if text is None:
            return LoadedText(problems=[problem] if problem else [])
        return load_text(text, self.name, hint_path=self.path, limits=limits)

    def iter_load(self, limits: LoadLimits = DEFAULT_LIMITS) -> Iterator[LoadedText]:
        """What `load` finds, one document at a time where the input is a file or stdin (a rendered
        directory comes whole: its renderer's output is read at once anyway)."""
        if self.problem is not None or self.rendered:
            yield self.load(limits)
        elif self.text is not None:
            yield from iter_text(self.text, self.name, limits=limits)
        else:
            assert self.path is not None
            data, problem = _read(self.path, self.name)
            if data is None:
                yield LoadedText(problems=[problem] if problem else [])
            else:
                yield from iter_text(data, self.name, hint_path=self.path, limits=limits)

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
        return None, LoadProblem("GP001", f"cannot read file: {exc.strerror}", file)
    return _decode(data, file)


def iter_sources(
    paths: Iterable[str], *, exclude: Iterable[str] = (), allow_remote: bool = True
) -> Iterator[Source]:
    """The inputs of the paths given on the command line (`-` is stdin), in the order `load_paths`
    reads them: directories walked, kustomizations and charts as one unit each."""
    patterns = list(exclude)
    for raw in paths:
        if raw == "-":
            text, problem = _decode(sys.stdin.buffer.read(), "<stdin>")
            yield Source("<stdin>", text=text) if text is not None else Source("<stdin>", problem=problem)
            continue
        path = Path(raw)
        if not path.is_dir():
            yield Source(display_path(path), path=path)
            continue
        unreadable: list[LoadProblem] = []
        for item in iter_manifest_files(path, patterns, unreadable=unreadable):
            yield from _problem_sources(unreadable)
            yield Source(display_path(item), path=item, allow_remote=allow_remote)
        yield from _problem_sources(unreadable)


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
    """Whether a file name given explicitly (pre-commit passes every changed YAML file) can hold manifests."""
    return name.endswith(MANIFEST_SUFFIXES) and not _values_file(name) and name not in KUSTOMIZATION_FILES


def sources_with_context(
    paths: Iterable[str], root: Path, *, exclude: Iterable[str] = (), allow_remote: bool = True
) -> tuple[list[Source], list[Source]]:
    """The inputs of the given paths (to report on) and the other inputs below `root` (context
    only), chosen as `load_with_context` chooses them."""
    patterns = list(exclude)
    chosen = [raw for raw in paths if raw == "-" or Path(raw).is_dir() or is_manifest_name(Path(raw).name)]
    sources = list(iter_sources(chosen, exclude=patterns, allow_remote=allow_remote))
    given = {source.name for source in sources if source.is_file}
    context = [
        source
        for source in iter_sources([str(root)], exclude=patterns, allow_remote=allow_remote)
        if source.is_file and source.name not in given
    ]
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
    that cannot hold manifests (Chart.yaml, values files, .pre-commit-config.yaml) are skipped.
    Problems in context files are not reported: they are not the change being judged.
    """
    patterns = list(exclude)
    chosen = [raw for raw in paths if raw == "-" or Path(raw).is_dir() or is_manifest_name(Path(raw).name)]
    loaded = load_paths(chosen, exclude=patterns, limits=limits, allow_remote=allow_remote)
    given = set(loaded.files) | {resource.file for resource in loaded.resources}
    context = load_paths([str(root)], exclude=patterns, limits=limits, allow_remote=allow_remote)
    return loaded, [resource for resource in context.resources if resource.file not in given]
