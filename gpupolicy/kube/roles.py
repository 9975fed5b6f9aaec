"""What a workload is, decided once from evidence, not from its kind.

A Deployment running `sleep infinity` is not a server; a DaemonSet of the NVIDIA device plugin is
infrastructure, not a GPU workload that forgot its probes. Every rule that is about serving asks
this module, and every rule that a GPU-stack agent must be spared declares so in its `@rule`.

Roles:

- **server**: answers requests. Evidence: a serving CRD (KServe InferenceService, RayService), a
  container port, a Service of the inventory selecting the pods, a serving command
  (`vllm serve`, `text-generation-launcher`, `tritonserver` …) or a serving image running its own
  entrypoint, or the label `gpupolicy.io/workload-class` set to a serving class.
- **batch**: runs to completion: Jobs, CronJobs, the Kubeflow, JobSet, RayJob and TrainJob kinds,
  bare Pods with `restartPolicy` Never/OnFailure, or a batch workload class.
- **dev**: a test, benchmark or notebook: `sleep infinity`, `tail -f /dev/null`, `nvidia-smi`,
  CUDA samples, Jupyter, GPU burn-in and NCCL tests, or the `dev` workload class.
- **agent**: part of the GPU stack itself (device plugins, drivers and their installers, DCGM
  and its exporter, GPU/node feature discovery, the MIG manager, the container toolkit, the GPU
  operator and its validators): recognised by image, and by DaemonSets of the GPU stack's
  namespaces that reach into the node.
- **workload**: a long-running GPU workload with no evidence of serving (a queue consumer, a
  training loop in a Deployment): the general rules apply, the serving ones do not.

Every test here is a substring or token comparison over bounded text: linear in the input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gpupolicy.core.identity_enum import IdentityEnum
from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import WORKLOAD_CLASS_LABEL
from gpupolicy.kube.gpu import names_gpu_resource
from gpupolicy.kube.pod_spec import (
    CONFIG_KINDS,
    Container,
    PodTemplate,
    Workload,
    as_list,
    as_mapping,
)


class Role(IdentityEnum):
    SERVER = "server"
    BATCH = "batch"
    DEV = "dev"
    AGENT = "agent"
    WORKLOAD = "workload"


NOT_AGENT = frozenset(Role) - {Role.AGENT}
SERVERS = frozenset({Role.SERVER})
# Rules about a container's CPU and memory: not for tests and notebooks (a shrug), nor agents.
RESOURCED = frozenset({Role.SERVER, Role.BATCH, Role.WORKLOAD})
# Rules about a model's load time (GP403, GP404): a notebook or a test loads none at start.
MODEL_LOADING = frozenset({Role.SERVER, Role.BATCH, Role.WORKLOAD})


@immutable
class RoleDecision:
    role: Role
    evidence: str  # one sentence: why this role

    def as_json(self) -> dict[str, str]:
        return {"role": self.role.value, "evidence": self.evidence}


# Kinds whose pods run to completion (batch whatever their containers do).
BATCH_KINDS = frozenset(
    {"Job", "CronJob", "PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob",
     "JobSet", "RayJob", "Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow", "VolcanoJob",
     "SparkApplication", "ScheduledSparkApplication"}
)  # fmt: skip
# Kinds that are servers by definition: their controllers front them with a Service and route to them
# (KServe InferenceService and LLMInferenceService, KubeRay RayService, NVIDIA's NIM operator NIMService,
# NVIDIA Dynamo's DynamoGraphDeployment: a frontend that routes requests to its workers).
SERVING_KINDS = frozenset(
    {"InferenceService", "LLMInferenceService", "RayService", "NIMService", "DynamoGraphDeployment"}
)

# What a controller adds to the pods it creates, so that a manifest need not (and a rule must not
# ask for it): probes, container ports, a memory-backed /dev/shm, CPU and memory resources.
# - KubeRay adds readiness/liveness probes to Ray pods and mounts /dev/shm:
#   https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/config.html
# - KServe's InferenceService webhook defaults resources and the predictor's port and probes:
#   https://kserve.github.io/website/latest/modelserving/v1beta1/serving_runtime/
# - KServe's LLMInferenceService config template (config-llm-template) sets probes, ports, /dev/shm.
# - The NIM operator sets the NIM's probes, port and /dev/shm:
#   https://docs.nvidia.com/nim-operator/latest/service.html
# - NVIDIA Dynamo's operator gives every component startup, liveness and readiness probes by its
#   type (a worker's startup probe waits up to two hours), its ports, and an 8Gi memory-backed
#   /dev/shm (deploy/operator docs, "Operator Default Values Injection", in ai-dynamo/dynamo).
CONTROLLER_INJECTS: dict[str, frozenset[str]] = {
    "RayCluster": frozenset({"probes", "shm"}),
    "RayService": frozenset({"probes", "shm"}),
    "RayJob": frozenset({"probes", "shm"}),
    "RayClusterFleet": frozenset({"probes", "shm"}),
    "InferenceService": frozenset({"probes", "ports", "resources"}),
    "LLMInferenceService": frozenset({"probes", "ports", "shm"}),
    # NIMService: its probes and port are read as the operator writes them (pod_spec._nim_container).
    "NIMService": frozenset({"shm"}),
    "DynamoGraphDeployment": frozenset({"probes", "ports", "shm"}),
    # A partial spec (CONFIG_KINDS): the well-known template merged under it, or the service
    # merged over it, may give what it leaves out, resources included.
    "LLMInferenceServiceConfig": frozenset({"probes", "ports", "shm", "resources"}),
    # Knative's serving.knative.dev Service (the only Service with a pod template): "Knative will define
    # a default Readiness probe for the primary user container when no probe is defined", a TCP socket
    # on its traffic port (knative/docs serving/services/configure-probing.md); liveness is the user's.
    "Service": frozenset({"readiness"}),
    # KServe's serving runtimes, completed by the InferenceServices that name them (pod_spec.RUNTIME_KINDS).
    "ServingRuntime": frozenset({"probes", "ports", "shm", "resources"}),
    "ClusterServingRuntime": frozenset({"probes", "ports", "shm", "resources"}),
}


def injected(kind: str, what: str) -> bool:
    """Whether the controller of `kind` adds `what` (probes, readiness, ports, shm, resources) to its pods."""
    return what in CONTROLLER_INJECTS.get(kind, _INJECTS_NOTHING)


_INJECTS_NOTHING: frozenset[str] = frozenset()  # made once: four rules ask of every workload


# The GPU stack's images (NVIDIA GPU operator and device plugin, GKE and AKS installers, AMD,
# Intel, HAMi): https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/index.html
AGENT_IMAGE_PARTS = (
    "k8s-device-plugin", "gpu-device-plugin", "device-plugin", "dcgm-exporter", "/dcgm:", "/dcgm@",
    "gpu-feature-discovery", "node-feature-discovery", "k8s-mig-manager", "mig-manager",
    "container-toolkit", "nvidia/driver", "gpu-operator", "operator-validator", "driver-installer",
    "k8s-dra-driver", "dra-driver", "nccl-installer", "nccl-plugin", "tcpx-daemon", "tcpxo-daemon",
    "cuda-validator", "kubevirt-gpu-device-plugin", "vgpu-manager", "vgpu-device-manager",
    "k8s-kata-manager", "cc-manager", "projecthami/hami", "intel-gpu-plugin", "amdgpu-dp",
    "k8s-device-plugin", "network-operator", "gpu-metrics-exporter", "nvidia-peermem",
    # AWS Neuron's monitor (its accelerators' DCGM exporter; its device plugin is a device-plugin)
    "neuron-monitor",
)  # fmt: skip
# DaemonSet names of node agents that prepare GPU nodes (installers of drivers, NCCL and RDMA
# plugins, exporters of GPU metrics).
AGENT_DAEMONSET_NAME_PARTS = ("installer", "device-plugin", "gpu-exporter", "dcgm", "nvidia-driver")
# Namespaces the GPU stack is installed in by its own charts and docs.
AGENT_NAMESPACES = frozenset(
    {"gpu-operator", "nvidia-gpu-operator", "nvidia-device-plugin", "gpu-feature-discovery",
     "node-feature-discovery", "nvidia-dra-driver-gpu", "hami-system", "kube-amd-gpu", "amd-gpu-operator",
     "intel-gpu-plugin", "nvidia-network-operator"}
)  # fmt: skip
# Host paths only node agents mount: the kubelet's own directory (device-plugin and CSI/DRA
# sockets, its CPU manager state), the driver root, the devices, the CNI plugins and their
# configuration (a network stack's installer), and the containers' logs.
AGENT_HOST_PATHS = (
    "/var/lib/kubelet", "/run/nvidia", "/dev", "/opt/cni", "/etc/cni",
    # The containers' logs a log collector reads (fluentd, fluent-bit, the Stackdriver agent).
    "/var/log/pods", "/var/log/containers", "/var/lib/docker/containers",
    # The container runtime's own sockets and plugin points: containerd's and CRI-O's sockets, NRI
    # plugins' socket (https://github.com/containerd/nri), OCI hooks; and the kernel's resource
    # control filesystem (resctrl: cache and memory-bandwidth monitoring per container). /var/run
    # is /run by the Filesystem Hierarchy Standard; manifests write either.
    "/run/containerd", "/var/run/containerd", "/run/crio", "/var/run/crio", "/run/nri", "/var/run/nri",
    "/etc/containers/oci/hooks.d", "/sys/fs/resctrl",
)  # fmt: skip
# Where the cluster's own add-ons run (kube-proxy, CNI and CSI agents, the cloud's node tuning):
# https://kubernetes.io/docs/concepts/overview/working-with-objects/namespaces/#initial-namespaces
SYSTEM_NAMESPACE = "kube-system"
# The built-in class of the pods a node cannot do without (CNI, CSI and device agents), wherever a
# chart renders them: https://kubernetes.io/docs/tasks/administer-cluster/guaranteed-scheduling-critical-addon-pods/
NODE_CRITICAL = "system-node-critical"

# Commands that serve requests (the first words of command + args, or inside a shell script).
SERVER_COMMAND_PARTS = (
    "vllm serve", "vllm.entrypoints", "text-generation-launcher", "tritonserver", "sglang.launch_server",
    "sglang serve", "serve run", "serve deploy", "trtllm-serve", "llama-server", "ollama serve",
    "torchserve", "uvicorn", "gunicorn", "mlserver start", "lmdeploy serve", "text-embeddings-router",
    "infinity_emb", "python3 -m http.server", "python -m http.server", "api_server", "launch_server",
    "openai.api_server", "nim_llm", "dynamo.vllm", "dynamo.sglang", "dynamo.trtllm", "dynamo.frontend",
)  # fmt: skip
# Images whose own entrypoint serves requests.
SERVER_IMAGE_PARTS = (
    "vllm-openai", "text-generation-inference", "tritonserver", "lmsysorg/sglang", "nvcr.io/nim/",
    "text-embeddings-inference", "ollama/ollama", "llama.cpp:server", "torchserve", "kserve/",
    "seldonio/mlserver", "tensorflow/serving", "lmdeploy",
)  # fmt: skip
# Servers that load a model when a request first names it, not at start: their health endpoint
# answers at once (Ollama's `/` says "Ollama is running"; its FAQ preloads a model "by sending the
# Ollama server an empty request", github.com/ollama/ollama docs/faq.md).
LAZY_LOADING_PARTS = ("ollama/ollama", "ollama serve")
# Runtimes that split a model over one process's GPUs layer by layer, without NCCL or shared-memory
# collectives (llama.cpp's split, which Ollama runs).
SINGLE_PROCESS_SPLIT_PARTS = ("ollama/ollama", "ollama serve", "llama.cpp", "llama-server")
# Every part a runtime is told by, searched at once (a literal alternation: linear in the text);
# each container's matches are kept on its view.
_RUNTIME_PARTS = re.compile(
    "|".join(re.escape(part) for part in {*LAZY_LOADING_PARTS, *SINGLE_PROCESS_SPLIT_PARTS})
)
_RUNTIME = "runtime-parts"  # Container.cache key of runs_one_of


def runs_one_of(container: Container, parts: Sequence[str]) -> bool:
    """Whether the container's image or command line is one of `parts` (of the runtimes above)."""
    found: frozenset[str] | None = container.cache.get(_RUNTIME)
    if found is None:
        image = container.image.lower()
        text = (
            f"{image}\n{command_text(container)}"
            if container.spec.get("command") or container.spec.get("args")
            else image
        )
        found = container.cache[_RUNTIME] = frozenset(_RUNTIME_PARTS.findall(text))
    return not found.isdisjoint(parts)


