"""GP601-GP611: Pod Security and the GPU-specific ways out of a container (GP612-GP616, access
beyond the container, are in access.py).

The Pod Security Standards controls are checked field for field as pod-security-admission does
(`gpupolicy.kube.pod_security`, whose table cites each `check_*.go` and the version it changed in);
the policy's `security.level` picks baseline (the default) or restricted, its `kubernetesVersion`
the admission's version. One defect is one finding: where two admission checks see the same
field or the same cause, one rule reports it and the other says which. GPU pods never need privileges: the device plugin hands
a container exactly its GPUs, and every way around it (privileged, device hostPaths,
NVIDIA_VISIBLE_DEVICES) gives it GPUs nobody accounts for.
https://kubernetes.io/docs/concepts/security/pod-security-standards/
https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/security.html
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from gpupolicy.core.findings import Severity
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Parameter, Setting, Violation, rule
from gpupolicy.kube import pod_security as pss
from gpupolicy.kube import pod_security_levels as levels
from gpupolicy.kube.gpu import VISIBLE_DEVICES, hides_every_gpu, repository_claim_classes
from gpupolicy.kube.pod_spec import EXTRACTORS, Container, PodTemplate, Workload, as_list, as_mapping
from gpupolicy.kube.roles import NOT_AGENT
from gpupolicy.kube.scheduling import node_selector, required_terms
from gpupolicy.kube.selectors import node_affinity_matches
from gpupolicy.policy.node_pools import node_pools

PSS = levels.PSS_URL
PSA = levels.PSA_CHECKS_URL
SECURITY_CONTEXT = "https://kubernetes.io/docs/tasks/configure-pod-container/security-context/"
LEVEL = Setting("security.level", "Pod Security Standards level: baseline (default) or restricted.")
VERSION = Setting(
    "kubernetesVersion",
    "The Kubernetes version whose Pod Security admission the checks follow (allowed values and "
    "exemptions change by version: gpupolicy/kube/pod_security_levels.py CHECKS).",
)


def level(ctx: Context) -> levels.Level:
    return ctx.policy.security.level


def standard(ctx: Context) -> levels.Standard:
    """The Pod Security checks in force for the policy's level and Kubernetes version."""
    return ctx.policy.security.standard


def _violation(problem: pss.Problem, severity: Severity | None = None) -> Violation:
    return Violation(problem.path, problem.message, severity=severity, container=problem.container_name)


def _problems(problems: Iterator[pss.Problem]) -> Iterator[Violation]:
    for problem in problems:
        yield _violation(problem)


