"""Where the tests find the real tools they drive (tests/conftest.py provisions Helm at .tools/helm
when it is missing), and the skip marks of the tests that need them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def find_helm() -> str | None:
    """This checkout's .tools/helm (charts/install-helm.sh), else helm on PATH."""
    local = REPO / ".tools" / "helm"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which("helm")


HELM = find_helm()
needs_helm = pytest.mark.skipif(
    HELM is None, reason="helm not found on PATH or at .tools/helm (install it: charts/install-helm.sh)"
)
needs_kubectl = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl (with kustomize) is not on PATH"
)


def helm_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the Helm found above first on PATH, for code that runs `helm` by name."""
    assert HELM is not None
    monkeypatch.setenv("PATH", f"{Path(HELM).parent}{os.pathsep}{os.environ.get('PATH', '')}")
