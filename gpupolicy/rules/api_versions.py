"""GP006: API versions the cluster's Kubernetes release no longer serves, or will stop serving.

Deprecated API Migration Guide: https://kubernetes.io/docs/reference/using-api/deprecation-guide/
The table lives in policies/api-removals.yaml (gpupolicy/kube/api_removals.py reads it).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpupolicy.core.findings import Severity
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Scope, Setting, Violation, rule
from gpupolicy.kube.api_removals import minor, removal_of
from gpupolicy.loading.documents import Resource

GUIDE = "https://kubernetes.io/docs/reference/using-api/deprecation-guide/"


@rule(
    id="GP006",
    name="deprecated-api-version",
    severity="error",
    scope=Scope.OBJECT,
    summary="Reports an apiVersion that the policy's `kubernetesVersion` no longer serves (error, with the "
    "replacement), or that it still serves beside its replacement but a later release removes (warning, with "
    "that release), as the Kubernetes Deprecated API Migration Guide lists them.",
    rationale="The API server refuses an object of an API version it no longer serves: kubectl apply and Argo CD "
    "fail on the whole sync, and an HPA or PDB that never gets created leaves its GPU workload unscaled or "
    "unprotected, often noticed only at the next cluster upgrade.",
    remediation="Change apiVersion to the replacement the finding names (kubectl-convert rewrites the object).",
    references=(GUIDE, "https://kubernetes.io/docs/reference/using-api/deprecation-policy/"),
    settings=(Setting("kubernetesVersion", "The cluster's Kubernetes minor version."),),
)
def deprecated_api_version(resource: Resource, ctx: Context) -> Iterator[Violation]:
    removal = removal_of(resource.api_version, resource.kind)
    if removal is None:
        return
    version = minor(ctx.policy.kubernetes_version)
    status = removal.status(version)
    if status is None:
        return
    what = f"{removal.api_version} {removal.kind}"
    use = f"use {removal.replacement}" if removal.replacement else "it has no replacement"
    removed_in = ".".join(map(str, removal.removed_in))
    if status == "removed":
        yield Violation(
            ("apiVersion",),
            f"{what} is not served since Kubernetes {removed_in} (kubernetesVersion {ctx.policy.kubernetes_version}): {use}",
        )
    else:
        yield Violation(
            ("apiVersion",),
            f"{what} is deprecated and no longer served from Kubernetes {removed_in}: {use}",
            severity=Severity.WARNING,
        )