@rule(
    id="GP601",
    roles=NOT_AGENT,
    name="privileged-container",
    severity="error",
    summary="Reports a container with `securityContext.privileged: true`.",
    rationale="A privileged container gets every device of the node, so it sees and can use every GPU on the "
    "node, including those the device plugin gave to other pods, outside any accounting; it also disables "
    "seccomp, AppArmor and the capability bounds. GPU workloads never need it: the device plugin mounts "
    "exactly the allocated GPUs.",
    remediation="Remove privileged: true and request the GPUs through resources.limits (nvidia.com/gpu) instead.",
    references=(
        PSS,
        f"{PSA}/check_privileged.go",
        "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html",
    ),
)
def privileged_container(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not standard(ctx).applies("privileged"):
        return
    for _template, container in workload.containers():
        if pss.is_privileged(container):
            gpus = ctx.gpu.container_gpu_count(container)
            asked = f" although it asks for {gpus} GPU(s)" if gpus else ""
            seen = (
                f"every device of the node, every GPU included,{asked}"
                if gpus
                else "every device of the node"
            )
            yield Violation(
                container.field("securityContext", "privileged"),
                f"{container.label} is privileged: it sees {seen}",
                container=container.name,
            )


@rule(
    id="GP602",
    roles=NOT_AGENT,
    name="privilege-escalation",
    severity="warning",
    summary="Reports a container that does not set `allowPrivilegeEscalation: false` (at the restricted level; "
    "Windows pods are exempt from Kubernetes 1.25). A privileged container or one adding CAP_SYS_ADMIN is left "
    "to GP601 and GP603: it always escalates, and the API refuses `false` beside it.",
    rationale="Without it a process can gain more privileges than its parent (setuid binaries, file "
    "capabilities); the restricted Pod Security level requires it on every Linux container.",
    remediation="Set securityContext.allowPrivilegeEscalation: false on every container.",
    references=(PSS, f"{PSA}/check_allowPrivilegeEscalation.go", levels.SECURITY_CONTEXT_API),
    settings=(LEVEL, VERSION),
)
def privilege_escalation(workload: Workload, ctx: Context) -> Iterator[Violation]:
    current = standard(ctx)
    for template in workload.templates:
        for problem in pss.privilege_escalation(template, current):
            # Privileged or CAP_SYS_ADMIN always escalates and the API refuses `false` beside
            # them: GP601 or GP603 reports the cause, once.
            if problem.container is not None and pss.implies_privilege_escalation(problem.container):
                continue
            yield _violation(problem)


@rule(
    id="GP603",
    roles=NOT_AGENT,
    name="capabilities-beyond-baseline",
    severity="error",
    summary="Reports Linux capabilities added beyond the Pod Security baseline list (at the restricted level, "
    "from Kubernetes 1.22, beyond NET_BIND_SERVICE; Windows pods are exempt there from 1.25). Names are compared "
    "exactly, as the admission does: `CAP_CHOWN` is not `CHOWN`. A privileged container is left to GP601: it "
    "holds every capability whatever it adds.",
    rationale="Capabilities such as SYS_ADMIN, NET_ADMIN or SYS_PTRACE let a container escape or reach into the "
    "node; GPU workloads need none of them (the NVIDIA runtime injects devices without them). The one a GPU "
    "workload does need is IPC_LOCK beside an RDMA device (GPUDirect RDMA pins the memory it transfers), asked "
    "for as a resource or through a DRA claim of an RDMA device class, mounted from the host's /dev/infiniband, or "
    "reached through a secondary network named for RDMA: that is a warning saying the pod needs a privileged "
    "namespace, not an error.",
    remediation="Remove the capability from securityContext.capabilities.add.",
    references=(PSS, f"{PSA}/check_capabilities_baseline.go", f"{PSA}/check_capabilities_restricted.go"),
    settings=(LEVEL, VERSION),
)
def capabilities_beyond_baseline(workload: Workload, ctx: Context) -> Iterator[Violation]:
    current = standard(ctx)
    for template in workload.templates:
        for container, name, path in pss.added_capabilities(template, current):
            if pss.is_privileged(container):
                continue  # GP601's: one problem, one finding
            device = (
                (
                    rdma_device(container)
                    or rdma_claim(template, container, workload, ctx)
                    or rdma_node_device(template, container)
                    or rdma_network(template)
                )
                if name == MEMORY_LOCK
                else None
            )
            if device is not None:
                # The capability is what RDMA needs, not a mistake in the manifest: the claim worth
                # making is where the pod can run, as a warning.
                yield Violation(
                    path,
                    f"{container.label} adds capability {name}, which RDMA ({device}) needs to pin memory and "
                    f"the {current.level.label} level does not allow: the pod is admitted only in a namespace "
                    "whose pod-security.kubernetes.io/enforce is privileged",
                    severity=Severity.WARNING,
                    container=container.name or None,
                )
                continue
            yield Violation(
                path,
                f"{container.label} adds capability {name}, not allowed at the {current.level.label} level",
                container=container.name or None,
            )


# RDMA registers (pins) the memory it transfers, which takes CAP_IPC_LOCK beyond the container's
# RLIMIT_MEMLOCK (man 2 mlock): NVIDIA's GPUDirect RDMA demo pods add IPC_LOCK beside their RDMA
# device (github.com/NVIDIA/cloud-native-docs gpu-operator/manifests/input/gpu-direct-rdma-demo-pod-1.yaml;
# https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-rdma.html).
MEMORY_LOCK = "IPC_LOCK"
# Resource names of RDMA devices: the shared RDMA device plugin's `rdma/…` (its default prefix),
# SR-IOV's host devices (`nvidia.com/hostdev`) and virtual functions (the SR-IOV network device
# plugin's `intel.com/sriov_…` and other `…sriov…` names: a kernel-bypass NIC, whose RDMA or DPDK
# user pins memory as well), AWS's Elastic Fabric Adapter (RDMA verbs through libfabric:
# https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html) and providers' own
# (`vke.volcengine.com/rdma`, `…/rdma_vf`).
_RDMA_DEVICES = frozenset({"nvidia.com/hostdev", "vpc.amazonaws.com/efa"})


def rdma_claim(template: PodTemplate, container: Container, workload: Workload, ctx: Context) -> str | None:
    """The DRA claim of an RDMA device the container uses, when the repository (or the cluster's
    inventory) holds its ResourceClaim or template: a device class named for RDMA, such as GKE's
    `mrdma.google.com` for its RDMA NICs."""
    named = (as_mapping(claim).get("name") for claim in as_list(container.resources.get("claims")))
    used = {name for name in named if isinstance(name, str)}
    for entry in as_list(template.spec.get("resourceClaims")):
        entry = as_mapping(entry)
        if entry.get("name") not in used:
            continue
        classes = repository_claim_classes(entry, workload.namespace, ctx.inventory) or set()
        rdma = sorted(name for name in classes if "rdma" in name.lower())
        if rdma:
            return f"DRA claim {entry.get('name')!r} of {rdma[0]}"
    return None


# The RDMA devices' node files (/dev/infiniband/uverbsN, rdma_cm), which a pod mounted from the
# host uses without a device plugin (SGLang's and llm-d's multi-node examples).
RDMA_NODE_DIRECTORY = "/dev/infiniband"
# Pod annotations that attach secondary networks: Multus's (NVIDIA's Network Operator), and GKE's
# multi-network (`networking.gke.io/interfaces`, RDMA NICs on networks named `…rdma-N`).
NETWORK_ANNOTATIONS = ("k8s.v1.cni.cncf.io/networks", "networking.gke.io/interfaces")


def rdma_node_device(template: PodTemplate, container: Container) -> str | None:
    """The host's RDMA device directory the container mounts (a hostPath volume of it)."""
    mounted = _mounted_by(container)
    for _, volume in template.volumes():
        path = as_mapping(volume.get("hostPath")).get("path")
        name = volume.get("name")
        if (
            isinstance(path, str)
            and isinstance(name, str)
            and name in mounted
            and path.rstrip("/").startswith(RDMA_NODE_DIRECTORY)
        ):
            return f"hostPath {path}"
    return None


def rdma_network(template: PodTemplate) -> str | None:
    """A secondary network the pod attaches whose name says RDMA (or RoCE)."""
    for key in NETWORK_ANNOTATIONS:
        value = template.annotations.get(key)
        if isinstance(value, str) and ("rdma" in value.lower() or "roce" in value.lower()):
            return f"the networks of annotation {key}"
    return None


def rdma_device(container: Container) -> str | None:
    """The RDMA device resource the container requests or limits (a count other than 0), if any."""
    for section in (container.limits, container.requests):
        for name, quantity in section.items():
            text = str(name)
            prefix, _, resource = text.rpartition("/")
            lowered = resource.lower()
            named = prefix == "rdma" or "rdma" in lowered or "sriov" in lowered or text in _RDMA_DEVICES
            if named and str(quantity) != "0":
                return text
    return None


@rule(
    id="GP604",
    roles=NOT_AGENT,
    name="capabilities-not-dropped",
    severity="warning",
    summary="Reports a container that does not drop ALL capabilities (at the restricted level, from Kubernetes "
    "1.22; Windows pods are exempt from 1.25). A privileged container is left to GP601: it holds every "
    "capability whatever drop says.",
    rationale="The restricted Pod Security level requires `drop: [ALL]` so the container keeps only the "
    "capabilities it adds back explicitly.",
    remediation="Set securityContext.capabilities.drop: [ALL] (add back NET_BIND_SERVICE if the server binds a port below 1024).",
    references=(PSS, f"{PSA}/check_capabilities_restricted.go"),
    settings=(LEVEL, VERSION),
)
def capabilities_not_dropped(workload: Workload, ctx: Context) -> Iterator[Violation]:
    current = standard(ctx)
    for template in workload.templates:
        for problem in pss.capabilities_not_dropped(template, current):
            # A privileged container holds every capability whatever drop says: GP601's finding.
            if problem.container is not None and pss.is_privileged(problem.container):
                continue
            yield _violation(problem)


def on_mps_pools_only(template: PodTemplate, ctx: Context) -> bool:
    """Every policy node pool the pod can land on (it requests the pool's GPU resource and its
    node targeting admits the pool's labels) shares GPUs with MPS — and there is at least one."""
    resources = {demand.resource.name for demand in ctx.gpu.counted_demands(template)}
    selector, terms = node_selector(template), required_terms(template)
    candidates = [
        pool
        for pool in node_pools(ctx.policy)
        if pool.resource in resources
        and any(node_affinity_matches(selector, terms, labels) for labels in pool.label_sets())
    ]
    return bool(candidates) and all(pool.sharing == "mps" for pool in candidates)


ALLOW_MPS_HOST_IPC = Parameter(
    "allowMpsHostIPC",
    False,
    "Allow hostIPC on pods that can land only on node pools with sharing: mps (MPS clients reach the "
    "control daemon through the host's IPC namespace).",
    setting="security.allowMpsHostIPC",
)


@rule(
    id="GP605",
    roles=NOT_AGENT,
    name="host-namespace",
    severity="error",
    summary="Reports `hostNetwork`, `hostPID` or `hostIPC: true`. hostIPC is allowed for pods that land only on "
    "node pools sharing GPUs with MPS, when the policy allows it.",
    rationale="Host namespaces let a container see and signal the node's processes, sniff its network, or read "
    "other pods' shared memory; on a GPU node that includes the other tenants' CUDA processes.",
    remediation="Remove hostNetwork, hostPID and hostIPC from the pod spec.",
    references=(PSS, f"{PSA}/check_hostNamespaces.go", "https://docs.nvidia.com/deploy/mps/index.html"),
    parameters=(ALLOW_MPS_HOST_IPC,),
)
def host_namespace(workload: Workload, ctx: Context) -> Iterator[Violation]:
    allow_mps = ctx.policy.param(ALLOW_MPS_HOST_IPC)
    current = standard(ctx)
    for template in workload.templates:
        for key, path in pss.host_namespaces(template, current):
            if key == "hostIPC" and allow_mps and on_mps_pools_only(template, ctx):
                continue
            # MPS is NVIDIA's: the note is for pods that ask for NVIDIA GPUs (ROCm's examples set
            # hostIPC for AMD's own reasons).
            note = (
                " (MPS needs it only on MPS node pools, and only where the policy allows it)"
                if key == "hostIPC" and _asks_nvidia_gpus(template, ctx)
                else ""
            )
            yield Violation(path, f"{template.describe()} sets {key}: true{note}")


def _asks_nvidia_gpus(template: PodTemplate, ctx: Context) -> bool:
    return any(demand.resource.vendor == "nvidia" for demand in ctx.gpu.template_demands(template))


# Host paths that matter on a GPU node, most specific first: (pattern, what it is).
GPU_HOST_PATHS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"^/dev/nvidia"),
        "NVIDIA GPU device nodes: the container gets GPUs outside the device plugin's accounting",
    ),
    (
        re.compile(r"^/dev/dri(/|$)"),
        "DRM GPU device nodes (AMD/Intel): GPUs outside the device plugin's accounting",
    ),
    (re.compile(r"^/dev/kfd$"), "the AMD ROCm compute device"),
    (re.compile(r"^/dev/?$"), "the node's whole /dev: every GPU and every other device"),
    (
        re.compile(r"^/var/run/nvidia-container-devices(/|$)"),
        "the NVIDIA toolkit's device list: lets the container pick its own GPUs",
    ),
    (re.compile(r"^(/var)?/run/nvidia"), "the NVIDIA driver and toolkit state of the node"),
    (
        re.compile(r"^(/home/kubernetes/bin/nvidia|/usr/local/nvidia)(/|$)"),
        "the node's NVIDIA driver installation",
    ),
    (
        re.compile(r"^(/var)?/run/docker\.sock$|^(/var)?/run/docker(/|$)"),
        "the Docker socket: root on the node",
    ),
    (re.compile(r"^(/var)?/run/containerd(/|$)"), "the containerd socket: root on the node"),
    (re.compile(r"^(/var)?/run/crio(/|$)"), "the CRI-O socket: root on the node"),
    (re.compile(r"^/var/lib/kubelet/device-plugins(/|$)"), "the kubelet's device-plugin sockets"),
    (
        re.compile(r"^/var/lib/kubelet/pod-resources(/|$)"),
        "the kubelet's pod-resources API (every pod's devices)",
    ),
    (re.compile(r"^/(proc|sys)(/|$)"), "the node's kernel interfaces"),
    (re.compile(r"^/$"), "the node's root filesystem"),
)


