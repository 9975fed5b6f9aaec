"""Roles from evidence, not kind (gpupolicy/kube/roles.py)."""

from __future__ import annotations

import pytest

from gpupolicy.engine.context import Context
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.kube.inventory import Bundle
from gpupolicy.kube.pod_spec import workload_of
from gpupolicy.kube.roles import COMMAND_TEXT_LIMIT, Role, decide
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy
from tests.conftest import LintText, rule_ids, workload_in

DEPLOYMENT = """\
apiVersion: apps/v1
kind: {kind}
metadata: {{name: w, namespace: {namespace}, labels: {labels}}}
spec:
  selector: {{matchLabels: {{app: w}}}}
  template:
    metadata: {{labels: {{app: w}}}}
    spec:
      containers:
        - name: main
          image: {image}
{extra}
"""


def role_of(text: str) -> tuple[Role, str]:
    loaded = load_text(text, "t.yaml")
    ctx = Context(default_policy(), Bundle(loaded.resources), loaded.resources)
    workload = workload_of(loaded.resources[0])
    assert workload is not None
    decision = ctx.role(workload)
    return decision.role, decision.evidence


def workload(
    *, image: str, extra: str = "", kind: str = "Deployment", namespace: str = "ai-lab", labels: str = "{}"
) -> str:
    return DEPLOYMENT.format(kind=kind, image=image, extra=extra, namespace=namespace, labels=labels)


@pytest.mark.parametrize(
    ("text", "role", "evidence"),
    [
        (workload(image="vllm/vllm-openai:v0.8.5"), Role.SERVER, "serving image"),
        (
            workload(image="vllm/vllm-openai:v0.8.5", extra="          command: [sleep, infinity]"),
            Role.DEV,
            "sleep infinity",
        ),
        (
            workload(image="registry.example.com/app:1", extra="          ports: [{containerPort: 8000}]"),
            Role.SERVER,
            "port 8000",
        ),
        (
            workload(image="registry.example.com/app:1", extra="          args: [vllm, serve, org/model]"),
            Role.SERVER,
            "vllm serve",
        ),
        (workload(image="registry.example.com/trainer:1"), Role.WORKLOAD, "no evidence"),
        (  # a serving command outweighs what an organisation's name hints at
            workload(
                image="registry.example.com/ml-bench-team/vllm-openai:v0.8.5",
                extra="          args: [vllm, serve, org/model]",
            ),
            Role.SERVER,
            "vllm serve",
        ),
        (  # llm-d's inference simulator answers with canned text: a test double
            workload(image="ghcr.io/llm-d/llm-d-inference-sim:v0.1.2", extra="          args: [--mode=echo]"),
            Role.DEV,
            "inference-sim",
        ),
        (workload(image="jupyter/tensorflow-notebook:2024-01-01"), Role.DEV, "jupyter"),
        (
            workload(
                image="nvcr.io/nvidia/k8s-device-plugin:v0.17.0", kind="DaemonSet", namespace="kube-system"
            ),
            Role.AGENT,
            "GPU stack",
        ),
        (  # AWS's accelerator monitor (Neuron's DCGM exporter), privileged by design
            workload(
                image="public.ecr.aws/neuron/neuron-monitor:1.3.0",
                kind="DaemonSet",
                namespace="neuron-monitor",
            ),
            Role.AGENT,
            "GPU stack",
        ),
        (
            workload(image="registry.example.com/exporter:1", kind="DaemonSet", namespace="gpu-operator"),
            Role.AGENT,
            "namespace gpu-operator",
        ),
        (  # a cloud's node tuning (GKE's tcp-increase-rmem): a cluster add-on, privileged by design
            workload(image="ubuntu:22.04", kind="DaemonSet", namespace="kube-system"),
            Role.AGENT,
            "kube-system",
        ),
        (  # a batch scheduler's node agent (Volcano's) installs CNI plugins and reads the kubelet's state
            workload(
                image="docker.io/volcanosh/vc-agent:v1.12.1", kind="DaemonSet", namespace="volcano-system"
            )
            + "      volumes: [{name: cni, hostPath: {path: /opt/cni/bin}}]\n",
            Role.AGENT,
            "/opt/cni/bin",
        ),
        (
            workload(image="registry.example.com/csi:1", kind="DaemonSet", namespace="storage")
            + "      volumes: [{name: k, hostPath: {path: /var/lib/kubelet/pods}}]\n",
            Role.AGENT,
            "/var/lib/kubelet/pods",
        ),
        (  # in kube-system but not one per node: no node agent
            workload(image="registry.example.com/app:1", namespace="kube-system"),
            Role.WORKLOAD,
            "no evidence",
        ),
        (  # kubeadm's kube-scheduler static pod (gpushare-scheduler-extender's config/)
            workload(image="registry.k8s.io/kube-scheduler:v1.23.0", namespace="kube-system")
            + "      priorityClassName: system-node-critical\n      hostNetwork: true\n",
            Role.AGENT,
            "kube-system at priority system-node-critical",
        ),
        (  # CoreDNS: a Deployment, the cluster's own
            workload(image="registry.k8s.io/coredns/coredns:v1.11.1", namespace="kube-system")
            + "      priorityClassName: system-cluster-critical\n",
            Role.AGENT,
            "system-cluster-critical",
        ),
        (  # a GPU pod at that class is a workload misusing it (GP303)
            workload(
                image="registry.example.com/app:1",
                namespace="kube-system",
                extra="          resources: {limits: {nvidia.com/gpu: 1}}",
            )
            + "      priorityClassName: system-node-critical\n",
            Role.WORKLOAD,
            "no evidence",
        ),
        (  # the Kubernetes e2e hostpath CSI driver: a StatefulSet that registers with the kubelet
            workload(image="registry.k8s.io/sig-storage/hostpathplugin:v1.11.0", kind="StatefulSet")
            + "      volumes: [{name: r, hostPath: {path: /var/lib/kubelet/plugins_registry, type: Directory}}]\n",
            Role.AGENT,
            "kubelet plugin",
        ),
        (  # a DaemonSet of user code that reads /proc: no evidence of an agent
            workload(image="registry.example.com/app:1", kind="DaemonSet")
            + "      volumes: [{name: p, hostPath: {path: /proc}}]\n",
            Role.WORKLOAD,
            "no evidence",
        ),
        (
            workload(image="vllm/vllm-openai:v0.8.5", kind="Job").replace(
                "  selector: {matchLabels: {app: w}}\n", ""
            ),
            Role.BATCH,
            "runs to completion",
        ),
        (
            workload(image="registry.example.com/app:1", labels="{gpupolicy.io/workload-class: online}"),
            Role.SERVER,
            "workload-class=online",
        ),
    ],
)
def test_roles_from_evidence(text: str, role: Role, evidence: str) -> None:
    got, why = role_of(text)
    assert got is role, why
    assert evidence in why


