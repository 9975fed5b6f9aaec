"""Where the shipped data lives: the `policies/` folder (default policy, JSON schemas, the API
removal table), inside the wheel as `gpupolicy/_policies` or beside the package in a checkout."""

from __future__ import annotations

import functools
from pathlib import Path


@functools.cache  # asked by every policy load, schema and table read; the answer never changes
def policies_dir() -> Path:
    """The shipped `policies/` folder: inside the wheel, or beside the package in a checkout.

    Found from this file rather than with `importlib.resources`: gpupolicy is installed as files
    (a wheel or a checkout, never a zip), where both give the same folder, and importing
    `importlib.resources` (zipfile, tempfile and what they import) is a noticeable share of
    `gpupolicy lint one.yaml`'s start."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_policies"
    if packaged.is_dir():
        return packaged
    return package.parent / "policies"
