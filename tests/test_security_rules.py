"""GP6xx/GP7xx rules end to end: levels, pod/container precedence, GPU escapes, cross-object
lookups through the inventory, and the restricted example."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.formats.text import format_finding
from gpupolicy.kube.inventory import Bundle, Coverage
from gpupolicy.loading.documents import Resource
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy, policy_from_mapping
from tests.conftest import REPO, LintText

RESTRICTED = {"security": {"level": "restricted"}}


def pod(
    spec: str, *, kind_header: str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ai-lab}\n"
) -> str:
    return kind_header + "spec:\n" + spec


def ids(findings: Sequence[Finding], rule: str) -> list[Finding]:
    return [finding for finding in findings if finding.rule_id == rule]


GPU_CONTAINER = """\
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.8.5
      resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_restricted_only_rules_are_silent_at_baseline(lint_text: LintText) -> None:
    text = pod(GPU_CONTAINER)
    baseline = lint_text(text)
    restricted = lint_text(text, RESTRICTED)
    for rule in ("GP602", "GP604", "GP608"):
        assert not ids(baseline.findings, rule), rule
        assert len(ids(restricted.findings, rule)) == 1, rule


def test_capability_allow_list_follows_the_level(lint_text: LintText) -> None:
    text = pod(
        GPU_CONTAINER.replace(
            "      resources:",
            "      securityContext: {capabilities: {add: [CHOWN, NET_BIND_SERVICE]}}\n      resources:",
        )
    )
    assert not ids(lint_text(text).findings, "GP603")
    found = ids(lint_text(text, RESTRICTED).findings, "GP603")
    assert [f.message for f in found] == [
        "container 'vllm' adds capability CHOWN, not allowed at the restricted level"
    ]


def test_memory_lock_beside_an_rdma_device_is_a_warning_naming_where_the_pod_runs(
    lint_text: LintText,
) -> None:
    """NVIDIA's GPUDirect RDMA demo pod adds IPC_LOCK beside `rdma/rdma_shared_device_a`: RDMA pins
    the memory it transfers. The pod still needs a privileged namespace (a warning that says so);
    IPC_LOCK without an RDMA device, or SYS_RESOURCE beside one, stays an error."""
    rdma = pod(
        GPU_CONTAINER.replace(
            "      resources: {limits: {nvidia.com/gpu: 1}}",
            "      securityContext: {capabilities: {add: [IPC_LOCK, SYS_RESOURCE]}}\n"
            "      resources: {limits: {nvidia.com/gpu: 1, rdma/rdma_shared_device_a: 1}}",
        )
    )
    found = ids(lint_text(rdma).findings, "GP603")
    assert [(f.severity, f.message) for f in found] == [
        (
            Severity.WARNING,
            "container 'vllm' adds capability IPC_LOCK, which RDMA (rdma/rdma_shared_device_a) needs to pin memory "
            "and the baseline level does not allow: the pod is admitted only in a namespace whose "
            "pod-security.kubernetes.io/enforce is privileged",
        ),
        (Severity.ERROR, "container 'vllm' adds capability SYS_RESOURCE, not allowed at the baseline level"),
    ]
    for resource in (
        "vke.volcengine.com/rdma",
        "nvidia.com/hostdev",
        "rdma/hca_shared_devices_a",
        "vpc.amazonaws.com/efa",
        "intel.com/sriov_111",  # DeepOps' RoCE job: SR-IOV virtual functions for NCCL over RDMA
    ):
        (hit,) = ids(lint_text(rdma.replace("rdma/rdma_shared_device_a", resource)).findings, "GP603")[:1]
        assert hit.severity is Severity.WARNING, resource
    for without_device in (
        rdma.replace(", rdma/rdma_shared_device_a: 1", ""),
        rdma.replace("device_a: 1", "device_a: 0"),
    ):
        without = ids(lint_text(without_device).findings, "GP603")
        assert [f.severity for f in without] == [Severity.ERROR, Severity.ERROR]


MEMORY_LOCK_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: ai-lab
  annotations: {annotations}
spec:
  containers:
    - name: sglang
      image: lmsysorg/sglang:v0.5.2
      securityContext: {{capabilities: {{add: [IPC_LOCK]}}{privileged}}}
      resources: {{limits: {{nvidia.com/gpu: 8}}}}
      volumeMounts: [{{name: ib, mountPath: /dev/infiniband}}]
  volumes:
    - name: ib
      hostPath: {{path: {host_path}}}
