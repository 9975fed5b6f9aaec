"""GP101-GP113: how GPU resources are requested.

Kubernetes treats GPUs as extended resources: they are set in `limits`; a request, if given,
must equal the limit; they cannot be overcommitted or fractional.
https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/
https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from gpupolicy.core.linear_regex import LinearPattern
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Parameter, Setting, Violation, rule
from gpupolicy.engine.unknowns import NODE_POOLS, said_unknown, unknown_fact
from gpupolicy.kube.gpu import (
    VISIBLE_DEVICES,
    GpuDemand,
    GpuKind,
    claimed_whole_gpus,
    hides_every_gpu,
    names_gpu_resource,
)
from gpupolicy.kube.images import cpu_build, parse_image
from gpupolicy.kube.inventory import workload_namespace
from gpupolicy.kube.placeholders import quantity_placeholder
from gpupolicy.kube.pod_spec import (
    CONFIG_KINDS,
    KSERVE_CONTAINER_KEYS,
    Container,
    PodTemplate,
    Workload,
    as_list,
    as_mapping,
)
from gpupolicy.kube.quantities import format_quantity, is_positive_integer, quantity_or_none, quantity_problem
from gpupolicy.kube.roles import (
    NOT_AGENT,
    RESOURCED,
    SERVER_COMMAND_PARTS,
    SERVER_IMAGE_PARTS,
    SINGLE_PROCESS_SPLIT_PARTS,
    command_text,
    first_part,
    injected,
    runs_one_of,
)
from gpupolicy.policy.node_pools import largest_node, node_pools

SCHEDULING_GPUS = "https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/"
EXTENDED_RESOURCES = (
    "https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources"
)


def _demands(workload: Workload, ctx: Context) -> tuple[tuple[PodTemplate, GpuDemand], ...]:
    """Every GPU-vendor resource the workload's containers name, with its template. Five rules
    read them: gathered once per view (for this policy's catalogue), not walked by each."""
    key = ("gpu-demands", id(ctx.gpu))
    found: tuple[tuple[PodTemplate, GpuDemand], ...] | None = workload.cache.get(key)
    if found is None:
        gpu = ctx.gpu
        found = workload.cache[key] = tuple(
            (template, demand) for template in workload.templates for demand in gpu.template_demands(template)
        )
    return found


@rule(
    id="GP101",
    name="gpu-request-without-limit",
    severity="error",
    summary="Reports a GPU resource set in `resources.requests` but not in `resources.limits`.",
    rationale="GPUs are extended resources: Kubernetes allocates them from the limit, and the API server "
    "rejects a pod whose extended-resource request has no equal limit, so the rollout stalls at admission.",
    remediation="Set the GPU count in resources.limits (and, if you keep the request, to the same value).",
    references=(SCHEDULING_GPUS, EXTENDED_RESOURCES),
)
def gpu_request_without_limit(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for _, demand in _demands(workload, ctx):
        if demand.resource.counts_gpus and demand.request is not None and demand.limit is None:
            container = demand.container
            yield Violation(
                container.resource_path("requests", demand.resource.name),
                f"{container.label} requests {demand.resource.name}: {format_quantity(demand.request)} "
                "but sets no limit for it",
                container=container.name,
            )


@rule(
    id="GP102",
    name="gpu-request-limit-mismatch",
    severity="error",
    summary="Reports a GPU resource whose request differs from its limit.",
    rationale="Extended resources cannot be overcommitted: the API server rejects a request that differs "
    "from the limit, and a reviewer cannot tell which of the two numbers was meant.",
    remediation="Set resources.requests and resources.limits of the GPU resource to the same integer.",
    references=(SCHEDULING_GPUS, EXTENDED_RESOURCES),
)
def gpu_request_limit_mismatch(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for _, demand in _demands(workload, ctx):
        if demand.request is None or demand.limit is None or not demand.resource.counts_gpus:
            continue
        request, limit = quantity_or_none(demand.request), quantity_or_none(demand.limit)
        if request is not None and limit is not None and request != limit:
            container = demand.container
            yield Violation(
                container.resource_path("requests", demand.resource.name),
                f"{container.label}: {demand.resource.name} request {format_quantity(demand.request)} "
                f"!= limit {format_quantity(demand.limit)}",
                container=container.name,
            )


@rule(
    id="GP103",
    name="gpu-quantity-invalid",
    severity="error",
    summary="Reports a GPU count that is not a positive whole number (`0.5`, `500m`, `-1`, `one`).",
    rationale="The device plugin hands out whole devices; the API server rejects fractional extended "
    "resources. Sharing a GPU is done with MIG, time-slicing or MPS resources, not fractions.",
    remediation="Request a whole number of GPUs, or a MIG/shared GPU resource for a fraction of one.",
    references=(
        SCHEDULING_GPUS,
        "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html",
    ),
)
def gpu_quantity_invalid(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for _, demand in _demands(workload, ctx):
        if not demand.resource.counts_gpus:
            continue
        container = demand.container
        for section, raw in (("requests", demand.request), ("limits", demand.limit)):
            if raw is None or (isinstance(raw, str) and quantity_placeholder(raw)):
                continue  # a deploy-time placeholder is GP004's finding
            amount = quantity_or_none(raw)
            if amount is None or (amount != 0 and not is_positive_integer(amount)):
                why = quantity_problem(raw) if amount is None else None
                yield Violation(
                    container.resource_path(section, demand.resource.name),
                    f"{container.label}: {demand.resource.name} {section} "
                    + (why or f"{format_quantity(raw)} is not a positive whole number of GPUs"),
                    container=container.name,
                )


@rule(
    id="GP104",
    name="gpu-quantity-zero",
    severity="warning",
    summary="Reports `nvidia.com/gpu: 0` (or any GPU resource set to zero).",
    rationale="A zero count asks for no device, but NVIDIA's CUDA images set NVIDIA_VISIBLE_DEVICES=all, so on "
    "a node whose default runtime is nvidia the container may see every GPU of the node, unaccounted for.",
    remediation="Set NVIDIA_VISIBLE_DEVICES=void in a container that needs no GPU (removing the zero alone "
    "hides nothing), or request the GPUs it needs.",
    references=(
        "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html",
        SCHEDULING_GPUS,
    ),
)
def gpu_quantity_zero(workload: Workload, ctx: Context) -> Iterator[Violation]:
    demands = _demands(workload, ctx)
    for _, demand in demands:
        if demand.resource.counts_gpus and demand.amount == 0:
            container = demand.container
            if _hides_gpus(container):
                continue  # NVIDIA_VISIBLE_DEVICES=void: the toolkit mounts no GPU, whatever the image says
            if any(
                other.container is container and other.resource.counts_gpus and other.amount
                for _, other in demands
            ):
                # nv-ingest's MIG values zero the chart's nvidia.com/gpu beside nvidia.com/mig-1g.10gb
                # (Helm merges maps: a default can only be zeroed): the device plugin gives the MIG
                # device, whose list replaces the image's `all`.
                continue
            yield Violation(
                container.resource_path(demand.section, demand.resource.name),
                f"{container.label} sets {demand.resource.name} to 0: it is given no GPU, and the zero hides "
                "none (a CUDA image's NVIDIA_VISIBLE_DEVICES=all still shows every GPU of an nvidia-runtime node)",
                container=container.name,
            )


def _hides_gpus(container: Container) -> bool:
    for _, item in container.env_items():
        if item.get("name") == VISIBLE_DEVICES:
            return hides_every_gpu(item.get("value"))
    return False


@rule(
    id="GP105",
    roles=NOT_AGENT,
    name="gpu-image-without-gpu-request",
    severity="warning",
    summary="Reports a container whose image the policy knows to need a GPU (vLLM, Triton, NIM, TGI, CUDA) "
    "while its pod requests no GPU. A serving image whose command runs another of its programs (SGLang's "
    "router, vLLM's benchmark client) is judged by that command, not by the image.",
    rationale="Without a GPU request the pod lands on any node: it crash-loops on a CPU node, or on a GPU "
    "node it uses a GPU the scheduler believes free, colliding with the pod that was given it.",
    remediation="Request the GPUs the server needs in resources.limits (or a DRA claim), or use a CPU image.",
    references=(SCHEDULING_GPUS,),
    settings=(Setting("gpu.servingImages", "Regular expressions of images that need a GPU."),),
)
def gpu_image_without_gpu_request(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if workload.kind in CONFIG_KINDS:  # a partial spec: the service that names it asks for the GPUs
        return
    patterns = ctx.gpu.serving_images  # RE2 (the image comes from the object), checked when the policy loaded
    for template in workload.templates:
        if ctx.template_uses_gpus(template, workload) or names_gpu_resource(template):
            continue
        for container in template.main_containers():
            if _runs_another_program(container):
                continue
            if _gpu_image(container.image, patterns):
                yield Violation(
                    container.field("image"),
                    f"{container.label} runs {container.image}, a GPU image, but the pod requests no GPU",
                    container=container.name,
                )


def _gpu_image(image: str, patterns: tuple[LinearPattern, ...]) -> bool:
    """An image the policy names as needing a GPU, unless its tag or name says it is the program's
    CPU build (TGI's `…-intel-cpu`): the patterns name programs, and some ship for CPUs too."""
    if not image or not any(pattern.search(image) for pattern in patterns):
        return False
    ref = parse_image(image, placeholders=True)
    return ref is None or not cpu_build(ref)


def _runs_another_program(container: Container) -> bool:
    """A serving image (its entrypoint serves) whose `command` runs something other than a server:
    `python -m sglang_router.launch_router` in SGLang's image routes requests on a CPU."""
    if not container.spec.get("command") or first_part(SERVER_IMAGE_PARTS, container.image.lower()) is None:
        return False
    return first_part(SERVER_COMMAND_PARTS, command_text(container)) is None


# An init or ephemeral container that holds GPUs is GP112's, whose remedy (drop the GPU) leaves
# nothing for GP106 and GP107 to size.
UNSIZED_ROLES = ("init", "ephemeral")


def _gpu_containers(workload: Workload, ctx: Context) -> tuple[tuple[PodTemplate, Container], ...]:
    """Containers that request GPUs; where a pod's GPUs come from DRA claims (or a sharing
    scheduler's annotation) and no container counts any, its main containers. Four rules read
    them: found once per view (for this policy's catalogue)."""
    key = ("gpu-containers", id(ctx.gpu))
    found: tuple[tuple[PodTemplate, Container], ...] | None = workload.cache.get(key)
    if found is None:
        found = workload.cache[key] = tuple(_find_gpu_containers(workload, ctx))
    return found


def _find_gpu_containers(workload: Workload, ctx: Context) -> Iterator[tuple[PodTemplate, Container]]:
    for template in workload.templates:
        found = ctx.gpu.gpu_containers(template)
        if not found and ctx.template_uses_gpus(template, workload):
            found = ctx.gpu.fraction_containers(template) or _claiming_containers(template)
        for container in found:
            yield template, container


def _claim_names(entries: Any) -> set[str]:
    names = (as_mapping(entry).get("name") for entry in as_list(entries))
    return {name for name in names if isinstance(name, str)}


def _claiming_containers(template: PodTemplate) -> list[Container]:
    """The containers a pod's claimed GPUs go to: with DRA, those whose `resources.claims` name
    one of the pod's claims ("It makes that resource available inside a container",
    https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#resources); the
    one KServe's managed DRA routes its claim to (`…dra-container-name`, else the first); every
    main container when none says (a sharing scheduler's fraction, a claim no container names)."""
    containers = template.main_containers()
    claims = _claim_names(template.spec.get("resourceClaims"))
    named = [
        container
        for container in containers
        if not claims.isdisjoint(_claim_names(container.resources.get("claims")))
    ]
    if named:
        return named
    routed = next(
        (value for key, value in template.annotations.items() if key.endswith("dra-container-name")), None
    )
    if routed is not None or any(key.endswith("dra-device-class") for key in template.annotations):
        chosen = [container for container in containers if container.name == routed]
        return chosen or containers[:1]
    return containers


def _has(container: Container, resource: str, *, sections: tuple[str, ...]) -> bool:
    """Whether `resource` is set in one of the `sections` ("requests", "limits") of the
    container's resources, which its view holds as mappings ({} when absent or not a mapping)."""
    return ("requests" in sections and resource in container.requests) or (
        "limits" in sections and resource in container.limits
    )


@rule(
    id="GP106",
    roles=RESOURCED,
    name="gpu-container-without-cpu-memory-requests",
    severity="warning",
    summary="Reports a GPU container with no cpu or no memory request (a limit alone counts, as Kubernetes "
    "defaults the request to it).",
    rationale="The scheduler places pods by requests: a GPU pod without cpu/memory requests can land on a node "
    "whose CPUs or memory are already taken, and the GPU then idles waiting for tokenisation or data loading.",
    remediation="Set resources.requests.cpu and resources.requests.memory for the GPU container.",
    references=("https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/",),
)
def gpu_container_without_cpu_memory_requests(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if injected(workload.kind, "resources"):
        return  # the controller fills them in (KServe defaults them from its configuration)
    for _, container in _gpu_containers(workload, ctx):
        if container.role in UNSIZED_ROLES:
            continue
        missing = [
            name for name in ("cpu", "memory") if not _has(container, name, sections=("requests", "limits"))
        ]
        if missing:
            yield Violation(
                container.resource_path("requests") if container.requests else container.resources_field(),
                f"GPU {container.label} has no {' or '.join(missing)} request"
                + (
                    ""
                    if "memory" not in missing or _has(container, "memory", sections=("limits",))
                    else " nor memory limit"
                ),
                container=container.name,
            )


@rule(
    id="GP107",
    roles=RESOURCED,
    name="gpu-container-without-memory-limit",
    severity="warning",
    summary="Reports a GPU container with no memory limit.",
    rationale="Model servers grow host memory (KV-cache offload, pinned buffers, data loaders); without a limit "
    "one pod can push the node into memory pressure and get its GPU neighbours evicted.",
    remediation="Set resources.limits.memory for the GPU container.",
    references=("https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/",),
)
def gpu_container_without_memory_limit(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for _, container in _gpu_containers(workload, ctx):
        if container.role in UNSIZED_ROLES:
            continue
        # No memory request either: GP106 reports the container's missing memory settings once.
        if not _has(container, "memory", sections=("limits",)) and _has(
            container, "memory", sections=("requests",)
        ):
            yield Violation(
                container.resource_path("limits") if container.limits else container.resources_field(),
                f"GPU {container.label} has no memory limit",
                container=container.name,
            )


@rule(
    id="GP108",
    name="gpu-count-exceeds-node",
    severity="error",
    summary="Reports a pod that needs more GPUs of one resource than the largest node of the policy's node "
    "pools offers.",
    rationale="A pod cannot span nodes: it stays Pending forever, and the cluster autoscaler cannot help.",
    remediation="Request at most the GPUs one node has, or split the model across pods (tensor/pipeline parallel "
    "over LeaderWorkerSet or Ray).",
    references=(SCHEDULING_GPUS, "https://lws.sigs.k8s.io/docs/overview/"),
    settings=(Setting("nodePools", "The node pools, with resource and gpusPerNode."),),
)
def gpu_count_exceeds_node(workload: Workload, ctx: Context) -> Iterator[Violation]:
    known = bool(node_pools(ctx.policy))
    if not known and said_unknown(ctx, NODE_POOLS):
        return  # without node pools that unknown is all it can say: no pool has a largest node
    for template in workload.templates:
        for name, total in ctx.gpu.pod_totals(template).items():
            if not known and total > 1:
                yield from unknown_fact(
                    ctx, NODE_POOLS, template.path, "whether multi-GPU pods fit a node (GP108)"
                )
                continue
            node = largest_node(ctx.policy, name)
            if node is None or total <= node[0]:
                continue
            container = max(
                (d.container for d in ctx.gpu.counted_demands(template) if d.resource.name == name),
                key=lambda item: ctx.gpu.container_gpu_count(item),
            )
            yield Violation(
                container.resource_path("limits", name),
                f"{template.describe()} needs {total} {name} but the largest node pool ({node[1]}) has {node[0]} per node",
                container=container.name,
            )


@rule(
    id="GP109",
    name="gpu-resource-unknown",
    severity="warning",
    summary="Reports a resource under a GPU vendor's domain that the policy does not know and that is meant as "
    "one of the vendor's GPU resources: its name says gpu (`nvidia.com/gpus`, `amd.com/GPU`) or is a letter or "
    "two from a known name (`gpu.intel.com/tile`).",
    rationale="An unknown extended resource is advertised by no node: the pod stays Pending with "
    "`Insufficient nvidia.com/gpus`, and the typo is easy to miss in review. Other names under a vendor's "
    "domain are not judged: NVIDIA's Network Operator publishes NICs as `nvidia.com/<a name the cluster "
    "chooses>` (its `resourcePrefix`: `nvidia.com/hostdev`, `nvidia.com/mlnxnics`), which no policy can list.",
    remediation="Use a resource name the device plugin advertises (for example nvidia.com/gpu), or add the "
    "name to the vendor's resources in the policy (gpu.vendors).",
    references=(
        SCHEDULING_GPUS,
        "https://github.com/Mellanox/network-operator/blob/master/deployment/network-operator/values.yaml",
    ),
    settings=(Setting("gpu.vendors", "Known resource names per vendor domain."),),
)
def gpu_resource_unknown(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for _, demand in _demands(workload, ctx):
        if demand.resource.kind is not GpuKind.UNKNOWN:
            continue
        meant, suggestion = _meant_as_gpu(ctx, demand.resource.name)
        if meant:
            container = demand.container
            hint = f" (did you mean {suggestion}?)" if suggestion else ""
            yield Violation(
                container.resource_path(demand.section, demand.resource.name),
                f"{container.label} names {demand.resource.name}, which no device plugin of the policy advertises{hint}",
                container=container.name,
            )


def _meant_as_gpu(ctx: Context, name: str) -> tuple[bool, str | None]:
    """Whether an unknown name under a vendor's domain is meant as one of its GPU resources, and the
    known name of that domain it is closest to. Names are compared without their domain (with it,
    `gpu.intel.com/dxg` is 0.8 alike to `gpu.intel.com/xe`) and without case."""
    import difflib

    domain, _, wanted = name.partition("/")
    known = {
        other.partition("/")[2].lower(): other
        for other in ctx.gpu.known_resource_names
        if other.partition("/")[0] == domain
    }
    matches = difflib.get_close_matches(wanted.lower(), list(known), n=1, cutoff=0.8)
    suggestion = known[matches[0]] if matches else None
    return suggestion is not None or "gpu" in wanted.lower(), suggestion


@rule(
    id="GP110",
    name="gpu-vendor-mix",
    severity="error",
    summary="Reports a pod that mixes GPU vendors, or whole GPUs with MIG slices.",
    rationale="No node offers two vendors' GPUs to one pod, and under the MIG mixed strategy a MIG-enabled GPU "
    "is not advertised as nvidia.com/gpu: the pod can never schedule.",
    remediation="Request GPUs of one vendor and one kind (whole GPUs or MIG slices) per pod.",
    references=("https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html",),
)
def gpu_vendor_mix(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template in workload.templates:
        demands = [d for d in ctx.gpu.counted_demands(template) if (d.amount or 0) > 0]
        vendors = sorted({d.resource.vendor for d in demands})
        kinds = {d.resource.kind for d in demands}
        if len(vendors) > 1:
            yield Violation(
                demands[-1].container.resource_path(demands[-1].section, demands[-1].resource.name),
                f"{template.describe()} requests GPUs of several vendors: {', '.join(vendors)}",
            )
        elif GpuKind.MIG in kinds and GpuKind.DEVICE in kinds:
            mig = next(d for d in demands if d.resource.kind is GpuKind.MIG)
            whole = next(d for d in demands if d.resource.kind is GpuKind.DEVICE)
            yield Violation(
                mig.container.resource_path(mig.section, mig.resource.name),
                f"{template.describe()} mixes whole GPUs ({whole.resource.name}) with MIG slices ({mig.resource.name})",
            )


@rule(
    id="GP111",
    name="gpu-multi-container",
    severity="warning",
    summary="Reports a pod in which more than one container requests whole GPUs. Containers that each ask a "
    "sharing scheduler for a slice (HAMi's or Volcano's GPU memory or cores beside the count, MetaX's vcore) "
    "share cards, and are not judged.",
    rationale="Each container gets its own devices and cannot see the other's; sidecars that ask for a GPU "
    "usually meant to share the server's and instead hold a whole second GPU idle.",
    remediation="Give GPUs to one container of the pod, or split the containers into pods of their own.",
    references=(SCHEDULING_GPUS,),
)
def gpu_multi_container(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template in workload.templates:
        holders = [c for c in ctx.gpu.gpu_containers(template) if c.role in ("container", "sidecar")]
        if len(holders) > 1:
            holders = [c for c in holders if not _asks_for_a_slice(c, ctx)]
        if len(holders) > 1:
            names = ", ".join(repr(c.name) for c in holders)
            for container in holders[1:]:
                yield Violation(
                    container.resource_path("limits"),
                    f"{len(holders)} containers of {template.describe()} request GPUs ({names})",
                    container=container.name,
                )


def _asks_for_a_slice(container: Container, ctx: Context) -> bool:
    """A GPU count with the vendor's memory or cores beside it: a sharing scheduler's slice of a card
    (HAMi: `nvidia.com/gpu: 1` with `nvidia.com/gpumem`; each card is split up to its
    deviceSplitCount), not a whole GPU of its own."""
    demands = ctx.gpu.container_demands(container)
    vendors = {d.resource.vendor for d in demands if d.resource.counts_gpus}
    return any(d.resource.kind is GpuKind.ATTRIBUTE and d.resource.vendor in vendors for d in demands)


@rule(
    id="GP112",
    name="gpu-in-init-container",
    severity="warning",
    summary="Reports an init container that requests more GPUs than the pod's other containers use together (a "
    "native sidecar, an init container with `restartPolicy: Always`, runs for the pod's life and is judged as a "
    "main container), and an ephemeral container that requests any.",
    rationale="A pod's effective GPU request is the larger of its largest init container's and the sum of its "
    "containers': an init container asking for more holds GPUs that sit idle once it ends. One asking no more "
    "than the containers (TensorRT-LLM's engine build on the GPUs that serve it) costs nothing: the device "
    "manager gives its devices to the containers. Ephemeral containers cannot be given resources at all.",
    remediation="Ask the init container for no more GPUs than the main containers use, or move the GPU work into them.",
    references=(
        "https://kubernetes.io/docs/concepts/workloads/pods/init-containers/#resource-sharing-within-containers",
    ),
)
def gpu_in_init_container(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for template, container in _gpu_containers(workload, ctx):
        if container.role not in ("init", "ephemeral"):
            continue
        asked = ctx.gpu.container_gpu_count(container)
        used = sum(
            (
                ctx.gpu.container_gpu_count(other)
                for other in template.containers
                if other.role in ("container", "sidecar")
            ),
            Decimal(0),
        )
        if container.role == "init" and asked <= used:
            continue
        what = (
            f"requests {asked} GPU(s), more than the {used} the pod's containers use: {asked - used} sit idle "
            "once it ends"
            if container.role == "init"
            else "requests GPUs, which an ephemeral container cannot be given"
        )
        yield Violation(
            container.resource_path("limits") if container.limits else container.resource_path("requests"),
            f"{container.label} {what}",
            container=container.name,
        )


def _runtime_supplied(workload: Workload, container: Container) -> bool:
    """A KServe InferenceService's `model` (or framework) container: the ServingRuntime it names
    gives the pod its volumes, ports and probes (https://kserve.github.io/website/latest/modelserving/servingruntimes/)."""
    return workload.kind == "InferenceService" and container.path[-1] in KSERVE_CONTAINER_KEYS


def _claimed_gpus(template: PodTemplate, container: Container, workload: Workload, ctx: Context) -> int:
    """The whole GPUs of the DRA claims the container names (`resources.claims`), read from the
    ResourceClaimTemplates and ResourceClaims the repository or the cluster's inventory holds (a
    claim not at hand counts none)."""
    names = {as_mapping(claim).get("name") for claim in as_list(container.resources.get("claims"))}
    if not names:
        return 0
    namespace = workload_namespace(workload)
    total = 0
    for entry in as_list(template.spec.get("resourceClaims")):
        entry = as_mapping(entry)
        if entry.get("name") not in names:
            continue
        for key, kind in (
            ("resourceClaimTemplateName", "ResourceClaimTemplate"),
            ("resourceClaimName", "ResourceClaim"),
        ):
            name = entry.get(key)
            found = ctx.inventory.get(kind, name, namespace) if isinstance(name, str) else None
            if found is not None:
                total += claimed_whole_gpus(found.obj, ctx.gpu.dra_device_classes)
    return total


def _has_memory_shm(template: PodTemplate, container: Container) -> bool:
    """A RAM-backed /dev/shm larger than the runtime's 64 MiB: a memory emptyDir mounted there, the
    node's own /dev/shm mounted there (a hostPath: GP606's finding), or the node's IPC namespace,
    whose /dev/shm the runtime mounts (hostIPC: GP605's finding; containerd's CRI plugin uses the
    host's /dev/shm for a sandbox in the node's IPC namespace)."""
    if template.spec.get("hostIPC") is True:
        return True
    memory_volumes = {
        volume.get("name")
        for _, volume in template.volumes()
        if as_mapping(volume.get("emptyDir")).get("medium") == "Memory"
        or as_mapping(volume.get("hostPath")).get("path") in _SHM_PATHS
    }
    return any(
        isinstance(mount, dict)
        and mount.get("mountPath") in _SHM_PATHS
        and mount.get("name") in memory_volumes
        for mount in as_list(container.spec.get("volumeMounts"))
    )


_SHM_PATHS = ("/dev/shm", "/dev/shm/")

SHM_MINIMUM_GPUS = Parameter(
    "minimumGpus",
    2,
    "The whole GPUs in one container from which /dev/shm is required.",
    setting="gpu.shmMinimumGpus",
)


@rule(
    id="GP113",
    roles=RESOURCED,
    name="tensor-parallel-without-shm",
    severity="warning",
    summary="Reports a container with more than one GPU (requested, or whole GPUs of the DRA claims it names, read "
    "from the ResourceClaimTemplate or ResourceClaim at hand) that has no memory-backed emptyDir mounted at /dev/shm. "
    "The node's own /dev/shm (a hostPath mounted there, or the node's IPC namespace, hostIPC) is RAM-backed too: "
    "GP606 and GP605 report those, once.",
    rationale="NCCL and PyTorch use /dev/shm for intra-node communication; the container runtime's default is "
    "64 MiB, and tensor-parallel servers (vLLM, TGI, TensorRT-LLM) fail or hang with bus errors.",
    remediation="Mount an emptyDir with medium: Memory (and a sizeLimit) at /dev/shm.",
    references=(
        "https://docs.vllm.ai/en/latest/serving/deploying_with_k8s.html",
        "https://kubernetes.io/docs/concepts/storage/volumes/#emptydir",
    ),
    parameters=(SHM_MINIMUM_GPUS,),
)
def tensor_parallel_without_shm(workload: Workload, ctx: Context) -> Iterator[Violation]:
    minimum = ctx.policy.param(SHM_MINIMUM_GPUS)
    if injected(workload.kind, "shm"):
        return
    for template, container in _gpu_containers(workload, ctx):
        if container.resources_key != "resources" or _runtime_supplied(workload, container):
            # A TrainJob's trainer or a KServe model: its volumes live in the training or serving
            # runtime, linted there.
            continue
        # Whole GPUs only: MIG slices or shared replicas in one container are not NCCL peers.
        count = sum(
            (d.amount or 0)
            for d in ctx.gpu.container_demands(container)
            if d.resource.kind is GpuKind.DEVICE and (d.amount or 0) > 0
        ) + _claimed_gpus(template, container, workload, ctx)
        if (
            container.role == "container"
            and count >= minimum
            and not _has_memory_shm(template, container)
            # llama.cpp splits layers over one process's GPUs: no NCCL, no /dev/shm
            and not runs_one_of(container, SINGLE_PROCESS_SPLIT_PARTS)
        ):
            yield Violation(
                container.field("volumeMounts")
                if "volumeMounts" in container.spec
                else container.resource_path("limits"),
                f"{container.label} has {count} GPUs but no memory-backed emptyDir at /dev/shm",
                container=container.name,
            )
