"""GP301-GP308: pod priority and preemption, and Kueue's workload priority.

Pod priority and preemption: https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/
PriorityClass API: https://kubernetes.io/docs/reference/kubernetes-api/scheduling-resources/priority-class-v1/
Kueue WorkloadPriorityClass: https://kueue.sigs.k8s.io/docs/concepts/workload_priority_class/
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Scope, Setting, Violation, rule
from gpupolicy.engine.unknowns import PRIORITY_CLASSES, said_unknown, unknown_fact
from gpupolicy.kube.inventory import Coverage
from gpupolicy.kube.pod_spec import CONFIG_KINDS, PodTemplate, Workload, as_mapping
from gpupolicy.kube.roles import NOT_AGENT, declared_class
from gpupolicy.loading.documents import Resource

PRIORITY = "https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/"
PRIORITY_CLASS = f"{PRIORITY}#priorityclass"
NON_PREEMPTING = f"{PRIORITY}#non-preempting-priority-class"
KUEUE_PRIORITY = "https://kueue.sigs.k8s.io/docs/concepts/workload_priority_class/"
# Created by the API server in every cluster, with these values.
BUILTIN_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
# "The value of a PriorityClass ... can be any 32-bit integer value smaller than or equal to 1 billion."
MAX_USER_VALUE = 1_000_000_000
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def _class_name(template: PodTemplate) -> str | None:
    name = template.spec.get("priorityClassName")
    return name if isinstance(name, str) and name else None


def _priority_class(ctx: Context, name: str) -> Resource | None:
    return ctx.inventory.get("PriorityClass", name)


def _gpu_templates(workload: Workload, ctx: Context) -> Iterator[PodTemplate]:
    return (template for template in workload.templates if ctx.template_uses_gpus(template, workload))


@rule(
    id="GP301",
    roles=NOT_AGENT,
    name="gpu-pod-without-priority-class",
    severity="warning",
    summary="Reports a GPU workload whose pod template sets no priorityClassName, on a cluster that schedules by "
    "PriorityClass and has no global default class.",
    rationale="Without a class the pod gets the global default (often 0): on a full GPU cluster it can neither "
    "preempt a batch job nor be protected from one, and its place in the queue is left to chance.",
    remediation="Set priorityClassName to the class of the workload's tier (see the policy's priority.tiers).",
    references=(PRIORITY,),
    settings=(
        Setting("priority.clusterClasses", "The cluster's classes: it schedules by PriorityClass."),
        Setting("priority.globalDefault", "The cluster's global default class: pods without one get it."),
    ),
)
def gpu_pod_without_priority_class(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if workload.kind in CONFIG_KINDS:  # a partial spec: the service that names it sets the priority
        return
    if (
        said_unknown(ctx, PRIORITY_CLASSES)
        and ctx.inventory.coverage("PriorityClass") is not Coverage.COMPLETE
        and not _cluster_uses_priority(ctx)
    ):
        return  # not known to schedule by PriorityClass: that unknown is all it can say
    kueue = workload.labels.get(KUEUE_PRIORITY_LABEL)
    for template in _gpu_templates(workload, ctx):
        if _class_name(template) is not None or kueue or template.labels.get(KUEUE_PRIORITY_LABEL):
            continue
        if _global_default(ctx) is not None:
            continue
        if not _cluster_uses_priority(ctx):
            # Known to have no class of its own (a complete inventory): every pod has the same priority.
            if ctx.inventory.coverage("PriorityClass") is not Coverage.COMPLETE:
                yield from unknown_fact(
                    ctx, PRIORITY_CLASSES, template.path, "the priority of GPU pods (GP301)"
                )
            continue
        yield Violation(template.path, f"{template.describe()} requests GPUs but sets no priorityClassName")


def _cluster_uses_priority(ctx: Context) -> bool:
    """Whether the cluster is known to schedule by PriorityClass: the policy lists its classes or
    tiers, or an inventory that holds every PriorityClass (the webhook's, a cluster snapshot, or
    inventory.completeKinds) has one besides the built-in system classes. PriorityClasses in a
    repository do not say it: one repository may hold a scheduler's classes and another team's
    workloads (the unknown finding names them, for the policy)."""
    if ctx.policy.priority.cluster_classes or ctx.policy.priority.tiers:
        return True
    if ctx.inventory.coverage("PriorityClass") is not Coverage.COMPLETE:
        return False
    return any(not found.name.startswith("system-") for found in ctx.inventory.list("PriorityClass"))


def _global_default(ctx: Context) -> str | None:
    """A PriorityClass with globalDefault: true gives pods without a class its priority: the
    cluster's (policy priority.globalDefault, from a cluster snapshot) or one in the inventory."""
    declared = ctx.policy.priority.global_default
    if declared is not None:
        return declared
    for found in ctx.inventory.list("PriorityClass"):
        if as_mapping(found.obj).get("globalDefault") is True:
            return found.name
    return None