"""


@pytest.mark.parametrize(
    ("annotations", "host_path", "privileged", "expected"),
    [
        # SGLang's and llm-d's multi-node examples mount the host's RDMA devices.
        ("{}", "/dev/infiniband", "", [("GP603", Severity.WARNING)]),
        # GKE's multi-network RDMA NICs; NVIDIA Network Operator's Multus networks.
        ('{networking.gke.io/interfaces: \'[{"interfaceName":"eth2","network":"rdma-0"}]\'}', "/data", "",
         [("GP603", Severity.WARNING)]),
        ("{k8s.v1.cni.cncf.io/networks: roce-net-a}", "/data", "", [("GP603", Severity.WARNING)]),
        ("{}", "/data", "", [("GP603", Severity.ERROR)]),  # no RDMA: an error
        # Privileged holds every capability: one problem, GP601's.
        ("{}", "/dev/infiniband", ", privileged: true", [("GP601", Severity.ERROR)]),
    ],
)  # fmt: skip
def test_memory_lock_beside_the_hosts_rdma_devices_or_networks(
    lint_text: LintText,
    annotations: str,
    host_path: str,
    privileged: str,
    expected: list[tuple[str, Severity]],
) -> None:
    text = MEMORY_LOCK_POD.format(annotations=annotations, host_path=host_path, privileged=privileged)
    found = [(f.rule_id, f.severity) for f in lint_text(text).findings if f.rule_id in ("GP601", "GP603")]
    assert found == expected


def test_memory_lock_beside_an_rdma_nic_claimed_through_dra(lint_text: LintText) -> None:
    """GKE's a4x-max recipes claim their RDMA NICs with DRA (device class mrdma.google.com) and add
    IPC_LOCK: the same need as beside an RDMA resource, told by the class of the repository's
    template, not by a name."""
    text = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: all-nics, namespace: ai-lab}
spec:
  spec:
    devices:
      requests:
        - name: req-mrdma
          exactly: {deviceClassName: mrdma.google.com, allocationMode: All}
---
""" + pod(
        "  resourceClaims: [{name: nics, resourceClaimTemplateName: all-nics}]\n"
        + GPU_CONTAINER.replace(
            "      resources: {limits: {nvidia.com/gpu: 1}}",
            "      securityContext: {capabilities: {add: [IPC_LOCK]}}\n"
            "      resources: {limits: {nvidia.com/gpu: 1}, claims: [{name: nics}]}",
        )
    )
    (found,) = ids(lint_text(text).findings, "GP603")
    assert found.severity is Severity.WARNING
    assert "RDMA (DRA claim 'nics' of mrdma.google.com)" in found.message
    elsewhere = text.replace("mrdma.google.com", "gpu.nvidia.com")
    assert [f.severity for f in ids(lint_text(elsewhere).findings, "GP603")] == [Severity.ERROR]


def test_a_host_port_on_the_nodes_network_is_gp605s_alone(lint_text: LintText) -> None:
    """DeepOps' node-exporter: hostNetwork with a hostPort equal to its containerPort, as the API
    server requires there. The port is the node's because the pod is on its network: one finding."""
    container = GPU_CONTAINER.replace(
        "      resources:", "      ports: [{containerPort: 9100, hostPort: 9100}]\n      resources:"
    )
    assert len(ids(lint_text(pod(container)).findings, "GP610")) == 1
    on_node = lint_text(pod("  hostNetwork: true\n" + container)).findings
    assert not ids(on_node, "GP610") and ids(on_node, "GP605")


def test_pod_non_root_with_container_root_user(lint_text: LintText) -> None:
    text = pod(
        "  securityContext: {runAsNonRoot: true}\n"
        + GPU_CONTAINER.replace("      resources:", "      securityContext: {runAsUser: 0}\n      resources:")
    )
    found = ids(lint_text(text, RESTRICTED).findings, "GP608")
    assert [f.path for f in found] == [("spec", "containers", 0, "securityContext", "runAsUser")]


