"""The workload model: pod templates (JSON path, role, replicas) and containers of every kind."""

from __future__ import annotations

import textwrap

import pytest

from gpupolicy.kube.pod_spec import Workload, workload_of
from gpupolicy.loading.documents import Resource
from gpupolicy.loading.inputs import load_text
from tests.conftest import LintText, workload_in

C = "containers: [{name: main, image: nvcr.io/nvidia/pytorch:24.10-py3}]"


def workload(text: str) -> Workload:
    loaded = load_text(text, "w.yaml")
    assert not loaded.problems, loaded.problems
    (resource,) = loaded.resources
    found = workload_of(resource)
    assert found is not None
    for template in found.templates:
        assert resource.has_path(template.path), template.path
        for container in template.containers:
            assert resource.has_path(container.path), container.path
    return found


def shape(found: Workload) -> list[tuple[tuple[str | int, ...], str, int | None]]:
    return [(t.path, t.role, t.replicas) for t in found.templates]


def replicated(kind: str, api: str, extra: str = "") -> str:
    return f"""
apiVersion: {api}
kind: {kind}
metadata: {{name: w}}
spec:
  {extra}
  template:
    metadata: {{labels: {{app: w}}}}
    spec:
      {C}
"""


def test_pod() -> None:
    found = workload(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p, labels: {{a: b}}}}\nspec:\n  {C}\n")
    assert shape(found) == [(("spec",), "", 1)]
    assert found.is_pod
    template = found.templates[0]
    assert template.labels == {"a": "b"}
    assert template.metadata_path == ("metadata",)
    assert [c.path for c in template.containers] == [("spec", "containers", 0)]


@pytest.mark.parametrize(
    ("kind", "api"),
    [
        ("Deployment", "apps/v1"),
        ("StatefulSet", "apps/v1"),
        ("ReplicaSet", "apps/v1"),
        ("ReplicationController", "v1"),
        ("Rollout", "argoproj.io/v1alpha1"),
    ],
)
def test_replicated_kinds(kind: str, api: str) -> None:
    path = ("spec", "template", "spec")
    assert shape(workload(replicated(kind, api, "replicas: 3"))) == [(path, "", 3)]
    assert shape(workload(replicated(kind, api))) == [(path, "", 1)]  # the API default
    found = workload(replicated(kind, api, "replicas: 3"))
    assert found.templates[0].labels == {"app": "w"}
    assert found.templates[0].metadata_path == ("spec", "template", "metadata")
    assert found.total_replicas() == 3


def test_daemonset_has_no_replica_count() -> None:
    found = workload(replicated("DaemonSet", "apps/v1"))
    assert shape(found) == [(("spec", "template", "spec"), "", None)]
    assert found.total_replicas() is None


def test_templated_replicas_fall_back_to_default() -> None:
    assert shape(workload(replicated("Deployment", "apps/v1", 'replicas: "3"')))[0][2] == 1


def test_job_uses_parallelism() -> None:
    assert shape(workload(replicated("Job", "batch/v1", "parallelism: 4"))) == [
        (("spec", "template", "spec"), "", 4)
    ]
    assert shape(workload(replicated("Job", "batch/v1"))) == [(("spec", "template", "spec"), "", 1)]


def test_cronjob() -> None:
    text = f"""
apiVersion: batch/v1
kind: CronJob
metadata: {{name: nightly-eval}}
spec:
  schedule: "0 2 * * *"
  jobTemplate:
    spec:
      parallelism: 2
      template:
        spec:
          restartPolicy: Never
          {C}
"""
    assert shape(workload(text)) == [(("spec", "jobTemplate", "spec", "template", "spec"), "", 2)]


LWS = f"""
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: vllm-405b}}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 4
    leaderTemplate:
      spec:
        {C}
    workerTemplate:
      spec:
        {C}
"""


def test_leader_worker_set_leader_and_workers() -> None:
    base = ("spec", "leaderWorkerTemplate")
    assert shape(workload(LWS)) == [
        ((*base, "leaderTemplate", "spec"), "leader", 2),
        ((*base, "workerTemplate", "spec"), "worker", 6),  # 2 groups x (4 - 1 leader)
    ]