@rule(
    id="GP302",
    name="priority-class-undefined",
    severity="error",
    summary="Reports a priorityClassName that is neither in the inventory, nor in the policy's list of the "
    "cluster's classes, nor built in. When the inventory cannot be complete and the policy lists no classes, "
    "one info finding says the class could not be verified.",
    rationale="The API server rejects a pod whose PriorityClass does not exist: the Deployment's ReplicaSet "
    "creates no pods, and the rollout silently makes no progress.",
    remediation="Define the PriorityClass, list it in the policy's priority.clusterClasses, or fix the name.",
    references=(PRIORITY_CLASS,),
    settings=(Setting("priority.clusterClasses", "Classes the cluster has outside the repository."),),
)
def priority_class_undefined(workload: Workload, ctx: Context) -> Iterator[Violation]:
    cluster_classes = ctx.policy.priority.cluster_classes
    coverage = ctx.inventory.coverage("PriorityClass")
    for template in workload.templates:
        name = _class_name(template)
        if name is None or name in BUILTIN_CLASSES or name in cluster_classes or _priority_class(ctx, name):
            continue
        path = template.field("priorityClassName")
        if coverage is Coverage.COMPLETE or (coverage is Coverage.PARTIAL and cluster_classes):
            yield Violation(
                path,
                f"PriorityClass {name!r} is not defined (not in the inventory, not in priority.clusterClasses)",
            )
        elif ("GP302", name) not in ctx.said:  # said once per run: the engine drops the others
            yield Violation(
                path,
                f"PriorityClass {name!r} could not be verified: the {coverage.value} inventory does not hold it "
                "and the policy's priority.clusterClasses is empty",
                unknown=True,
                once=("GP302", name),
            )


@rule(
    id="GP303",
    roles=NOT_AGENT,
    name="system-priority-class-misuse",
    severity="error",
    summary="Reports a GPU workload outside the policy's system namespaces that uses system-cluster-critical or "
    "system-node-critical (DaemonSets, the node agents these classes exist for, are exempt, and so are pod "
    "templates that request no GPU: a scheduler's or an operator's own controllers are the cluster add-ons the "
    "classes are for).",
    rationale="These classes sit above every user class: a GPU job with them preempts anything, including the "
    "cluster's own DNS or the device plugin; clusters commonly confine them to kube-system with a ResourceQuota.",
    remediation="Use one of the cluster's user PriorityClasses instead of a system class.",
    references=(
        PRIORITY_CLASS,
        "https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default",
    ),
    settings=(Setting("priority.systemNamespaces", "Namespaces allowed the system classes."),),
)
def system_priority_class_misuse(workload: Workload, ctx: Context) -> Iterator[Violation]:
    # DaemonSets are node agents (device plugin, drivers, DCGM): system-node-critical is meant for them.
    if (
        workload.kind == "DaemonSet"
        or (workload.namespace or "default") in ctx.policy.priority.system_namespaces
    ):
        return
    # Only GPU templates: a batch scheduler's or an operator's controllers (Volcano's scheduler, a
    # webhook) are the "critical add-ons" the classes exist for, and what they preempt is no GPU.
    # https://kubernetes.io/docs/tasks/administer-cluster/guaranteed-scheduling-critical-addon-pods/
    # The class is read first: most templates name none, and then their GPUs need not be counted.
    for template in workload.templates:
        name = _class_name(template)
        if name in BUILTIN_CLASSES and ctx.template_uses_gpus(template, workload):
            yield Violation(
                template.field("priorityClassName"),
                f"{template.describe()} uses the system class {name} in namespace {workload.namespace or 'default'}",
            )