def describe_host_path(path: str) -> str | None:
    clean = path.rstrip("/") or "/"
    if path.startswith("/dev/") and clean == "/dev":
        clean = "/dev"
    for pattern, meaning in GPU_HOST_PATHS:
        if pattern.search(clean):
            return meaning
    return None


@rule(
    id="GP606",
    roles=NOT_AGENT,
    name="host-path-volume",
    severity="error",
    summary="Reports hostPath volumes, naming GPU device paths (`/dev`, `/dev/nvidia*`, `/dev/dri`, `/run/nvidia*`, "
    "`/var/run/nvidia-container-devices`) and container-runtime sockets as such.",
    rationale="A hostPath volume exposes the node's filesystem. Mounting GPU device nodes hands the container "
    "GPUs the scheduler gave to someone else; a runtime socket is root on the node.",
    remediation="Replace the hostPath volume with a GPU request (resources.limits), a PVC, an emptyDir or a ConfigMap.",
    references=(
        PSS,
        f"{PSA}/check_hostPathVolumes.go",
        "https://kubernetes.io/docs/concepts/storage/volumes/#hostpath",
    ),
)
def host_path_volume(workload: Workload, ctx: Context) -> Iterator[Violation]:
    current = standard(ctx)
    for template in workload.templates:
        mounted: set[str] | None = None  # read once a hostPath is found: most pods have none
        for path, host_path, volume in pss.host_path_volumes(template, current):
            where = (*path, "hostPath", "path") if host_path else (*path, "hostPath")
            name = volume.get("name", "?")
            mounted = _mounted_volumes(template) if mounted is None else mounted
            # A kind walked for its pod spec without knowing its controller (Slinky's NodeSet adds
            # its slurmd container from a field of its own) may mount it in a container we do not see.
            if (not isinstance(name, str) or name not in mounted) and workload.kind in EXTRACTORS:
                # Admission refuses the pod all the same; what it would expose is beside the point.
                yield Violation(
                    where,
                    f"volume {name!r} declares the node's {host_path or '(no path)'}, which no container "
                    "mounts: remove it",
                )
                continue
            meaning = describe_host_path(host_path)
            what = f": {meaning}" if meaning else ""
            verb = "mounts" if isinstance(name, str) and name in mounted else "declares"
            yield Violation(where, f"volume {name!r} {verb} the node's {host_path or '(no path)'}{what}")