# Commands and images of tests, benchmarks and notebooks.
DEV_COMMAND_PARTS = (
    "sleep infinity", "sleep inf", "tail -f /dev/null", "sleep 365d", "sleep 100000", "sleep 1000000",
    "sleep 9999", "nvidia-smi", "jupyter", "vectoradd", "gpu-burn", "gpu_burn",
    "all_reduce_perf", "nccl-tests", "benchmark", "vllm bench", "genai-perf", "locust", "while true",
    "nvbandwidth", "cuda-samples", "devicequery", "nbody", "cuda.is_available", "jax.devices()",
    "device_count()", "clinfo", "rocm-smi", "amd-smi", "rocminfo", "xpu-smi", "hl-smi",
)  # fmt: skip
# Test doubles of a model server (llm-d's inference simulator, Dynamo's mocker): they load no model.
SIMULATOR_IMAGE_PARTS = ("inference-sim", "simulator", "mocker")
DEV_IMAGE_PARTS = (
    "cuda-sample", "vectoradd", "jupyter", "notebook", "gpu-burn", "nccl-tests", "genai-perf",
    "locustio", "grafana/k6", "dcgmproftester", "perftest", "e2e-test-images/", "-bench",
    *SIMULATOR_IMAGE_PARTS,
)  # fmt: skip


