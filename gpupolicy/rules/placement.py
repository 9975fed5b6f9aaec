"""GP201-GP210: where GPU pods land — node targeting, taints, label registry, spreading.

Assigning pods to nodes: https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/
Taints and tolerations: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/
GPU Feature Discovery labels: https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gfd_labels.md
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gpupolicy.core.findings import JsonPath, Severity, excerpt
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Parameter, Setting, Violation, rule
from gpupolicy.engine.unknowns import GPU_TAINTS, NODE_POOLS, said_unknown, unknown_fact
from gpupolicy.kube.disruption import hpa_for, hpa_replicas
from gpupolicy.kube.gpu import GpuKind
from gpupolicy.kube.inventory import Coverage
from gpupolicy.kube.models import nodes_per_instance
from gpupolicy.kube.placeholders import fill_in
from gpupolicy.kube.pod_spec import PodTemplate, Workload, as_list, as_mapping
from gpupolicy.kube.roles import NOT_AGENT, SERVERS, serving_replicas, serving_templates_of
from gpupolicy.kube.scheduling import node_selector, required_values, targeted_keys
from gpupolicy.kube.tolerations import Taint, toleration_for
from gpupolicy.policy.node_constraints import node_contradictions, pool_conflicts
from gpupolicy.policy.node_labels import PREFERENCE, node_label_uses
from gpupolicy.policy.node_pools import largest_node, node_pools

ASSIGN = "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/"
TAINTS = "https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/"
GFD = "https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gfd_labels.md"
NODE_SELECTOR_TERM = "https://kubernetes.io/docs/reference/kubernetes-api/definitions/node-selector-term-v1/"
GPU_OPERATOR = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/getting-started.html"
SPREAD = "https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/"
RUNTIME_CLASS = "https://kubernetes.io/docs/concepts/containers/runtime-class/"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
# Node agents (device plugin, DCGM exporter, drivers) must run on GPU nodes and tolerate anything.
NODE_AGENT_KINDS = frozenset({"DaemonSet"})


# The taint NVIDIA's GPU operator docs and GKE put on GPU nodes: the key a CPU pod has no business
# tolerating (GP203) even when the policy does not say which taints the cluster's GPU nodes carry.
# https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#gpu_taints
WELL_KNOWN_GPU_TAINT = Taint("nvidia.com/gpu", "NoSchedule", "")


def _spec_path(template: PodTemplate, key: str) -> JsonPath:
    """The field when the template has it, else the pod spec itself."""
    return template.field(key) if key in template.spec else template.path


@rule(
    id="GP201",
    roles=NOT_AGENT,
    name="gpu-pod-without-node-targeting",
    severity="warning",
    summary="Reports a GPU pod with neither a nodeSelector nor required node affinity on a GPU label "
    "(a key the label registry marks `gpu: true`, or a node pool's label).",
    rationale="The scheduler then places the pod on any node with free GPUs of the resource: a model sized "
    "for an 80 GB H100 lands on a 24 GB L4 and fails to load, or the placement changes with every pool added.",
    remediation="Select the GPU nodes the workload was sized for, e.g. nodeSelector nvidia.com/gpu.product or "
    "required affinity on a registered GPU label.",
    references=(ASSIGN, GFD),
    settings=(
        Setting("nodeLabels", "The label registry; `gpu: true` marks GPU labels."),
        Setting("nodePools", "The nodeLabels of each pool count as GPU labels."),
    ),
)
def gpu_pod_without_node_targeting(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not node_pools(ctx.policy) and said_unknown(ctx, NODE_POOLS):
        return  # without node pools (_pool_kinds) that unknown is all it can say
    registry = ctx.policy.label_registry  # includes the node pools' labels
    for template in workload.templates:
        if not ctx.template_uses_gpus(template, workload):
            continue
        keys = targeted_keys(template)
        if any(registry.is_gpu_label(key) for key in keys):
            continue
        kinds = _pool_kinds(ctx, template)
        if kinds is None:
            yield from unknown_fact(
                ctx, NODE_POOLS, _spec_path(template, "nodeSelector"), "GPU node targeting (GP201)"
            )
            continue
        if len(kinds) < 2:
            continue  # one kind of GPU node for the resource: the scheduler cannot pick a wrong one
        named = f" (it selects only on {', '.join(sorted(keys))})" if keys else ""
        yield Violation(
            _spec_path(template, "nodeSelector"),
            f"{template.describe()} requests GPUs, which {len(kinds)} kinds of node pool offer "
            f"({', '.join(sorted(kinds)[:4])}), but selects no GPU node label{named}",
        )


def _pool_kinds(ctx: Context, template: PodTemplate) -> set[str] | None:
    """The distinct GPU products (or pool names) offering the template's GPU resources; None when the
    policy declares no node pools."""
    pools = node_pools(ctx.policy)
    if not pools:
        return None
    wanted = {demand.resource.name for demand in ctx.gpu.counted_demands(template)}
    return {pool.gpu_product or pool.name for pool in pools if pool.resource in wanted}


@rule(
    id="GP202",
    roles=NOT_AGENT,
    name="gpu-pod-without-gpu-toleration",
    severity="warning",
    summary="Reports a GPU pod that does not tolerate the policy's GPU taint (matched on key and effect; a taint "
    "with a vendor applies to pods requesting that vendor's GPUs).",
    rationale="GPU nodes are tainted so that only GPU pods land there; a GPU pod without the toleration "
    "can schedule nowhere and stays Pending with `untolerated taint`.",
    remediation="Add a toleration for the GPU taint (for example key nvidia.com/gpu, operator Exists, effect NoSchedule).",
    references=(
        TAINTS,
        "https://kubernetes.io/docs/reference/access-authn-authz/admission-controllers/#extendedresourcetoleration",
    ),
    settings=(
        Setting("placement.gpuTaints", "The taints on GPU nodes."),
        Setting("placement.extendedResourceToleration", "The API server adds GPU tolerations itself."),
    ),
)
def gpu_pod_without_gpu_toleration(workload: Workload, ctx: Context) -> Iterator[Violation]:
    auto = ctx.policy.placement.extended_resource_toleration
    taints = ctx.policy.placement.gpu_taints
    if taints is None and said_unknown(ctx, GPU_TAINTS):
        return  # without the GPU taints that unknown is all it can say
    for template in workload.templates:
        if not ctx.template_uses_gpus(template, workload):
            continue
        if taints is None:
            yield from unknown_fact(
                ctx, GPU_TAINTS, _spec_path(template, "tolerations"), "GPU tolerations (GP202)"
            )
            continue
        demands = ctx.gpu.counted_demands(template)
        resources = {demand.resource.name for demand in demands}
        vendors = {demand.resource.vendor for demand in demands if (demand.amount or 0) > 0}
        tolerations = template.spec.get("tolerations")
        for gpu_taint in taints:
            taint, vendor = gpu_taint.taint, gpu_taint.vendor
            if (auto and taint.key in resources) or (
                vendor is not None and vendors and vendor not in vendors
            ):
                continue
            if toleration_for(tolerations, taint, match_value=gpu_taint.value_given) is None:
                yield Violation(
                    _spec_path(template, "tolerations"),
                    f"{template.describe()} requests GPUs but does not tolerate the GPU taint {taint.key}:{taint.effect}",
                )


@rule(
    id="GP203",
    roles=NOT_AGENT,
    name="non-gpu-pod-tolerates-gpu-taint",
    severity="warning",
    summary="Reports a pod without GPUs that tolerates the GPU taint by its key (DaemonSets, the node agents, "
    "are exempt; keyless wildcards are GP204's).",
    rationale="The taint keeps GPU nodes for GPU pods; a CPU pod that tolerates it takes CPU and memory on an "
    "expensive GPU node and can leave a GPU pod Pending for want of them.",
    remediation="Remove the GPU toleration from pods that request no GPU.",
    references=(TAINTS,),
    settings=(Setting("placement.gpuTaints", "The taints on GPU nodes."),),
)
def non_gpu_pod_tolerates_gpu_taint(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if workload.kind in NODE_AGENT_KINDS:
        return
    declared = ctx.policy.placement.gpu_taints
    taints = [item.taint for item in declared] if declared is not None else [WELL_KNOWN_GPU_TAINT]
    for template in workload.templates:
        if ctx.template_uses_gpus(template, workload) or not all(c.image for c in template.main_containers()):
            # A container without an image is a fragment a controller completes (Spark's executor
            # pod template): the GPUs may come with it.
            continue
        tolerations = as_list(template.spec.get("tolerations"))
        for taint in taints:
            keyed = [item if as_mapping(item).get("key") else None for item in tolerations]
            index = toleration_for(keyed, taint, match_value=False)
            if index is not None:
                yield Violation(
                    template.field("tolerations", index),
                    f"{template.describe()} requests no GPU but tolerates the GPU taint {taint.key}:{taint.effect}",
                )


@rule(
    id="GP204",
    roles=NOT_AGENT,
    name="wildcard-toleration",
    severity="warning",
    summary="Reports a toleration with `operator: Exists` and no key (it tolerates every taint). DaemonSets "
    "(node agents) are exempt.",
    rationale="A keyless Exists toleration tolerates every taint, including the GPU taint and NoExecute "
    "taints for unreachable or draining nodes: the pod lands on GPU nodes it should not and is never evicted.",
    remediation="Tolerate the specific taints the pod needs, by key and effect.",
    references=(TAINTS,),
)
def wildcard_toleration(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if workload.kind in NODE_AGENT_KINDS:
        return
    for template in workload.templates:
        for index, item in enumerate(as_list(template.spec.get("tolerations"))):
            item = as_mapping(item)
            if not item.get("key") and item.get("operator") == "Exists":
                effect = item.get("effect") or "every effect"
                yield Violation(
                    template.field("tolerations", index),
                    f"{template.describe()} tolerates every taint (operator Exists without a key, {effect})",
                )


def _vendor_of_label(ctx: Context, key: str) -> str | None:
    if "/" not in key:
        return None
    domain = key.split("/", 1)[0]
    for name, domains in ctx.gpu.vendor_domains:
        for known, suffix in domains:
            if domain == known or domain.endswith(suffix):
                return name
    return None


def _pool_conflicts(template: PodTemplate, ctx: Context) -> Iterator[Violation]:
    pools = node_pools(ctx.policy)
    if not pools:
        return  # no catalogue to hold the pod against (pool_conflicts finds nothing without one)
    kinds = {
        d.resource.name
        for d in ctx.gpu.counted_demands(template)
        if d.resource.kind in (GpuKind.DEVICE, GpuKind.SHARED)
    }
    demands = {name: count for name, count in ctx.gpu.pod_totals(template).items() if name in kinds}
    for conflict in pool_conflicts(template, pools, demands):
        largest = largest_node(ctx.policy, conflict.resource)
        if conflict.count is not None and largest is not None and conflict.count > largest[0]:
            continue  # more than any pool has: GP108's finding, not a contradiction of the selector
        yield Violation(conflict.path, f"{template.describe()}: {conflict.reason}")


@rule(
    id="GP205",
    name="node-constraints-contradict",
    severity="error",
    summary="Reports node constraints that can never hold, read as the scheduler reads them (the nodeSelector AND "
    "any one of the required node-affinity terms, evaluated as sets of values): a nodeSelector that rules out "
    "every required term; a term no node can match (`In []`, In and NotIn of the same value, Gt/Lt with no "
    "integer between, an empty term; a warning when another term can still match); an empty nodeSelector value, or "
    "one written to be filled in (`your-node-name`), of a label the kubelet sets on every node (kubernetes.io/hostname, "
    "os, arch); a required label of one GPU "
    "vendor on a pod that requests another vendor's GPUs; and, when the policy declares nodePools, a required GPU "
    "product whose pools do not advertise the requested GPU resource or count.",
    rationale="The scheduler needs the nodeSelector and at least one required term to hold at once; when no node "
    "can carry such labels the pod stays Pending forever, and nothing in the manifest says why. A term that can "
    "never match is a dead alternative: the placement it was written for never happens.",
    remediation="Make the nodeSelector agree with at least one required term, and fix or drop a term that can never match.",
    references=(ASSIGN, NODE_SELECTOR_TERM, GFD),
    settings=(
        Setting("gpu.vendors", "Vendor label domains."),
        Setting("nodePools", "gpuProduct, resource and gpusPerNode of each pool."),
    ),
)
def node_constraints_contradict(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template in workload.templates:
        foreign = _foreign_label(template, ctx)
        for key, value in node_selector(template).items():
            if _unmatchable_kubelet_value(str(key), value):
                said = f"is {excerpt(str(value))}, a value to fill in" if value else "is empty"
                yield Violation(
                    template.field("nodeSelector", str(key)),
                    f"{template.describe()}: nodeSelector {key} {said}, but the kubelet gives every node its "
                    f"own {key}: no node matches and the pod stays Pending",
                )
                continue
            reason = foreign(str(key)) if foreign is not None else None
            if reason is not None:
                yield Violation(
                    template.field("nodeSelector", str(key)),
                    f"{template.describe()}: nodeSelector {key}: {reason}",
                )
        for found in node_contradictions(template, foreign):
            yield Violation(
                found.path,
                f"{template.describe()}, {found.where}: {found.reason}",
                severity=None if found.fatal else Severity.WARNING,
            )
        yield from _pool_conflicts(template, ctx)


# Labels the kubelet sets on every node, never empty: the node's hostname, its OS and architecture.
# https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetesiohostname
HOSTNAME_LABEL = "kubernetes.io/hostname"
KUBELET_LABELS = frozenset({HOSTNAME_LABEL, "kubernetes.io/os", "kubernetes.io/arch"})


def _unmatchable_kubelet_value(key: str, value: object) -> bool:
    """Whether a nodeSelector value of a label the kubelet sets on every node can match no node:
    empty (null or "": a chart's value left unset, `kubernetes.io/hostname: {{ .Values.hostname }}`),
    or written to be filled in (`your-node-name`)."""
    return key in KUBELET_LABELS and (value is None or value == "" or fill_in(str(value)))


def _foreign_label(template: PodTemplate, ctx: Context) -> Callable[[str], str | None] | None:
    """For a pod that requests the GPUs of one vendor: why a node label of another vendor can never
    be on its node (the pod needs that vendor's GPUs there); None for other pods."""
    vendors = {d.resource.vendor for d in ctx.gpu.counted_demands(template) if (d.amount or 0) > 0}
    if len(vendors) != 1:
        return None
    [vendor] = vendors

    def reason(key: str) -> str | None:
        label_vendor = _vendor_of_label(ctx, key)
        if label_vendor is None or label_vendor == vendor:
            return None
        return f"the pod requests {vendor} GPUs but this requires the {label_vendor} node label {key}"

    return reason


LABEL_REGISTRY_COMPLETE = Parameter(
    "labelRegistryComplete",
    False,
    "The registry lists every key the cluster's nodes carry: any other key is reported, not only near-misses.",
    setting="placement.labelRegistryComplete",
)


@rule(
    id="GP206",
    roles=NOT_AGENT,
    name="node-label-unregistered",
    severity="warning",
    summary="Reports a node label key (nodeSelector, node affinity, topologyKey) that is not in the policy's "
    "label registry, with a did-you-mean for a misspelt known key (nvidia.com/gpu.prodcut).",
    rationale="A misspelt key matches no node and the pod stays Pending; an unregistered key has no source or "
    "owner, so nobody keeps the nodes labelled and placement silently changes when a pool is rebuilt.",
    remediation="Use a registered key, or register the label (source, owner, requirement or preference) in the "
    "policy's nodeLabels.",
    references=(ASSIGN, GFD),
    parameters=(LABEL_REGISTRY_COMPLETE,),
    settings=(Setting("nodeLabels", "The label registry."),),
)
def node_label_unregistered(workload: Workload, ctx: Context) -> Iterator[Violation]:
    registry = ctx.policy.label_registry
    complete = ctx.policy.param(LABEL_REGISTRY_COMPLETE)
    for template in workload.templates:
        for use in node_label_uses(template, topology=True):
            if registry.lookup(use.key) is not None:
                continue
            suggestion = registry.suggest(use.key)
            if suggestion is None and not complete:
                continue  # a key of the cluster's own (Karpenter, node groups, pools): not ours to judge
            hint = f"; did you mean {suggestion}?" if suggestion else ""
            yield Violation(
                use.path, f"node label {use.key} ({use.place}) is not in the label registry{hint}"
            )


def _gpu_memory_problem(ctx: Context, operator: str, values: tuple[str, ...]) -> str | None:
    pools = {pool.gpu_memory_mib for pool in node_pools(ctx.policy) if pool.gpu_memory_mib is not None}
    bad = [value for value in values if not (value.isascii() and value.isdigit())]
    if bad:
        return (
            f"{operator} {', '.join(bad)} is not an integer number of MiB; use Gt/Lt with MiB (e.g. Gt 40000)"
        )
    numbers = [int(value) for value in values]
    if operator in ("Gt", "Lt") and numbers and numbers[0] < 1024:
        return f"{operator} {numbers[0]} reads as GiB, but the label is MiB ({numbers[0] * 1024} MiB = {numbers[0]} GiB)"
    if operator == "In" and pools and not set(numbers) & pools:
        return (
            f"In [{', '.join(values)}] matches no node pool's exact memory ({', '.join(str(p) for p in sorted(pools))} MiB); "
            "use Gt/Lt, which do not depend on the exact MiB a driver reports"
        )
    return None


@rule(
    id="GP207",
    name="gpu-memory-label-misuse",
    severity="warning",
    summary="Reports `nvidia.com/gpu.memory` matched on values that are not integer MiB (`80GB`, `80Gi`), "
    "Gt/Lt bounds that read as GiB, or In on exact values no node pool reports.",
    rationale="GPU Feature Discovery sets nvidia.com/gpu.memory to the framebuffer size in MiB (81559 on an "
    "80 GB A100); `In [80Gi]` or `Gt 40` matches no node or every node. Gt/Lt compare integers.",
    remediation="Match nvidia.com/gpu.memory with Gt or Lt on a number of MiB (for example Gt 40000).",
    references=(GFD, ASSIGN),
    settings=(Setting("nodePools", "gpuMemoryMiB of each pool."),),
)
def gpu_memory_label_misuse(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template in workload.templates:
        for use in node_label_uses(template):
            if use.key != GPU_MEMORY_LABEL or use.operator not in ("In", "NotIn", "Gt", "Lt"):
                continue
            problem = _gpu_memory_problem(ctx, use.operator, use.values)
            if problem is not None:
                yield Violation(use.path, f"{GPU_MEMORY_LABEL} is an integer of MiB: {problem}")


def _ranks_per_server(template: PodTemplate) -> int:
    """How many pods one server of the template spans (1 unless a container's command line says
    `--nnodes N`)."""
    return max((nodes_per_instance(container) or 1 for container in template.containers), default=1)


def _spreads(template: PodTemplate, workload: Workload) -> bool:
    affinity = as_mapping(template.spec.get("affinity"))
    anti = as_mapping(affinity.get("podAntiAffinity"))
    return bool(
        as_list(template.spec.get("topologySpreadConstraints"))
        or anti.get("requiredDuringSchedulingIgnoredDuringExecution")
        or anti.get("preferredDuringSchedulingIgnoredDuringExecution")
        or "leaderworkerset.sigs.k8s.io/exclusive-topology" in workload.annotations
    )


SPREAD_MIN_REPLICAS = Parameter(
    "minReplicas",
    2,
    "Serving GPU pod templates with at least this many replicas (or HPA maxReplicas) must spread.",
    setting="placement.spread.minReplicas",
)


@rule(
    id="GP208",
    roles=SERVERS,
    name="replicas-without-spread",
    severity="warning",
    summary="Reports a replicated serving GPU pod template with no pod anti-affinity and no topology spread "
    "constraints; replicated means its replicas, or the maxReplicas of the HorizontalPodAutoscaler that "
    "scales it, reach the `minReplicas` parameter. Pods that are the ranks of one multi-node server "
    "(`--nnodes N`: SGLang, vLLM, torchrun) are one replica, not N; replicas whose required placement names one "
    "node (a hostname) cannot spread, and the pin is GP209's.",
    rationale="Without spreading, the scheduler may pack every replica onto one GPU node: one node drain, "
    "driver crash or Xid error takes the whole service down, and a PDB cannot help. The ranks of one "
    "server all stop when any of them does, so spreading them keeps nothing up.",
    remediation="Add topologySpreadConstraints on kubernetes.io/hostname (or a preferred podAntiAffinity).",
    references=(
        SPREAD,
        "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#inter-pod-affinity-and-anti-affinity",
        "https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/",
    ),
    parameters=(SPREAD_MIN_REPLICAS,),
)
def replicas_without_spread(workload: Workload, ctx: Context) -> Iterator[Violation]:
    minimum = ctx.policy.param(SPREAD_MIN_REPLICAS)
    if not ctx.is_serving(workload):
        return
    for template in serving_templates_of(workload):
        replicas, scaled_by = _most_replicas(workload, template, ctx)
        if (
            replicas < minimum
            or not ctx.template_uses_gpus(template, workload)
            or _spreads(template, workload)
            or _on_one_node(template)
        ):
            continue
        if replicas <= _ranks_per_server(template):
            continue  # every pod is a rank of the one server: no replica to keep up
        spec = as_mapping(workload.resource.obj).get("spec")
        path: JsonPath = (
            ("spec", "replicas")
            if "replicas" in as_mapping(spec) and len(workload.templates) == 1
            else template.path
        )
        count = f"{replicas} replicas" if scaled_by is None else f"up to {replicas} replicas ({scaled_by})"
        yield Violation(
            path, f"{count} of {template.describe()} have no pod anti-affinity or topology spread"
        )


def _on_one_node(template: PodTemplate) -> bool:
    """Whether the pod's required placement names one node: one hostname in the nodeSelector, or
    in the `In` of every required node-affinity term. Its replicas cannot spread (they share the
    node on purpose, RL engines beside their trainer); pinning to one node is GP209's finding."""
    found = required_values(template, HOSTNAME_LABEL)
    return found is not None and len(found[0]) == 1


def _most_replicas(workload: Workload, template: PodTemplate, ctx: Context) -> tuple[int, str | None]:
    """The most pods of `template` at once, and what says so when it is not the template: the
    maxReplicas of an HPA that scales the workload (it owns `replicas` then, which manifests
    often leave out), else the replicas the workload declares."""
    if len(workload.templates) == 1:
        hpa = hpa_for(workload, ctx.inventory)
        if hpa is not None:
            _, maximum = hpa_replicas(hpa)
            if maximum is not None:
                return maximum, f"maxReplicas of {hpa.ref}"
    return serving_replicas(template) or 0, None


@rule(
    id="GP209",
    roles=NOT_AGENT,
    name="preference-as-requirement",
    severity="warning",
    summary="Reports a node label the registry marks as a preference used in a nodeSelector or required node "
    "affinity of a workload that uses GPUs (its CPU frontends included: they go down with the node too).",
    rationale="A preference made a hard constraint (a hostname, an instance type) leaves the pod Pending when "
    "that node is drained or the type is out of capacity, although any GPU node of the right product would do.",
    remediation="Move the label to preferredDuringSchedulingIgnoredDuringExecution, or mark it a requirement in the registry.",
    references=(ASSIGN,),
    settings=(Setting("nodeLabels", "`use: preference` marks preferences."),),
)
def preference_as_requirement(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not ctx.uses_gpus(workload):
        return  # where a CPU workload runs is no GPU capacity to lose
    registry = ctx.policy.label_registry
    for template in workload.templates:
        for use in node_label_uses(template):
            info = registry.lookup(use.key)
            if use.where == "nodeSelector" and _unmatchable_kubelet_value(
                use.key, node_selector(template).get(use.key)
            ):
                continue  # no node at all matches: GP205's finding
            if use.required and info is not None and info.use == PREFERENCE:
                yield Violation(
                    use.path,
                    f"node label {use.key} is a preference (owner {info.owner}) but is used in the {use.place}",
                )


def _runtime_class_known(ctx: Context, name: str) -> Coverage | None:
    """None when known to exist; else the coverage under which it was not found."""
    if name in ctx.policy.placement.runtime_class_names:
        return None
    if ctx.inventory.get("RuntimeClass", name) is not None:
        return None
    return ctx.inventory.coverage("RuntimeClass")


RUNTIME_CLASS_REQUIRED = Parameter(
    "required", False, "GPU pods must name a RuntimeClass.", setting="placement.runtimeClass.required"
)


@rule(
    id="GP210",
    roles=NOT_AGENT,
    name="runtime-class-missing",
    severity="warning",
    summary="Reports a GPU pod without runtimeClassName when the policy requires one, or one naming a "
    "RuntimeClass that is neither in the inventory nor in the policy (info when that cannot be known).",
    rationale="On clusters whose default container runtime is not NVIDIA's, a GPU pod without the nvidia "
    "runtime class starts without its devices; an unknown class makes the pod fail admission.",
    remediation="Set runtimeClassName to a RuntimeClass the cluster has (for example nvidia).",
    references=(RUNTIME_CLASS, GPU_OPERATOR),
    parameters=(RUNTIME_CLASS_REQUIRED,),
    settings=(Setting("placement.runtimeClass.names", "The RuntimeClasses the cluster has."),),
)
def runtime_class_missing(workload: Workload, ctx: Context) -> Iterator[Violation]:
    required = ctx.policy.param(RUNTIME_CLASS_REQUIRED)
    for template in workload.templates:
        if not ctx.template_uses_gpus(template, workload):
            continue
        name = template.spec.get("runtimeClassName")
        if not isinstance(name, str) or not name:
            if required:
                yield Violation(
                    template.path, f"{template.describe()} requests GPUs but sets no runtimeClassName"
                )
            continue
        coverage = _runtime_class_known(ctx, name)
        if coverage is Coverage.COMPLETE:
            yield Violation(template.field("runtimeClassName"), f"RuntimeClass {name!r} does not exist")
        elif coverage is not None:
            yield Violation(
                template.field("runtimeClassName"),
                f"RuntimeClass {name!r} could not be verified: it is not in the {coverage.value} inventory "
                "nor in placement.runtimeClass.names",
                unknown=True,
                once=("GP210", name),
            )