def test_container_seccomp_overrides_pod_unconfined(lint_text: LintText) -> None:
    text = pod(
        "  securityContext: {seccompProfile: {type: Unconfined}}\n"
        + GPU_CONTAINER.replace(
            "      resources:",
            "      securityContext: {seccompProfile: {type: RuntimeDefault}}\n      resources:",
        )
    )
    found = ids(lint_text(text).findings, "GP609")
    # one error at the pod field, none for the container (it runs confined)
    assert [(f.path, f.severity) for f in found] == [
        (("spec", "securityContext", "seccompProfile", "type"), Severity.ERROR)
    ]


TWO_CONTAINERS = GPU_CONTAINER + "    - name: proxy\n      image: registry.example.com/tools/proxy:1.0.0\n"


def test_unset_seccomp_passes_baseline_and_is_one_restricted_warning_per_pod(lint_text: LintText) -> None:
    assert not ids(lint_text(pod(TWO_CONTAINERS)).findings, "GP609")
    [finding] = ids(lint_text(pod(TWO_CONTAINERS), RESTRICTED).findings, "GP609")
    assert finding.severity is Severity.WARNING and finding.path == ("spec", "securityContext")
    assert finding.message == (
        "no seccomp profile: neither the pod nor containers 'vllm', 'proxy' sets seccompProfile.type "
        "RuntimeDefault or Localhost"
    )


def test_privileged_is_one_finding_not_three(lint_text: LintText) -> None:
    text = pod(
        GPU_CONTAINER.replace(
            "      resources:", "      securityContext: {privileged: true}\n      resources:"
        )
    )
    report = lint_text(text, RESTRICTED)
    assert len(ids(report.findings, "GP601")) == 1
    # privileged always escalates and holds every capability: no GP602/GP604 beside GP601
    assert not ids(report.findings, "GP602") and not ids(report.findings, "GP604")
    sys_admin = text.replace("privileged: true", "capabilities: {add: [CAP_SYS_ADMIN], drop: [ALL]}")
    report = lint_text(sys_admin, RESTRICTED)
    assert len(ids(report.findings, "GP603")) == 1 and not ids(report.findings, "GP602")


def test_kubernetes_version_moves_the_boundaries(lint_text: LintText) -> None:
    text = pod(
        "  securityContext: {sysctls: [{name: net.ipv4.tcp_keepalive_time, value: '600'}]}\n" + GPU_CONTAINER
    )
    assert not ids(lint_text(text).findings, "GP611")  # the shipped policy: 1.34
    [finding] = ids(lint_text(text, {"kubernetesVersion": "1.28"}).findings, "GP611")
    assert "safe set of Kubernetes 1.28" in finding.message
    assert not ids(lint_text(text, {"kubernetesVersion": "v1.29.4"}).findings, "GP611")


def test_text_line_names_the_container_once(lint_text: LintText) -> None:
    text = pod(
        GPU_CONTAINER.replace(
            "      resources:", "      securityContext: {privileged: true}\n      resources:"
        )
    )
    report = lint_text(text, RESTRICTED)
    for finding in report.findings:
        if finding.rule_id.startswith("GP6") and finding.container:
            line = format_finding(finding)
            assert line.count("vllm'") + line.count("container vllm") == 1, line


def test_privileged_names_the_gpu_consequence(lint_text: LintText) -> None:
    text = pod(
        GPU_CONTAINER.replace(
            "      resources:", "      securityContext: {privileged: true}\n      resources:"
        )
    )
    [finding] = ids(lint_text(text).findings, "GP601")
    assert "sees every device of the node, every GPU included, although it asks for" in finding.message


def test_host_path_names_gpu_devices_and_sockets(lint_text: LintText) -> None:
    volumes = "".join(
        f"    - {{name: v{i}, hostPath: {{path: {path}}}}}\n"
        for i, path in enumerate(
            ["/dev/nvidia0", "/dev/dri", "/run/nvidia/driver", "/var/run/docker.sock", "/dev", "/data"]
        )
    )
    mounts = (
        "      volumeMounts: [" + ", ".join(f"{{name: v{i}, mountPath: /m{i}}}" for i in range(6)) + "]\n"
    )
    container = GPU_CONTAINER.replace("      resources:", mounts + "      resources:")
    found = ids(lint_text(pod(container + "  volumes:\n" + volumes)).findings, "GP606")
    messages = [f.message for f in found]
    assert len(messages) == 6
    assert "NVIDIA GPU device nodes" in messages[0]
    assert "DRM GPU device nodes" in messages[1]
    assert "NVIDIA driver" in messages[2]
    assert "Docker socket" in messages[3]
    assert "whole /dev" in messages[4]
    assert messages[5] == "volume 'v5' mounts the node's /data"