def test_leader_worker_set_without_leader_template() -> None:
    text = LWS.replace("    leaderTemplate:\n      spec:\n        " + C + "\n", "")
    assert shape(workload(text)) == [
        (("spec", "leaderWorkerTemplate", "workerTemplate", "spec"), "worker", 8)
    ]


def test_inference_service_components_and_model_form() -> None:
    text = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: llama}
spec:
  predictor:
    minReplicas: 2
    model:
      modelFormat: {name: huggingface}
      resources: {limits: {nvidia.com/gpu: 1}}
  transformer:
    containers:
      - name: tokenizer
        image: ghcr.io/ai-lab/tokenizer:1.0
  explainer:
    containers:
      - name: explainer
        image: ghcr.io/ai-lab/explainer:1.0
"""
    found = workload(text)
    assert shape(found) == [
        (("spec", "predictor"), "predictor", 2),
        (("spec", "transformer"), "transformer", 1),
        (("spec", "explainer"), "explainer", 1),
    ]
    predictor = found.templates[0]
    (model,) = predictor.containers
    assert model.path == ("spec", "predictor", "model")
    assert model.limits == {"nvidia.com/gpu": 1}
    assert model.resource_path("limits", "nvidia.com/gpu") == (
        "spec", "predictor", "model", "resources", "limits", "nvidia.com/gpu",
    )  # fmt: skip
    assert [c.path for c in found.templates[1].containers] == [("spec", "transformer", "containers", 0)]


def test_inference_service_predictor_with_containers_list() -> None:
    text = """
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: vllm}
spec:
  predictor:
    containers:
      - name: kserve-container
        image: vllm/vllm-openai:v0.6.3
"""
    found = workload(text)
    assert [c.path for _, c in found.containers()] == [("spec", "predictor", "containers", 0)]


RAY_CLUSTER_SPEC = f"""\
headGroupSpec:
  rayStartParams: {{}}
  template:
    spec:
      {C}
workerGroupSpecs:
  - groupName: gpu-group
    replicas: 3
    template:
      spec:
        {C}
  - minReplicas: 2
    template:
      spec:
        {C}
"""


def ray_spec(indent: str) -> str:
    return textwrap.indent(RAY_CLUSTER_SPEC, indent)


def ray_shape(base: tuple[str, ...]) -> list[tuple[tuple[str | int, ...], str, int | None]]:
    return [
        ((*base, "headGroupSpec", "template", "spec"), "head", 1),
        ((*base, "workerGroupSpecs", 0, "template", "spec"), "worker gpu-group", 3),
        ((*base, "workerGroupSpecs", 1, "template", "spec"), "worker worker[1]", 2),
    ]


def test_ray_cluster() -> None:
    text = "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {name: r}\nspec:\n" + ray_spec("  ")
    assert shape(workload(text)) == ray_shape(("spec",))


def test_ray_service() -> None:
    text = (
        "apiVersion: ray.io/v1\nkind: RayService\nmetadata: {name: r}\nspec:\n"
        "  serveConfigV2: 'applications: []'\n  rayClusterConfig:\n" + ray_spec("    ")
    )
    assert shape(workload(text)) == ray_shape(("spec", "rayClusterConfig"))


def test_ray_job_with_submitter() -> None:
    text = (
        "apiVersion: ray.io/v1\nkind: RayJob\nmetadata: {name: r}\nspec:\n"
        "  entrypoint: python train.py\n"
        f"  submitterPodTemplate:\n    spec:\n      {C}\n"
        "  rayClusterSpec:\n" + ray_spec("    ")
    )
    assert shape(workload(text)) == [
        *ray_shape(("spec", "rayClusterSpec")),
        (("spec", "submitterPodTemplate", "spec"), "submitter", 1),
    ]


@pytest.mark.parametrize(
    ("kind", "key", "roles"),
    [
        ("PyTorchJob", "pytorchReplicaSpecs", ("Master", "Worker")),
        ("TFJob", "tfReplicaSpecs", ("Chief", "Worker")),
        ("MPIJob", "mpiReplicaSpecs", ("Launcher", "Worker")),
    ],
)
def test_kubeflow_jobs(kind: str, key: str, roles: tuple[str, str]) -> None:
    first, second = roles
    text = f"""
