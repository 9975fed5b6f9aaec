"""Whether a kustomization would make `kubectl kustomize` fetch something over the network.

kustomize accepts remote targets wherever a kustomization names other kustomizations — a Git
repository (`github.com/org/repo//path?ref=v1`, `https://…`, `git@host:org/repo`, `ssh://…`)
in `resources`, `bases` and `components`, and in `generators`, `transformers` and `validators`
— and fetches files over HTTP(S) wherever it reads one (`patches[].path`, `crds`,
`configMapGenerator[].files` …): https://github.com/kubernetes-sigs/kustomize/blob/master/examples/remoteBuild.md.
Linting a pull request's kustomization therefore lets the pull request make the CI runner
clone and download whatever it names. `gpupolicy lint --no-remote` reads each kustomization
(and the local ones it names, recursively) before running kubectl, and refuses one that names
anything but a local file or folder: a GP004 finding with the reason, at the entry.

Kinds of entries (https://kubectl.docs.kubernetes.io/references/kustomize/kustomization/):
an entry of a *target* field must be a local file or folder (kustomize tries anything else as a
remote target); an entry of a *file* field only must not be a URL (a missing local file is
kustomize's own error, with no network involved). Entries holding a newline are inline content
(an inline patch or generator configuration), not locations.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpupolicy.core.findings import JsonPath, excerpt
from gpupolicy.core.immutable import immutable, mutable
from gpupolicy.loading.documents import DEFAULT_LIMITS, LoadLimits, LoadProblem, Resource, parse_text

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

# Fields whose entries name kustomizations or resources: local, or fetched by kustomize.
TARGET_FIELDS = ("resources", "bases", "components", "generators", "transformers", "validators")
# Fields whose entries name files, which kustomize's loader fetches when they are HTTP(S) URLs.
FILE_LIST_FIELDS = ("crds", "configurations", "patchesStrategicMerge")
PATH_ITEM_FIELDS = ("patches", "patchesJson6902", "replacements")  # [{path: …}]
GENERATOR_FIELDS = ("configMapGenerator", "secretGenerator")  # [{files: […], envs: […], env: …}]

# What kustomize may take for a remote location: a URL scheme, go-getter's forced getters
# (`git::`), an scp-like Git address (`git@github.com:org/repo`), the `gh:` shorthand, a query
# of a remote target (`?ref=`, `?version=`, `?submodules=`, `?timeout=`), or a host name as the
# first path segment (`github.com/org/repo`).
_REMOTE = re.compile(
    r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|[A-Za-z0-9]+::|gh:|[^/\s]+@[^/\s]+:)"
    r"|[?&](?:ref|version|submodules|timeout)="
    r"|^[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(?::\d+)?/"
)
MAX_KUSTOMIZATIONS = 1000  # local kustomizations read for one directory (a guard, not a rule)


@immutable
class _Entry:
    value: str
    path: JsonPath
    target: bool  # names a kustomization or resource (else a file)


def looks_remote(entry: str) -> bool:
    return bool(_REMOTE.search(entry.strip()))


def remote_reference(
    folder: Path, *, display: Callable[[Path], str] = str, limits: LoadLimits = DEFAULT_LIMITS
) -> LoadProblem | None:
    """The first entry of the kustomization in `folder`, or of a local one it names, that is
    not a local file or folder: a GP004 problem saying so (None when everything is local).
    `display` names files in messages."""
    pending = [folder.resolve()]
    seen: set[Path] = set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        if len(seen) > MAX_KUSTOMIZATIONS:
            shown = display(folder)
            return LoadProblem(
                "GP004", f"names more than {MAX_KUSTOMIZATIONS} local kustomizations: not checked", shown
            )
        found = _read(current, display, limits)
        if isinstance(found, LoadProblem):
            return found
        if found is None:
            continue
        problem, local = _check(found, current)
        if problem is not None:
            return problem
        pending.extend(local)
    return None


def _kustomization_file(folder: Path) -> Path | None:
    return next((folder / name for name in KUSTOMIZATION_FILES if (folder / name).is_file()), None)


def _read(folder: Path, display: Callable[[Path], str], limits: LoadLimits) -> Resource | LoadProblem | None:
    file = _kustomization_file(folder)
    if file is None:
        return None  # a folder of plain resources
    shown = display(file)
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return LoadProblem(
            "GP004", f"cannot read the kustomization to check it for remote bases: {exc}", shown
        )
    loaded = parse_text(text, shown, limits=limits)
    if loaded.problems or len(loaded.resources) != 1:
        reason = loaded.problems[0].message if loaded.problems else "expected one YAML document"
        return LoadProblem(
            "GP004", f"cannot read the kustomization to check it for remote bases: {reason}", shown
        )
    return loaded.resources[0]


def _check(kustomization: Resource, folder: Path) -> tuple[LoadProblem | None, list[Path]]:
    """The first remote entry (as a problem), and the local folders to read next."""
    local: list[Path] = []
    for entry in _entries(kustomization.obj):
        value = entry.value.strip()
        if looks_remote(value):
            return _refusal(kustomization, entry, "a remote location"), local
        if not entry.target:
            continue
        target = folder / value
        if target.is_dir():
            local.append(target.resolve())
        elif not target.is_file():
            return _refusal(
                kustomization, entry, "not a local file or folder (kustomize would fetch it)"
            ), local
    return None, local


def _refusal(kustomization: Resource, entry: _Entry, what: str) -> LoadProblem:
    line, column = kustomization.position(entry.path) or (None, None)
    field = ".".join(str(part) for part in entry.path)
    return LoadProblem(
        "GP004",
        f"{field} names {excerpt(entry.value.strip(), 120)}, {what}; --no-remote renders only kustomizations "
        "whose bases, components and files are local (render it where fetching is trusted, or vendor the base)",
        kustomization.file,
        line,
        column,
    )


def _entries(obj: Any) -> Iterator[_Entry]:
    if not isinstance(obj, dict):
        return
    for field in TARGET_FIELDS:
        yield from _strings(obj.get(field), (field,), target=True)
    for field in FILE_LIST_FIELDS:
        yield from _strings(obj.get(field), (field,), target=False)
    for field in PATH_ITEM_FIELDS:
        for index, item in _items(obj.get(field)):
            yield from _strings(item.get("path"), (field, index, "path"), target=False)
    for field in GENERATOR_FIELDS:
        for index, item in _items(obj.get(field)):
            for key in ("files", "envs", "env"):
                for entry in _strings(item.get(key), (field, index, key), target=False):
                    yield entry
                    _name, sep, path = entry.value.partition("=")  # `files` entries may be `key=path`
                    if sep and key == "files":
                        yield _Entry(path, entry.path, target=False)
    openapi = obj.get("openapi")
    if isinstance(openapi, dict):
        yield from _strings(openapi.get("path"), ("openapi", "path"), target=False)
    for index, item in _items(obj.get("helmCharts")):  # fetched only with --enable-helm; refused all the same
        yield from _strings(item.get("repo"), ("helmCharts", index, "repo"), target=False)


def _items(value: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    if isinstance(value, list):
        yield from ((index, item) for index, item in enumerate(value) if isinstance(item, dict))


def _strings(value: Any, path: JsonPath, *, target: bool) -> Iterator[_Entry]:
    """The location strings of a field (a string or a list of them); inline content is skipped."""
    if isinstance(value, str):
        if "\n" not in value.strip() and value.strip():
            yield _Entry(value, path, target)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, str) and "\n" not in item.strip() and item.strip():
                yield _Entry(item, (*path, index), target)


# -- what a kustomization reads: for linting a base or a patch through the overlays that use it --------

PATCH_FIELDS = ("patches", "patchesJson6902")  # [{path: …, target: {kind, name, …}}]


@immutable
class Patch:
    file: Path  # resolved
    kustomization: Path  # the kustomization file that applies it, resolved
    target: dict[str, str]  # its `target` selector's kind and name, where given


@mutable
class Reach:
    """The local folders, files and patches a kustomization reads, itself and through the local
    kustomizations it names (resolved paths)."""

    folders: set[Path]
    files: set[Path]
    patches: list[Patch]


def resolved(path: Path) -> Path | None:
    """The path with symlinks resolved; None for a symlink loop (RuntimeError in Python 3.11)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return None


