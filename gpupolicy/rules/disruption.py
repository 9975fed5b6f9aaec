"""GP501-GP507: PodDisruptionBudgets of GPU servers, checked against their workloads and HPAs.

Disruptions: https://kubernetes.io/docs/concepts/workloads/pods/disruptions/
Configuring a PDB: https://kubernetes.io/docs/tasks/run-application/configure-pdb/
Matching, HPA targeting and the disruption controller's rounding live in gpupolicy/kube/disruption.py.
Every lookup of another object goes through ctx.inventory, so the webhook (one admitted object
against the cluster's inventory) and the CLI (the repository's bundle) reach the same findings.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Scope, Violation, rule
from gpupolicy.kube.disruption import (
    PDB,
    Budget,
    Selection,
    budget_of,
    first_shared,
    hpa_for,
    hpa_replicas,
    max_pods,
    namespace_pdbs,
    pdb_selector,
    pdb_selects_template,
    pdbs_for,
    pod_labels,
    selected_templates,
    selecting,
    workload_kinds,
    workloads_coverage,
    workloads_in,
)
from gpupolicy.kube.inventory import Coverage, namespace_of, workload_namespace
from gpupolicy.kube.pod_spec import Workload, as_mapping, workload_of
from gpupolicy.kube.roles import CONTROLLER_INJECTS, SERVERS, serving_replicas, serving_templates_of
from gpupolicy.kube.selectors import TextSelector, selector_is_empty
from gpupolicy.loading.documents import Resource

DISRUPTIONS = "https://kubernetes.io/docs/concepts/workloads/pods/disruptions/"
CONFIGURE_PDB = "https://kubernetes.io/docs/tasks/run-application/configure-pdb/"
ROUNDING = f"{CONFIGURE_PDB}#rounding-logic-when-specifying-percentages"
UNHEALTHY_POLICY = f"{CONFIGURE_PDB}#unhealthy-pod-eviction-policy"
ARBITRARY = f"{CONFIGURE_PDB}#arbitrary-controllers-and-selectors"
HPA_DOC = "https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/"


def _kinds(ctx: Context) -> list[str]:
    workloads = ctx.policy.workloads
    return workload_kinds([*workloads.serving_kinds, *workloads.batch_kinds])


def _selected(pdb: Resource, ctx: Context) -> list[Workload]:
    """The workloads of its namespace whose pods `pdb` selects, in the inventory's order:
    `selected_workloads`, read from what GP504 keeps per namespace (the namespace's workload
    views and each PDB's selection) rather than made again for each PDB and rule. Each PDB read
    every workload of its namespace for GP503 alone: with 20 apps to a namespace, that was 60 us
    of the 270 us per object of a bundle lint (the `--bundle` tree of bench/lint_throughput.py)."""
    namespace = namespace_of(pdb)
    workloads = _namespace_workloads(namespace, ctx)
    chosen = {index for index, _ in _selection(pdb, namespace, workloads, ctx)}
    return [workload for index, workload in enumerate(workloads) if index in chosen]


def _namespace_workloads(namespace: str, ctx: Context) -> list[Workload]:
    """The workload views of `namespace` (`workloads_in`), kept with the namespace's memos."""
    found: list[Workload] = ctx.namespace_memo(
        namespace, "GP504-workloads", lambda: list(workloads_in(ctx.inventory, namespace, _kinds(ctx)))
    )
    return found


def _gpu_server(workload: Workload, ctx: Context) -> bool:
    return ctx.is_serving(workload) and ctx.uses_gpus(workload)


def _spec(resource: Resource) -> dict[str, object]:
    return as_mapping(as_mapping(resource.obj).get("spec"))


@rule(
    id="GP501",
    roles=SERVERS,
    name="gpu-server-without-pdb",
    severity="warning",
    summary="Reports a replicated serving GPU workload (replicas, or an HPA's maxReplicas, of 2 or more) that no "
    "PodDisruptionBudget in its namespace selects (info when the PDBs cannot be listed).",
    rationale="Without a PDB, a node drain or cluster upgrade may evict every replica at once; each then has to "
    "be rescheduled onto a GPU node and reload its model before the service answers again.",
    remediation="Add a PodDisruptionBudget (maxUnavailable: 1, unhealthyPodEvictionPolicy: AlwaysAllow) selecting the pods.",
    references=(DISRUPTIONS, CONFIGURE_PDB),
)
def gpu_server_without_pdb(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not _gpu_server(workload, ctx) or (_most_serving_pods(workload, ctx) or 0) < 2:
        return
    path: JsonPath = (
        ("spec", "replicas") if "replicas" in as_mapping(_spec(workload.resource)) else ("metadata", "name")
    )
    namespace = workload_namespace(workload)
    if ctx.inventory.coverage(PDB) is Coverage.UNAVAILABLE:
        yield Violation(
            path,
            f"PodDisruptionBudgets of namespace {namespace} could not be listed: whether "
            f"{workload.resource.ref} is protected is unknown",
            unknown=True,
            once=("GP501", namespace),
        )
        return
    if not selecting(workload, _pdbs_of(namespace, ctx)):
        yield Violation(
            path,
            f"no PodDisruptionBudget in namespace {namespace} selects the pods of "
            f"{workload.resource.ref} (pod labels: {_pod_labels_said(workload)})",
        )


def _pod_labels_said(workload: Workload) -> str:
    """The labels a PDB could select the workload's pods by: the first template's, with those its
    controller adds (`pod_labels`). A controller that builds the pods from fields of its own (KServe's
    LLMInferenceService) labels them as it likes: the message says so rather than "no labels"."""
    labels = pod_labels(workload, workload.templates[0]) if workload.templates else {}
    if labels:
        return ", ".join(f"{key}={value}" for key, value in sorted(labels.items()))
    if workload.kind in CONTROLLER_INJECTS:
        return f"none in the manifest; the {workload.kind} controller sets its pods' labels"
    return "no labels"


def _pdbs_of(namespace: str, ctx: Context) -> list[tuple[Resource, TextSelector]]:
    """The PDBs of `namespace` with their selectors (`namespace_pdbs`, what `pdbs_for` reads),
    kept with the namespace's memos: GP501 matches each GPU server of the namespace against them."""
    found: list[tuple[Resource, TextSelector]] = ctx.namespace_memo(
        namespace, "GP501-pdbs", lambda: namespace_pdbs(ctx.inventory, namespace)
    )
    return found


def _most_serving_pods(workload: Workload, ctx: Context) -> int | None:
    """The most pods of one serving template at once: the HPA's maxReplicas, else the replicas of
    the serving templates (a LeaderWorkerSet's groups, not its workers; a Ray cluster's head)."""
    if hpa_for(workload, ctx.inventory) is not None:
        return max_pods(workload, ctx.inventory)
    # Per template: a prefill and a decode pool of one pod each are two single points, not a pair.
    counts = [serving_replicas(template) for template in serving_templates_of(workload)]
    if any(count is None for count in counts):
        return None
    return max((count for count in counts if count is not None), default=0)


def _budget_path(budget: Budget) -> JsonPath:
    return ("spec", budget.field)


def _expected(pdb: Resource, workloads: list[Workload], ctx: Context) -> tuple[int, list[str]] | None:
    """Pods the PDB guards at the workloads' declared scale, and where each count came from. The
    scale an HPA may shrink a workload to is GP506's to judge (one defect, one finding): a workload
    an HPA owns counts with the replicas it declares, or leaves the count unknown."""
    total, sources = 0, []
    for workload in workloads:
        if hpa_for(workload, ctx.inventory) is not None and "replicas" not in _spec(workload.resource):
            return None
        counts = [t.replicas for t in workload.templates if pdb_selects_template(pdb, workload, t)]
        if any(count is None for count in counts):
            return None
        count = sum(c for c in counts if c is not None)
        total += count
        sources.append(f"replicas {count} of {workload.resource.ref}")
    return total, sources


@rule(
    id="GP502",
    name="pdb-blocks-eviction",
    severity="error",
    scope=Scope.OBJECT,
    kinds=(PDB,),
    summary="Reports a PDB with `maxUnavailable: 0`/`0%`, `minAvailable: 100%`, or a minAvailable that, scaled "
    "as the disruption controller does (percentages rounded up), is at least the replicas of the workloads it "
    "selects (the HPA's minReplicas when an HPA targets them).",
    rationale="Such a budget never allows an eviction: `kubectl drain` and cluster upgrades hang on the node, "
    "and operators end up deleting the PDB by hand, which then protects nothing.",
    remediation="Allow at least one disruption: maxUnavailable: 1, or minAvailable below the replica count.",
    references=(CONFIGURE_PDB, ROUNDING),
)
def pdb_blocks_eviction(resource: Resource, ctx: Context) -> Iterator[Violation]:
    budget = budget_of(resource)
    if budget is None:
        return
    if budget.blocks_always():
        yield Violation(
            _budget_path(budget), f"{budget.field} {budget.amount} allows no eviction at any scale"
        )
        return
    if budget.field != "minAvailable":
        return
    workloads = _selected(resource, ctx)
    if not workloads and workloads_coverage(ctx.inventory, _kinds(ctx)) is Coverage.UNAVAILABLE:
        yield Violation(
            _budget_path(budget),
            f"the workloads of namespace {namespace_of(resource)} could not be "
            f"listed: whether minAvailable {budget.amount} leaves an eviction is unknown",
            unknown=True,
            once=("GP502", namespace_of(resource), resource.name),
        )
        return
    expected = _expected(resource, workloads, ctx) if workloads else None
    if expected is None or expected[0] <= 0 or budget.disruptions_allowed(expected[0]) > 0:
        return
    count, sources = expected
    scaled = (
        ""
        if not budget.amount.percent
        else f" (of {count} pods, rounded up: {budget.desired_healthy(count)})"
    )
    yield Violation(
        _budget_path(budget),
        f"minAvailable {budget.amount}{scaled} ≥ {' + '.join(sources)}: no pod can ever be evicted",
    )


def _blocks_eviction(pdb: Resource, workload: Workload, ctx: Context) -> bool:
    """GP502 reports this PDB as blocking every eviction (the same defect GP506 would see at minReplicas)."""
    found: bool = ctx.memo(
        ("GP502-blocks", id(pdb)),
        lambda: any(violation.severity is None for violation in pdb_blocks_eviction(pdb, ctx)),
    )
    return found


@rule(
    id="GP503",
    name="pdb-selects-nothing",
    severity="warning",
    scope=Scope.OBJECT,
    kinds=(PDB,),
    summary="Reports a PDB that selects no workload in its namespace (or has no selector at all; info when the "
    "workloads cannot be listed).",
    rationale="A PDB that matches no pod protects nothing: its selector has drifted from the pod labels, and the "
    "workload it was written for can be evicted all at once.",
    remediation="Make spec.selector match the pod template labels of the workload it protects.",
    references=(CONFIGURE_PDB,),
)
def pdb_selects_nothing(resource: Resource, ctx: Context) -> Iterator[Violation]:
    selector = pdb_selector(resource)
    if selector is None:
        yield Violation(
            ("spec",), f"PodDisruptionBudget {resource.name} has no selector, which selects no pod"
        )
        return
    if _selected(resource, ctx):
        return
    namespace = namespace_of(resource)
    if workloads_coverage(ctx.inventory, _kinds(ctx)) is Coverage.UNAVAILABLE:
        yield Violation(
            ("spec", "selector"),
            f"the workloads of namespace {namespace} could not be listed: what "
            f"PodDisruptionBudget {resource.name} selects is unknown",
            unknown=True,
            once=("GP503", namespace),
        )
        return
    yield Violation(
        ("spec", "selector"),
        f"PodDisruptionBudget {resource.name} selects no workload's pods in namespace {namespace}",
    )


@rule(
    id="GP504",
    name="pdb-overlap",
    severity="error",
    scope=Scope.OBJECT,
    kinds=(PDB,),
    summary="Reports a PDB that selects the same pods as another PDB of its namespace (pods of a known workload "
    "both select, or identical selectors).",
    rationale="The eviction API refuses to evict a pod covered by more than one PDB, so drains of those pods "
    "fail whatever the budgets say.",
    remediation="Keep one PodDisruptionBudget per workload; make the selectors disjoint.",
    references=(ARBITRARY,),
)
def pdb_overlap(resource: Resource, ctx: Context) -> Iterator[Violation]:
    selector = pdb_selector(resource)
    if selector is None:
        return
    namespace = namespace_of(resource)
    workloads = _namespace_workloads(namespace, ctx)
    selects = _selection(resource, namespace, workloads, ctx)
    name = resource.name
    for other, other_name, other_selector, other_selects in _namespace_pdbs(namespace, workloads, ctx):
        if other_name == name:
            continue
        shared = first_shared(selects, other_selects, workloads)
        if shared is not None:
            why = f"the pods of {shared.resource.ref}"
        elif other_selector == selector:
            why = "the same selector"
        else:
            continue
        yield Violation(
            ("spec", "selector"),
            f"PodDisruptionBudget {resource.name} and {other.ref} both select "
            f"{why}; such pods cannot be evicted",
        )


def _namespace_pdbs(
    namespace: str, workloads: list[Workload], ctx: Context
) -> list[tuple[Resource, str, Any, Selection]]:
    """The PDBs of `namespace`, in the inventory's order, each with its name, selector and
    selection, read once per namespace: GP504 compares each PDB with every other, and reading
    them again for each pair was 20 of the 40 us per PDB of a namespace of 20 apps (the `--bundle`
    tree of bench/lint_throughput.py)."""
    found: list[tuple[Resource, str, Any, Selection]] = ctx.namespace_memo(
        namespace,
        "GP504-pdbs",
        lambda: [
            (pdb, pdb.name, pdb_selector(pdb), _selection(pdb, namespace, workloads, ctx))
            for pdb in ctx.inventory.list(PDB, namespace)
            if namespace_of(pdb) == namespace
        ],
    )
    return found


def _selection(pdb: Resource, namespace: str, workloads: list[Workload], ctx: Context) -> Selection:
    """What `pdb` selects of the namespace's workloads, once per evaluation: GP504 compares each
    PDB of a namespace with every other (the inventory keeps every PDB for the whole run, so
    its `id()` is not reused; the selection is forgotten with the views it names)."""
    found: Selection = ctx.namespace_memo(
        namespace, ("GP504-selects", id(pdb)), lambda: selected_templates(pdb, workloads)
    )
    return found


@rule(
    id="GP505",
    name="pdb-without-always-allow",
    severity="warning",
    scope=Scope.OBJECT,
    kinds=(PDB,),
    summary="Reports a PDB selecting a serving GPU workload without `unhealthyPodEvictionPolicy: AlwaysAllow`.",
    rationale="With the default IfHealthyBudget, pods that are Running but not Ready — a GPU server still loading "
    "its model, or stuck after an Xid error — cannot be evicted while the budget is spent, so a drain waits on "
    "pods that serve nothing.",
    remediation="Set spec.unhealthyPodEvictionPolicy: AlwaysAllow.",
    references=(UNHEALTHY_POLICY, "https://www.kubernetes.dev/resources/keps/3017/"),
)
def pdb_without_always_allow(resource: Resource, ctx: Context) -> Iterator[Violation]:
    policy = _spec(resource).get("unhealthyPodEvictionPolicy")
    if policy == "AlwaysAllow":
        return
    servers = [w for w in _selected(resource, ctx) if _gpu_server(w, ctx)]
    if servers:
        path: JsonPath = ("spec", "unhealthyPodEvictionPolicy") if policy is not None else ("spec",)
        shown = policy if isinstance(policy, str) else "unset (IfHealthyBudget)"
        yield Violation(
            path, f"unhealthyPodEvictionPolicy is {shown} for GPU server {servers[0].resource.ref}"
        )


@rule(
    id="GP506",
    name="pdb-min-available-vs-hpa",
    severity="warning",
    scope=Scope.OBJECT,
    kinds=("HorizontalPodAutoscaler",),
    summary="Reports an HPA whose minReplicas is at most the minAvailable of a PDB selecting its target "
    "(percentages rounded up): scaled in to minReplicas, the workload can no longer be drained.",
    rationale="The HPA scales the workload in at night; at minReplicas the PDB's minAvailable leaves no "
    "disruption, so node upgrades scheduled off-peak hang. (GP502 reports the PDB; this reports the HPA, which "
    "an admission of the HPA alone would otherwise let through.)",
    remediation="Raise the HPA's minReplicas above the PDB's minAvailable, or use maxUnavailable in the PDB.",
    references=(HPA_DOC, CONFIGURE_PDB),
)
def pdb_min_available_vs_hpa(resource: Resource, ctx: Context) -> Iterator[Violation]:
    ref = as_mapping(_spec(resource).get("scaleTargetRef"))
    kind, name = ref.get("kind"), ref.get("name")
    if not isinstance(kind, str) or not isinstance(name, str):
        return
    target = ctx.inventory.get(kind, name, namespace_of(resource))
    workload = workload_of(target) if target is not None else None
    if workload is None:
        return
    minimum, _ = hpa_replicas(resource)
    for pdb in pdbs_for(workload, ctx.inventory):
        budget = budget_of(pdb)
        if budget is None or budget.field != "minAvailable" or budget.disruptions_allowed(minimum) > 0:
            continue
        if _blocks_eviction(pdb, workload, ctx):
            continue  # the PDB blocks drains at any scale: GP502 reports it on the PDB, once
        path: JsonPath = ("spec", "minReplicas") if "minReplicas" in _spec(resource) else ("spec",)
        yield Violation(
            path,
            f"minReplicas {minimum} ≤ minAvailable {budget.amount} of {pdb.ref} (selects "
            f"{workload.resource.ref}): at minReplicas no pod can be evicted",
        )


@rule(
    id="GP507",
    name="pdb-empty-selector",
    severity="warning",
    scope=Scope.OBJECT,
    kinds=(PDB,),
    summary="Reports a PDB with `selector: {}`, which in policy/v1 selects every pod of the namespace.",
    rationale="The budget then spans unrelated workloads: one crash-looping pod uses it up for everyone, and "
    "every other PDB of the namespace overlaps it, which blocks evictions outright.",
    remediation="Select the pods of one workload with matchLabels.",
    references=(CONFIGURE_PDB,),
)
def pdb_empty_selector(resource: Resource, ctx: Context) -> Iterator[Violation]:
    selector = pdb_selector(resource)
    if selector is not None and selector_is_empty(selector):
        yield Violation(
            ("spec", "selector"),
            f"PodDisruptionBudget {resource.name} selects every pod of namespace "
            f"{namespace_of(resource)} (selector: {{}})",
        )