apiVersion: kubeflow.org/v1
kind: {kind}
metadata: {{name: train}}
spec:
  {key}:
    {first}:
      replicas: 1
      template:
        spec:
          {C}
    {second}:
      replicas: 4
      template:
        spec:
          {C}
"""
    assert shape(workload(text)) == [
        (("spec", key, first, "template", "spec"), first, 1),
        (("spec", key, second, "template", "spec"), second, 4),
    ]


def test_train_job_resources_per_node() -> None:
    text = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama-sft}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 4
    image: nvcr.io/nvidia/pytorch:24.10-py3
    resourcesPerNode:
      limits: {nvidia.com/gpu: 8}
"""
    found = workload(text)
    assert shape(found) == [(("spec", "trainer"), "trainer", 4)]
    (container,) = found.templates[0].containers
    assert container.limits == {"nvidia.com/gpu": 8}
    assert container.resource_path("limits", "nvidia.com/gpu") == (
        "spec", "trainer", "resourcesPerNode", "limits", "nvidia.com/gpu",
    )  # fmt: skip


def test_jobset() -> None:
    text = f"""
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {{name: multislice}}
spec:
  replicatedJobs:
    - name: driver
      template:
        spec:
          template:
            spec:
              {C}
    - name: workers
      replicas: 2
      template:
        spec:
          parallelism: 4
          template:
            spec:
              {C}
"""
    base = ("spec", "replicatedJobs")
    assert shape(workload(text)) == [
        ((*base, 0, "template", "spec", "template", "spec"), "driver", 1),
        ((*base, 1, "template", "spec", "template", "spec"), "workers", 8),
    ]


def test_unknown_crd_is_walked_for_containers() -> None:
    text = f"""
apiVersion: example.ai/v1
kind: ModelServer
metadata: {{name: custom}}
spec:
  serving:
    template:
      metadata: {{labels: {{app: custom}}}}
      spec:
        {C}
  workers:
    - name: a
      podSpec:
        {C}
status:
  observed:
    spec:
      {C}
"""
    found = workload(text)
    assert shape(found) == [
        (("spec", "serving", "template", "spec"), "serving", 1),
        (("spec", "workers", 0, "podSpec"), "workers.0.podSpec", 1),
    ]
    assert found.templates[0].metadata_path == ("spec", "serving", "template", "metadata")


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {containers: x}\n",
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n",
        "apiVersion: example.ai/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}\n",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n",
    ],
)
def test_objects_without_pod_templates(text: str) -> None:
    (resource,) = load_text(text, "x.yaml").resources
    assert workload_of(resource) is None


def test_init_ephemeral_containers_and_volumes() -> None:
    text = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  initContainers:
    - name: download
      image: ghcr.io/ai-lab/hf-downloader:0.3.1
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.6.3
    - not-a-mapping
  ephemeralContainers:
    - name: debug
      image: busybox:1.36
  volumes:
    - name: shm
      emptyDir: {medium: Memory}
    - name: models
      persistentVolumeClaim: {claimName: models}
