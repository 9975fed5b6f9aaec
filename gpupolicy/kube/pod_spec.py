"""The workload model: every pod template an object carries, with its JSON path.

One extractor serves every rule. Known kinds are read at the paths their APIs define; any other
kind is walked for `containers` lists, so a CRD that carries pods is never silently skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import field
from typing import Any

from gpupolicy.core.findings import JsonPath, ObjectRef
from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import built_in_api_group
from gpupolicy.loading.documents import Resource
from gpupolicy.loading.object_evidence import ARGO_WORKFLOW_KINDS

CONTAINER_LISTS = (
    ("containers", "container"),
    ("initContainers", "init"),
    ("ephemeralContainers", "ephemeral"),
)

# KServe's single-container component forms: `model` (v1beta1 ModelSpec) and the framework keys.
KSERVE_CONTAINER_KEYS = (
    "model", "sklearn", "xgboost", "tensorflow", "pytorch", "triton", "onnx", "huggingface",
    "lightgbm", "paddle", "pmml", "alibi", "art",
)  # fmt: skip
KSERVE_COMPONENTS = ("predictor", "transformer", "explainer")
# KServe's serving runtimes: containers and a part of a pod spec that the InferenceService naming
# the runtime completes. The service asks for the GPUs and names the service account and the
# priority: ServingRuntimePodSpec has no serviceAccountName, automountServiceAccountToken or
# priorityClassName (pkg/apis/serving/v1alpha1/servingruntime_types.go in kserve/kserve).
RUNTIME_KINDS = frozenset({"ServingRuntime", "ClusterServingRuntime"})


def as_mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def int_or_default(value: Any, default: int | None) -> int | None:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    return default


@immutable
class WrittenResources:
    """A container's resource requirements as a controller writes them from a field of its own over
    the container's (NVIDIA Dynamo's v1alpha1 service `resources`: `gpu: "1"` becomes
    `nvidia.com/gpu: 1`), with where each entry is written, so that a finding points at it."""

    requirements: dict[str, Any]  # {"limits": {...}, "requests": {...}, "claims": [...]}
    paths: dict[tuple[str, str], JsonPath]  # (section, resource name; "" for the section) -> field
    base: JsonPath  # the field the controller reads

    def path_of(self, section: str, name: str | None) -> JsonPath:
        found = self.paths.get((section, name or ""))
        if found is None and name is not None:
            found = self.paths.get((section, ""))
        return found if found is not None else self.base


_ENV_ITEMS = "env-items"  # Container.cache key of env_items


@immutable
class Container:
    """One container of a pod template. What rules read of it again and again (name, image, its
    resources, its security context) is read once, when the view is made."""

    spec: dict[str, Any]
    path: JsonPath
    role: str  # "container", "init", "sidecar" (an init container with restartPolicy: Always) or "ephemeral"
    resources_key: str = "resources"
    # Derived facts (GPU demands) memoised per container; not part of its identity.
    cache: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    # Requirements a controller writes into the container from elsewhere (else its own `resources`).
    written: WrittenResources | None = field(default=None, compare=False, hash=False, repr=False)
    # Variables a controller adds from elsewhere (NVIDIA Dynamo's v1alpha1 service `envs`), each
    # with where it is written; the container's own `env` comes first.
    added_env: tuple[tuple[JsonPath, dict[str, Any]], ...] = field(
        default=(), compare=False, hash=False, repr=False
    )
    # What the container belongs to, where a workload's templates share container names (every
    # Dynamo service's container is `main`): said in its label.
    owner: str | None = field(default=None, compare=False, hash=False, repr=False)
    name: str = field(init=False, compare=False, repr=False)
    image: str = field(init=False, compare=False, repr=False)
    resources: dict[str, Any] = field(init=False, compare=False, repr=False)
    requests: dict[str, Any] = field(init=False, compare=False, repr=False)
    limits: dict[str, Any] = field(init=False, compare=False, repr=False)
    security_context: dict[str, Any] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        spec = self.spec
        name, image = spec.get("name"), spec.get("image")
        written = self.written
        resources = written.requirements if written is not None else as_mapping(spec.get(self.resources_key))
        read = object.__setattr__  # frozen: the view is filled once, here
        read(self, "name", name if isinstance(name, str) else "")
        read(self, "image", image if isinstance(image, str) else "")
        read(self, "resources", resources)
        read(self, "requests", as_mapping(resources.get("requests")))
        read(self, "limits", as_mapping(resources.get("limits")))
        read(self, "security_context", as_mapping(spec.get("securityContext")))

    def resource_path(self, section: str, name: str | None = None) -> JsonPath:
        if self.written is not None:
            return self.written.path_of(section, name)
        base = (*self.path, self.resources_key, section)
        return base if name is None else (*base, name)

    def env_items(self) -> tuple[tuple[JsonPath, dict[str, Any]], ...]:
        """The container's variables (`env` items, and those its controller adds), each with its
        path: what the process is given, as far as the manifests say. Made once per container view
        (five rules read them)."""
        found: tuple[tuple[JsonPath, dict[str, Any]], ...] | None = self.cache.get(_ENV_ITEMS)
        if found is None:
            path = self.path
            own = tuple(
                ((*path, "env", index), item)
                for index, item in enumerate(as_list(self.spec.get("env")))
                if isinstance(item, dict)
            )
            found = self.cache[_ENV_ITEMS] = (*own, *self.added_env) if self.added_env else own
        return found

    def resources_field(self) -> JsonPath:
        """Where the container's resource requirements are written."""
        return self.written.base if self.written is not None else (*self.path, self.resources_key)

    def field(self, *steps: str | int) -> JsonPath:
        return (*self.path, *steps)

    @property
    def label(self) -> str:
        kind = {
            "init": "init container",
            "ephemeral": "ephemeral container",
            "sidecar": "sidecar container",
        }.get(self.role, "container")
        label = f"{kind} {self.name!r}" if self.name else kind
        return f"{label} of {self.owner}" if self.owner else label


