"""The environment of a benchmark's `python -m gpupolicy` child: from bytecode, as installed.

Where PYTHONDONTWRITEBYTECODE is set (this machine's shell sets it), a child that imports
gpupolicy from a checkout compiles every module it imports from source on each run: about 0.15 s
of CPU for `gpupolicy lint`, which an installed gpupolicy never spends (pip writes bytecode at
install) and a peer installed with pip (Checkov, in bench/compare_peers.py) does not either.
`bytecode_environment` drops that setting and points PYTHONPYCACHEPREFIX at a folder of the
bench's own: the first run writes the bytecode there, untimed (`write_bytecode`), and the timed
runs read it. bench/startup.py and bench/lint_throughput.py do the same.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path


def bytecode_folder(prefix: str) -> Path:
    """A temporary folder for the bytecode, removed when the bench exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def bytecode_environment(pycache: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (this process's environment by default) with bytecode written to and read from `pycache`."""
    environment = dict(os.environ if base is None else base)
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    environment["PYTHONPYCACHEPREFIX"] = str(pycache)
    return environment


def write_bytecode(checkout: Path, environment: Mapping[str, str]) -> None:
    """Compile the checkout's gpupolicy into the environment's cache, so that no timed run compiles
    it (modules imported lazily included)."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(checkout / "gpupolicy")],
        env=dict(environment),
        check=True,
        stdout=subprocess.DEVNULL,
    )