def _value(resource: Resource) -> Any:
    return as_mapping(resource.obj).get("value")


@rule(
    id="GP304",
    name="priority-class-reserved",
    severity="error",
    scope=Scope.OBJECT,
    kinds=("PriorityClass",),
    summary="Reports a PriorityClass named `system-*` or with a value above 1,000,000,000.",
    rationale="The `system-` prefix and values above one billion are reserved for the system classes; the API "
    "server rejects such an object, so the class never exists and every pod naming it is rejected too.",
    remediation="Rename the class without the system- prefix and keep its value at or below 1000000000.",
    references=(PRIORITY_CLASS,),
)
def priority_class_reserved(resource: Resource, ctx: Context) -> Iterator[Violation]:
    if resource.name.startswith("system-"):
        yield Violation(
            ("metadata", "name"), f"PriorityClass name {resource.name!r} uses the reserved system- prefix"
        )
    value = _value(resource)
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_USER_VALUE:
        yield Violation(("value",), f"PriorityClass value {value} > {MAX_USER_VALUE}, the largest user value")


def _is_global_default(resource: Resource) -> bool:
    return as_mapping(resource.obj).get("globalDefault") is True


@rule(
    id="GP305",
    name="multiple-global-default-priority",
    severity="error",
    scope=Scope.OBJECT,
    kinds=("PriorityClass",),
    summary="Reports a PriorityClass with `globalDefault: true` when another one in the inventory has it too.",
    rationale="Only one PriorityClass may be the global default: the API server rejects the second, so "
    "whichever is applied last fails and pods without a class get a priority nobody chose.",
    remediation="Keep globalDefault: true on exactly one PriorityClass.",
    references=(PRIORITY_CLASS,),
)
def multiple_global_default_priority(resource: Resource, ctx: Context) -> Iterator[Violation]:
    if not _is_global_default(resource):
        return
    if ctx.inventory.coverage("PriorityClass") is Coverage.UNAVAILABLE:
        yield Violation(
            ("globalDefault",),
            "other PriorityClasses could not be listed: whether another is the global default is unknown",
            unknown=True,
            once=("GP305", resource.name),
        )
        return
    others = sorted(
        other.name
        for other in ctx.inventory.list("PriorityClass")
        if other.name != resource.name and _is_global_default(other)
    )
    if others:
        yield Violation(
            ("globalDefault",),
            f"PriorityClass {resource.name} and {', '.join(others)} both set globalDefault: true",
        )


@rule(
    id="GP306",
    roles=NOT_AGENT,
    name="priority-tier-violation",
    severity="warning",
    summary="Reports a workload whose class (label gpupolicy.io/workload-class) is not allowed the PriorityClass "
    "it uses, by the policy's tiers.",
    rationale="Tiers keep batch and dev jobs from taking the priority of online serving; a training job on the "
    "serving class preempts inference pods and turns a queue into an outage.",
    remediation="Use a PriorityClass allowed for the workload class, or change the workload class label.",
    references=(PRIORITY,),
    settings=(Setting("priority.tiers", "Workload class -> allowed PriorityClasses."),),
)
def priority_tier_violation(workload: Workload, ctx: Context) -> Iterator[Violation]:
    workload_class = declared_class(workload)
    tiers = ctx.policy.priority.tiers
    if not isinstance(workload_class, str) or workload_class not in tiers:
        return
    allowed = tiers[workload_class]
    for template in workload.templates:
        name = _class_name(template)
        if name is not None and name not in allowed:
            yield Violation(
                template.field("priorityClassName"),
                f"workload class {workload_class!r} may use {', '.join(allowed) or 'no class'}, not {name!r}",
            )