def runs_a_simulator(container: Container) -> bool:
    """Whether the container runs a model server's test double, by its image."""
    return first_part(SIMULATOR_IMAGE_PARTS, container.image.lower()) is not None


# Images known by their repository's last name, whatever the registry, tag or digest: the pause
# container holds a pod's resources and runs nothing (registry.k8s.io/pause, a mirror's copy).
DEV_REPOSITORIES = frozenset({"pause"})


def _repository_name(image: str) -> str:
    """The last component of an image's repository: `pause` of `registry.k8s.io/pause:3.10`."""
    name = image.lower().split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


# How much of a command line is read: a shell script of a few KB says what it runs early.
COMMAND_TEXT_LIMIT = 8192

SERVING_CLASSES_DEFAULT = ("online", "embedding", "asr")
BATCH_CLASSES_DEFAULT = ("batch", "training")

ServiceLookup = Callable[[Workload, PodTemplate], str | None]


def command_text(container: Container) -> str:
    """command + args of a container as one lower-case line, bounded; an Argo script template's
    `source` is its program too (run by its command, `python` or `bash`). Made once per container
    view: the role, GP105, GP113 and the probe rules read it."""
    found: str | None = container.cache.get(_COMMAND_TEXT)
    if found is None:
        found = container.cache[_COMMAND_TEXT] = _command_text(container)
    return found


