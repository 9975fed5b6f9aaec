"""PodDisruptionBudgets against workloads and HorizontalPodAutoscalers, as the cluster sees them.

- A PDB covers the pods of its own namespace that its selector matches; in policy/v1 an empty
  selector (`{}`) matches every pod of the namespace and a null one matches none.
  https://kubernetes.io/docs/tasks/run-application/configure-pdb/#specifying-a-poddisruptionbudget
- Percentages are scaled against the expected pod count and rounded *up*, for minAvailable and for
  maxUnavailable alike: the disruption controller calls
  `intstr.GetScaledValueFromIntOrPercent(value, expectedCount, true)` for both
  (kubernetes/kubernetes pkg/controller/disruption/disruption.go, getExpectedPodCount; the docs'
  "Rounding logic when specifying percentages": 50% of 7 pods is 4).
  https://kubernetes.io/docs/tasks/run-application/configure-pdb/#rounding-logic-when-specifying-percentages
  (A Deployment's rollingUpdate.maxUnavailable rounds *down*; that is a different field.)
- An HPA scales its target between minReplicas (default 1) and maxReplicas; at minReplicas the
  PDB must still allow an eviction.
  https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.kube.inventory import DEFAULT_NAMESPACE, Coverage, Inventory, namespace_of, workload_namespace
from gpupolicy.kube.pod_spec import (
    RUNNING_KINDS,
    PodTemplate,
    Workload,
    as_mapping,
    int_or_default,
    workload_of,
)
from gpupolicy.kube.selectors import (
    TextSelector,
    selector_matches_text_labels,
    text_labels,
    text_selector,
    text_selector_matches,
)
from gpupolicy.loading.documents import Resource

PDB = "PodDisruptionBudget"
HPA = "HorizontalPodAutoscaler"
_PERCENT = re.compile(r"^([0-9]+)%$")  # ASCII digits, as strconv.Atoi reads them (\d takes "١")


@immutable
class IntOrPercent:
    value: int
    percent: bool

    def scaled(self, total: int) -> int:
        """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
        if not self.percent:
            return self.value
        return math.ceil(self.value * total / 100)

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


def parse_int_or_percent(raw: Any) -> IntOrPercent | None:
    """An int, or a string "N%". A plain numeric string is not valid for PDBs (the controller
    rejects it), so it is None here, as is anything else."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return IntOrPercent(raw, False) if raw >= 0 else None
    if isinstance(raw, str):
        match = _PERCENT.match(raw.strip())
        if match:
            return IntOrPercent(int(match.group(1)), True)
    return None


@immutable
class Budget:
    """A PDB's spec: one of minAvailable / maxUnavailable."""

    field: str  # "minAvailable" or "maxUnavailable"
    amount: IntOrPercent

    def desired_healthy(self, expected: int) -> int:
        """status.desiredHealthy for `expected` pods, as getExpectedPodCount computes it."""
        if self.field == "maxUnavailable":
            return max(expected - self.amount.scaled(expected), 0)
        return self.amount.scaled(expected)

    def disruptions_allowed(self, expected: int) -> int:
        """Evictions allowed when all `expected` pods are healthy."""
        return max(expected - self.desired_healthy(expected), 0)

    def blocks_always(self) -> bool:
        """maxUnavailable 0 / 0%, or minAvailable 100%: no eviction at any scale."""
        if self.field == "maxUnavailable":
            return self.amount.value == 0
        return self.amount.percent and self.amount.value >= 100


def budget_of(pdb: Resource) -> Budget | None:
    spec = as_mapping(as_mapping(pdb.obj).get("spec"))
    for field in ("maxUnavailable", "minAvailable"):
        if field in spec:
            amount = parse_int_or_percent(spec[field])
            return Budget(field, amount) if amount is not None else None
    return None


def pdb_selector(pdb: Resource) -> Any:
    return as_mapping(as_mapping(pdb.obj).get("spec")).get("selector")