class PodTemplate:
    """One pod spec inside a workload (a Deployment has one; a LeaderWorkerSet two; a RayCluster one
    per group), with the metadata of its template and the number of pods it stands for."""

    __slots__ = (
        "annotations",
        "cache",
        "containers",
        "labels",
        "metadata",
        "metadata_path",
        "node_selector",
        "path",
        "pod_labels",
        "ranks",
        "replicas",
        "role",
        "security_context",
        "spec",
    )

    def __init__(
        self,
        spec: dict[str, Any],
        path: JsonPath,
        *,
        role: str = "",
        metadata: dict[str, Any] | None = None,
        metadata_path: JsonPath | None = None,
        replicas: int | None = 1,
        containers: list[Container] | None = None,
        ranks: int = 1,
    ) -> None:
        self.spec = spec
        self.path = path
        self.role = role
        self.metadata = metadata or {}
        self.metadata_path = metadata_path
        self.replicas = replicas
        # The pods of one copy of what the template runs: the ranks of one multi-node engine (a
        # Dynamo component's multinode.nodeCount, a worker-only LeaderWorkerSet's group size).
        self.ranks = ranks
        self.containers = containers if containers is not None else list(_containers_of(spec, path))
        self.cache: dict[str, Any] = {}
        # Read once: every rule about placement, security or experiments asks for them.
        self.labels: dict[str, Any] = as_mapping(self.metadata.get("labels"))
        # The labels of the pods a controller makes from this template, where it sets its own or
        # merges another field's (KubeRay: `_ray_pod_labels`); None when they are `labels`.
        self.pod_labels: dict[str, Any] | None = None
        self.annotations: dict[str, Any] = as_mapping(self.metadata.get("annotations"))
        self.node_selector: dict[str, Any] = as_mapping(spec.get("nodeSelector"))
        self.security_context: dict[str, Any] = as_mapping(spec.get("securityContext"))

    def field(self, *steps: str | int) -> JsonPath:
        return (*self.path, *steps)

    def main_containers(self) -> list[Container]:
        return [item for item in self.containers if item.role == "container"]

    def volumes(self) -> list[tuple[JsonPath, dict[str, Any]]]:
        """The pod's volumes with their paths, found once per template (four rules read them);
        each caller gets its own list."""
        found: tuple[tuple[JsonPath, dict[str, Any]], ...] | None = self.cache.get(_VOLUMES)
        if found is None:
            found = self.cache[_VOLUMES] = tuple(
                (self.field("volumes", index), volume)
                for index, volume in enumerate(as_list(self.spec.get("volumes")))
                if isinstance(volume, dict)
            )
        return list(found)

    def describe(self) -> str:
        return f"pod template {self.role!r}" if self.role else "pod template"


_VOLUMES = "volumes"  # PodTemplate.cache key of `volumes()`


def _containers_of(spec: dict[str, Any], path: JsonPath, owner: str | None = None) -> Iterator[Container]:
    for key, role in CONTAINER_LISTS:
        for index, item in enumerate(as_list(spec.get(key))):
            if isinstance(item, dict):
                # A native sidecar (an init container with restartPolicy: Always, Kubernetes 1.29+)
                # runs beside the main containers for the pod's life, and its requests add to theirs.
                # https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/
                kind = "sidecar" if role == "init" and item.get("restartPolicy") == "Always" else role
                yield Container(item, (*path, key, index), kind, owner=owner)


def _template(
    obj: Any, path: JsonPath, *, role: str = "", replicas: int | None = 1, ranks: int = 1
) -> PodTemplate | None:
    """A PodTemplateSpec (`metadata` + `spec`) at `path`."""
    template = as_mapping(obj)
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return None
    metadata = as_mapping(template.get("metadata"))
    return PodTemplate(
        spec,
        (*path, "spec"),
        role=role,
        metadata=metadata,
        metadata_path=(*path, "metadata"),
        replicas=replicas,
        ranks=ranks,
    )


def value_at(obj: Any, path: JsonPath) -> Any:
    """The value at `path` in plain values (mapping keys, list indices), or None."""
    for step in path:
        if isinstance(step, str) and isinstance(obj, dict):
            obj = obj.get(step)
        elif isinstance(step, int) and isinstance(obj, list) and 0 <= step < len(obj):
            obj = obj[step]
        else:
            return None
    return obj


# -- per-kind extractors --------------------------------------------------------------

Extractor = Callable[[dict[str, Any]], Iterator[PodTemplate]]