_COMMAND_TEXT = "command-text"  # Container.cache key of command_text


def _command_text(container: Container) -> str:
    words: list[str] = []
    size = 0
    source = container.spec.get("source")
    for key in ("command", "args", "source"):
        listed = [source] if key == "source" and isinstance(source, str) else as_list(container.spec.get(key))
        for word in listed:
            if not isinstance(word, str):
                continue
            words.append(word)
            size += len(word) + 1
            if size > COMMAND_TEXT_LIMIT:
                return " ".join(words)[:COMMAND_TEXT_LIMIT].lower()
    return " ".join(words).lower()


def first_part(parts: Sequence[str], text: str) -> str | None:
    for part in parts:
        if part in text:
            return part
    return None


def _agent_evidence(workload: Workload) -> str | None:
    return gpu_stack_evidence(workload) or _node_agent_evidence(workload)


def gpu_stack_evidence(workload: Workload) -> str | None:
    """Why `workload` is one of the GPU stack's own agents (its image, service account, name or
    namespace), or None. Such pods are made by the stack's operators, which fill fields in
    themselves; a node agent of another kind (a log collector, a runtime plugin) is not."""
    for _, container in workload.containers():
        if container.role != "container" and workload.kind != "DaemonSet":
            # A DCGM sidecar beside a trainer does not make the trainer an agent; a DaemonSet's init
            # containers do the work of GKE's installers (their main container is a pause image).
            continue
        image = container.image.lower()
        part = first_part(AGENT_IMAGE_PARTS, image)
        if part is not None:
            return f"runs the GPU stack's image {container.image[:120]!r}"
    for template in workload.templates:
        account = template.spec.get("serviceAccountName")
        if isinstance(account, str) and first_part(AGENT_IMAGE_PARTS, account.lower()) is not None:
            return f"runs as the GPU stack's service account {account[:120]}"
    if workload.kind != "DaemonSet":
        return None
    part = first_part((*AGENT_IMAGE_PARTS, *AGENT_DAEMONSET_NAME_PARTS), workload.name.lower())
    if part is not None:
        return f"a DaemonSet named for the GPU stack ({workload.name[:120]})"
    if (workload.namespace or "") in AGENT_NAMESPACES:
        return f"a DaemonSet in the GPU stack's namespace {workload.namespace}"
    return None