def _mounted_volumes(template: PodTemplate) -> set[str]:
    """The names of the volumes some container of the pod mounts (or maps as a block device)."""
    return {name for container in template.containers for name in _mounted_by(container)}


def _mounted_by(container: Container) -> set[str]:
    """The names of the volumes the container mounts or maps (names that are not strings, which
    the API refuses, are left out rather than hashed)."""
    names = (
        as_mapping(item).get("name")
        for key in ("volumeMounts", "volumeDevices")
        for item in as_list(container.spec.get(key))
    )
    return {name for name in names if isinstance(name, str)}


# NVIDIA_VISIBLE_DEVICES says which GPUs the toolkit mounts. NVIDIA_DRIVER_CAPABILITIES is not
# among them: it says which driver libraries come with the GPUs the container has (compute,
# utility, video for a decoder, …), and gives it no device.
# https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
NVIDIA_ENV = (VISIBLE_DEVICES,)


def _sharing_scheduler_wrote(item: Mapping[str, object], template: PodTemplate, ctx: Context) -> bool:
    """KAI Scheduler (and run:ai) give a fractional-GPU pod NVIDIA_VISIBLE_DEVICES from its sharing
    ConfigMap (the binder's AddGPUSharingEnvVars, in its mutating webhook): a variable read from a
    ConfigMap in a pod that asks the scheduler for a fraction is the scheduler's, not a bypass."""
    source = as_mapping(item.get("valueFrom"))
    return "configMapKeyRef" in source and ctx.gpu.uses_gpu_fraction(template)


