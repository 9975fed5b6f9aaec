"""GP151-GP157: shared GPUs (time-slicing, MPS, MIG) and Dynamic Resource Allocation.

NVIDIA GPU sharing: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html
MIG: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html
DRA: https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/
"""

from __future__ import annotations

from collections.abc import Iterator, Set

from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Setting, Violation, rule
from gpupolicy.kube.gpu import GpuDemand, GpuKind, dra_gpu_claims, repository_claim_classes
from gpupolicy.kube.gpu_nodes import PROVIDER_PRODUCT_KEYS
from gpupolicy.kube.pod_spec import PodTemplate, Workload, as_list, as_mapping
from gpupolicy.kube.quantities import format_quantity
from gpupolicy.kube.roles import declared_class
from gpupolicy.kube.scheduling import required_values, targeted_keys
from gpupolicy.policy.loading import Policy
from gpupolicy.policy.node_pools import NodePool, node_pools

GPU_SHARING = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html"
MIG = "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html"
DRA = "https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/"
PRODUCT_LABEL = "nvidia.com/gpu.product"
SHARING_LABELS = frozenset(
    {
        PRODUCT_LABEL,
        "nvidia.com/gpu.sharing-strategy",
        "nvidia.com/gpu.replicas",
        "nvidia.com/mig.config",
        "nvidia.com/mig.strategy",
        "nvidia.com/gpu.count",
        "cloud.google.com/gke-gpu-sharing-strategy",
        # The MIG manager's outcome on the node (success once the layout is applied).
        "nvidia.com/mig.config.state",
        # The product by the cloud's labels (EKS's and Karpenter's as GKE's), or by the instance
        # type, which fixes the GPU model (p4d.24xlarge: A100 40GB).
        *PROVIDER_PRODUCT_KEYS,
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
    }
)


def _targets_shared_pool(template: PodTemplate, ctx: Context) -> NodePool | None:
    """The shared pool the template's product selector points at (with or without -SHARED)."""
    pools = node_pools(ctx.policy)
    if not pools:
        return None  # no catalogue (the default policy): the selector is not read, three rules ask
    wanted = required_values(template, PRODUCT_LABEL)
    if wanted is None:
        return None
    products = {value.removesuffix("-SHARED") for value in wanted[0]}
    for pool in pools:
        if pool.shared and pool.gpu_product in products:
            return pool
    return None


def _shared_demands(template: PodTemplate, ctx: Context) -> Iterator[GpuDemand]:
    """Demands for shared GPUs: a renamed shared resource, or nvidia.com/gpu on a shared pool."""
    pool = _targets_shared_pool(template, ctx)
    for demand in ctx.gpu.counted_demands(template):
        if demand.resource.kind is GpuKind.SHARED or (
            pool is not None
            and demand.resource.kind is GpuKind.DEVICE
            and pool.resource == demand.resource.name
        ):
            yield demand


