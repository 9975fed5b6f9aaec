"""The git work tree a lint runs in: its top folder and the `git` command that answers it.

Apart from `lint/changes.py` because the pre-commit hook's `lint --context-from-git` only asks for
the top of the tree, on every commit: it needs neither `git archive`'s tar reader nor the rest of
`--changed-since`.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

GIT_TIMEOUT_SECONDS = 120


class ChangeError(Exception):
    """REF or the repository cannot be used: one line, a usage error."""


def run_git(args: Sequence[str], cwd: Path, *, what: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, timeout=GIT_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ChangeError(f"{what}: cannot run git: {exc}") from exc


def git_toplevel(folder: Path, *, what: str) -> Path:
    """The top of the git work tree `folder` is in (`git rev-parse --show-toplevel`)."""
    completed = run_git(["rev-parse", "--show-toplevel"], folder, what=what)
    if completed.returncode != 0:
        raise ChangeError(f"{what}: {folder} is not inside a git work tree")
    return Path(completed.stdout.decode("utf-8", "surrogateescape").strip())