@rule(
    id="GP607",
    roles=NOT_AGENT,
    name="nvidia-visible-devices-env",
    severity="error",
    summary="Reports `NVIDIA_VISIBLE_DEVICES` set in a container's env (or in a ConfigMap it loads with envFrom), "
    "with or without a GPU request, unless it hides every GPU (`void`, `none`, empty). "
    "`NVIDIA_DRIVER_CAPABILITIES` chooses driver libraries, not devices, and is left alone.",
    rationale="On nodes whose runtime is nvidia, the toolkit reads NVIDIA_VISIBLE_DEVICES to decide which GPUs to "
    "mount: `all` or an index gives the container GPUs the device plugin never allocated to it, so another "
    "pod's model and this one share a GPU without either knowing. The device plugin sets these variables itself.",
    remediation="Remove NVIDIA_VISIBLE_DEVICES from env and request GPUs in resources.limits.",
    references=(
        "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html",
        "https://github.com/NVIDIA/k8s-device-plugin#security",
    ),
)
def nvidia_visible_devices_env(workload: Workload, ctx: Context) -> Iterator[Violation]:
    namespace = workload.namespace
    for template, container in workload.containers():
        for path, item in container.env_items():
            name, value = item.get("name"), item.get("value")
            narrows = name == VISIBLE_DEVICES and hides_every_gpu(value)
            if name in NVIDIA_ENV and not narrows and not _sharing_scheduler_wrote(item, template, ctx):
                shown = f"={value}" if value is not None else " (from valueFrom)"
                yield Violation(
                    path,
                    f"{container.label} sets {name}{shown}",
                    container=container.name,
                )
        for index, source in enumerate(as_list(container.spec.get("envFrom"))):
            ref = as_mapping(as_mapping(source).get("configMapRef")).get("name")
            config = ctx.inventory.get("ConfigMap", str(ref), namespace) if ref else None
            data = (
                as_mapping(config.obj.get("data"))
                if config is not None and isinstance(config.obj, dict)
                else {}
            )
            prefix = str(as_mapping(source).get("prefix") or "")
            for key in data:
                if f"{prefix}{key}" in NVIDIA_ENV:
                    yield Violation(
                        container.field("envFrom", index),
                        f"{container.label} loads {prefix}{key} from ConfigMap {ref}",
                        container=container.name,
                    )