def test_a_host_path_no_container_mounts_is_still_refused_and_says_so(lint_text: LintText) -> None:
    """AWS's Trainium templates declare the node's /dev and never mount it: the admission refuses
    the hostPath all the same, and the message says what to do rather than what it would expose."""
    text = pod(GPU_CONTAINER + "  volumes:\n    - {name: dev, hostPath: {path: /dev}}\n")
    (found,) = ids(lint_text(text).findings, "GP606")
    assert found.message == "volume 'dev' declares the node's /dev, which no container mounts: remove it"


def test_nvidia_env_fires_without_gpu_request(lint_text: LintText) -> None:
    text = pod(
        "  containers:\n    - name: c\n      image: busybox:1.37\n      env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]\n"
    )
    assert len(ids(lint_text(text).findings, "GP607")) == 1
    hidden = text.replace("value: all", "value: void")
    assert not ids(lint_text(hidden).findings, "GP607")


MPS_POLICY = {
    "security": {"allowMpsHostIPC": True},
    "nodePools": [
        {
            "name": "a100",
            "resource": "nvidia.com/gpu",
            "gpuProduct": "A100",
            "gpusPerNode": 8,
            "sharing": "none",
        },
        {
            "name": "l4-mps",
            "resource": "nvidia.com/gpu.shared",
            "gpuProduct": "L4",
            "gpusPerNode": 4,
            "sharing": "mps",
        },
        {
            "name": "t4-ts",
            "resource": "nvidia.com/gpu.shared",
            "gpuProduct": "T4",
            "gpusPerNode": 4,
            "sharing": "time-slicing",
        },
    ],
}


def mps_pod(selector: str) -> str:
    return pod(
        f"  hostIPC: true\n{selector}  containers:\n    - name: c\n      image: busybox:1.37\n"
        "      resources: {limits: {nvidia.com/gpu.shared: 1}}\n"
    )


def test_mps_host_ipc_needs_the_policy_and_an_mps_pool(lint_text: LintText) -> None:
    on_mps = mps_pod("  nodeSelector: {nvidia.com/gpu.product: L4-SHARED}\n")
    assert not ids(lint_text(on_mps, MPS_POLICY).findings, "GP605")
    # the allowance is off by default
    assert len(ids(lint_text(on_mps, {**MPS_POLICY, "security": {}}).findings, "GP605")) == 1
    # without node targeting the pod may land on the time-sliced pool too
    assert len(ids(lint_text(mps_pod(""), MPS_POLICY).findings, "GP605")) == 1
    # hostNetwork is never allowed
    assert len(ids(lint_text(on_mps.replace("hostIPC", "hostNetwork"), MPS_POLICY).findings, "GP605")) == 1


class UnavailableInventory(Bundle):
    def coverage(self, kind: str) -> Coverage:
        return Coverage.UNAVAILABLE


def test_network_policy_unknown_when_inventory_unavailable() -> None:
    resources = load_text(pod(GPU_CONTAINER), "p.yaml").resources
    report = evaluate(resources, default_policy(), UnavailableInventory(resources))
    [finding] = ids(report.findings, "GP614")
    assert finding.severity is Severity.INFO and "cannot tell" in finding.message


def test_webhook_style_inventory_answers_cross_object_rules() -> None:
    """One admitted object, the rest from the cluster inventory: the NetworkPolicy and the
    ServiceAccount are found there."""
    cluster = load_text(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: ai-lab}\nspec: {podSelector: {}}\n"
        "---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: llm, namespace: ai-lab}\nautomountServiceAccountToken: false\n",
        "cluster.yaml",
    ).resources
    admitted = load_text(pod("  serviceAccountName: llm\n" + GPU_CONTAINER), "p.yaml").resources
    report = evaluate(
        admitted, default_policy(), Bundle([*cluster, *admitted], complete_kinds=["NetworkPolicy"])
    )
    assert not ids(report.findings, "GP614") and not ids(report.findings, "GP613")