def _pod(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        yield PodTemplate(
            spec, ("spec",), metadata=as_mapping(obj.get("metadata")), metadata_path=("metadata",)
        )


def _replicated(default_replicas: int | None) -> Extractor:
    def extract(obj: dict[str, Any]) -> Iterator[PodTemplate]:
        spec = as_mapping(obj.get("spec"))
        replicas = int_or_default(spec.get("replicas"), default_replicas)
        found = _template(spec.get("template"), ("spec", "template"), replicas=replicas)
        if found:
            yield found

    return extract


def _job(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    spec = as_mapping(obj.get("spec"))
    found = _template(
        spec.get("template"), ("spec", "template"), replicas=int_or_default(spec.get("parallelism"), 1)
    )
    if found:
        yield found


def _cronjob(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    job = as_mapping(value_at(obj, ("spec", "jobTemplate", "spec")))
    path = ("spec", "jobTemplate", "spec", "template")
    found = _template(job.get("template"), path, replicas=int_or_default(job.get("parallelism"), 1))
    if found:
        yield found


def _leader_worker_set(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    spec = as_mapping(obj.get("spec"))
    groups = int_or_default(spec.get("replicas"), 1) or 0
    lwt = as_mapping(spec.get("leaderWorkerTemplate"))
    size = int_or_default(lwt.get("size"), 1) or 1
    base = ("spec", "leaderWorkerTemplate")
    leader = _template(lwt.get("leaderTemplate"), (*base, "leaderTemplate"), role="leader", replicas=groups)
    if leader:
        yield leader
    worker_count = groups * (size - 1) if leader else groups * size
    worker = _template(
        lwt.get("workerTemplate"),
        (*base, "workerTemplate"),
        role="worker",
        replicas=worker_count,
        ranks=max(size - 1, 1) if leader else size,
    )
    if worker:
        yield worker


def _ray_cluster_spec(spec: Any, base: JsonPath, cluster: str | None) -> Iterator[PodTemplate]:
    spec = as_mapping(spec)
    head_group = as_mapping(spec.get("headGroupSpec"))
    head = _template(head_group.get("template"), (*base, "headGroupSpec", "template"), role="head")
    if head:
        head.pod_labels = _ray_pod_labels(head, head_group, "head", RAY_HEAD_GROUP, cluster)
        yield head
    for index, group in enumerate(as_list(spec.get("workerGroupSpecs"))):
        group = as_mapping(group)
        group_name = group.get("groupName")
        name = group_name if isinstance(group_name, str) else f"worker[{index}]"
        replicas = int_or_default(group.get("replicas"), int_or_default(group.get("minReplicas"), 1))
        path = (*base, "workerGroupSpecs", index, "template")
        found = _template(group.get("template"), path, role=f"worker {name}", replicas=replicas)
        if found:
            group_label = group_name if isinstance(group_name, str) else None
            found.pod_labels = _ray_pod_labels(found, group, "worker", group_label, cluster)
            yield found


# What the KubeRay operator labels every Ray pod with (ray-operator/controllers/ray/common/pod.go,
# `labelPod`; the keys in utils/constant.go). The template's labels, merged with the group's
# top-level `labels` (KubeRay 1.5+, which win), override the first three; they cannot override the
# node type, the group or the cluster. The cluster is the RayCluster's name: a RayService or RayJob
# makes its RayCluster under a generated name, so theirs cannot be told from the manifest.
RAY_POD_LABELS = {
    "ray.io/is-ray-node": "yes",
    "app.kubernetes.io/name": "kuberay",
    "app.kubernetes.io/created-by": "kuberay-operator",
}
RAY_HEAD_GROUP = "headgroup"


def _ray_pod_labels(
    template: PodTemplate, group: dict[str, Any], node_type: str, group_name: str | None, cluster: str | None
) -> dict[str, Any]:
    labels: dict[str, Any] = {**RAY_POD_LABELS, **template.labels, **as_mapping(group.get("labels"))}
    labels["ray.io/node-type"] = node_type
    if group_name is not None:
        labels["ray.io/group"] = group_name
    if cluster is not None:
        labels["ray.io/cluster"] = cluster
    return labels


def _ray(cluster_key: str | None) -> Extractor:
    def extract(obj: dict[str, Any]) -> Iterator[PodTemplate]:
        if cluster_key is None:
            name = as_mapping(obj.get("metadata")).get("name")
            yield from _ray_cluster_spec(obj.get("spec"), ("spec",), name if isinstance(name, str) else None)
        else:
            spec = as_mapping(obj.get("spec"))
            yield from _ray_cluster_spec(spec.get(cluster_key), ("spec", cluster_key), None)
            # RayJob may also run its submitter as a pod of its own.
            submitter = _template(
                spec.get("submitterPodTemplate"), ("spec", "submitterPodTemplate"), role="submitter"
            )
            if submitter:
                yield submitter

    return extract


def _kubeflow(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """PyTorchJob, TFJob, MPIJob, XGBoostJob, PaddleJob...: `spec.<x>ReplicaSpecs.<Role>.template`."""
    spec = as_mapping(obj.get("spec"))
    for key, replica_specs in spec.items():
        if not (isinstance(key, str) and key.endswith("ReplicaSpecs") and isinstance(replica_specs, dict)):
            continue
        for role, replica_spec in replica_specs.items():
            replica_spec = as_mapping(replica_spec)
            replicas = int_or_default(replica_spec.get("replicas"), 1)
            path = ("spec", key, str(role), "template")
            found = _template(replica_spec.get("template"), path, role=str(role), replicas=replicas)
            if found:
                yield found


def _train_job(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """Kubeflow Trainer v2: `spec.trainer` is a container-like block with `resourcesPerNode`."""
    trainer = value_at(obj, ("spec", "trainer"))
    if not isinstance(trainer, dict):
        return
    path = ("spec", "trainer")
    container = Container(trainer, path, "container", resources_key="resourcesPerNode")
    nodes = int_or_default(trainer.get("numNodes"), 1)
    yield PodTemplate(trainer, path, role="trainer", replicas=nodes, containers=[container])


def _jobset(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    for index, job in enumerate(as_list(value_at(obj, ("spec", "replicatedJobs")))):
        job = as_mapping(job)
        job_spec = as_mapping(value_at(job, ("template", "spec")))
        replicas = (int_or_default(job.get("replicas"), 1) or 1) * (
            int_or_default(job_spec.get("parallelism"), 1) or 1
        )
        name = job.get("name") if isinstance(job.get("name"), str) else f"replicatedJobs[{index}]"
        path = ("spec", "replicatedJobs", index, "template", "spec", "template")
        found = _template(job_spec.get("template"), path, role=str(name), replicas=replicas)
        if found:
            yield found


def _inference_service(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    spec = as_mapping(obj.get("spec"))
    for component in KSERVE_COMPONENTS:
        body = spec.get(component)
        if not isinstance(body, dict):
            continue
        path = ("spec", component)
        containers = list(_containers_of(body, path))
        for key in KSERVE_CONTAINER_KEYS:
            if isinstance(body.get(key), dict):
                containers.append(Container(body[key], (*path, key), "container"))
        replicas = int_or_default(body.get("minReplicas"), 1)
        yield PodTemplate(body, path, role=component, replicas=replicas, containers=containers)


def _llm_inference_service(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """KServe's LLMInferenceService (serving.kserve.io/v1alpha1): `spec.template` is the decode (or
    only) pod spec, `spec.worker` its multi-node workers; `spec.prefill` holds the same pair for
    disaggregated prefill. Each is a PodSpec, not a PodTemplateSpec."""
    spec = as_mapping(obj.get("spec"))
    # The object's own metadata: its annotations ask the controller for DRA claims.
    metadata = as_mapping(obj.get("metadata"))
    for base, section, name in (
        (("spec",), spec, ""),
        (("spec", "prefill"), as_mapping(spec.get("prefill")), "prefill"),
    ):
        replicas = int_or_default(section.get("replicas"), 1)
        for key, role in (("template", name or "main"), ("worker", f"{name} worker".strip())):
            body = section.get(key)
            if isinstance(body, dict):
                yield PodTemplate(
                    body,
                    (*base, key),
                    role=role,
                    replicas=replicas,
                    metadata=metadata,
                    metadata_path=("metadata",),
                )


def _spark_application(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """Kubeflow Spark operator's SparkApplication: `spec.driver` and `spec.executor` are container
    specs; the pod-level volumes are `spec.volumes` (the operator mounts them into both)."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        yield from _spark_pods(spec, ("spec",))


def _scheduled_spark_application(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """A ScheduledSparkApplication: `spec.template` is the SparkApplication spec it runs on its schedule."""
    template = as_mapping(obj.get("spec")).get("template")
    if isinstance(template, dict):
        yield from _spark_pods(template, ("spec", "template"))


# The operator names the containers it makes (spark-operator: common.SparkDriverContainerName).
_SPARK_CONTAINERS = {"driver": "spark-kubernetes-driver", "executor": "spark-kubernetes-executor"}


def _spark_pods(spec: dict[str, Any], path: JsonPath) -> Iterator[PodTemplate]:
    """The driver and executor of a SparkApplication spec, as the operator builds their pods (api/v1beta2
    SparkPodSpec): the image is the pod's own or `spec.image`, the one both share; `gpu: {name,
    quantity}` becomes that resource's limit, `cores` the cpu request, `coreLimit` its limit, and
    `memory` the memory request and limit (`coreRequest`, where given, the cpu request).
    https://github.com/kubeflow/spark-operator/blob/master/api/v1beta2/sparkapplication_types.go"""
    containers: list[Container] = []
    shared_image = spec.get("image")
    for key in ("driver", "executor"):
        body = spec.get(key)
        if not isinstance(body, dict):
            continue
        written = _spark_resources(body, (*path, key))
        seen = {"name": _SPARK_CONTAINERS[key], **body}
        if "image" not in body and isinstance(shared_image, str):
            # Said once, on the driver: the executor's copy of the same image is the same finding.
            seen["image"] = shared_image if key == "driver" or "driver" not in spec else ""
        containers.append(Container(seen, (*path, key), "container", written=written))
        for list_key, role in (("initContainers", "init"), ("sidecars", "container")):
            for index, item in enumerate(as_list(body.get(list_key))):
                if isinstance(item, dict):
                    containers.append(Container(item, (*path, key, list_key, index), role))
    executors = int_or_default(as_mapping(spec.get("executor")).get("instances"), 1)
    yield PodTemplate(spec, path, role="spark", replicas=executors, containers=containers)


# Spark's memory sizes are JVM sizes (`512m` is 512 MiB, not Kubernetes' 0.512 bytes).
_JVM_SIZE = re.compile(r"([0-9]{1,12})([kmgtp])b?", re.IGNORECASE)  # matched whole


def _spark_resources(body: dict[str, Any], base: JsonPath) -> WrittenResources | None:
    requirements: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    paths: dict[tuple[str, str], JsonPath] = {}

    def put(section: str, name: str, value: Any, where: JsonPath) -> None:
        requirements[section][name] = value
        paths[(section, name)] = where

    gpu = as_mapping(body.get("gpu"))
    if isinstance(gpu.get("name"), str) and "quantity" in gpu:
        put("limits", gpu["name"], gpu["quantity"], (*base, "gpu", "quantity"))
    if isinstance(body.get("cores"), int | float | str):
        put("requests", "cpu", body["cores"], (*base, "cores"))
    if isinstance(body.get("coreLimit"), str | int | float):
        put("limits", "cpu", body["coreLimit"], (*base, "coreLimit"))
    size = _JVM_SIZE.fullmatch(body["memory"]) if isinstance(body.get("memory"), str) else None
    if size is not None:
        memory = f"{size.group(1)}{size.group(2).upper()}i"
        put("requests", "memory", memory, (*base, "memory"))
        put("limits", "memory", memory, (*base, "memory"))
    if isinstance(body.get("coreRequest"), str | int | float):  # the request, where both are given
        put("requests", "cpu", body["coreRequest"], (*base, "coreRequest"))
    if not paths:
        return None
    return WrittenResources({k: v for k, v in requirements.items() if v}, paths, base)


def _nim_service(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """NVIDIA NIM operator's NIMService: `spec` is one container (image, resources, env) that the
    operator turns into a Deployment, scaled up to `spec.scale.hpa.maxReplicas` when enabled."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    scale = as_mapping(spec.get("scale"))
    replicas = int_or_default(spec.get("replicas"), 1)
    if scale.get("enabled") is True:
        replicas = int_or_default(as_mapping(scale.get("hpa")).get("maxReplicas"), replicas)
    container = Container(_nim_container(obj, spec), ("spec",), "container")
    yield PodTemplate(spec, ("spec",), role="nim", replicas=replicas, containers=[container])


# The NIM operator's probes when a NIMService writes none (api/apps/v1alpha1 nimservice_types.go,
# GetDefault{Liveness,Readiness,Startup}Probe), on its `api` port (DefaultNamedPortAPI, 8000).
_NIM_PORT = "api"
_NIM_DEFAULT_PROBES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("livenessProbe", {"httpGet": {"path": "/v1/health/live", "port": _NIM_PORT}, "initialDelaySeconds": 15,
                       "timeoutSeconds": 1, "periodSeconds": 10, "failureThreshold": 3}),
    ("readinessProbe", {"httpGet": {"path": "/v1/health/ready", "port": _NIM_PORT}, "initialDelaySeconds": 15,
                        "timeoutSeconds": 1, "periodSeconds": 10, "failureThreshold": 3}),
    ("startupProbe", {"httpGet": {"path": "/v1/health/ready", "port": _NIM_PORT}, "initialDelaySeconds": 30,
                      "timeoutSeconds": 1, "periodSeconds": 10, "failureThreshold": 30}),
)  # fmt: skip


def _nim_container(obj: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The container the NIM operator makes of a NIMService's spec: named `<name>-ctr`, running
    `image.repository:image.tag` (api/apps/v1alpha1 NIMService GetImage, GetContainerName), with its
    `api` port (spec.expose.service.port) and each probe the spec's `{enabled, probe}` gives: the
    probe written, else the operator's default, none when `enabled: false` (GetDeploymentParams)."""
    seen = dict(spec)
    for key, default in _NIM_DEFAULT_PROBES:
        written = as_mapping(spec.get(key))
        if written.get("enabled") is False:
            seen.pop(key, None)
        else:
            probe = written.get("probe")
            seen[key] = probe if isinstance(probe, dict) else default
    port = as_mapping(as_mapping(as_mapping(spec.get("expose")).get("service"))).get("port")
    seen["ports"] = [{"name": _NIM_PORT, "containerPort": port if isinstance(port, int) else 8000}]
    name = as_mapping(obj.get("metadata")).get("name")
    if isinstance(name, str) and name and "name" not in spec:
        seen["name"] = f"{name}-ctr"
    image = spec.get("image")
    if isinstance(image, dict) and isinstance(image.get("repository"), str):
        tag = image.get("tag")
        seen["image"] = (
            f"{image['repository']}:{tag}"
            if isinstance(tag, str | int | float) and tag != ""
            else image["repository"]
        )
    return seen


def _pod_clique_set(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """NVIDIA Grove's PodCliqueSet (grove.io/v1alpha1): each clique of `spec.template.cliques` is a
    pod template (`spec.podSpec`) whose pods are the set's replicas × the clique's × those of the
    scaling group that names it; the operator labels them with the set's name (part-of) and its
    own name (managed-by), besides the clique's labels (operator/api/common/labels.go)."""
    spec = as_mapping(obj.get("spec"))
    template = as_mapping(spec.get("template"))
    copies = int_or_default(spec.get("replicas"), 1)
    grouped: dict[str, int | None] = {}
    for group in as_list(template.get("podCliqueScalingGroups")):
        group = as_mapping(group)
        for name in as_list(group.get("cliqueNames")):
            grouped[str(name)] = int_or_default(group.get("replicas"), 1)
    name = str(as_mapping(obj.get("metadata")).get("name") or "")
    for index, clique in enumerate(as_list(template.get("cliques"))):
        clique = as_mapping(clique)
        clique_spec = as_mapping(clique.get("spec"))
        pod = clique_spec.get("podSpec")
        if not isinstance(pod, dict):
            continue
        own = str(clique.get("name") or "")
        pods, group = int_or_default(clique_spec.get("replicas"), 1), grouped.get(own, 1)
        replicas = (
            copies * pods * group if copies is not None and pods is not None and group is not None else None
        )
        metadata = {
            key: clique[key] for key in ("labels", "annotations") if isinstance(clique.get(key), dict)
        }
        base: JsonPath = ("spec", "template", "cliques", index)
        found = PodTemplate(
            pod,
            (*base, "spec", "podSpec"),
            role=own,
            replicas=replicas,
            metadata=metadata,
            metadata_path=base,
        )
        found.pod_labels = {
            **found.labels,
            "app.kubernetes.io/managed-by": "grove-operator",
            "app.kubernetes.io/part-of": name,
        }
        yield found


# Argo Workflows: the pod-level fields a workflow sets for all its pods, and the name each has in
# a template where it differs (a template's own value wins: Argo's WorkflowSpec and Template,
# https://argo-workflows.readthedocs.io/en/latest/fields/).
_ARGO_POD_DEFAULTS = (
    ("nodeSelector", "nodeSelector"), ("affinity", "affinity"), ("tolerations", "tolerations"),
    ("securityContext", "securityContext"), ("serviceAccountName", "serviceAccountName"),
    ("automountServiceAccountToken", "automountServiceAccountToken"), ("hostNetwork", "hostNetwork"),
    ("imagePullSecrets", "imagePullSecrets"), ("podPriorityClassName", "priorityClassName"),
    ("schedulerName", "schedulerName"),
    # The workflow's DRA claims, given to every pod whose template declares none (workflowpod.go).
    ("resourceClaims", "resourceClaims"),
)  # fmt: skip
_ARGO_MAIN = "main"


def _argo_workflow(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """Argo's Workflow, WorkflowTemplate, ClusterWorkflowTemplate and CronWorkflow
    (`spec.workflowSpec`): one pod template per template that runs a pod — a `container`, a
    `script` or a `containerSet` — with its init containers and sidecars, under the pod-level
    fields the workflow sets for every pod (its template's own win; volumes add up). The
    template's fields are a pod's where Argo names them alike (nodeSelector, tolerations,
    securityContext, priorityClassName…); `dag`, `steps`, `resource` and `suspend` run none."""
    spec = as_mapping(obj.get("spec"))
    base: JsonPath = ("spec",)
    if obj.get("kind") == "CronWorkflow":
        spec, base = as_mapping(spec.get("workflowSpec")), ("spec", "workflowSpec")
    defaults = {name: spec[key] for key, name in _ARGO_POD_DEFAULTS if key in spec}
    shared_volumes = as_list(spec.get("volumes"))
    for index, template in enumerate(as_list(spec.get("templates"))):
        if isinstance(template, dict):
            found = _argo_template(template, (*base, "templates", index), defaults, shared_volumes, spec)
            if found is not None:
                yield found


def _argo_template(
    template: dict[str, Any],
    path: JsonPath,
    defaults: dict[str, Any],
    shared_volumes: list[Any],
    spec: dict[str, Any],
) -> PodTemplate | None:
    patch = template.get("podSpecPatch", spec.get("podSpecPatch"))
    if isinstance(patch, str) and "{{" in patch:
        # A patch filled in when the step runs (Kubeflow Pipelines' executor: `podSpecPatch:
        # '{{inputs.parameters.pod-spec-patch}}'` over the image `should-be-overridden-during-runtime`)
        # may replace any field of the pod: what the manifest says of it is not what runs.
        return None
    containers: list[Container] = []
    for key in ("container", "script"):
        body = template.get(key)
        if isinstance(body, dict):
            # Argo names the container it runs `main` (its executor's convention).
            named = body if body.get("name") else {**body, "name": _ARGO_MAIN}
            containers.append(Container(named, (*path, key), "container"))
    for index, item in enumerate(as_list(as_mapping(template.get("containerSet")).get("containers"))):
        if isinstance(item, dict):
            containers.append(Container(item, (*path, "containerSet", "containers", index), "container"))
    if not containers:
        return None
    # Argo's sidecars run beside the main container for its life, as a native sidecar does.
    for key, role in (("initContainers", "init"), ("sidecars", "sidecar")):
        for index, item in enumerate(as_list(template.get(key))):
            if isinstance(item, dict):
                containers.append(Container(item, (*path, key, index), role))
    pod = {**defaults, **template}
    if shared_volumes:
        pod["volumes"] = [*shared_volumes, *as_list(template.get("volumes"))]
    metadata = as_mapping(spec.get("podMetadata"))
    own = as_mapping(template.get("metadata"))
    merged = {
        key: {**as_mapping(metadata.get(key)), **as_mapping(own.get(key))}
        for key in ("labels", "annotations")
    }
    name = template.get("name")
    return PodTemplate(
        pod,
        path,
        role=name if isinstance(name, str) else "",
        containers=containers,
        metadata={key: value for key, value in merged.items() if value},
        metadata_path=(*path, "metadata"),
    )


def _dynamo_graph_deployment(obj: dict[str, Any]) -> Iterator[PodTemplate]:
    """NVIDIA Dynamo's DynamoGraphDeployment: one pod template per component. nvidia.com/v1beta1
    lists `spec.components`, each with a PodTemplateSpec (`podTemplate`); v1alpha1 maps names to
    `spec.services`, each a PodSpec (`extraPodSpec`) whose `mainContainer` the operator completes
    with the service's `resources` (cpu, memory, `gpu` as nvidia.com/gpu or its `gpuType`,
    `custom`), its `labels` and `annotations`. A multi-node component runs `multinode.nodeCount`
    pods per replica. https://github.com/ai-dynamo/dynamo (deploy/operator: api/v1alpha1,
    api/v1beta1, internal/controller_common GetResourcesConfig)."""
    spec = as_mapping(obj.get("spec"))
    for index, component in enumerate(as_list(spec.get("components"))):
        component = as_mapping(component)
        path = ("spec", "components", index, "podTemplate")
        role = _dynamo_role(component.get("type"), component.get("name"), f"components[{index}]")
        found = _template(
            component.get("podTemplate"),
            path,
            role=role,
            replicas=_dynamo_pods(component),
            ranks=_dynamo_nodes(component),
        )
        if found:
            yield found
    for name, service in as_mapping(spec.get("services")).items():
        if isinstance(service, dict):
            found = _dynamo_service(str(name), service)
            if found:
                yield found


def _dynamo_role(kind: Any, name: Any, fallback: str) -> str:
    label = name if isinstance(name, str) and name else fallback
    return f"{kind} {label}" if isinstance(kind, str) and kind else label


def _dynamo_pods(component: dict[str, Any]) -> int | None:
    replicas = int_or_default(component.get("replicas"), 1)
    return None if replicas is None else replicas * _dynamo_nodes(component)


def _dynamo_nodes(component: dict[str, Any]) -> int:
    """The pods of one replica: "Distributing a single model instance across multiple nodes"
    (Dynamo's multinode deployment guide, multinode.nodeCount)."""
    return max(int_or_default(as_mapping(component.get("multinode")).get("nodeCount"), 1) or 1, 1)


def _dynamo_service(name: str, service: dict[str, Any]) -> PodTemplate | None:
    path = ("spec", "services", name)
    pod = service.get("extraPodSpec")
    if not isinstance(pod, dict):
        return None
    pod_path = (*path, "extraPodSpec")
    containers = []
    main = pod.get("mainContainer")
    if isinstance(main, dict):
        main_path = (*pod_path, "mainContainer")
        written = _dynamo_resources(
            main, main_path, as_mapping(service.get("resources")), (*path, "resources")
        )
        # The operator names it `main` (consts.MainContainerName) when the manifest does not.
        named = main if main.get("name") else {**main, "name": _DYNAMO_MAIN}  # `name: ""` too (mergo)
        # The operator merges the service's `envs` into the main container's env (MergeEnvs).
        added = tuple(
            ((*path, "envs", index), item)
            for index, item in enumerate(as_list(service.get("envs")))
            if isinstance(item, dict)
        )
        containers.append(
            Container(
                named, main_path, "container", written=written, added_env=added, owner=f"service {name!r}"
            )
        )
    containers.extend(_containers_of(pod, pod_path, owner=f"service {name!r}"))
    metadata = {key: service[key] for key in ("labels", "annotations") if isinstance(service.get(key), dict)}
    return PodTemplate(
        pod,
        pod_path,
        role=_dynamo_role(service.get("componentType"), name, name),
        replicas=_dynamo_pods(service),
        ranks=_dynamo_nodes(service),
        containers=containers,
        metadata=metadata,
        metadata_path=path,
    )


# The fields of a Dynamo v1alpha1 ResourceItem written under their own resource names.
_DYNAMO_NAMED_RESOURCES = ("cpu", "memory")
_DYNAMO_GPU = "nvidia.com/gpu"  # consts.KubeResourceGPUNvidia, unless the item names a `gpuType`
_DYNAMO_MAIN = "main"


def _dynamo_resources(
    main: dict[str, Any], main_path: JsonPath, override: dict[str, Any], base: JsonPath
) -> WrittenResources | None:
    """The main container's requirements with the service's `resources` copied over them, entry
    by entry, as the operator does; None when the service sets none (the container's own hold)."""
    if not override:
        return None
    own = as_mapping(main.get("resources"))
    requirements: dict[str, Any] = {}
    paths: dict[tuple[str, str], JsonPath] = {}
    for section in ("requests", "limits"):
        merged = dict(as_mapping(own.get(section)))
        for key in merged:
            paths[(section, str(key))] = (*main_path, "resources", section, key)
        item = override.get(section)
        if isinstance(item, dict):
            paths[(section, "")] = (*base, section)
            _copy_dynamo_item(item, (*base, section), merged, paths, section)
        elif section in own:
            paths[(section, "")] = (*main_path, "resources", section)
        if merged:
            requirements[section] = merged
    claims = [*as_list(own.get("claims")), *as_list(override.get("claims"))]
    if claims:
        requirements["claims"] = claims
    return WrittenResources(requirements, paths, base)


def _copy_dynamo_item(
    item: dict[str, Any],
    path: JsonPath,
    merged: dict[str, Any],
    paths: dict[tuple[str, str], JsonPath],
    section: str,
) -> None:
    for key in _DYNAMO_NAMED_RESOURCES:
        if item.get(key) not in (None, ""):
            merged[key], paths[(section, key)] = item[key], (*path, key)
    if item.get("gpu") not in (None, ""):
        gpu_type = item.get("gpuType")
        resource = gpu_type if isinstance(gpu_type, str) and gpu_type else _DYNAMO_GPU
        merged[resource], paths[(section, resource)] = item["gpu"], (*path, "gpu")
    for key, value in as_mapping(item.get("custom")).items():
        merged[str(key)], paths[(section, str(key))] = value, (*path, "custom", key)


def _walk_for_pod_specs(obj: Any, path: JsonPath = ()) -> Iterator[PodTemplate]:
    """Unknown kinds: any mapping holding a `containers` list of mappings is a pod spec."""
    if isinstance(obj, dict):
        main = obj.get("mainContainer")
        if isinstance(main, dict):
            # NVIDIA Dynamo's extraPodSpec: a PodSpec whose one container is `mainContainer`.
            container = Container(main, (*path, "mainContainer"), "container")
            yield PodTemplate(obj, path, role=_role_from_path(path), containers=[container])
            return
        containers = obj.get("containers")
        if isinstance(containers, list) and any(isinstance(item, dict) for item in containers):
            parent_path = path[:-1] if path and path[-1] == "spec" else None
            yield PodTemplate(
                obj,
                path,
                role=_role_from_path(path),
                metadata_path=parent_path and (*parent_path, "metadata"),
            )
            return
        for key, value in obj.items():
            if key in ("status", "metadata"):
                continue
            yield from _walk_for_pod_specs(value, (*path, str(key)))
    elif isinstance(obj, list):
        for index, item in enumerate(obj):
            yield from _walk_for_pod_specs(item, (*path, index))


def _role_from_path(path: JsonPath) -> str:
    steps = [str(step) for step in path if step not in ("spec", "template")]
    return ".".join(steps)


# Kinds that hold part of the pods of other objects, and run none themselves. KServe's
# LLMInferenceServiceConfig is an LLMInferenceService spec that services name in `baseRefs`; the
# controller merges its well-known configs (`kserve-config-llm-template`: probes, ports, /dev/shm),
# then those, then the service's own spec, by strategic merge patch (containers by name):
# https://kserve.github.io/website/docs/next/model-serving/generative-inference/llmisvc/llmisvc-config-composition
# KServe's ServingRuntime and ClusterServingRuntime (RUNTIME_KINDS) are the same for InferenceServices.
# What they write (images, privileges, env) is checked; what they lack is not claimed (roles.py;
# GP301 and GP613 leave them alone: the service sets the priority and the service account), and
# they are not among the workloads that PDBs, HPAs and experiments count (RUNNING_KINDS).
CONFIG_KINDS = frozenset({"LLMInferenceServiceConfig", *RUNTIME_KINDS})

EXTRACTORS: dict[str, Extractor] = {
    "Pod": _pod,
    "Deployment": _replicated(1),
    "StatefulSet": _replicated(1),
    "ReplicaSet": _replicated(1),
    "ReplicationController": _replicated(1),
    "DaemonSet": _replicated(None),
    "PodTemplate": lambda obj: iter([t] if (t := _template(obj.get("template"), ("template",))) else []),
    "Job": _job,
    "CronJob": _cronjob,
    "Rollout": _replicated(1),
    "LeaderWorkerSet": _leader_worker_set,
    "InferenceService": _inference_service,
    "NIMService": _nim_service,
    "PodCliqueSet": _pod_clique_set,
    "SparkApplication": _spark_application,
    "ScheduledSparkApplication": _scheduled_spark_application,
    "LLMInferenceService": _llm_inference_service,
    # The same spec, partial: what services name in `baseRefs` (gpupolicy/kube/roles.py, CONFIG_KINDS).
    "LLMInferenceServiceConfig": _llm_inference_service,
    "RayCluster": _ray(None),
    "RayService": _ray("rayClusterConfig"),
    "RayJob": _ray("rayClusterSpec"),
    "PyTorchJob": _kubeflow,
    "TFJob": _kubeflow,
    "MPIJob": _kubeflow,
    "XGBoostJob": _kubeflow,
    "PaddleJob": _kubeflow,
    "JAXJob": _kubeflow,
    "TrainJob": _train_job,
    "JobSet": _jobset,
    "DynamoGraphDeployment": _dynamo_graph_deployment,
    **dict.fromkeys(ARGO_WORKFLOW_KINDS, _argo_workflow),
}
# The kinds whose objects run pods of their own: what cross-object rules count as workloads.
RUNNING_KINDS = tuple(kind for kind in EXTRACTORS if kind not in CONFIG_KINDS)

# Kinds that never carry pods, skipped by the walker for speed and to avoid false matches: the
# built-in ones in their own API groups only (Knative's serving.knative.dev Service carries a pod
# spec: its CRD is labelled duck.knative.dev/podspecable), the custom ones by name.
# Custom kinds under a built-in kind's name that carry a pod template, walked for it (the chart's
# webhook rules send them as they send the extracted kinds): (API group, plural resource).
WALKED_CUSTOM_RESOURCES = frozenset({("serving.knative.dev", "services")})
# Kinds that hold a pod's shape as a pattern to match, never a pod to run: Kyverno's policies
# (`validate.pattern: {spec: {containers: [...]}}`) and GKE Autopilot's WorkloadAllowlist (the
# privileged pods Autopilot lets through: https://cloud.google.com/kubernetes-engine/docs/reference/crds/workloadallowlist).
PATTERN_KINDS = frozenset(
    {
        "ClusterPolicy",
        "Policy",
        "PolicyException",
        "ClusterCleanupPolicy",
        "CleanupPolicy",
        "WorkloadAllowlist",
    }
)
NON_WORKLOAD_CUSTOM_KINDS = frozenset(
    {"AnalysisTemplate", "ClusterAnalysisTemplate", "Canary", "MetricTemplate", "WorkloadPriorityClass",
     *PATTERN_KINDS}
)  # fmt: skip
NON_WORKLOAD_KINDS = frozenset(
    {
        "ConfigMap", "Secret", "Service", "Namespace", "PodDisruptionBudget", "PriorityClass",
        "HorizontalPodAutoscaler", "NetworkPolicy", "Role", "ClusterRole", "RoleBinding",
        "ClusterRoleBinding", "ServiceAccount", "Ingress", "PersistentVolumeClaim", "PersistentVolume",
        "StorageClass", "RuntimeClass", "CustomResourceDefinition", "AnalysisTemplate",
        "ClusterAnalysisTemplate", "Canary", "MetricTemplate", "WorkloadPriorityClass", "ResourceQuota",
        "LimitRange", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
        "ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice", *PATTERN_KINDS,
    }
)  # fmt: skip


class Workload:
    """A Kubernetes object seen through the pod templates it carries. Its identity (kind, name,
    namespace, labels, annotations) is read once, when the view is made: every rule asks for it."""

    __slots__ = (
        "_containers",
        "annotations",
        "cache",
        "kind",
        "labels",
        "name",
        "namespace",
        "resource",
        "templates",
    )

    def __init__(self, resource: Resource, templates: list[PodTemplate]) -> None:
        self.resource = resource
        self.templates = templates
        self.kind: str = resource.kind
        self.name: str = resource.name
        self.namespace: str | None = resource.namespace
        self.labels: dict[str, Any] = resource.labels
        self.annotations: dict[str, Any] = resource.annotations
        # Derived facts memoised on this view (one per evaluation of the object); not identity.
        self.cache: dict[Any, Any] = {}
        self._containers: tuple[tuple[PodTemplate, Container], ...] | None = None

    def containers(self) -> tuple[tuple[PodTemplate, Container], ...]:
        """Every container with its template, paired once per view: about ten rules walk them."""
        found = self._containers
        if found is None:
            found = self._containers = tuple(
                (template, container) for template in self.templates for container in template.containers
            )
        return found

    def ref(self) -> ObjectRef:
        """`Resource.ref`, from the identity the view read when it was made."""
        return ObjectRef(self.kind or "<no kind>", self.namespace, self.name or "<no name>")

    @property
    def is_pod(self) -> bool:
        return self.kind == "Pod"

    def total_replicas(self) -> int | None:
        counts = [template.replicas for template in self.templates]
        if any(count is None for count in counts):
            return None
        return sum(count for count in counts if count is not None)


def workload_of(resource: Resource) -> Workload | None:
    """The workload view of `resource`, or None when it carries no pod template (memoised)."""
    # The templates are memoised, not the Workload: a Workload points back at its resource,
    # and a cycle would outlive a batch run that pauses the cyclic collector.
    templates = resource._templates
    if templates is None:
        templates = resource._templates = list(extract_templates(resource))
    return Workload(resource, templates) if templates else None


def release_views(resource: Resource) -> None:
    """Forget the views `workload_of` memoised on `resource`, with what rules memoised on them. A
    container's memo holds its GPU demands, which name the container: a cycle that reference
    counting cannot free, while batch runs pause the cyclic collector. Emptied here, the views go
    with the resource, as soon as a streaming lint is done with it."""
    templates = resource._templates
    if templates:
        for template in templates:
            template.cache.clear()
            for container in template.containers:
                container.cache.clear()
    resource._templates = None


def extract_templates(resource: Resource) -> Iterator[PodTemplate]:
    obj = resource.obj
    if not isinstance(obj, dict):
        return
    kind = resource.kind
    extractor = EXTRACTORS.get(kind)
    found = list(extractor(obj)) if extractor is not None else []
    if found:
        yield from found
    elif kind not in NON_WORKLOAD_KINDS or (
        kind not in NON_WORKLOAD_CUSTOM_KINDS and not built_in_api_group(resource.api_version)
    ):
        # Unknown kinds, and known kind names of other API groups (Volcano's batch.volcano.sh Job
        # keeps its pods under spec.tasks[].template; KAITO's Workspace under a top-level
        # `inference.template`): walk for containers, never skip silently.
        for key, value in obj.items():
            if key not in ("apiVersion", "kind", "metadata", "status"):
                yield from _walk_for_pod_specs(value, (key,))