def _node_agent_evidence(workload: Workload) -> str | None:
    """Why a DaemonSet is one of the node's own agents: where it runs, its priority, what of the
    node it mounts; or why a pod of another kind is one of the cluster's own components."""
    if workload.kind != "DaemonSet":
        return _component_evidence(workload)
    if workload.namespace == SYSTEM_NAMESPACE:
        return f"a DaemonSet in {SYSTEM_NAMESPACE}, where the cluster's own node agents run"
    for template in workload.templates:
        # A GPU consumer at that class is a workload misusing it (GP303), not an agent.
        if template.spec.get("priorityClassName") == NODE_CRITICAL and not names_gpu_resource(template):
            return f"a DaemonSet at priority {NODE_CRITICAL}, the cluster's class for its node agents"
    for template in workload.templates:
        for _, volume in template.volumes():
            path = as_mapping(volume.get("hostPath")).get("path")
            if isinstance(path, str) and mounts_agent_path(path):
                return f"a DaemonSet that mounts the node's {path[:120]}"
    return None


# The classes Kubernetes defines for the pods a cluster cannot do without: its control plane's
# static pods (kubeadm's kube-scheduler, kube-apiserver), DNS, CNI and CSI components.
# https://kubernetes.io/docs/tasks/administer-cluster/guaranteed-scheduling-critical-addon-pods/
SYSTEM_CRITICAL = frozenset({NODE_CRITICAL, "system-cluster-critical"})
# Where a kubelet plugin registers (CSI and DRA drivers, device plugins): only a plugin mounts it.
# https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/
KUBELET_PLUGIN_PATHS = ("/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/device-plugins")


def _component_evidence(workload: Workload) -> str | None:
    """Why a pod that is not a DaemonSet's is one of the cluster's own components: in kube-system
    at a system-critical priority (kubeadm's static control-plane pods), or registering with the
    kubelet as a plugin (a CSI driver's node plugin run by a StatefulSet). A GPU consumer is judged
    as the workload it is (GP303 says what it does at that priority)."""
    for template in workload.templates:
        if names_gpu_resource(template):
            continue
        priority = template.spec.get("priorityClassName")
        if workload.namespace == SYSTEM_NAMESPACE and priority in SYSTEM_CRITICAL:
            return f"a pod in {SYSTEM_NAMESPACE} at priority {priority}, one of the cluster's own components"
        for _, volume in template.volumes():
            path = as_mapping(volume.get("hostPath")).get("path")
            if isinstance(path, str) and _under(_normalised(path), KUBELET_PLUGIN_PATHS):
                return f"a kubelet plugin: it mounts the node's {path[:120]}"
    return None


def mounts_agent_path(path: str) -> bool:
    """Whether a host path is, or holds, one only node agents mount: `/dev/infiniband`, `/var/log`
    (a log collector's, holding the containers' logs) and the node's root `/` (which holds them
    all, as a mount helper that nsenters PID 1 mounts it) are; `/devices` and `/var/lib/models`
    are not."""
    path = _normalised(path)
    return _under(path, AGENT_HOST_PATHS) or any(
        known.startswith(path.rstrip("/") + "/") for known in AGENT_HOST_PATHS
    )