@pytest.mark.parametrize("automount", ["", "  automountServiceAccountToken: true\n"])
@pytest.mark.parametrize(
    ("binding", "subject_namespace", "fires"),
    [
        ("ClusterRoleBinding", "kube-system", False),  # the Neuron scheduler extender's
        ("RoleBinding", "kube-system", False),
        ("ClusterRoleBinding", "other", True),  # another namespace's account of that name
        (None, None, True),
    ],
)
def test_a_pod_whose_account_is_granted_the_api_uses_its_token(
    lint_text: LintText, automount: str, binding: str | None, subject_namespace: str | None, fires: bool
) -> None:
    """AWS Neuron's scheduler extender runs as an account its ClusterRoleBinding grants the API:
    "automount not disabled" told it to drop the token it works with."""
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ext, namespace: kube-system}\nspec:\n"
        "  selector: {matchLabels: {app: ext}}\n  template:\n    metadata: {labels: {app: ext}}\n    spec:\n"
        f"      serviceAccountName: ext\n{'    ' + automount if automount else ''}"
        "      containers: [{name: ext, image: 'public.ecr.aws/neuron/neuron-scheduler:2.22.4.0'}]\n"
    )
    if binding is not None:
        text += (
            f"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: {binding}\n"
            "metadata: {name: ext, namespace: kube-system}\n"
            "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ext}\n"
            f"subjects: [{{kind: ServiceAccount, name: ext, namespace: {subject_namespace}}}]\n"
        )
    assert bool(ids(lint_text(text).findings, "GP613")) is fires


def test_rbac_group_of_service_accounts(lint_text: LintText) -> None:
    text = (
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: all}\n"
        "rules: [{apiGroups: ['*'], resources: ['*'], verbs: [get]}]\n---\n"
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: all}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: all}\n"
        "subjects: [{kind: Group, name: 'system:serviceaccounts:ai-lab', apiGroup: rbac.authorization.k8s.io}]\n---\n"
        + pod(GPU_CONTAINER)
    )
    [finding] = ids(lint_text(text).findings, "GP616")
    assert finding.path == ("rules", 0, "resources", 0) and "Pod/p" in finding.message
    other_namespace = text.replace("system:serviceaccounts:ai-lab", "system:serviceaccounts:other")
    assert not ids(lint_text(other_namespace).findings, "GP616")


def test_one_policy_rule_with_wildcard_verbs_and_resources_is_one_finding(lint_text: LintText) -> None:
    """prometheus-adapter's role (kubernetes/examples): `resources: ['*'], verbs: ['*']` over one
    group is one grant, one finding naming both wildcards."""
    text = (
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: adapter}\n"
        "rules: [{apiGroups: [custom.metrics.k8s.io], resources: ['*'], verbs: ['*']}]\n---\n"
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: adapter}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: adapter}\n"
        "subjects: [{kind: ServiceAccount, name: default, namespace: ai-lab}]\n---\n" + pod(GPU_CONTAINER)
    )
    [finding] = ids(lint_text(text).findings, "GP616")
    assert finding.path == ("rules", 0, "verbs", 0)
    assert "grants verbs and resources '*' to Pod/p" in finding.message


def test_secret_in_env_and_args(lint_text: LintText) -> None:
    text = pod(
        "  containers:\n    - name: c\n      image: busybox:1.37\n"
        "      args: [--api-key, sk-kFJ12nKsFVfVmGpj3QzX65s4RbN2xJqWzPYC]\n"
        "      env: [{name: HF_TOKEN, value: hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789}, {name: OPENAI_API_KEY, value: EMPTY}]\n"
    )
    found = ids(lint_text(text).findings, "GP612")
    assert sorted(f.path for f in found) == [
        ("spec", "containers", 0, "args", 1),
        ("spec", "containers", 0, "env", 0, "value"),
    ]