def is_batch(workload: Workload, ctx: Context) -> bool:
    workloads = ctx.policy.workloads
    return workload.kind in workloads.batch_kinds or declared_class(workload) in workloads.batch_classes


def _is_high(ctx: Context, name: str, found: Resource | None) -> str | None:
    """Why the class counts as high, or None."""
    if name in ctx.policy.priority.high_classes:
        return "listed in priority.highClasses"
    threshold = ctx.policy.priority.high_value
    value = _value(found) if found is not None else None
    if isinstance(threshold, int) and isinstance(value, int) and value >= threshold:
        return f"value {value} ≥ priority.highValue {threshold}"
    return None


@rule(
    id="GP307",
    roles=NOT_AGENT,
    name="batch-class-preempts",
    severity="warning",
    summary="Reports a batch or training GPU workload on a high PriorityClass without `preemptionPolicy: Never` "
    "(on the pod or on the class).",
    rationale="A high-priority batch job evicts running pods to make room; on a GPU cluster that means serving "
    "replicas reloading their models. preemptionPolicy: Never keeps its place in the queue without preempting.",
    remediation="Set preemptionPolicy: Never on the pod template (or use a non-preempting PriorityClass).",
    references=(NON_PREEMPTING,),
    settings=(
        Setting("priority.highClasses", "Classes that count as high."),
        Setting("priority.highValue", "Values that count as high."),
        Setting("workloads.batchKinds", "Kinds that are batch."),
    ),
)
def batch_class_preempts(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not is_batch(workload, ctx):
        return
    for template in _gpu_templates(workload, ctx):
        name = _class_name(template)
        if name is None:
            continue
        found = _priority_class(ctx, name)
        why = _is_high(ctx, name, found)
        never = template.spec.get("preemptionPolicy") == "Never" or (
            found is not None and as_mapping(found.obj).get("preemptionPolicy") == "Never"
        )
        if why is not None and not never:
            yield Violation(
                template.field("priorityClassName"),
                f"{workload.kind} uses high PriorityClass {name!r} ({why}) and may preempt serving pods; "
                "preemptionPolicy is not Never",
            )


@rule(
    id="GP308",
    name="kueue-priority-undefined",
    severity="warning",
    summary="Reports a `kueue.x-k8s.io/priority-class` label naming no WorkloadPriorityClass in the inventory "
    "or the policy's priority.kueueClasses (info when the inventory cannot know).",
    rationale="Kueue rejects or never admits a workload whose WorkloadPriorityClass does not exist: the job "
    "waits in its queue indefinitely.",
    remediation="Create the WorkloadPriorityClass, list it in priority.kueueClasses, or fix the label.",
    references=(KUEUE_PRIORITY,),
    settings=(
        Setting("priority.kueueClasses", "WorkloadPriorityClasses the cluster has outside the repository."),
    ),
)
def kueue_priority_undefined(workload: Workload, ctx: Context) -> Iterator[Violation]:
    name = workload.labels.get(KUEUE_PRIORITY_LABEL)
    if not isinstance(name, str) or not name:
        return
    listed = ctx.policy.priority.kueue_classes
    if name in listed or ctx.inventory.get("WorkloadPriorityClass", name) is not None:
        return
    path = ("metadata", "labels", KUEUE_PRIORITY_LABEL)
    coverage = ctx.inventory.coverage("WorkloadPriorityClass")
    if coverage is Coverage.COMPLETE or (coverage is Coverage.PARTIAL and listed):
        yield Violation(
            path,
            f"WorkloadPriorityClass {name!r} is not defined (not in the inventory, not in priority.kueueClasses)",
        )
    else:
        yield Violation(
            path,
            f"WorkloadPriorityClass {name!r} could not be verified: the {coverage.value} inventory does not hold "
            "it and the policy's priority.kueueClasses is empty",
            unknown=True,
            once=("GP308", name),
        )