@rule(
    id="GP608",
    roles=NOT_AGENT,
    name="run-as-root",
    severity="warning",
    summary="Reports, at the restricted level, runAsNonRoot: false or runAsUser: 0 (from Kubernetes 1.23) set on "
    "the pod or a container, and containers that leave runAsNonRoot unset while the pod does too (one finding at "
    "the pod's securityContext). From 1.35 pods with `hostUsers: false` are exempt.",
    rationale="Root in the container is root on the node after any escape, and model servers load and execute "
    "downloaded code (`trust_remote_code`, pickled weights). The restricted level requires non-root.",
    remediation="Set securityContext.runAsNonRoot: true and a non-zero runAsUser, at pod level or on every container.",
    references=(PSS, f"{PSA}/check_runAsNonRoot.go", f"{PSA}/check_runAsUser.go"),
    settings=(LEVEL, VERSION),
)
def run_as_root(workload: Workload, ctx: Context) -> Iterator[Violation]:
    current = standard(ctx)
    for template in workload.templates:
        yield from _problems(pss.run_as_root(template, current))


@rule(
    id="GP609",
    roles=NOT_AGENT,
    name="seccomp-unconfined",
    severity="error",
    summary="Reports a seccomp profile set to `Unconfined` (or any type but RuntimeDefault and Localhost) on the "
    "pod or a container; a pod-level one even when containers override it. Unset is allowed at the baseline "
    "level; at the restricted level the containers without a profile of their own, in a pod that sets none, are "
    "one warning at the pod's securityContext (Windows pods exempt from Kubernetes 1.25).",
    rationale="Without seccomp every system call of the kernel is reachable from the container; RuntimeDefault "
    "blocks the ones container escapes use and costs a model server nothing.",
    remediation="Set securityContext.seccompProfile.type: RuntimeDefault at pod level (or Localhost with a profile).",
    references=(PSS, f"{PSA}/check_seccompProfile_baseline.go", f"{PSA}/check_seccompProfile_restricted.go"),
    settings=(LEVEL, VERSION),
)
def seccomp_unconfined(workload: Workload, ctx: Context) -> Iterator[Violation]:
    current = standard(ctx)
    for template in workload.templates:
        for problem, explicit in pss.seccomp_problems(template, current):
            yield _violation(problem, None if explicit else Severity.WARNING)