def test_supply_chain_rules(lint_text: LintText) -> None:
    text = pod("  containers:\n    - name: c\n      image: registry.example.com:5000/team/app\n")
    report = lint_text(text)
    # An untagged image is GP702's alone: "not pinned by digest" would say the same thing twice.
    assert len(ids(report.findings, "GP702")) == 1 and not ids(report.findings, "GP701")
    tagged = pod("  containers:\n    - name: c\n      image: registry.example.com:5000/team/app:1.4\n")
    found = ids(lint_text(tagged).findings, "GP701")
    assert len(found) == 1 and found[0].severity is Severity.INFO  # a version tag: information by default
    required = ids(lint_text(tagged, {"supplyChain": {"requireDigests": True}}).findings, "GP701")
    assert len(required) == 1 and required[0].severity is Severity.WARNING
    assert not ids(report.findings, "GP703")  # empty allow list: no check
    allowed = lint_text(text, {"supplyChain": {"allowedRegistries": ["registry.example.com:5000/team"]}})
    assert not ids(allowed.findings, "GP703")
    denied = lint_text(text, {"supplyChain": {"allowedRegistries": ["nvcr.io"]}})
    assert len(ids(denied.findings, "GP703")) == 1


def test_model_unpinned_only_for_serving_workloads(lint_text: LintText) -> None:
    container = "  containers:\n    - name: c\n      image: vllm/vllm-openai:v0.8.5\n      args: [--model, Qwen/Qwen3-8B]\n"
    job = (
        pod(container)
        .replace("kind: Pod", "kind: Pod")
        .replace("spec:\n", "spec:\n  restartPolicy: Never\n", 1)
    )
    assert not ids(lint_text(job).findings, "GP704")  # a Pod that runs to completion is not serving
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ai-lab}\nspec:\n"
        "  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n"
        + "\n".join("    " + line if line else line for line in container.splitlines())
        + "\n"
    )
    assert len(ids(lint_text(deployment).findings, "GP704")) == 1


@pytest.mark.parametrize(
    ("args", "fires"),
    [
        (
            "[--model, Qwen/Qwen3-8B, --load-format, dummy]",
            False,
        ),  # LMCache's operator sample: random weights
        ("[--model, Qwen/Qwen3-8B, --load-format=dummy]", False),
        ("[--model, Qwen/Qwen3-8B, --load-format, safetensors]", True),
    ],
)
def test_a_server_told_to_load_dummy_weights_serves_no_checkpoint(
    lint_text: LintText, args: str, fires: bool
) -> None:
    deployment = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: ai-lab}\nspec:\n"
        "  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n"
        f"      containers:\n        - name: c\n          image: vllm/vllm-openai:v0.8.5\n          args: {args}\n"
    )
    assert bool(ids(lint_text(deployment).findings, "GP704")) is fires


def test_policy_sections_validate() -> None:
    policy = policy_from_mapping(
        {
            "security": {"level": "restricted", "allowMpsHostIPC": True},
            "supplyChain": {"allowedRegistries": ["nvcr.io"]},
        }
    )
    assert policy.data["security"]["level"] == "restricted"
    assert default_policy().data["security"]["level"] == "baseline"
    assert default_policy().data["security"]["allowMpsHostIPC"] is False
    assert default_policy().data["supplyChain"]["allowedRegistries"] == []


RESTRICTED_EXAMPLE = REPO / "examples" / "gpu" / "restricted-vllm.yaml"


def _load(path: Path) -> list[Resource]:
    return load_text(path.read_text(encoding="utf-8"), str(path), hint_path=path).resources


def test_restricted_example_passes_every_gp6_rule_and_gets_its_gpu() -> None:
    resources = _load(RESTRICTED_EXAMPLE)
    report = evaluate(resources, policy_from_mapping(RESTRICTED))
    assert not report.errors
    gp6 = [f"{f.rule_id} {f.message}" for f in report.findings if f.rule_id.startswith("GP6")]
    assert gp6 == []
    deployment = next(r for r in resources if r.kind == "Deployment")
    limits = deployment.obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 1
    assert default_policy().gpu.classify("nvidia.com/gpu") is not None
    # and the supply-chain rules agree: pinned image, pinned model
    assert not [f for f in report.findings if f.rule_id in ("GP701", "GP702", "GP704")]
    # the namespace it declares enforces restricted itself
    namespace = yaml.safe_load(RESTRICTED_EXAMPLE.read_text(encoding="utf-8").split("---")[0])
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_a_namespace_declared_by_two_blueprints_is_judged_once_beside_its_gpu_workloads() -> None:
    """ai-on-eks declares `stablediffusion` in its Neuron and its GPU blueprint: one namespace, one
    finding, on the declaration beside the GPU workload."""
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: stablediffusion}\n"
    gpu = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: sd, namespace: stablediffusion}\n"
        "spec:\n  selector: {matchLabels: {app: sd}}\n  template:\n    metadata: {labels: {app: sd}}\n"
        "    spec:\n      containers:\n        - {name: sd, image: 'sd:1', resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    resources = [
        *load_text(namespace, "neuron/ns.yaml").resources,
        *load_text(namespace, "gpu/ns.yaml").resources,
        *load_text(gpu, "gpu/deploy.yaml").resources,
    ]
    report = evaluate(resources, default_policy())
    assert [(f.file, f.rule_id) for f in report.findings if f.rule_id == "GP615"] == [
        ("gpu/ns.yaml", "GP615")
    ]