def _normalised(path: str) -> str:
    """A host path without empty or `.` parts: `//var/lib/./kubelet/` is `/var/lib/kubelet`."""
    return "/" + "/".join(part for part in path.split("/") if part and part != ".")


def _under(path: str, known: Sequence[str]) -> bool:
    """Whether a normalised path is one of `known`, or inside one."""
    return any(path == item or path.startswith(item + "/") for item in known)


SHELL_WRAPPERS = ("/bin/bash -c ", "/bin/sh -c ", "bash -c ", "sh -c ", "/bin/bash -lc ", "bash -lc ")


# What a placeholder's script may do besides sleeping: print, and succeed.
_IDLE_COMMANDS = frozenset({"sleep", "/bin/sleep", "echo", "printf", "true", ":"})
# Anything that runs another program: a substitution, a pipe, a background job.
_RUNS_MORE = ("$(", "`", "|", "&")


def _only_sleeps(text: str) -> bool:
    """The container does nothing but sleep (`sleep 86400`, `bash -c "sleep 3600"`, or a script
    that only prints and sleeps, as schedulers' demonstrations of queues and quotas do): a pod kept
    around to hold its resources or to exec into, not a program. A script that runs anything else
    proves nothing."""
    for wrapper in SHELL_WRAPPERS:
        if text.startswith(wrapper):
            text = text[len(wrapper) :]
            break
    slept = False
    for line in text.replace("&&", "\n").replace(";", "\n").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = [word for word in line.split() if word not in ("--", "-e", "-x", "-c")]
        if not words or words[0] not in _IDLE_COMMANDS or any(mark in line for mark in _RUNS_MORE):
            return False
        if words[0] in ("sleep", "/bin/sleep"):
            if len(words) != 2:
                return False
            slept = True
    return slept


def _dev_evidence(template: PodTemplate) -> str | None:
    containers = template.main_containers()
    # A pod that serves is no test because a helper beside the server idles or runs a test tool
    # (GKE's reference architecture warms the page cache with a sidecar that then sleeps forever):
    # what one container runs is evidence only while no other one serves.
    serving = [container for container in containers if _serves(container)] if len(containers) > 1 else []
    for container in containers:
        if serving and any(other is not container for other in serving):
            continue
        text = command_text(container)
        if text and _only_sleeps(text):
            return f"container {container.name!r} only sleeps ({text[:60]!r})"
        if text and first_part(SERVER_COMMAND_PARTS, text) is not None:
            # A serving command outweighs what the image's name hints at (`…/ml-bench-team/vllm-openai`
            # running `vllm serve` serves).
            continue
        part = _dev_command_part(text) if text else None
        if part is not None:
            return f"container {container.name!r} runs {part!r}"
        if _repository_name(container.image) in DEV_REPOSITORIES:
            return f"container {container.name!r} runs the image {container.image[:120]!r}"
        part = first_part(DEV_IMAGE_PARTS, container.image.lower())
        if part is not None:
            return f"container {container.name!r} runs the image {container.image[:120]!r}"
    return None


def _dev_command_part(text: str) -> str | None:
    """The first of DEV_COMMAND_PARTS the command line runs. The word `benchmark` counts in what
    runs (`benchmark_serving.py`, `python -m benchmarks.x`), not in an option's name: JetStream's
    server takes `inference_benchmark_test=True` and serves all the same."""
    for part in DEV_COMMAND_PARTS:
        if part in text and (part != "benchmark" or _runs_a_benchmark(text)):
            return part
    return None


def _serves(container: Container) -> bool:
    """Whether a container runs a serving command or declares a port other than a shell's."""
    if first_part(SERVER_COMMAND_PARTS, command_text(container)) is not None:
        return True
    return any(
        isinstance(port, dict) and not remote_access(port) for port in as_list(container.spec.get("ports"))
    )


def _runs_a_benchmark(text: str) -> bool:
    for word in text.split():
        if word.startswith("-") or "$" in word:
            continue  # an option (`--benchmark-dir`), a variable's name (`$(MLP_BENCHMARK_BUCKET)`)
        key, equals, value = word.partition("=")
        if "benchmark" in (value if equals else key):  # `key=value`: an option's value, not its name
            return True
    return False


