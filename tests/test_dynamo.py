"""NVIDIA Dynamo's DynamoGraphDeployment judged as its operator runs it: a serving graph whose
components get probes, ports and /dev/shm from the operator, and whose v1alpha1 services ask for
GPUs in a `resources` field of their own (ai-dynamo/dynamo deploy/operator)."""

from __future__ import annotations

from gpupolicy.core.findings import Finding
from tests.conftest import LintText
from tests.test_pod_spec import DYNAMO_V1ALPHA1, DYNAMO_V1BETA1


def by_rule(findings: list[Finding], rule: str) -> list[Finding]:
    return [finding for finding in findings if finding.rule_id == rule]


def test_a_graph_is_a_gpu_server_whose_operator_gives_probes_and_shm(lint_text: LintText) -> None:
    for text in (DYNAMO_V1ALPHA1, DYNAMO_V1BETA1.replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "4"')):
        report = lint_text(text)
        (role,) = report.roles
        assert role.decision.role.value == "server", role
        found = {finding.rule_id for finding in report.findings}
        # a multi-GPU worker without probes or /dev/shm in the manifest: the operator adds them
        assert not found & {"GP401", "GP402", "GP403", "GP113"}, found
        assert "GP901" in found  # a serving GPU workload, as any other


def test_a_v1alpha1_service_gpu_request_without_a_limit_points_at_the_service_field(
    lint_text: LintText,
) -> None:
    """`requests: {gpu: "1"}` alone becomes a request of nvidia.com/gpu without a limit, which the
    API server refuses for an extended resource; the finding is on the line that asks for it."""
    text = DYNAMO_V1ALPHA1.replace('          gpu: "8"\n', "").replace(
        '          cpu: "10"\n', '          cpu: "10"\n          gpu: "1"\n'
    )
    report = lint_text(text)
    (finding,) = by_rule(report.findings, "GP101")
    line = text.splitlines().index('          gpu: "1"') + 1
    assert finding.line == line, (finding.line, finding.message)


def test_a_v1alpha1_worker_is_a_gpu_workload_only_through_its_service_resources(lint_text: LintText) -> None:
    without = DYNAMO_V1ALPHA1.replace('          gpu: "8"\n', "")
    assert by_rule(lint_text(DYNAMO_V1ALPHA1).findings, "GP901")
    assert not by_rule(lint_text(without).findings, "GP901")  # no GPU anywhere: not a GPU server


def test_a_v1alpha1_services_envs_are_the_main_containers(lint_text: LintText) -> None:
    """The operator merges a service's `envs` into its main container's env: a literal token there
    is in the pod, and the finding is on the service's line (13 of Dynamo's 41 v1alpha1 examples
    set `envs`)."""
    token = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM"
    text = DYNAMO_V1ALPHA1.replace(
        "      labels: {team: llm}\n",
        f"      labels: {{team: llm}}\n      envs:\n        - {{name: HF_TOKEN, value: {token}}}\n",
    )
    (finding,) = by_rule(lint_text(text).findings, "GP612")
    assert finding.line == text.splitlines().index(f"        - {{name: HF_TOKEN, value: {token}}}") + 1
    assert finding.message.startswith(
        "container 'main' of service 'VllmWorker' env HF_TOKEN holds a literal Hugging Face token"
    )


def test_a_pdb_selects_a_graphs_pods_by_the_label_its_operator_sets(lint_text: LintText) -> None:
    pdb = """\
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: vllm-agg}
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {nvidia.com/dynamo-graph-deployment-name: vllm-agg}
"""
    assert by_rule(lint_text(DYNAMO_V1BETA1).findings, "GP501")
    assert not by_rule(lint_text(DYNAMO_V1BETA1 + pdb).findings, "GP501")


MULTINODE = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {{name: big-model, namespace: llm}}
spec:
  services:
    VllmWorker:
      componentType: worker
      replicas: {replicas}
      multinode: {{nodeCount: 2}}
      resources: {{limits: {{gpu: "8"}}}}
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1
          command: [python3, -m, dynamo.vllm, --model, deepseek-ai/DeepSeek-R1]
"""


def test_a_multinode_component_serves_one_copy_per_replica(lint_text: LintText) -> None:
    """`multinode.nodeCount: 2` spreads one model instance over two nodes (Dynamo's multinode
    guide): one replica is one copy, not two to spread or keep up."""
    single = {f.rule_id for f in lint_text(MULTINODE.format(replicas=1)).findings}
    assert not {"GP208", "GP501"} & single
    pair = [f for f in lint_text(MULTINODE.format(replicas=2)).findings if f.rule_id == "GP208"]
    assert [f.message.split(" of ")[0] for f in pair] == ["2 replicas"]


def test_each_services_container_is_named_with_its_service(lint_text: LintText) -> None:
    """Every Dynamo service's container is `main`: semantic-router's chart gave two GP601 lines
    worded alike for the prefill and the decode worker."""
    text = """\
apiVersion: nvidia.com/v1alpha1
kind: DynamoGraphDeployment
metadata: {name: vllm, namespace: dynamo}
spec:
  services:
    PrefillWorker:
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0
          securityContext: {privileged: true}
    DecodeWorker:
      extraPodSpec:
        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0
          securityContext: {privileged: true}
"""
    messages = sorted(
        f.message.split(" is privileged")[0] for f in lint_text(text).findings if f.rule_id == "GP601"
    )
    assert messages == [
        "container 'main' of service 'DecodeWorker'",
        "container 'main' of service 'PrefillWorker'",
    ]