def test_a_class_declared_on_the_pod_template_is_the_workloads_and_its_pods() -> None:
    """A Pod carries its template's labels, not its owner's: declared there, the class reaches
    the Pods a controller makes (the webhook reviews them)."""
    container = (
        "- name: train\n  image: registry.example.com/train:1\n  ports: [{containerPort: 8000}]\n"
        "  resources: {limits: {nvidia.com/gpu: 1}}\n"
    )
    labels = "{app: trainer, gpupolicy.io/workload-class: batch}"
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: trainer, namespace: ai-lab}\nspec:\n"
        f"  selector: {{matchLabels: {{app: trainer}}}}\n  template:\n    metadata:\n      labels: {labels}\n"
        "    spec:\n      containers:\n" + "".join(f"        {line}\n" for line in container.splitlines())
    )
    pod = (  # what the ReplicaSet makes: the template's metadata
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: trainer-7d4b9c6f5-x2kq9\n  namespace: ai-lab\n"
        f"  labels: {labels}\nspec:\n  containers:\n"
        + "".join(f"    {line}\n" for line in container.splitlines())
    )
    for text in (deployment, pod):
        role, why = role_of(text)
        assert role is Role.BATCH and "workload-class=batch" in why
    assert role_of(deployment.replace("gpupolicy.io/workload-class: batch", "tier: x"))[0] is Role.SERVER