def kustomization_file(folder: Path) -> Path | None:
    return _kustomization_file(folder)


def direct_folders(folder: Path, limits: LoadLimits = DEFAULT_LIMITS) -> list[Path]:
    """The local folders a kustomization names as resources, bases or components (resolved)."""
    found = _read(folder, str, limits)
    if not isinstance(found, Resource) or not isinstance(found.obj, dict):
        return []
    return [
        target
        for entry in _entries(found.obj)
        if entry.target and not looks_remote(entry.value) and (folder / entry.value.strip()).is_dir()
        for target in [resolved(folder / entry.value.strip())]
        if target is not None
    ]


def reach(folder: Path, limits: LoadLimits = DEFAULT_LIMITS) -> Reach:
    """What `folder`'s kustomization reads, transitively (at most MAX_KUSTOMIZATIONS of them)."""
    result = Reach(set(), set(), [])
    pending = [folder.resolve()]
    while pending and len(result.folders) < MAX_KUSTOMIZATIONS:
        current = pending.pop()
        if current in result.folders:
            continue
        result.folders.add(current)
        found = _read(current, str, limits)
        if not isinstance(found, Resource) or not isinstance(found.obj, dict):
            continue
        own = _kustomization_file(current)
        if own is not None:
            result.files.add(own.resolve())
        for entry in _entries(found.obj):
            value = entry.value.strip()
            if looks_remote(value):
                continue
            target = resolved(current / value)
            if target is None:
                continue
            if target.is_dir() and entry.target:
                pending.append(target)
            elif target.is_file():
                result.files.add(target)
        result.patches.extend(_patches(found.obj, current, own))
    return result