def _server_evidence(
    workload: Workload, template: PodTemplate, service_of: ServiceLookup | None
) -> str | None:
    for container in template.main_containers():
        ports = [
            p for p in as_list(container.spec.get("ports")) if isinstance(p, dict) and not remote_access(p)
        ]
        if ports:
            return f"container {container.name!r} declares port {ports[0].get('containerPort')!r}"
    if service_of is not None:
        service = service_of(workload, template)
        if service is not None:
            return f"Service {service} selects its pods"
    return _serving_program(template)


def _serving_program(template: PodTemplate) -> str | None:
    """Why a template runs a server program (its command, or a serving image's entrypoint), or None."""
    for container in template.main_containers():
        text = command_text(container)
        part = first_part(SERVER_COMMAND_PARTS, text) if text else None
        if part is not None:
            return f"container {container.name!r} runs {part!r}"
        if not container.spec.get("command"):
            part = first_part(SERVER_IMAGE_PARTS, container.image.lower())
            if part is not None:
                return f"container {container.name!r} runs the serving image {container.image[:120]!r}"
    return None


def _restart_policy(template: PodTemplate) -> str:
    value = template.spec.get("restartPolicy")
    return value if isinstance(value, str) else "Always"


def declared_class(workload: Workload) -> str | None:
    """The workload class the object declares (label gpupolicy.io/workload-class): on its own
    metadata, else on its pod templates' (the first that declares one). A Pod carries its
    template's labels, not its owner's: declared on the template, the class reaches the ReplicaSets
    and Pods that controllers make, which the webhook reviews too."""
    declared = workload.labels.get(WORKLOAD_CLASS_LABEL)
    if isinstance(declared, str):
        return declared
    for template in workload.templates:
        declared = template.labels.get(WORKLOAD_CLASS_LABEL)
        if isinstance(declared, str):
            return declared
    return None


def decide(
    workload: Workload,
    *,
    service_of: ServiceLookup | None = None,
    serving_classes: Iterable[str] = SERVING_CLASSES_DEFAULT,
    batch_classes: Iterable[str] = BATCH_CLASSES_DEFAULT,
    serving_kinds: Iterable[str] = (),
) -> RoleDecision:
    """The role of a workload, with the evidence for it. An explicit workload class wins, then the
    GPU stack's own images, then the kind (batch kinds, serving CRDs), then what the pods run."""
    declared = declared_class(workload)
    if declared is not None:
        if declared in serving_classes:
            return RoleDecision(Role.SERVER, f"labelled {WORKLOAD_CLASS_LABEL}={declared}")
        if declared in batch_classes:
            return RoleDecision(Role.BATCH, f"labelled {WORKLOAD_CLASS_LABEL}={declared}")
        if declared == "dev":
            return RoleDecision(Role.DEV, f"labelled {WORKLOAD_CLASS_LABEL}={declared}")
    # A test pod that happens to run a GPU-stack image (GKE's NCCL tests beside the TCPX plugin)
    # is a test: only a DaemonSet is an agent before anything else.
    dev = (
        None
        if workload.kind == "DaemonSet"
        else next(filter(None, map(_dev_evidence, workload.templates)), None)
    )
    agent = None if dev is not None else _agent_evidence(workload)
    if agent is not None:
        return RoleDecision(Role.AGENT, agent)
    if workload.kind in CONFIG_KINDS:
        return RoleDecision(
            Role.WORKLOAD, f"a {workload.kind} is part of the pods of the services that name it"
        )
    if workload.kind in SERVING_KINDS or workload.kind in serving_kinds or _kaito_inference(workload):
        return RoleDecision(Role.SERVER, f"a {workload.kind} serves requests")
    templates = workload.templates
    if dev is not None:
        return RoleDecision(Role.DEV, dev)
    if workload.kind in BATCH_KINDS:
        return RoleDecision(Role.BATCH, f"a {workload.kind} runs to completion")
    if workload.is_pod and templates and _restart_policy(templates[0]) != "Always":
        return RoleDecision(Role.BATCH, f"a Pod with restartPolicy {_restart_policy(templates[0])}")
    if workload.kind == "RayCluster":
        # A bare Ray cluster runs jobs and Serve apps submitted to it; its head's ports are Ray's own
        # (GCS 6379, dashboard 8265, client 10001). RayService is the serving form.
        return RoleDecision(Role.WORKLOAD, "a RayCluster runs what is submitted to it")
    for template in serving_templates_of(workload):
        server = _server_evidence(workload, template, service_of)
        if server is not None:
            return RoleDecision(Role.SERVER, server)
    return RoleDecision(Role.WORKLOAD, "no evidence that it serves, runs to completion or is a test")


