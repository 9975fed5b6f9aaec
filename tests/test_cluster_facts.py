"""Cluster-agnostic by default: what the repository cannot show is one info finding per missing fact,
naming how to supply it; given the fact, the rule works at full strength."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

import pytest

from gpupolicy.core.findings import Severity
from gpupolicy.engine.context import Context
from gpupolicy.engine.evaluation import complete_kinds
from gpupolicy.engine.registry import REGISTRY, Violation
from gpupolicy.engine.unknowns import GPU_TAINTS, NETWORK_POLICIES, NODE_POOLS, PRIORITY_CLASSES, ClusterFact
from gpupolicy.kube.inventory import Bundle
from gpupolicy.kube.pod_spec import Workload
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import Policy, default_policy, load_policy, policy_from_mapping
from gpupolicy.policy.validation import PolicyError
from tests.conftest import REPO, LintText

SERVER = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
          ports: [{{containerPort: 8000}}]
          resources:
            requests: {{cpu: "4", memory: 32Gi}}
            limits: {{memory: 32Gi, nvidia.com/gpu: {gpus}}}
"""


def server(name: str = "llm", namespace: str = "ai-lab", gpus: int = 2) -> str:
    return SERVER.format(name=name, namespace=namespace, gpus=gpus)


def by_rule(report: object, rule_id: str) -> list:  # type: ignore[type-arg]
    return [f for f in report.findings if f.rule_id == rule_id]  # type: ignore[attr-defined]


def test_the_shipped_policy_describes_no_cluster() -> None:
    policy = default_policy()
    assert policy.data["nodePools"] == []
    assert policy.data["placement"]["gpuTaints"] is None
    assert policy.data["priority"]["tiers"] == {} and policy.data["priority"]["highClasses"] == []
    assert "accelerator" not in policy.data["nodeLabels"]


@pytest.mark.parametrize(
    ("rule_ids", "key"),
    [
        (("GP108", "GP201"), "nodePools"),
        (("GP202",), "placement.gpuTaints"),
        (("GP301",), "priority.clusterClasses"),
    ],
)
def test_each_missing_fact_is_said_once_as_info(
    lint_text: LintText, rule_ids: tuple[str, ...], key: str
) -> None:
    report = lint_text(
        server() + "---\n" + server(name="llm2") + "---\n" + server(name="llm3", namespace="other")
    )
    found = [f for rule_id in rule_ids for f in by_rule(report, rule_id)]
    assert len(found) == 1, [f.message for f in found]  # one per fact, whichever rule needs it first
    assert found[0].severity is Severity.INFO and found[0].extra.get("clusterFact")
    assert key in found[0].message and "gpupolicy cluster snapshot" in found[0].message


def test_unknown_stays_info_whatever_the_override(lint_text: LintText) -> None:
    report = lint_text(server(), {"rules": {"GP202": {"severity": "error"}}})
    assert [f.severity for f in by_rule(report, "GP202")] in ([Severity.INFO], [])