RESOURCE_FIELDS = ("resources", "bases")


def resource_files(folder: Path, limits: LoadLimits = DEFAULT_LIMITS) -> list[Path]:
    """The local manifest files a kustomization names as resources, itself and through the local
    kustomizations it names (resolved, in the order written): what it builds its objects from,
    without the patches and generators that change or add to them."""
    found: list[Path] = []
    seen: set[Path] = set()
    pending = [folder.resolve()]
    while pending and len(seen) < MAX_KUSTOMIZATIONS:
        current = pending.pop(0)
        if current in seen:
            continue
        seen.add(current)
        read = _read(current, str, limits)
        if not isinstance(read, Resource) or not isinstance(read.obj, dict):
            continue
        for field in RESOURCE_FIELDS:
            for entry in _strings(read.obj.get(field), (field,), target=True):
                value = entry.value.strip()
                target = None if looks_remote(value) else resolved(current / value)
                if target is None:
                    continue
                if target.is_dir():
                    pending.append(target)
                elif target.is_file() and target not in found:
                    found.append(target)
    return found


def _patches(obj: dict[str, Any], folder: Path, own: Path | None) -> Iterator[Patch]:
    if own is None:
        return
    for name in PATCH_FIELDS:
        for _index, item in _items(obj.get(name)):
            path = item.get("path")
            if not isinstance(path, str) or looks_remote(path) or "\n" in path.strip():
                continue
            raw_target = item.get("target")
            target = {
                key: str(raw_target[key])
                for key in ("kind", "name")
                if isinstance(raw_target, dict) and isinstance(raw_target.get(key), str)
            }
            file = resolved(folder / path.strip())
            if file is not None:
                yield Patch(file, own.resolve(), target)
    for entry in _strings(obj.get("patchesStrategicMerge"), ("patchesStrategicMerge",), target=False):
        file = None if looks_remote(entry.value) else resolved(folder / entry.value.strip())
        if file is not None:
            yield Patch(file, own.resolve(), {})