"""
    found = workload(text)
    template = found.templates[0]
    assert [(c.name, c.role, c.path) for c in template.containers] == [
        ("vllm", "container", ("spec", "containers", 0)),
        ("download", "init", ("spec", "initContainers", 0)),
        ("debug", "ephemeral", ("spec", "ephemeralContainers", 0)),
    ]
    assert [c.name for c in template.main_containers()] == ["vllm"]
    assert [path for path, _ in template.volumes()] == [("spec", "volumes", 0), ("spec", "volumes", 1)]
    assert template.containers[1].label == "init container 'download'"
    assert template.containers[2].label == "ephemeral container 'debug'"


def test_workload_is_memoised_on_the_resource() -> None:
    (resource,) = load_text(replicated("Deployment", "apps/v1"), "x.yaml").resources
    first, second = workload_of(resource), workload_of(resource)
    assert first is not None and second is not None
    # The templates (and what rules memoise on them) are shared; the Workload wrapper is not
    # kept, so that no reference cycle outlives a batch run.
    assert first.templates is second.templates
    other = Resource({"kind": "ConfigMap"}, file="x", doc_index=0)
    assert workload_of(other) is None and workload_of(other) is None


def test_known_kind_name_of_another_group_is_walked() -> None:
    text = f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: mpi-train}}
spec:
  minAvailable: 3
  tasks:
    - name: master
      replicas: 1
      template:
        spec:
          {C}
    - name: worker
      replicas: 2
      template:
        spec:
          {C}
"""
    assert [path for path, _, _ in shape(workload(text))] == [
        ("spec", "tasks", 0, "template", "spec"),
        ("spec", "tasks", 1, "template", "spec"),
    ]


def test_containers_and_volumes_are_found_once_per_view() -> None:
    found = workload(
        textwrap.dedent(
            """\
            apiVersion: leaderworkerset.x-k8s.io/v1
            kind: LeaderWorkerSet
            metadata: {name: lws}
            spec:
              leaderWorkerTemplate:
                size: 2
                leaderTemplate:
                  spec:
                    initContainers: [{name: fetch, image: busybox:1.37}]
                    containers: [{name: leader, image: vllm/vllm-openai:v0.8.5}]
                    volumes: [{name: shm, emptyDir: {medium: Memory}}, oops, {name: data, hostPath: {path: /d}}]
                workerTemplate:
                  spec:
                    containers: [{name: worker, image: vllm/vllm-openai:v0.8.5}]
            """
        )
    )
    pairs = found.containers()
    assert [(template.role, container.name) for template, container in pairs] == [
        ("leader", "leader"),
        ("leader", "fetch"),
        ("worker", "worker"),
    ]
    assert found.containers() is pairs
    leader = found.templates[0]
    volumes = leader.volumes()
    assert [(path, volume["name"]) for path, volume in volumes] == [
        ((*leader.path, "volumes", 0), "shm"),
        ((*leader.path, "volumes", 2), "data"),
    ]
    volumes.clear()  # each caller's own list
    assert len(leader.volumes()) == 2 and found.templates[1].volumes() == []


def test_a_views_ref_is_its_resources() -> None:
    for obj in (
        {
            "kind": "Deployment",
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"template": {"spec": {}}},
        },
        {"kind": "Job", "metadata": {"generateName": "b-"}, "spec": {"template": {"spec": {}}}},
        {"metadata": {"namespace": ""}, "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}},
    ):
        resource = Resource(obj, file="x.yaml", doc_index=0)
        view = workload_of(resource)
        assert view is not None and view.ref() == resource.ref


# NVIDIA Dynamo's DynamoGraphDeployment (ai-dynamo/dynamo examples/backends/vllm/deploy: agg.yaml in
# nvidia.com/v1alpha1, v1beta1/agg.yaml in nvidia.com/v1beta1), cut down.
DYNAMO_V1ALPHA1 = """
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: vllm-agg}
spec:
  services:
    Frontend:
      componentType: frontend
      replicas: 1
      extraPodSpec:
        mainContainer: {image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1}
    VllmWorker:
      componentType: worker
      replicas: 2
      multinode: {nodeCount: 2}
      labels: {team: llm}
      resources:
        limits:
          gpu: "8"
          custom: {rdma/ib: "1"}
        requests:
          cpu: "10"
          custom: {ephemeral-storage: 2Gi}
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1
          command: [python3, -m, dynamo.vllm]
          resources:
            requests: {memory: 40Gi, cpu: "2"}
        containers:
          - {name: log-shipper, image: fluent/fluent-bit:3.1}
"""
DYNAMO_V1BETA1 = """
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata: {name: vllm-agg}
spec:
  components:
  - name: Frontend
    type: frontend
    replicas: 1
    podTemplate:
      spec:
        containers: [{name: main, image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1}]
  - name: VllmDecodeWorker
    type: worker
    replicas: 3
    podTemplate:
      metadata: {labels: {team: llm}}
      spec:
        containers:
        - name: main
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.1
          resources: {limits: {nvidia.com/gpu: "1"}}
"""