def test_a_service_in_the_bundle_makes_a_server() -> None:
    text = workload(image="registry.example.com/app:1")
    assert role_of(text)[0] is Role.WORKLOAD
    service = "---\napiVersion: v1\nkind: Service\nmetadata: {name: api, namespace: ai-lab}\nspec:\n  selector: {app: w}\n"
    role, why = role_of(text + service)
    assert role is Role.SERVER and "Service api" in why


def test_a_pod_that_runs_to_completion_is_batch() -> None:
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  restartPolicy: Never\n  containers:\n    - {name: c, image: nvcr.io/nvidia/pytorch:24.01-py3}\n"
    assert role_of(pod)[0] is Role.BATCH


def test_lws_workers_are_not_the_server() -> None:
    from gpupolicy.kube.roles import serving_templates_of

    text = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: vllm}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers: [{name: leader, image: vllm/vllm-openai:v0.8.5, ports: [{containerPort: 8080}]}]
    workerTemplate:
      spec:
        containers: [{name: worker, image: vllm/vllm-openai:v0.8.5, command: [ray, start, --block]}]
"""
    assert role_of(text)[0] is Role.SERVER
    loaded = load_text(text, "t.yaml")
    found = workload_of(loaded.resources[0])
    assert found is not None
    assert [t.role for t in serving_templates_of(found)] == ["leader"]


def test_lws_workers_that_serve_behind_a_cpu_leader_are_servers() -> None:
    """LMCache's 1p1d LeaderWorkerSet: the leader, with no GPU, proxies prefill and decode; each
    worker runs `vllm serve` on its own GPU and port. The workers answer what the leader routes, so
    the probe rules judge them (GP401: no readiness probe); a worker that joins a GPU leader's model
    (the test above) still does not."""
    from gpupolicy.kube.roles import serving_templates_of

    text = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: pd, namespace: serving}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 3
    leaderTemplate:
      spec:
        containers: [{name: proxy, image: 'lmcache/vllm-openai:v0.3.9', command: [python3, proxy.py],
                      ports: [{containerPort: 9000}]}]
    workerTemplate:
      spec:
        containers:
          - name: vllm
            image: lmcache/vllm-openai:v0.3.9
            command: [vllm, serve, Qwen/Qwen3-8B, --port, "8200"]
            ports: [{containerPort: 8200}]
            resources: {limits: {nvidia.com/gpu: 1}}
"""
    loaded = load_text(text, "t.yaml")
    found = workload_of(loaded.resources[0])
    assert found is not None
    assert [t.role for t in serving_templates_of(found)] == ["leader", "worker"]
    report = evaluate(loaded.resources, default_policy())
    assert [f.message for f in report.findings if f.rule_id == "GP401"] == [
        "container 'vllm' of serving GPU LeaderWorkerSet has no readinessProbe"
    ]
    ray_workers = text.replace(
        'command: [vllm, serve, Qwen/Qwen3-8B, --port, "8200"]', "command: [ray, start, --block]"
    )
    ray_workers = ray_workers.replace("            ports: [{containerPort: 8200}]\n", "")
    found = workload_of(load_text(ray_workers, "t.yaml").resources[0])
    assert found is not None and [t.role for t in serving_templates_of(found)] == ["leader"]
    # Kueue's topology demo: nginx on GPU workers, a port and no model server: the leader alone.
    nginx = text.replace('command: [vllm, serve, Qwen/Qwen3-8B, --port, "8200"]', "command: [nginx]")
    found = workload_of(load_text(nginx, "t.yaml").resources[0])
    assert found is not None and [t.role for t in serving_templates_of(found)] == ["leader"]


def test_command_text_is_bounded() -> None:
    huge = workload(
        image="registry.example.com/app:1",
        extra=f"          args: [{'x' * (COMMAND_TEXT_LIMIT * 50)}, sleep infinity]",
    )
    loaded = load_text(huge, "t.yaml")
    found = workload_of(loaded.resources[0])
    assert found is not None
    assert decide(found).role is Role.WORKLOAD  # what lies past the bound is not read


def test_a_gpu_stack_sidecar_does_not_make_its_pod_an_agent() -> None:
    text = """\
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec:
      restartPolicy: Never
      initContainers:
        - {name: profiler, image: nvcr.io/nvidia/cloud-native/dcgm:4.1.1-2-ubuntu22.04, restartPolicy: Always}
      containers:
        - {name: train, image: nvcr.io/nvidia/pytorch:24.10-py3, command: [torchrun, train.py]}
"""
    assert role_of(text)[0] is Role.BATCH


