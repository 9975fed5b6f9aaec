"""Where the shipped data lives: the `policies/` folder (default policy, JSON schemas, the API
removal table), inside the wheel as `gpupolicy/_policies` or beside the package in a checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def policies_dir() -> Path:
    """The shipped `policies/` folder: inside the wheel, or beside the package in a checkout."""
    packaged = resources.files("gpupolicy").joinpath("_policies")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "policies"