def test_dynamo_graph_deployment_v1beta1_components() -> None:
    found = workload(DYNAMO_V1BETA1)
    assert shape(found) == [
        (("spec", "components", 0, "podTemplate", "spec"), "frontend Frontend", 1),
        (("spec", "components", 1, "podTemplate", "spec"), "worker VllmDecodeWorker", 3),
    ]
    assert found.templates[1].labels == {"team": "llm"}
    assert found.templates[1].containers[0].limits == {"nvidia.com/gpu": "1"}


def test_dynamo_graph_deployment_v1alpha1_services_get_the_operators_resources() -> None:
    """The operator writes a service's `resources` into its main container, entry by entry over
    the container's own: `gpu` as nvidia.com/gpu, `custom` under its own names."""
    found = workload(DYNAMO_V1ALPHA1)
    assert shape(found) == [
        (("spec", "services", "Frontend", "extraPodSpec"), "frontend Frontend", 1),
        (("spec", "services", "VllmWorker", "extraPodSpec"), "worker VllmWorker", 4),
    ]
    worker = found.templates[1]
    assert worker.labels == {"team": "llm"} and worker.metadata_path == ("spec", "services", "VllmWorker")
    main, shipper = worker.containers
    assert shipper.name == "log-shipper" and shipper.written is None
    assert main.limits == {"nvidia.com/gpu": "8", "rdma/ib": "1"}
    assert main.requests == {"memory": "40Gi", "cpu": "10", "ephemeral-storage": "2Gi"}
    service = ("spec", "services", "VllmWorker")
    assert main.resource_path("limits", "nvidia.com/gpu") == (*service, "resources", "limits", "gpu")
    assert main.resource_path("limits", "rdma/ib") == (*service, "resources", "limits", "custom", "rdma/ib")
    assert main.resource_path("requests", "cpu") == (*service, "resources", "requests", "cpu")
    own = (*service, "extraPodSpec", "mainContainer", "resources", "requests", "memory")
    assert main.resource_path("requests", "memory") == own
    assert main.resource_path("limits", "memory") == (*service, "resources", "limits")
    assert main.resources_field() == (*service, "resources")
    assert workload(DYNAMO_V1ALPHA1).resource.has_path(main.resource_path("limits", "nvidia.com/gpu"))
    typed = workload(DYNAMO_V1ALPHA1.replace('gpu: "8"', 'gpu: "8"\n          gpuType: amd.com/gpu'))
    assert typed.templates[1].containers[0].limits == {"amd.com/gpu": "8", "rdma/ib": "1"}
    frontend = found.templates[0].containers[0]
    assert frontend.written is None and frontend.limits == {}
    assert main.name == frontend.name == "main"  # the operator's name for it