# Labels a controller adds to every pod it creates, besides the template's own: PDBs often select
# on them. https://kserve.github.io/website/ (serving.kserve.io/inferenceservice),
# https://lws.sigs.k8s.io/docs/reference/labels-annotations-and-environment-variables/,
# https://kubernetes.io/docs/reference/labels-annotations-taints/#batch-kubernetes-io-job-name,
# NVIDIA's NIM operator (github.com/NVIDIA/k8s-nim-operator, manifests/deployment.yaml and
# NIMService.GetSelectorLabels: the Deployment it makes selects and labels its pods `app: <name>`;
# only on its own platform, see `_controller_labels`), NVIDIA Dynamo's operator (every pod of a
# graph's components is labelled with its graph: consts.KubeLabelDynamoGraphDeploymentName), Knative
# (a Service's pods carry serving.knative.dev/service: https://knative.dev/docs/serving/).
CONTROLLER_LABELS: dict[str, tuple[str, ...]] = {
    "InferenceService": ("serving.kserve.io/inferenceservice",),
    "LeaderWorkerSet": ("leaderworkerset.sigs.k8s.io/name",),
    "Job": ("job-name", "batch.kubernetes.io/job-name"),
    "NIMService": ("app",),
    "DynamoGraphDeployment": ("nvidia.com/dynamo-graph-deployment-name",),
    "Service": ("serving.knative.dev/service",),  # a Knative Service: only it carries pod templates
}


def pod_labels(workload: Workload, template: PodTemplate) -> dict[str, Any]:
    """The labels the workload's pods carry: the template's, plus the controller's own."""
    own = template.pod_labels if template.pod_labels is not None else template.labels
    return {**_controller_labels(workload), **own}


def _controller_labels(workload: Workload) -> dict[str, str]:
    """A NIMService with `inferencePlatform: kserve` is served through a KServe InferenceService the
    operator makes, whose pods KServe labels: the `app` label of the operator's own Deployment
    ("standalone", the default) is not theirs, and what is cannot be told from the manifest."""
    if workload.kind == "NIMService":
        platform = as_mapping(as_mapping(workload.resource.obj).get("spec")).get("inferencePlatform")
        if platform not in (None, "", "standalone"):
            return {}
    return {key: workload.name for key in CONTROLLER_LABELS.get(workload.kind, ())}


def pdb_selects_template(pdb: Resource, workload: Workload, template: PodTemplate) -> bool:
    """Same namespace, and the selector matches the labels of the template's pods. Those are made
    text once per template (`_pod_text_labels`), not once per PDB: GP501 matches a workload against
    every PDB of its namespace, GP504 and the streaming lint every PDB against every workload."""
    if namespace_of(pdb) != workload_namespace(workload):
        return False
    return selector_matches_text_labels(pdb_selector(pdb), _pod_text_labels(workload, template))


def pdb_selects(pdb: Resource, workload: Workload) -> bool:
    return any(pdb_selects_template(pdb, workload, template) for template in workload.templates)


_POD_TEXT_LABELS = "pod-text-labels"


def _pod_text_labels(workload: Workload, template: PodTemplate) -> dict[str, str]:
    """The `text_labels` of the template's pods, memoised on the template: it lives as long as its
    object's templates (`workload_of`), across the views made of it, and it is one object's, so
    the controller's labels (its kind and name) are the same for every view."""
    found: dict[str, str] | None = template.cache.get(_POD_TEXT_LABELS)
    if found is None:
        found = template.cache[_POD_TEXT_LABELS] = text_labels(pod_labels(workload, template))
    return found


def workload_kinds(extra: Sequence[str] = ()) -> list[str]:
    """The kinds the inventory is asked for when looking for workloads."""
    return list(dict.fromkeys([*RUNNING_KINDS, *extra]))


def workloads_in(inventory: Inventory, namespace: str, kinds: Sequence[str]) -> Iterator[Workload]:
    for kind in kinds:
        for resource in inventory.list(kind, namespace):
            if namespace_of(resource) != namespace:
                continue
            workload = workload_of(resource)
            if workload is not None:
                yield workload


def workloads_coverage(inventory: Inventory, kinds: Sequence[str]) -> Coverage:
    """The weakest coverage among the workload kinds."""
    coverages = {inventory.coverage(kind) for kind in kinds}
    for level in (Coverage.UNAVAILABLE, Coverage.PARTIAL):
        if level in coverages:
            return level
    return Coverage.COMPLETE


def pdbs_for(workload: Workload, inventory: Inventory) -> list[Resource]:
    """The PDBs that select the workload's pods (`pdb_selects`)."""
    return selecting(workload, namespace_pdbs(inventory, workload_namespace(workload)))


def namespace_pdbs(inventory: Inventory, namespace: str) -> list[tuple[Resource, TextSelector]]:
    """The PDBs of `namespace`, in the inventory's order, each with its selector read for
    matching: read once for the workloads of a namespace rather than once per workload (with a
    PDB beside each of 20 workloads of a namespace, GP501 matched each workload against 20)."""
    return [
        (pdb, text_selector(pdb_selector(pdb)))
        for pdb in inventory.list(PDB, namespace)
        if namespace_of(pdb) == namespace
    ]