@rule(
    id="GP151",
    name="shared-gpu-count-above-one",
    severity="error",
    summary="Reports a container asking for more than one unit of a time-sliced or MPS-shared GPU.",
    rationale="Shared replicas of one GPU give no more compute or memory together than one, and the device "
    "plugin may hand out replicas of the same GPU; with failRequestsGreaterThanOne the pod is rejected outright.",
    remediation="Request exactly 1 shared GPU, or request whole GPUs from a non-shared pool.",
    references=(GPU_SHARING,),
    settings=(Setting("nodePools", "Pools with sharing time-slicing or mps."),),
)
def shared_gpu_count_above_one(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template in workload.templates:
        for demand in _shared_demands(template, ctx):
            if (demand.amount or 0) > 1:
                container = demand.container
                yield Violation(
                    container.resource_path(demand.section, demand.resource.name),
                    f"{container.label} asks for {format_quantity(demand.limit or demand.request)} units of shared "
                    f"GPU {demand.resource.name}; more than 1 gives no more GPU",
                    container=container.name,
                )


@rule(
    id="GP152",
    name="sharing-without-node-targeting",
    severity="warning",
    summary="Reports a pod that requests a shared or MIG GPU resource without targeting nodes by sharing "
    "strategy, MIG configuration or GPU product.",
    rationale="Shared and MIG resources exist only on nodes configured for them; without a selector the pod's "
    "placement depends on which pools happen to advertise the name, and a reconfiguration strands it Pending.",
    remediation="Add a nodeSelector or required node affinity on nvidia.com/gpu.product, "
    "nvidia.com/gpu.sharing-strategy or nvidia.com/mig.config.",
    references=(GPU_SHARING, MIG),
)
def sharing_without_node_targeting(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template in workload.templates:
        demands = [
            d for d in ctx.gpu.counted_demands(template) if d.resource.kind in (GpuKind.SHARED, GpuKind.MIG)
        ]
        if demands:
            allocated = _dra_extended_resources(ctx)
            demands = [d for d in demands if d.resource.name not in allocated]
        if not demands or _targets_sharing(targeted_keys(template), ctx):
            continue
        demand = demands[0]
        yield Violation(
            demand.container.resource_path(demand.section, demand.resource.name),
            f"{template.describe()} requests {demand.resource.name} but selects no node by sharing strategy, "
            "MIG config or GPU product",
            container=demand.container.name,
        )


def _dra_extended_resources(ctx: Context) -> frozenset[str]:
    """The extended resources a DeviceClass of the inventory maps to DRA devices
    (`spec.extendedResourceName`, KEP-5004, DRAExtendedResource): the scheduler allocates a
    matching device from the ResourceSlices and places the pod by it, as it places a claim."""
    found: frozenset[str] = ctx.memo(
        "dra-extended-resources",
        lambda: frozenset(
            str(name)
            for device_class in ctx.inventory.list("DeviceClass")
            if isinstance(
                name := as_mapping(as_mapping(device_class.obj).get("spec")).get("extendedResourceName"), str
            )
        ),
    )
    return found


def _targets_sharing(keys: Set[str], ctx: Context) -> bool:
    """Whether the template selects nodes by a sharing label or by a label of a node pool."""
    return bool(keys & SHARING_LABELS) or any(
        key in pool.node_labels for pool in ctx.policy.node_pools for key in keys
    )


def _declares_pools(policy: Policy) -> bool:
    return bool(node_pools(policy))


@rule(
    id="GP153",
    can_find=_declares_pools,  # no pool to name a product of
    name="shared-product-label-mismatch",
    severity="warning",
    summary="Reports a selector on nvidia.com/gpu.product naming a time-sliced or MPS pool's product without "
    "the `-SHARED` suffix those nodes carry, or a MIG single-strategy pool's product without its `-MIG-` suffix.",
    rationale="With renameByDefault false, GPU Feature Discovery appends -SHARED to the product label of shared "
    "nodes (and the MIG profile under the single strategy): a selector on the plain product matches no such node.",
    remediation="Select the product value the nodes carry (for example NVIDIA-L4-SHARED).",
    references=(GPU_SHARING, MIG),
    settings=(Setting("nodePools", "gpuProduct, sharing, resource and migStrategy of each pool."),),
)
def shared_product_label_mismatch(workload: Workload, ctx: Context) -> Iterator[Violation]:
    pools = node_pools(ctx.policy)
    if not pools:
        return
    for template in workload.templates:
        wanted = required_values(template, PRODUCT_LABEL)
        if wanted is None or not ctx.template_uses_gpus(template, workload):
            continue
        values, path = wanted
        for pool in pools:
            product = pool.gpu_product
            if product not in values:
                continue
            if pool.shared and not pool.renamed:
                yield Violation(
                    path,
                    f"{PRODUCT_LABEL} {product} is a {pool.sharing} pool ({pool.name}); "
                    f"its nodes are labelled {product}-SHARED",
                )
            elif pool.mig_strategy == "single":
                yield Violation(
                    path,
                    f"{PRODUCT_LABEL} {product} is a MIG single-strategy pool ({pool.name}); "
                    f"its nodes are labelled {product}-MIG-<profile>",
                )


@rule(
    id="GP154",
    name="latency-critical-on-time-slicing",
    severity="warning",
    summary="Reports an `online` workload (label gpupolicy.io/workload-class) placed on time-sliced GPUs.",
    rationale="Time-slicing has no memory or fault isolation and interleaves whole kernels: a neighbour's batch job "
    "sets the P95 of an online service, and one out-of-memory takes every tenant of the GPU down.",
    remediation="Run online services on whole GPUs, MIG slices or MPS with limits, and keep time-slicing for batch and dev.",
    references=(GPU_SHARING,),
)
def latency_critical_on_time_slicing(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if declared_class(workload) != "online":
        return
    for template in workload.templates:
        pool = _targets_shared_pool(template, ctx)
        for demand in _shared_demands(template, ctx):
            if pool is None or pool.sharing == "time-slicing":
                yield Violation(
                    demand.container.resource_path(demand.section, demand.resource.name),
                    f"online workload uses time-sliced GPU {demand.resource.name}",
                    container=demand.container.name,
                )
                return


def _declared_claims(template: PodTemplate) -> set[str]:
    return {str(as_mapping(claim).get("name")) for claim in as_list(template.spec.get("resourceClaims"))}


@rule(
    id="GP155",
    name="dra-claim-undeclared",
    severity="error",
    summary="Reports a container `resources.claims[].name` that is not in the pod's `spec.resourceClaims`.",
    rationale="The API server rejects the pod: a container can only use claims the pod declares.",
    remediation="Declare the claim in spec.resourceClaims (with a resourceClaimTemplateName), or fix the name.",
    references=(DRA,),
)
def dra_claim_undeclared(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template in workload.templates:
        declared = _declared_claims(template)
        for container in template.containers:
            for index, claim in enumerate(as_list(container.resources.get("claims"))):
                name = as_mapping(claim).get("name")
                if name is not None and str(name) not in declared:
                    known = ", ".join(sorted(declared)) or "none"
                    yield Violation(
                        (*container.path, container.resources_key, "claims", index),
                        f"{container.label} uses claim {name!r}, but the pod declares {known}",
                        container=container.name,
                    )


@rule(
    id="GP156",
    name="dra-shared-claim-in-template",
    severity="warning",
    summary="Reports `resourceClaimName` in the pod template of a replicated workload, unless the repository's "
    "ResourceClaim of that name asks for no GPU device class (`gpu.draDeviceClasses`): an IMEX channel or a NIC "
    "is shared by the pods of one workload by design.",
    rationale="A ResourceClaim named directly is one claim: every replica shares the same allocated devices, "
    "and replicas beyond what the claim allows stay Pending. Each replica needs its own claim from a template.",
    remediation="Use resourceClaimTemplateName so that each pod gets its own claim.",
    references=(DRA, "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/dra-cds.html"),
    settings=(Setting("gpu.draDeviceClasses", "The device classes that are GPUs."),),
)
def dra_shared_claim_in_template(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if workload.is_pod:
        return
    for template in workload.templates:
        if workload.kind == "Job" and template.replicas == 1:
            continue  # parallelism 1: one pod at a time, each retry reusing the claim as intended
        for index, claim in enumerate(as_list(template.spec.get("resourceClaims"))):
            claim = as_mapping(claim)
            name = claim.get("resourceClaimName")
            if name and not _claims_no_gpu(claim, workload, ctx):
                yield Violation(
                    template.field("resourceClaims", index, "resourceClaimName"),
                    f"{workload.kind} pods all share ResourceClaim {claim['resourceClaimName']!r}",
                )


def _claims_no_gpu(entry: dict[str, object], workload: Workload, ctx: Context) -> bool:
    """Whether the repository's ResourceClaim that `entry` names asks only for devices that are not
    GPUs: the IMEX channel every pod of a multi-node NVLink workload shares (NVIDIA's ComputeDomain
    and `imex.nvidia.com` channels), a network device. A claim the repository does not hold is
    judged as a GPU claim."""
    classes = repository_claim_classes(entry, workload.namespace, ctx.inventory)
    return classes is not None and bool(classes) and classes.isdisjoint(ctx.gpu.dra_device_classes)


@rule(
    id="GP157",
    name="dra-and-device-plugin-mix",
    severity="error",
    summary="Reports a pod that uses both DRA GPU claims and device-plugin GPU resources (nvidia.com/gpu limits). "
    "A claim is a GPU claim by the device classes of the ResourceClaim or template the repository holds (an IMEX "
    "channel a ComputeDomain makes is none), else by a word of its names (`gpu`, `mig`, `accelerator`).",
    rationale="The DRA driver and the device plugin each believe they own the node's GPUs; the same device can be "
    "handed out twice, and NVIDIA's DRA driver documentation says not to run both on a node.",
    remediation="Request GPUs through one mechanism: DRA claims or device-plugin limits, not both.",
    references=(DRA, "https://github.com/NVIDIA/k8s-dra-driver-gpu"),
)
def dra_and_device_plugin_mix(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template in workload.templates:
        # A claim the repository shows asks for no GPU (an IMEX channel a ComputeDomain makes, a
        # NIC) sits beside device-plugin GPUs by design: NVIDIA's multi-node NVLink examples do it.
        claims = [item for item in dra_gpu_claims(template) if not _claims_no_gpu(item[1], workload, ctx)]
        devices = [d for d in ctx.gpu.counted_demands(template) if (d.amount or 0) > 0]
        if claims and devices:
            demand = devices[0]
            claim_name = as_mapping(claims[0][1]).get("name")
            yield Violation(
                demand.container.resource_path(demand.section, demand.resource.name),
                f"{template.describe()} uses DRA claim {claim_name!r} and {demand.resource.name} limits together",
                container=demand.container.name,
            )
