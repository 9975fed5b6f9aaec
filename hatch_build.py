"""Build hook: compiles the direct YAML reader (gpupolicy/loading/_direct.c) into the wheel.

Where no C compiler or no libyaml headers are found (Debian's `libyaml-dev`, Fedora's
`libyaml-devel`, Homebrew's `libyaml`), the wheel is pure Python and says so in a warning:
gpupolicy then reads every text with its Python loader, to the same values and positions, more
slowly (docs/performance.md, "Loader"). GPUPOLICY_NO_EXTENSION=1 builds without it on purpose.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

MODULE = "gpupolicy.loading._direct"
SOURCE = Path("gpupolicy", "loading", "_direct.c")


class DirectReaderBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or os.environ.get("GPUPOLICY_NO_EXTENSION") == "1":
            return
        self._scratch = Path(tempfile.mkdtemp(prefix="gpupolicy-direct-"))  # read when the wheel is written
        built = self._compile(self._scratch)
        if built is None:
            return
        if version == "editable":  # the editable install imports the package from the source tree
            shutil.copy2(built, Path(self.root, SOURCE.parent, built.name))
        else:
            build_data["force_include"][str(built)] = str(SOURCE.parent / built.name)
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)

    def _compile(self, scratch: Path) -> Path | None:
        """The extension built under `scratch`, or None (with a warning) where it cannot be."""
        from setuptools import Distribution, Extension
        from setuptools.command.build_ext import build_ext
        from setuptools.errors import CCompilerError, ExecError, PlatformError

        source = Path(self.root, SOURCE)
        # The source's digest, compiled in: a test tells a build older than its source (an editable
        # install not rebuilt after _direct.c changed) from a current one.
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        extension = Extension(
            MODULE, [str(source)], libraries=["yaml"], define_macros=[("SOURCE_DIGEST", f'"{digest}"')]
        )
        command = build_ext(Distribution({"name": "gpupolicy-direct", "ext_modules": [extension]}))
        command.build_lib = str(scratch / "lib")
        command.build_temp = str(scratch / "temp")
        command.ensure_finalized()
        try:
            command.run()
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:
            self.app.display_warning(
                f"gpupolicy: the direct YAML reader was not built ({exc}); gpupolicy will read YAML "
                "with its Python loader, to the same results, more slowly. It needs a C compiler and "
                "libyaml's headers (libyaml-dev)."
            )
            return None
        return Path(command.get_ext_fullpath(MODULE))
