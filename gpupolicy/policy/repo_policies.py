"""The nearest `.gpupolicy.yaml` of each linted path (never above the git top-level), each loaded
once: a run judges each input under its nearest policy (gpupolicy/lint/scopes.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from gpupolicy.core.packaged import policies_dir
from gpupolicy.policy.loading import Policy, load_policy

# The top-level of a git work tree holds `.git`: a directory, or a file in a linked worktree and a
# submodule (https://git-scm.com/docs/gitrepository-layout). black's find_project_root stops its
# walk for settings there too.
GIT_MARKER = ".git"
_ABSENT: Any = object()
REPO_POLICY_NAMES = (".gpupolicy.yaml", ".gpupolicy.yml")


def find_repo_policy(start: Path) -> Path | None:
    """The nearest `.gpupolicy.yaml` (or `.yml`) above a linted path (a file, or a directory
    itself), walking up no further than the top-level of the git work tree that holds it."""
    return RepoPolicies().file_for(start)


def _holds(test: Callable[[], bool]) -> bool:
    """A test of the filesystem that may meet a folder it cannot enter (Path.is_file raises
    PermissionError there): what cannot be seen is not there."""
    try:
        return test()
    except OSError:
        return False


def _repo_policy_in(folder: Path) -> Path | None:
    for name in REPO_POLICY_NAMES:
        candidate = folder / name
        if _holds(candidate.is_file):
            return candidate
    return None


class RepoPolicies:
    """The policy of each linted path, for one run: the shipped default, the nearest `.gpupolicy.yaml`
    above the path, and `extra` (`--policy`) merged over it; only `extra` with `use_repo_policies`
    False (`--no-repo-policy`).

    The nearest file wins, with no implicit merging of the files above it (as ruff finds its
    settings: https://docs.astral.sh/ruff/configuration/#config-file-discovery): a nested policy
    that builds on its parent says `extends: ../.gpupolicy.yaml`.
    The walk stops at the top-level of the git work tree (a policy above the repository is not
    the repository's), or at the filesystem root outside one. Each folder is looked at once and
    each policy file loaded once per run (both bounded by the folders of the run's inputs)."""

    def __init__(self, *, extra: Iterable[Path] = (), use_repo_policies: bool = True) -> None:
        self.extra = tuple(extra)
        self.use_repo_policies = use_repo_policies
        self._nearest: dict[Path, Path | None] = {}  # a folder (resolved) -> its nearest policy file
        self._resolved: dict[Path, Path] = {}  # a folder as given -> resolved
        self._policies: dict[Path | None, Policy] = {}
        self._read_as: tuple[Path, Path] | None = None

    def read_as(self, exported: Path, tree: Path) -> RepoPolicies:
        """These policies for a copy of `tree` exported to `exported` (REF's tree, for lint
        --changed-since): a path below `exported` gets the policy of the same path below `tree`."""
        view = RepoPolicies(extra=self.extra, use_repo_policies=self.use_repo_policies)
        view._policies = self._policies  # each file loaded once in the run
        view._read_as = (exported, tree)
        return view

    def file_for(self, path: Path) -> Path | None:
        """The nearest policy file of a file, or of a directory linted as one unit (a Helm chart, a
        kustomization) or walked (the directory itself may hold the policy)."""
        if not self.use_repo_policies:
            return None
        if self._read_as is not None:
            exported, tree = self._read_as
            if path.is_relative_to(exported):
                path = tree / path.relative_to(exported)
        folder = path if _holds(path.is_dir) else path.parent
        resolved = self._resolved.get(folder)
        if resolved is None:
            try:
                resolved = folder.resolve()
            except (OSError, RuntimeError):  # a symlink loop (RuntimeError in 3.11)
                resolved = folder.absolute()
            self._resolved[folder] = resolved
        return self._nearest_from(resolved)

    def _nearest_from(self, folder: Path) -> Path | None:
        walked: list[Path] = []
        found: Path | None = None
        here = folder
        while True:
            known = self._nearest.get(here, _ABSENT)
            if known is not _ABSENT:
                found = known
                break
            walked.append(here)
            found = _repo_policy_in(here)
            if found is not None or _holds((here / GIT_MARKER).exists) or here.parent == here:
                break
            here = here.parent
        for folder_walked in walked:
            self._nearest[folder_walked] = found
        return found

    def policy_for(self, path: Path) -> Policy:
        """The effective policy of `path` (raises PolicyError for a file that cannot be used)."""
        return self.load(self.file_for(path))

    def load(self, repo_policy: Path | None) -> Policy:
        policy = self._policies.get(repo_policy)
        if policy is None:
            policy = self._policies[repo_policy] = load_policy(repo_policy=repo_policy, extra=self.extra)
        return policy


def display_source(source: str) -> str:
    """A policy source as reports name it: `<default>` for the shipped policy, a path relative to the
    current directory where it lies below it (files found walking up are absolute)."""
    path = Path(source)
    if not path.is_absolute():
        return source  # `<policy>`, `<cluster facts>`, a --policy path as given
    if path == policies_dir().resolve() / "default.yaml":
        return "<default>"
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return source