def selecting(workload: Workload, pdbs: Sequence[tuple[Resource, TextSelector]]) -> list[Resource]:
    """Of `pdbs` (`namespace_pdbs` of the workload's namespace), those that select its pods."""
    return [pdb for pdb, selector in pdbs if _selects_pods(selector, workload)]


def _selects_pods(selector: TextSelector, workload: Workload) -> bool:
    """Whether `selector` matches the pods of one of the workload's templates."""
    for template in workload.templates:
        if text_selector_matches(selector, _pod_text_labels(workload, template)):
            return True
    return False


def selected_workloads(pdb: Resource, inventory: Inventory, kinds: Sequence[str]) -> list[Workload]:
    namespace = namespace_of(pdb)
    return [workload for workload in workloads_in(inventory, namespace, kinds) if pdb_selects(pdb, workload)]


def hpa_targets(hpa: Resource, workload: Workload) -> bool:
    """spec.scaleTargetRef names the workload (kind and name, same namespace)."""
    if namespace_of(hpa) != workload_namespace(workload):
        return False
    ref = as_mapping(as_mapping(as_mapping(hpa.obj).get("spec")).get("scaleTargetRef"))
    return ref.get("kind") == workload.kind and ref.get("name") == workload.name


def hpa_for(workload: Workload, inventory: Inventory) -> Resource | None:
    """The HPA that scales the workload. Several rules ask, so the answer is kept on the view
    (made per evaluation of the object) for this inventory."""
    key = ("hpa", id(inventory))
    cache = workload.cache
    if key in cache:
        found: Resource | None = cache[key]
        return found
    found = cache[key] = next(
        (hpa for hpa in inventory.list(HPA, workload_namespace(workload)) if hpa_targets(hpa, workload)),
        None,
    )
    return found


def hpa_replicas(hpa: Resource) -> tuple[int, int | None]:
    """(minReplicas, maxReplicas): minReplicas defaults to 1."""
    spec = as_mapping(as_mapping(hpa.obj).get("spec"))
    minimum = int_or_default(spec.get("minReplicas"), 1) or 1
    return minimum, int_or_default(spec.get("maxReplicas"), None)


@immutable
class ExpectedPods:
    count: int
    source: str  # "replicas 2 of Deployment ns/x" or "minReplicas 2 of HorizontalPodAutoscaler ns/h"
    hpa: Resource | None = None


def expected_pods(
    workload: Workload, inventory: Inventory, template: PodTemplate | None = None
) -> ExpectedPods | None:
    """Pods of the workload (or of one template) at its smallest scale: the HPA's minReplicas when
    an HPA targets it, else the replicas it declares. None when unknown (a DaemonSet)."""
    hpa = hpa_for(workload, inventory)
    if hpa is not None:
        minimum, _ = hpa_replicas(hpa)
        return ExpectedPods(minimum, f"minReplicas {minimum} of {hpa.ref}", hpa)
    count = template.replicas if template is not None else workload.total_replicas()
    if count is None:
        return None
    return ExpectedPods(count, f"replicas {count} of {workload.resource.ref}")


def max_pods(workload: Workload, inventory: Inventory) -> int | None:
    """The most pods the workload runs: the HPA's maxReplicas, else its replicas."""
    hpa = hpa_for(workload, inventory)
    if hpa is not None:
        _, maximum = hpa_replicas(hpa)
        if maximum is not None:
            return maximum
    return workload.total_replicas()


Selection = frozenset[tuple[int, int]]  # (workload, template) indices into a list of workloads


def selected_templates(pdb: Resource, workloads: Sequence[Workload]) -> Selection:
    """Which templates of `workloads` make pods that `pdb` selects: matched once per PDB, then
    compared with every other PDB's selection (GP504), rather than matched again for each pair.
    The PDB's namespace and selector are read once, and each workload's namespace from its view
    (`namespace_of` of its resource, read when the view was made)."""
    namespace, selector = namespace_of(pdb), text_selector(pdb_selector(pdb))
    return frozenset(
        (index, position)
        for index, workload in enumerate(workloads)
        if (workload.namespace or DEFAULT_NAMESPACE) == namespace
        for position, template in enumerate(workload.templates)
        if text_selector_matches(selector, _pod_text_labels(workload, template))
    )


def first_shared(first: Selection, second: Selection, workloads: Sequence[Workload]) -> Workload | None:
    """The first workload of `workloads` whose pods both selections hold; None when none is known
    to be shared."""
    common = first & second
    return workloads[min(common)[0]] if common else None