def test_given_the_facts_the_rules_work_at_full_strength(lint_text: LintText) -> None:
    cluster = {
        "nodePools": [
            {
                "name": "h100",
                "resource": "nvidia.com/gpu",
                "gpuProduct": "NVIDIA-H100-80GB-HBM3",
                "gpusPerNode": 8,
            },
            {"name": "l4", "resource": "nvidia.com/gpu", "gpuProduct": "NVIDIA-L4", "gpusPerNode": 1},
        ],
        "placement": {"gpuTaints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "priority": {"clusterClasses": ["gpu-serving"]},
    }
    report = lint_text(server(gpus=16), cluster)
    for rule_id in ("GP108", "GP201", "GP202", "GP301"):
        found = by_rule(report, rule_id)
        assert found and all(f.severity >= Severity.WARNING for f in found), rule_id
    # one kind of GPU node: nothing to target
    homogeneous = {**cluster, "nodePools": cluster["nodePools"][:1]}
    assert not by_rule(lint_text(server(), homogeneous), "GP201")


PRIORITY_CLASS = "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: 1000\n{extra}"


def test_priority_classes_count_when_the_repository_holds_them_all(lint_text: LintText) -> None:
    text = server() + PRIORITY_CLASS.format(name="gpu-serving", extra="")
    # A repository may hold a scheduler's classes beside another team's workloads: unknown.
    assert [f.severity for f in by_rule(lint_text(text), "GP301")] == [Severity.INFO]
    complete = {"inventory": {"completeKinds": ["PriorityClass"]}}
    used = lint_text(text, complete)
    assert [f.severity for f in by_rule(used, "GP301")] == [Severity.WARNING]
    defaulted = lint_text(
        server() + PRIORITY_CLASS.format(name="gpu-default", extra="globalDefault: true\n"), complete
    )
    assert not by_rule(defaulted, "GP301")  # a global default gives the pod its priority


NETWORK_POLICY = "---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: ai-lab}\nspec: {podSelector: {}}\n"


def test_network_policies_are_judged_only_when_the_inventory_holds_them(lint_text: LintText) -> None:
    two = server() + "---\n" + server(name="llm2")
    unknown = by_rule(lint_text(two), "GP614")
    assert len(unknown) == 1 and unknown[0].severity is Severity.INFO
    complete = {"inventory": {"completeKinds": ["NetworkPolicy"]}}
    missing = by_rule(lint_text(two, complete), "GP614")
    assert len(missing) == 1 and missing[0].severity is Severity.WARNING  # once per namespace
    assert not by_rule(lint_text(two + NETWORK_POLICY, complete), "GP614")


def test_a_policy_extends_a_shared_cluster_policy(tmp_path: Path) -> None:
    repo = tmp_path / ".gpupolicy.yaml"
    repo.write_text(
        f"apiVersion: gpupolicy.io/v1alpha1\nkind: Policy\nextends: {REPO / 'examples' / 'cluster' / 'policy.yaml'}\nfailOn: warning\n"
    )
    policy = load_policy(repo_policy=repo)
    assert len(policy.data["nodePools"]) == 4 and policy.data["failOn"] == "warning"
    assert "extends" not in policy.data


def test_extends_cycles_are_configuration_errors(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("extends: b.yaml\n")
    second.write_text("extends: a.yaml\n")
    with pytest.raises(PolicyError, match=r"\.yaml:1:1: policy key extends: .* forms a cycle"):
        load_policy(repo_policy=first)


class _Unread(list):  # type: ignore[type-arg]
    """Templates a rule must not walk: iterating them fails the test."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the rule read the workload's templates")


_POOLS = [
    {"name": "h100", "resource": "nvidia.com/gpu", "gpuProduct": "NVIDIA-H100-80GB-HBM3", "gpusPerNode": 8},
    {"name": "l4", "resource": "nvidia.com/gpu", "gpuProduct": "NVIDIA-L4", "gpusPerNode": 1},
]
# Each rule, the fact it needs, and a policy that declares the fact (the rule then finds the
# 16-GPU server wanting).
_FACT_RULES = [
    ("GP108", NODE_POOLS, {"nodePools": _POOLS}),
    ("GP201", NODE_POOLS, {"nodePools": _POOLS}),
    ("GP202", GPU_TAINTS, {"placement": {"gpuTaints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}),
    ("GP301", PRIORITY_CLASSES, {"priority": {"clusterClasses": ["gpu-serving"]}}),
    ("GP614", NETWORK_POLICIES, {"inventory": {"completeKinds": ["NetworkPolicy"]}}),
]


def _subject(policy: Policy, said: set[Hashable]) -> tuple[Workload, Context]:
    """A 16-GPU server's view, with its role and GPU use found, as the engine and the rules
    before any of these leave them."""
    resources = load_text(server(gpus=16), "t.yaml").resources
    ctx = Context(policy, Bundle(resources, complete_kinds=complete_kinds(policy)), resources, said=said)
    ctx.next_subject(resources[0])
    workload = ctx.workload_of(resources[0])
    assert workload is not None
    ctx.role(workload), ctx.uses_gpus(workload)
    return workload, ctx


def _run_rule(rule_id: str, workload: Workload, ctx: Context) -> list[Violation]:
    check = REGISTRY[rule_id].check
    assert check is not None
    return list(check(workload, ctx))


@pytest.mark.parametrize(("rule_id", "fact", "described"), _FACT_RULES)
def test_a_rule_whose_one_finding_is_a_said_unknown_reads_no_object(
    rule_id: str, fact: ClusterFact, described: dict[str, object]
) -> None:
    """Under a policy without the fact its one finding is that unknown: said once, the rule returns
    before it reads a template (the engine would drop the finding anyway)."""
    [violation] = _run_rule(rule_id, *_subject(default_policy(), set()))
    assert violation.cluster_fact == fact.what and violation.once is not None
    workload, ctx = _subject(default_policy(), {violation.once})
    workload.templates = _Unread(workload.templates)
    assert _run_rule(rule_id, workload, ctx) == []
    # Given the fact, what the run has said does not stop the rule: it judges the object.
    found = _run_rule(rule_id, *_subject(policy_from_mapping(described), {violation.once}))
    assert found and not any(item.cluster_fact or item.unknown for item in found), rule_id
