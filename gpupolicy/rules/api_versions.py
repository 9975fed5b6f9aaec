"""GP006: API versions the cluster's Kubernetes release no longer serves, or will stop serving.

Deprecated API Migration Guide: https://kubernetes.io/docs/reference/using-api/deprecation-guide/
The table lives in policies/api-removals.yaml (gpupolicy/kube/api_removals.py reads it).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpupolicy.core.findings import Severity
from gpupolicy.core.vocabulary import built_in_api_group
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Scope, Setting, Violation, rule
from gpupolicy.kube.api_removals import minor, removal_of
from gpupolicy.kube.kube_schemas import removed_by_schemas
from gpupolicy.loading.documents import Resource

GUIDE = "https://kubernetes.io/docs/reference/using-api/deprecation-guide/"


@rule(
    id="GP006",
    name="deprecated-api-version",
    severity="error",
    scope=Scope.OBJECT,
    summary="Reports an apiVersion that the policy's `kubernetesVersion` no longer serves (error, with the "
    "replacement), or that it still serves beside its replacement but a later release removes (warning, with "
    "that release), as the Kubernetes Deprecated API Migration Guide lists them; and an alpha or beta version of "
    "a built-in kind that an earlier release served and the policy's no longer does (DRA's resource.k8s.io/v1alpha2), "
    "as the bundled schemas of the releases tell.",
    rationale="The API server refuses an object of an API version it no longer serves: kubectl apply and Argo CD "
    "fail on the whole sync, and an HPA or PDB that never gets created leaves its GPU workload unscaled or "
    "unprotected, often noticed only at the next cluster upgrade.",
    remediation="Change apiVersion to the replacement the finding names (kubectl-convert rewrites the object).",
    references=(GUIDE, "https://kubernetes.io/docs/reference/using-api/deprecation-policy/"),
    settings=(Setting("kubernetesVersion", "The cluster's Kubernetes minor version."),),
)
def deprecated_api_version(resource: Resource, ctx: Context) -> Iterator[Violation]:
    api_version, kind = resource.api_version, resource.kind
    removal = removal_of(api_version, kind)
    if removal is None:
        if api_version not in _SERVED_GA and kind and built_in_api_group(api_version):
            yield from _removed_by_schemas(api_version, kind, ctx)
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


def _removed_by_schemas(api_version: str, kind: str, ctx: Context) -> Iterator[Violation]:
    """An alpha or beta version the guide does not list (alpha APIs go without a deprecation
    period: DRA's resource.k8s.io/v1alpha2 in 1.31, its v1alpha3 claims in 1.34), told by the
    bundled schemas of the releases: an earlier one served it, the policy's does not."""
    found = removed_by_schemas(api_version, kind, ctx.policy.kubernetes_version)
    if found is None:
        return
    use = f"use {found.replacement}" if found.replacement else "it has no replacement"
    yield Violation(
        ("apiVersion",),
        f"{api_version} {kind} is not served by Kubernetes {ctx.policy.kubernetes_version} (last served in "
        f"{found.last_served}): {use}",
    )


# GA versions no release since the oldest bundled one has stopped serving: most objects are of them.
_SERVED_GA = frozenset(
    {"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1", "rbac.authorization.k8s.io/v1",
     "scheduling.k8s.io/v1", "autoscaling/v2", "autoscaling/v1", "storage.k8s.io/v1", "node.k8s.io/v1"}
)  # fmt: skip
