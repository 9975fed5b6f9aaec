"""gpupolicy: a policy linter and admission webhook for GPU workloads on Kubernetes."""

from __future__ import annotations

__version__ = "0.1.0"