def test_roles_and_their_evidence_are_in_the_json_report() -> None:
    import json

    from gpupolicy.engine.evaluation import evaluate
    from gpupolicy.formats import RenderOptions
    from gpupolicy.formats.json_report import render_json

    loaded = load_text(
        workload(image="vllm/vllm-openai:v0.8.5", extra="          command: [sleep, infinity]"), "t.yaml"
    )
    report = evaluate(loaded.resources, default_policy())
    (entry,) = json.loads(render_json(report, RenderOptions()))["workloads"]
    assert entry["role"] == "dev" and "sleep infinity" in entry["evidence"]
    assert (
        entry["object"] == {"kind": "Deployment", "namespace": "ai-lab", "name": "w"} and entry["line"] == 1
    )


LLMISVC_CONFIG = """\
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceServiceConfig
metadata: {name: decode-base, namespace: ai-lab}
spec:
  replicas: 3
  template:
    containers:
      - name: main
        image: ghcr.io/llm-d/llm-d-cuda:latest
        securityContext: {privileged: true}
        resources:
          limits: {nvidia.com/gpu: "1"}
        livenessProbe:
          httpGet: {path: /health, port: 8000}
          initialDelaySeconds: 10
"""


def test_an_llm_inference_service_config_is_part_of_pods_not_a_server(lint_text: LintText) -> None:
    # KServe merges the well-known template (startup probe, ports, /dev/shm) under a config, and the
    # service over it: what the config writes is checked, what it leaves out is not claimed.
    assert role_of(LLMISVC_CONFIG)[0] is Role.WORKLOAD
    found = set(rule_ids(lint_text(LLMISVC_CONFIG, {"priority": {"clusterClasses": ["gpu-serving"]}})))
    assert {"GP601", "GP702"} <= found  # privileged, and tagged latest: written, so checked
    # No startupProbe of its own (GP403), no CPU or memory (GP106), replicas without a PDB,
    # spread or rollback criteria: the merge or the service gives those.
    assert not found & {"GP403", "GP106", "GP107", "GP401", "GP501", "GP208", "GP901"}
    # Nor a priority class or the token's automount: the service merged over it sets those.
    assert not found & {"GP301", "GP613"}


SERVING_RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: {kind}
metadata: {{name: vllm-runtime{namespace}}}
spec:
  supportedModelFormats:
    - {{name: huggingface, autoSelect: true}}
  containers:
    - name: kserve-container
      image: vllm/vllm-openai:latest
      args: ["--port", "8080", "--model", "/mnt/models"]
      securityContext: {{privileged: true}}
      resources:
        limits: {{nvidia.com/gpu: "1"}}