def _kaito_inference(workload: Workload) -> bool:
    """A KAITO Workspace with an `inference` section serves its model (kaito.sh/v1beta1)."""
    obj = workload.resource.obj
    return workload.kind == "Workspace" and isinstance(obj, dict) and isinstance(obj.get("inference"), dict)


def serving_templates_of(workload: Workload) -> list[PodTemplate]:
    """The templates that answer requests when the workload serves: a LeaderWorkerSet's leader (its
    workers join the leader's model; with a leader that holds no GPU, also the workers that serve on
    theirs), a Ray cluster's head; every template otherwise."""
    templates = workload.templates
    if workload.kind == "LeaderWorkerSet":
        leaders = [t for t in templates if t.role == "leader"]
        if not leaders or any(names_gpu_resource(t) for t in leaders):
            return leaders or templates[:1]
        # A leader that holds no GPU joins no model: it routes (LMCache's prefill/decode proxy), and
        # workers that run a model server on their own GPUs (`vllm serve`) answer what it routes. A
        # port alone is no such evidence (Kueue's topology demo runs nginx on GPU workers).
        return [
            *leaders,
            *(t for t in templates if t.role != "leader" and names_gpu_resource(t) and _serving_program(t)),
        ]
    if workload.kind in ("RayCluster", "RayService", "RayClusterFleet"):
        # Ray workers host Serve replicas, but Ray places them; the head is what a Service fronts.
        heads = [t for t in templates if t.role == "head"]
        return heads or templates[:1]
    if workload.kind == "DynamoGraphDeployment":
        # Its frontend routes requests to its workers, which serve them: every component answers
        # (a component named `worker` is not a multi-node worker of another's model).
        return templates
    # Multi-node workers (LLMInferenceService `worker`, KServe worker specs) join a leader's model.
    answering = [t for t in templates if not t.role.endswith("worker")] or templates
    if len(answering) > 1 and workload.kind not in SERVING_KINDS:
        # Several templates and no serving CRD (Kthena's ModelServing, read by the walk: an entry
        # template that serves, a worker template that joins it): those with evidence of serving
        # answer. Found once per view: the probe and model rules each ask.
        evident: list[PodTemplate] | None = workload.cache.get(_EVIDENT_SERVERS)
        if evident is None:
            evident = workload.cache[_EVIDENT_SERVERS] = [
                t for t in answering if _server_evidence(workload, t, None) is not None
            ]
        return evident or answering
    return answering


_EVIDENT_SERVERS = "evident-serving-templates"  # Workload.cache key of serving_templates_of


def serving_replicas(template: PodTemplate) -> int | None:
    """How many copies of the server a serving template's pods make: its pods over the pods of one
    copy (`PodTemplate.ranks`: the ranks of one multi-node engine, a worker-only LeaderWorkerSet's
    group, whose workerTemplate is the leader's too: https://lws.sigs.k8s.io/docs/reference/leaderworkerset.v1/)."""
    if template.replicas is None:
        return None
    return template.replicas // max(template.ranks, 1)


# SSH's well-known port: an interactive GPU box (`service ssh start -D`) or the rendezvous of MPI
# workers (`/usr/sbin/sshd -De`) listens on it, and neither serves requests.
SSH_PORT = 22


def remote_access(port: Any) -> bool:
    """Whether a container or Service port is SSH's (its number or its name)."""
    port = as_mapping(port)
    number = port.get("containerPort", port.get("port"))
    return bool(number == SSH_PORT or port.get("name") == "ssh")


def service_selects(service: Any, labels: dict[str, Any]) -> bool:
    """A Service's `spec.selector` (equality only) matches these pod labels."""
    selector = as_mapping(as_mapping(service).get("spec")).get("selector")
    if not isinstance(selector, dict) or not selector:
        return False
    return all(isinstance(v, str) and labels.get(k) == v for k, v in selector.items())