KNATIVE_SERVICE = """\
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: vllm, namespace: serving}
spec:
  template:
    spec:
      containers:
        - name: kfserving-container
          image: vllm/vllm-openai:v0.10.0
          args: [--model, EleutherAI/pythia-70m]
          ports: [{containerPort: 8080}]
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_a_knative_service_carries_a_pod_template_a_core_service_none() -> None:
    """A kind skipped by name is skipped in its own API group only: Knative's Service is
    podspecable (its CRD's duck.knative.dev/podspecable label)."""
    (knative,) = load_text(KNATIVE_SERVICE, "ksvc.yaml").resources
    workload = workload_of(knative)
    assert workload is not None and [t.path for t in workload.templates] == [("spec", "template", "spec")]
    core = KNATIVE_SERVICE.replace("serving.knative.dev/v1", "v1")
    assert workload_of(load_text(core, "svc.yaml").resources[0]) is None


def test_a_knative_services_rules_count_its_default_readiness_probe(lint_text: LintText) -> None:
    fired = {f.rule_id for f in lint_text(KNATIVE_SERVICE).findings}
    assert {"GP901", "GP704", "GP106"} <= fired  # a GPU server
    assert "GP401" not in fired  # Knative adds a TCP readiness probe when none is written


@pytest.mark.parametrize(
    ("api_version", "kind", "body"),
    [
        ("kyverno.io/v1", "ClusterPolicy",
         "spec:\n  rules:\n  - name: p\n    validate:\n      pattern:\n        spec:\n          containers:\n"
         "          - name: '*'\n            securityContext: {privileged: true}\n"),
        ("auto.gke.io/v1", "WorkloadAllowlist",
         "matchingCriteria:\n  containers:\n  - name: slurmd\n    image: gcr.io/gke-release/slinky/slurmd\n"
         "    securityContext: {privileged: true}\n"),
    ],
)  # fmt: skip
def test_a_pod_shape_held_as_a_pattern_is_no_workload(api_version: str, kind: str, body: str) -> None:
    """A Kyverno policy's pattern and GKE Autopilot's allowlist describe pods to match: neither runs
    one (GP601 on them said a policy against privilege was privileged)."""
    text = f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: p}}\n{body}"
    (resource,) = load_text(text, "p.yaml").resources
    assert workload_of(resource) is None


SPARK_RAPIDS = """\
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata: {name: rapids, namespace: spark}
spec:
  type: Python
  image: nvcr.io/nvidia/rapids-spark:24.08
  mainApplicationFile: local:///opt/app.py
  restartPolicy: {type: Never}
  driver:
    cores: 1
    memory: 2g
  executor:
    cores: 4
    coreLimit: 4000m
    instances: 2
    memory: 16g
    gpu: {name: nvidia.com/gpu, quantity: 1}
"""


def test_a_spark_application_is_read_as_the_operator_builds_its_pods(lint_text: LintText) -> None:
    """data-on-eks' Spark RAPIDS job asks for its executors' GPU through `executor.gpu`, and both
    pods run `spec.image` (spark-operator api/v1beta2): the job counted as a CPU workload."""
    workload = workload_in(SPARK_RAPIDS)
    (template,) = workload.templates
    driver, executor = template.containers
    assert (driver.name, driver.image) == ("spark-kubernetes-driver", "nvcr.io/nvidia/rapids-spark:24.08")
    assert executor.image == ""  # the shared image is the driver's finding, said once
    assert executor.limits == {"cpu": "4000m", "memory": "16Gi", "nvidia.com/gpu": 1}
    assert executor.requests == {"cpu": 4, "memory": "16Gi"}
    assert executor.resource_path("limits", "nvidia.com/gpu") == ("spec", "executor", "gpu", "quantity")
    assert driver.requests == {"cpu": 1, "memory": "2Gi"}
    report = lint_text(SPARK_RAPIDS.replace("name: nvidia.com/gpu,", "name: nvidia.com/gpus,"))
    (typo,) = [finding for finding in report.findings if finding.rule_id == "GP109"]
    assert typo.line == 17
    assert [role.decision.role.value for role in report.roles] == ["batch"]


def test_a_scheduled_spark_application_runs_its_template(lint_text: LintText) -> None:
    text = (
        "apiVersion: sparkoperator.k8s.io/v1beta2\nkind: ScheduledSparkApplication\n"
        "metadata: {name: nightly, namespace: spark}\nspec:\n  schedule: '@daily'\n  template:\n"
        "    image: docker.io/apache/spark:latest\n    driver:\n      cores: 1\n"
        "      securityContext: {privileged: true}\n    executor: {cores: 1, instances: 1}\n"
    )
    found = {finding.rule_id: finding.line for finding in lint_text(text).findings}
    assert found["GP601"] == 10 and "GP702" in found