"""


@pytest.mark.parametrize(
    ("kind", "namespace"), [("ClusterServingRuntime", ""), ("ServingRuntime", ", namespace: ai-lab")]
)
def test_a_kserve_serving_runtime_is_part_of_pods_not_a_server(
    lint_text: LintText, kind: str, namespace: str
) -> None:
    # The InferenceService that names the runtime completes its pods: it sets the service account, the
    # priority class and the replicas, and KServe its probes. What the runtime writes is checked.
    text = SERVING_RUNTIME.format(kind=kind, namespace=namespace)
    assert role_of(text)[0] is Role.WORKLOAD
    policy = {"priority": {"clusterClasses": ["gpu-serving"]}, "placement": {"gpuTaints": []}}
    found = set(rule_ids(lint_text(text, policy)))
    assert {"GP601", "GP702"} <= found  # privileged, and tagged latest: written, so checked
    # Rollback criteria, readiness and startup probes, a PDB, CPU and memory, a priority class and the
    # token's automount belong to the InferenceService (ServingRuntimePodSpec has no field for the last two).
    assert not found & {"GP901", "GP401", "GP403", "GP501", "GP106", "GP301", "GP613"}


@pytest.mark.parametrize(
    ("script", "idle"),
    [
        # KAI Scheduler's queue demonstration: a pod that holds 8 GPUs, prints and sleeps
        ('echo "started"\necho "GPUs: $NVIDIA_VISIBLE_DEVICES"\n# simulate work\nsleep 600\necho done', True),
        ("sleep 3600", True),
        ("echo waiting; sleep 60; true", True),
        ("echo holding && sleep 600", True),
        ("echo starting\npython train.py\nsleep 600", False),  # runs a program
        ('echo "$(python train.py)"; sleep 600', False),  # a substitution runs one
        ("sleep 600 & python serve.py", False),
        ("echo only prints", False),  # never sleeps: it exits at once, nothing to hold
    ],
)
def test_a_script_that_only_prints_and_sleeps_is_a_placeholder(script: str, idle: bool) -> None:
    indented = "\n".join("              " + line for line in script.splitlines())
    text = workload(
        image="ubuntu:22.04",
        extra=f"          command: [bash, -c]\n          args:\n            - |\n{indented}\n"
        "          resources: {limits: {nvidia.com/gpu: 8}}",
        kind="Deployment",
    )
    role, evidence = role_of(text)
    assert (role is Role.DEV) is idle, evidence


KTHENA_MODEL_SERVING = """\
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelServing
metadata: {name: deepseek-multinode, namespace: ai-lab}
spec:
  replicas: 1
  template:
    roles:
      - name: leader
        replicas: 1
        entryTemplate:
          spec:
            containers:
              - name: leader
                image: vllm/vllm-openai:v0.8.5
                command: [sh, -c, "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader --ray_cluster_size=2; python3 -m vllm.entrypoints.openai.api_server --port 8080 --model deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B --tensor-parallel-size 2"]
                ports: [{containerPort: 8080}]
                readinessProbe: {tcpSocket: {port: 8080}, initialDelaySeconds: 15}
                resources: {limits: {nvidia.com/gpu: "1"}}
        workerReplicas: 1
        workerTemplate:
          spec:
            containers:
              - name: worker
                image: vllm/vllm-openai:v0.8.5
                command: [sh, -c, "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker --ray_address=$(ENTRY_ADDRESS)"]
                resources: {limits: {nvidia.com/gpu: "1"}}
"""


def test_a_walked_kinds_templates_that_serve_are_those_with_evidence(lint_text: LintText) -> None:
    """volcano-sh/kthena's ModelServing (a kind the walk reads): its entry template serves on a
    port, its worker template joins the entry's Ray cluster. GP401 asked the worker for a
    readiness probe; the templates that answer are the ones with evidence of serving."""
    report = lint_text(KTHENA_MODEL_SERVING)
    assert [role.decision.role for role in report.roles] == [Role.SERVER]
    assert not [f for f in report.findings if f.rule_id == "GP401"]
    without_probe = KTHENA_MODEL_SERVING.replace(
        "                readinessProbe: {tcpSocket: {port: 8080}, initialDelaySeconds: 15}\n", ""
    )
    (finding,) = [f for f in lint_text(without_probe).findings if f.rule_id == "GP401"]
    assert finding.container == "leader"


def test_an_ssh_port_is_no_evidence_of_serving(lint_text: LintText) -> None:
    """CoreWeave's cuda-ssh box (`service ssh start -D`, port 22, a Service of port 22) and MPI
    workers running sshd: remote access, not a server (no GP901, GP401)."""
    box = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: sshd}
spec:
  selector: {matchLabels: {app: sshd}}
  template:
    metadata: {labels: {app: sshd}}
    spec:
      containers:
        - name: sshd
          image: ghcr.io/example/cuda-ssh:12.2
          command: [/bin/bash, -c, "service ssh start -D"]
          ports: [{containerPort: 22, name: ssh}]
          resources: {limits: {nvidia.com/gpu: 1, memory: 8Gi}, requests: {cpu: 2, memory: 8Gi}}
---
apiVersion: v1
kind: Service
metadata: {name: sshd}
spec:
  selector: {app: sshd}
  ports: [{name: ssh, port: 22}]
"""
    report = lint_text(box)
    assert [role.decision.role for role in report.roles] == [Role.WORKLOAD]
    assert not {"GP901", "GP401"} & {f.rule_id for f in report.findings}
    served = lint_text(box.replace("containerPort: 22, name: ssh", "containerPort: 8000"))
    assert [role.decision.role for role in served.roles] == [Role.SERVER]