@rule(
    id="GP610",
    roles=NOT_AGENT,
    name="host-port",
    severity="warning",
    summary="Reports a container port with a non-zero `hostPort`. In a pod on the node's network (hostNetwork) "
    "every port is the node's and the API server requires hostPort to equal containerPort: GP605 reports that, once.",
    rationale="A hostPort binds the node's address: one pod per node can have it, it bypasses NetworkPolicy on "
    "many CNIs, and a GPU node's port is then tied to whichever pod landed there.",
    remediation="Remove hostPort and expose the server through a Service.",
    references=(PSS, f"{PSA}/check_hostPorts.go"),
)
def host_port(workload: Workload, ctx: Context) -> Iterator[Violation]:
    current = standard(ctx)
    for template, container in workload.containers():
        if template.spec.get("hostNetwork") is True:
            continue  # the pod's ports are the node's: GP605's finding
        for value, path in pss.host_ports(container, current):
            yield Violation(
                path,
                f"{container.label} binds hostPort {value} on the node",
                container=container.name or None,
            )


@rule(
    id="GP611",
    roles=NOT_AGENT,
    name="pod-security-baseline",
    severity="error",
    summary="Reports the other Pod Security baseline fields, with the allowed values of the policy's Kubernetes "
    "version: sysctls outside the safe set (which grows in 1.27, 1.29, 1.32), procMount, SELinux type (plus "
    "container_engine_t from 1.31), user and role, AppArmor annotations and (from 1.30) appArmorProfile, Windows "
    "hostProcess, host in lifecycle hooks (from 1.34); at the restricted level also volume types other than "
    "configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret and (from 1.33) "
    "image.",
    rationale="Each of these lifts an isolation the kernel or the runtime gives containers by default; the "
    "built-in Pod Security admission rejects them at the same level.",
    remediation="Remove the field (or set it to a value the Pod Security level allows).",
    references=(
        PSS,
        f"{PSA}/check_sysctls.go",
        f"{PSA}/check_procMount_baseline.go",
        f"{PSA}/check_seLinuxOptions.go",
        f"{PSA}/check_appArmorProfile.go",
        f"{PSA}/check_windowsHostProcess.go",
        f"{PSA}/check_restrictedVolumes.go",
        f"{PSA}/check_hostProbesAndhostLifecycle.go",
    ),
    settings=(LEVEL, VERSION),
)
def pod_security_baseline(workload: Workload, ctx: Context) -> Iterator[Violation]:
    current = standard(ctx)
    for template in workload.templates:
        yield from _problems(pss.baseline_other(template, current))
        yield from _problems(pss.restricted_volumes(template, current))