def test_a_nimservice_runs_its_images_repository_and_tag(lint_text: LintText) -> None:
    """NVIDIA's RAG blueprint's NIMServices: the operator runs `image.repository:image.tag` in a
    container named `<name>-ctr`; the image rules never read the mapping (no GP702 on `latest`)."""
    text = (
        "apiVersion: apps.nvidia.com/v1alpha1\nkind: NIMService\nmetadata: {name: nim-llm, namespace: rag}\n"
        "spec:\n  image:\n    repository: nvcr.io/nim/meta/llama-3.1-8b-instruct\n    tag: latest\n"
        "  resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    workload = workload_in(text)
    ((_, container),) = workload.containers()
    assert (container.name, container.image) == (
        "nim-llm-ctr",
        "nvcr.io/nim/meta/llama-3.1-8b-instruct:latest",
    )
    (latest,) = [f for f in lint_text(text).findings if f.rule_id == "GP702"]
    assert latest.path == ("spec", "image") and latest.line == 5


def test_a_nimservices_probes_are_the_written_ones_else_the_operators(lint_text: LintText) -> None:
    """NVIDIA's RAG blueprint writes NIM probes through `spec.startupProbe.probe`: the operator
    uses them in place of its defaults and drops one with `enabled: false`, so they are judged."""
    text = (
        "apiVersion: apps.nvidia.com/v1alpha1\nkind: NIMService\nmetadata: {name: llm, namespace: rag}\n"
        "spec:\n  image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: '1.8.0'}\n"
        "  resources: {requests: {cpu: '8', memory: 64Gi}, limits: {memory: 64Gi, nvidia.com/gpu: 1}}\n"
        "  startupProbe:\n    probe: {httpGet: {path: /v1/health/ready, port: api}, periodSeconds: 10, failureThreshold: 2}\n"
    )
    found = {f.rule_id for f in lint_text(text).findings}
    assert "GP404" in found and "GP401" not in found  # the written startup probe; the default readiness
    defaults = {f.rule_id for f in lint_text(text.split("  startupProbe:")[0]).findings}
    assert not defaults & {"GP401", "GP402", "GP403", "GP404", "GP405", "GP407"}
    disabled = text.split("  startupProbe:")[0] + "  readinessProbe: {enabled: false}\n"
    assert "GP401" in {f.rule_id for f in lint_text(disabled).findings}


def test_a_pod_clique_sets_cliques_are_pod_templates_of_all_their_replicas(lint_text: LintText) -> None:
    """NVIDIA Grove: 2 sets × a clique of 2 = 4 GPU server pods, labelled by the operator with the
    set's name. Walked generically they counted as one replica (no GP501, no GP208)."""
    text = (
        "apiVersion: grove.io/v1alpha1\nkind: PodCliqueSet\nmetadata: {name: llm, namespace: serving}\nspec:\n"
        "  replicas: 2\n  template:\n    cliques:\n    - name: worker\n      labels: {role: decode}\n"
        "      spec:\n        replicas: 2\n        podSpec:\n          containers:\n          - name: vllm\n"
        "            image: vllm/vllm-openai:v0.10.1\n            ports: [{containerPort: 8000}]\n"
        "            resources: {limits: {nvidia.com/gpu: 1}}\n"
        "    podCliqueScalingGroups: [{name: decode, cliqueNames: [worker], replicas: 3}]\n"
    )
    workload = workload_in(text)
    (template,) = workload.templates
    assert (template.role, template.replicas) == ("worker", 12)
    assert template.pod_labels == {
        "role": "decode",
        "app.kubernetes.io/managed-by": "grove-operator",
        "app.kubernetes.io/part-of": "llm",
    }
    assert {"GP501", "GP208"} <= {f.rule_id for f in lint_text(text).findings}
    pdb = (
        "\n---\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: llm, namespace: serving}\n"
        "spec: {maxUnavailable: 1, selector: {matchLabels: {app.kubernetes.io/part-of: llm}}}\n"
    )
    assert "GP501" not in {f.rule_id for f in lint_text(text + pdb).findings}