def test_gp616_and_gp615_name_each_workload_once_and_say_how_many_more(lint_text: LintText) -> None:
    """An Argo Workflow's templates run as one account (CoreWeave's finetuner): one name, not one
    per template; past three names, how many more."""
    role = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: wf, namespace: ml}
rules: [{apiGroups: [""], resources: [pods], verbs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: wf, namespace: ml}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: wf}
subjects: [{kind: ServiceAccount, name: runner, namespace: ml}]
---
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: finetune, namespace: ml}
spec:
  serviceAccountName: runner
  entrypoint: a
  templates:
    - {name: a, container: {image: 'x:1'}}
    - {name: b, container: {image: 'x:1'}}
    - {name: c, container: {image: 'x:1'}}
"""
    (message,) = [f.message for f in lint_text(role).findings if f.rule_id == "GP616"]
    assert message.count("Workflow/finetune") == 1, message
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n---\n"
    pods = "".join(
        f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}, namespace: ml}}\nspec:\n"
        f"  containers: [{{name: c, image: 'x:1', resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]\n"
        for i in range(5)
    )
    (message,) = [f.message for f in lint_text(namespace + pods).findings if f.rule_id == "GP615"]
    assert "(Pod/p0, Pod/p1, Pod/p2 and 2 more)" in message


def test_one_literal_credential_in_several_variables_is_one_finding(lint_text: LintText) -> None:
    """The four proxy variables usually carry the same URL: one credential, one finding."""
    url = "http://user:s3cret@proxy.example.com:3128"
    env = ", ".join(
        f"{{name: {name}, value: '{url}'}}" for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY")
    )
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        f"  containers: [{{name: main, image: 'x:1', env: [{env}]}}]\n"
    )
    (message,) = [f.message for f in lint_text(text).findings if f.rule_id == "GP612"]
    assert message.startswith("container 'main' env HTTP_PROXY holds a literal")
    assert message.endswith("(so do http_proxy, HTTPS_PROXY)")


def test_a_host_path_of_a_kind_whose_controller_adds_containers_is_not_said_unmounted(
    lint_text: LintText,
) -> None:
    """Slinky's NodeSet mounts the node's /dev/aperture_devices into the slurmd container the
    operator adds from `spec.slurmd`: "which no container mounts: remove it" would break NCCL."""
    text = (
        "apiVersion: slinky.slurm.net/v1beta1\nkind: NodeSet\nmetadata: {name: a3, namespace: slurm}\nspec:\n"
        "  slurmd:\n    image: ghcr.io/slinkyproject/slurmd:25.05\n"
        "    volumeMounts: [{name: aperture, mountPath: /dev/aperture_devices}]\n"
        "  template:\n    spec:\n      containers: [{name: sidecar, image: 'busybox:1.37'}]\n"
        "      volumes: [{name: aperture, hostPath: {path: /dev/aperture_devices}}]\n"
    )
    (finding,) = [f for f in lint_text(text).findings if f.rule_id == "GP606"]
    assert "declares the node's /dev/aperture_devices" in finding.message
    assert "no container mounts" not in finding.message


def test_the_mps_note_is_for_pods_that_ask_for_nvidia_gpus(lint_text: LintText) -> None:
    """ROCm's JAX examples set hostIPC on AMD pods: the finding stands, NVIDIA's MPS is no reason there."""
    text = pod(
        "  hostIPC: true\n  containers:\n    - name: c\n      image: rocm/jax:0.4.35\n"
        "      resources: {limits: {amd.com/gpu: 1}}\n"
    )
    (finding,) = ids(lint_text(text).findings, "GP605")
    assert finding.message.endswith("sets hostIPC: true")
    nvidia = text.replace("amd.com/gpu", "nvidia.com/gpu")
    (finding,) = ids(lint_text(nvidia).findings, "GP605")
    assert "MPS needs it only on MPS node pools" in finding.message


def test_a_sharing_schedulers_visible_devices_are_not_the_users(lint_text: LintText) -> None:
    """KAI Scheduler's binder gives a fractional-GPU pod NVIDIA_VISIBLE_DEVICES from its sharing
    ConfigMap: GP607 errors would deny every such pod in enforce mode. Set by hand, it still is one."""
    text = pod(
        "  containers:\n    - name: frac\n      image: nvcr.io/nvidia/pytorch:25.01-py3\n"
        "      env: [{name: NVIDIA_VISIBLE_DEVICES, valueFrom: {configMapKeyRef: "
        "{name: frac-runai-sh-gpu-0, key: RUNAI-VISIBLE-DEVICES}}}]\n"
    ).replace("metadata: {", "metadata: {annotations: {gpu-fraction: '0.5'}, ", 1)
    assert not ids(lint_text(text).findings, "GP607")
    by_hand = text.replace("annotations: {gpu-fraction: '0.5'}, ", "")
    assert ids(lint_text(by_hand).findings, "GP607")


CONFIG_MAP_TOKEN = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: tgi-config, namespace: ai-lab}
data:
  MODEL_ID: Intel/neural-chat-7b-v3-3
  HF_TOKEN: VALUE
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME, namespace: ai-lab}
spec:
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      containers:
        - name: tgi
          image: ghcr.io/huggingface/text-generation-inference:2.4.0
          ENVIRONMENT
          resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.mark.parametrize(
    ("value", "environment", "said"),
    [
        # OPEA's TGI chart: HF_TOKEN in the ConfigMap the server loads whole.
        (
            "insert-your-huggingface-token-here",
            "envFrom: [{configMapRef: {name: tgi-config}}]",
            "holds a token to fill in at deploy time (insert-your-huggingface-token-here)",
        ),
        (
            "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
            "env: [{name: HF_TOKEN, valueFrom: {configMapKeyRef: {name: tgi-config, key: HF_TOKEN}}}]",
            "holds a literal Hugging Face token",
        ),
        # Only the model id is read from it: the token is nobody's environment here.
        (
            "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
            "env: [{name: MODEL_ID, valueFrom: {configMapKeyRef: {name: tgi-config, key: MODEL_ID}}}]",
            None,
        ),
        ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "env: [{name: A, value: b}]", None),
    ],
)
def test_a_credential_in_a_config_map_a_container_loads(
    lint_text: LintText, value: str, environment: str, said: str | None
) -> None:
    text = CONFIG_MAP_TOKEN.replace("VALUE", value).replace("ENVIRONMENT", environment)
    twice = text + "---\n" + text.split("---\n", 1)[1].replace("NAME", "tgi-b")
    found = [f for f in lint_text(twice.replace("NAME", "tgi-a")).findings if f.rule_id == "GP612"]
    if said is None:
        assert found == []
        return
    (finding,) = found  # two Deployments load it: said once, at the ConfigMap's key
    assert finding.object is not None
    assert (finding.path, finding.object.kind, finding.line) == (("data", "HF_TOKEN"), "ConfigMap", 6)
    assert said in finding.message and "a ConfigMap is not a Secret" in finding.message


def test_the_webhook_does_not_read_the_config_maps_a_pod_loads() -> None:
    """Only findings about the admitted object are kept there: the ConfigMap is not even asked for,
    so the decision cache does not follow every ConfigMap's changes."""
    from gpupolicy.engine.evaluation import evaluate_subject

    text = CONFIG_MAP_TOKEN.replace("VALUE", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH").replace(
        "ENVIRONMENT",
        "env: [{name: HF_TOKEN, valueFrom: {configMapKeyRef: {name: tgi-config, key: HF_TOKEN}}}]",
    )
    config_map, deployment = load_text(text.replace("NAME", "tgi"), "t.yaml").resources
    asked: list[str] = []

    class Noting(Bundle):
        def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
            asked.append(kind)
            return super().get(kind, name, namespace)

    report = evaluate_subject(deployment, default_policy(), Noting([config_map, deployment]))
    assert "ConfigMap" not in asked and not [f for f in report.findings if f.rule_id == "GP612"]