def test_a_daemonset_at_node_critical_priority_is_a_node_agent(lint_text: LintText) -> None:
    """OCI's GPU node labeler, rendered into its release's namespace: system-node-critical is the
    cluster's own class for node agents. A DaemonSet that asks for GPUs at it is judged as the GPU
    workload it is."""
    labeler = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: labeler, namespace: monitoring}
spec:
  selector: {matchLabels: {app: labeler}}
  template:
    metadata: {labels: {app: labeler}}
    spec:
      priorityClassName: system-node-critical
      hostPID: true
      containers:
        - name: label
          image: example.com/labeler:1.0
          command: [nsenter, --target, "1", --, nvidia-smi]
          securityContext: {privileged: true}
"""
    report = lint_text(labeler)
    assert [role.decision.role for role in report.roles] == [Role.AGENT]
    assert not {"GP601", "GP605"} & {f.rule_id for f in report.findings}
    gpu = labeler.replace("securityContext: {privileged: true}", "resources: {limits: {nvidia.com/gpu: 1}}")
    gpu_report = lint_text(gpu)
    assert [role.decision.role for role in gpu_report.roles] != [Role.AGENT]
    assert "GP605" in {f.rule_id for f in gpu_report.findings}  # hostPID


@pytest.mark.parametrize(
    "image",
    [
        "registry.k8s.io/pause",
        "registry.k8s.io/pause:3.10",
        "mirror.example.com/k8s/pause@sha256:" + "a" * 64,
    ],
)
def test_the_pause_image_is_a_placeholder_pod_whatever_its_tag(lint_text: LintText, image: str) -> None:
    """aws-do-eks pre-pulls images with pods whose main container is an untagged pause image."""
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: prepull}\nspec:\n"
        "  selector: {matchLabels: {app: p}}\n  template:\n    metadata: {labels: {app: p}}\n    spec:\n"
        f"      containers: [{{name: pause, image: '{image}', resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]\n"
    )
    assert [role.decision.role for role in lint_text(text).roles] == [Role.DEV]


@pytest.mark.parametrize(
    ("path", "agent"),
    [("/", True), ("/dev/infiniband", True), ("/var/lib", True), ("/var/lib/kubelet/", True),
     ("/devices", False), ("/var/log", True), ("/var/lib/docker/containers", True), ("/var/lib/models", False),
     ("/data/models", False),
     # OPEA's memory-bandwidth exporter: NRI's socket, the OCI hooks, the kernel's resctrl.
     ("/var/run/nri", True), ("/run/containerd/containerd.sock", True), ("/sys/fs/resctrl", True),
     ("/etc/containers/oci/hooks.d", True), ("/run", True), ("/usr", False), ("/etc/containers", True),
     ("/sys/kernel", False)],
)  # fmt: skip
def test_a_daemonset_mounting_the_node_root_is_a_node_agent(
    lint_text: LintText, path: str, agent: bool
) -> None:
    """data-on-eks' mountpoint-s3 helper mounts the node's `/` and nsenters PID 1: `/` holds the
    devices and the kubelet's directory that make a DaemonSet an agent; `/devices` is not `/dev`."""
    helper = f"""\
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: s3-mount, namespace: storage}}
spec:
  selector: {{matchLabels: {{name: s3-mount}}}}
  template:
    metadata: {{labels: {{name: s3-mount}}}}
    spec:
      hostPID: true
      volumes: [{{name: host, hostPath: {{path: '{path}'}}}}]
      containers:
        - name: mount
          image: amazonlinux:2.0.20240916.0
          command: [nsenter, --target, "1", --mount, --pid, /usr/bin/monitor.sh]
          volumeMounts: [{{name: host, mountPath: /host}}]
"""
    report = lint_text(helper)
    assert ([role.decision.role for role in report.roles] == [Role.AGENT]) is agent


@pytest.mark.parametrize(
    ("args", "role"),
    [
        ("[inference_server=DisaggregatedServer, inference_benchmark_test=True, --port=9000]", Role.SERVER),
        ("[--benchmark-dir=/tmp/out, --port=9000]", Role.SERVER),
        ("[python3, benchmarks/benchmark_serving.py, --port=9000]", Role.DEV),
        ("[run, script=benchmark.py]", Role.DEV),
    ],
)
def test_benchmark_counts_in_what_runs_not_in_an_options_name(args: str, role: Role) -> None:
    """GKE's JetStream Pathways server takes `inference_benchmark_test=True`: the word in an option's
    name made it a benchmark (dev), and GP401, GP501 and GP901 went silent on a GPU server."""
    text = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: jetstream, namespace: ai}}
spec:
  selector: {{matchLabels: {{app: jetstream}}}}
  template:
    metadata: {{labels: {{app: jetstream}}}}
    spec:
      containers:
        - name: server
          image: us-docker.pkg.dev/cloud-tpu-images/inference/jetstream:v0.2
          args: {args}
          ports: [{{containerPort: 9000}}]
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""
    workload = workload_in(text)
    assert decide(workload).role is role


def test_a_helper_that_idles_beside_a_server_does_not_make_the_pod_a_test() -> None:
    """GKE's inference reference architecture warms the page cache with a sidecar that then runs
    `sleep infinity`: 74 GPU servers were dev, and every serving rule went silent on them. A
    notebook whose own container runs Jupyter on a port stays dev."""
    text = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: ai}
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
        - name: fetch-safetensors
          image: busybox:1.37
          command: [sh, -c, "find /models -name '*.safetensors' | xargs -I{} dd if={} of=/dev/null; sleep infinity"]
        - name: inference-server
          image: registry.example.com/vllm:0.10.0
          command: [python3, -m, vllm.entrypoints.openai.api_server]
          ports: [{containerPort: 8000}]
          resources: {limits: {nvidia.com/gpu: 8}}
"""
    workload = workload_in(text)
    assert decide(workload).role is Role.SERVER
    notebook = text.replace(
        "command: [python3, -m, vllm.entrypoints.openai.api_server]", "command: [jupyter, lab]"
    )
    workload = workload_in(notebook)
    assert decide(workload).role is Role.DEV


def test_a_variables_name_is_no_benchmark() -> None:
    """accelerated-platforms' transfer Job reads `$(MLP_STORAGE_BENCHMARK_FLAT_BUCKET)`."""
    text = """\
apiVersion: batch/v1
kind: Job
metadata: {name: transfer, namespace: ai}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: copy
          image: google/cloud-sdk:520.0.0
          args: [gcloud, storage, cp, -r, /models, "gs://$(MLP_STORAGE_BENCHMARK_FLAT_BUCKET)"]
          resources: {limits: {nvidia.com/gpu: 1}}
"""
    workload = workload_in(text)
    assert decide(workload).role is Role.BATCH


def test_a_static_control_plane_pod_is_the_clusters_own(lint_text: LintText) -> None:
    """gpushare-scheduler-extender ships kubeadm's kube-scheduler static pod: host network, a probe
    of 127.0.0.1 (its own loopback there), the node's kubeconfig. Ten errors told the cluster's own
    scheduler to stop being one; a GPU workload written the same way keeps them."""
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: kube-scheduler, namespace: kube-system, labels: {component: kube-scheduler, tier: control-plane}}
spec:
  priorityClassName: system-node-critical
  hostNetwork: true
  containers:
    - name: kube-scheduler
      image: registry.k8s.io/kube-scheduler:v1.23.3
      command: [kube-scheduler, --kubeconfig=/etc/kubernetes/scheduler.conf]
      livenessProbe: {httpGet: {host: 127.0.0.1, path: /healthz, port: 10259, scheme: HTTPS}}
      volumeMounts: [{name: kubeconfig, mountPath: /etc/kubernetes/scheduler.conf, readOnly: true}]
  volumes: [{name: kubeconfig, hostPath: {path: /etc/kubernetes/scheduler.conf, type: FileOrCreate}}]
"""
    judged = {"GP409", "GP605", "GP606"}
    assert not judged & set(rule_ids(lint_text(text)))
    workload_text = text.replace("namespace: kube-system", "namespace: ai-lab")
    assert judged <= set(rule_ids(lint_text(workload_text)))
