"""GP2xx-GP5xx through the engine: the seeds' affinity example, cross-object findings (which object
they point at, what they name), "unknown" as one info finding, and the webhook's view (one admitted
object against an inventory)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpupolicy.core.findings import Severity
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.kube.inventory import Bundle, Coverage, Inventory
from gpupolicy.kube.tolerations import Taint, toleration_for
from gpupolicy.loading.documents import Resource
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy, policy_from_mapping
from tests.conftest import SEEDS, LintText

FAMILIES = ("GP2", "GP3", "GP4", "GP5")


def ours(report: Report, prefix: str | tuple[str, ...] = FAMILIES) -> list[str]:
    """Rule ids of the findings, less what the policy cannot know of the cluster (said as info)."""
    return [
        f.rule_id for f in report.findings if f.rule_id.startswith(prefix) and "clusterFact" not in f.extra
    ]


NVIDIA_TAINT = [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "vendor": "nvidia"}]


# A verbatim copy of the day-20 field note's affinity block (tests/data/seeds), so these tests
# run where the notes are not laid out beside the repository; the test below keeps it verbatim.
SEED_AFFINITY = Path(__file__).parent / "data" / "seeds" / "002_9eb615917f662adc.affinity"


def seed_affinity() -> str:
    """The affinity block of the day-20 field note, exactly as written there."""
    return SEED_AFFINITY.read_text(encoding="utf-8")


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the field notes are not at {SEEDS}")
def test_seed_affinity_copy_is_verbatim() -> None:
    text = (SEEDS / f"{SEED_AFFINITY.stem}.txt").read_text(encoding="utf-8")
    match = re.search(r"^affinity:\n(?:[ ]+.*\n)+", text, re.MULTILINE)
    assert match is not None, "the seed's affinity example moved"
    assert match.group(0) == seed_affinity()


def indent(block: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in block.splitlines())


SERVER = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: ai-lab
spec:
  replicas: 2
  progressDeadlineSeconds: 1200
  selector:
    matchLabels: {{app: llm}}
  template:
    metadata:
      labels: {{app: llm}}
    spec:
      priorityClassName: gpu-serving
{affinity}      tolerations:
        - {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}
      topologySpreadConstraints:
        - {{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {{matchLabels: {{app: llm}}}}}}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          ports:
            - {{name: http, containerPort: 8000}}
          resources:
            limits: {{nvidia.com/gpu: 1}}
          startupProbe:
            httpGet: {{path: /health, port: http}}
            failureThreshold: 60
          readinessProbe:
            httpGet: {{path: /health, port: http}}
            periodSeconds: 5
          livenessProbe:
            httpGet: {{path: /health, port: http}}
            failureThreshold: 6
"""

PDB = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: llm
  namespace: ai-lab
spec:
  {budget}
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels: {{app: llm}}
"""


def server(affinity: str | None = None) -> str:
    return SERVER.format(affinity=indent(affinity if affinity is not None else seed_affinity(), 6))


def test_seed_affinity_passes_the_placement_rules_under_the_default_policy(lint_text: LintText) -> None:
    report = lint_text(server())
    assert "key: accelerator" in server()
    assert ours(report, "GP2") == [], [f.message for f in report.findings]


def test_the_good_server_passes_every_family(lint_text: LintText) -> None:
    report = lint_text(
        server() + "---\n" + PDB.format(budget="maxUnavailable: 1"),
        {"priority": {"clusterClasses": ["gpu-serving"]}},
    )
    assert ours(report) == [], [(f.rule_id, f.message) for f in report.findings]


def test_misspelt_key_gets_a_did_you_mean(lint_text: LintText) -> None:
    affinity = seed_affinity().replace("key: accelerator", "key: nvidia.com/gpu.prodcut")
    report = lint_text(server(affinity))
    [finding] = [f for f in report.findings if f.rule_id == "GP206"]
    assert (
        "nvidia.com/gpu.prodcut" in finding.message
        and "did you mean nvidia.com/gpu.product?" in finding.message
    )


def test_seed_key_contradicting_a_node_selector(lint_text: LintText) -> None:
    affinity = "nodeSelector:\n  accelerator: amd-gpu\n" + seed_affinity()
    report = lint_text(server(affinity))
    [finding] = [f for f in report.findings if f.rule_id == "GP205"]
    assert (
        "nodeSelector accelerator=amd-gpu" in finding.message
        and "accelerator In [nvidia-gpu]" in finding.message
    )


L4_POD = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: l4
  namespace: ai-lab
spec:
  selector:
    matchLabels: {app: l4}
  template:
    metadata:
      labels: {app: l4}
    spec:
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-L4
      containers:
        - name: cuda
          image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
          resources:
            limits: {nvidia.com/gpu: 1}
"""
L4_SHARED_POOL = {
    "name": "l4-shared",
    "resource": "nvidia.com/gpu.shared",
    "gpuProduct": "NVIDIA-L4",
    "gpusPerNode": 4,
    "sharing": "time-slicing",
}


def test_node_pool_reasoning_needs_declared_pools(lint_text: LintText) -> None:
    """Which resource NVIDIA-L4 nodes advertise is a fact of one cluster: without pools, nothing."""
    assert ours(lint_text(L4_POD, {"nodePools": []}), "GP205") == []
    [finding] = [
        f for f in lint_text(L4_POD, {"nodePools": [L4_SHARED_POOL]}).findings if f.rule_id == "GP205"
    ]
    assert "(pool l4-shared) advertise nvidia.com/gpu.shared" in finding.message


def test_or_ed_terms_with_a_node_selector(lint_text: LintText) -> None:
    """nodeSelector A100 AND (term 0: H100 OR term 1: A100) is satisfiable (issue 11)."""
    terms = (
        "nodeSelector:\n  nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB\n"
        "affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n"
        "      nodeSelectorTerms:\n"
        "        - matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}]\n"
        "        - matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [{second}]}]\n"
    )
    assert ours(lint_text(server(terms.replace("{second}", "NVIDIA-A100-SXM4-80GB"))), "GP205") == []
    [finding] = [
        f
        for f in lint_text(server(terms.replace("{second}", "NVIDIA-L40S"))).findings
        if f.rule_id == "GP205"
    ]
    assert finding.severity is Severity.ERROR and "rules out every required term" in finding.message
    assert finding.path[-1] == "nodeSelectorTerms"


def test_gpu_taint_matches_on_key_and_effect() -> None:
    taint = Taint("nvidia.com/gpu", "NoSchedule")
    assert toleration_for([{"key": "nvidia.com/gpu", "operator": "Exists"}], taint, match_value=False) == 0
    assert (
        toleration_for(
            [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], taint, match_value=False
        )
        == 0
    )
    assert (
        toleration_for(
            [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], taint, match_value=True
        )
        is None
    )
    assert (
        toleration_for([{"key": "nvidia.com/gpu", "effect": "NoExecute"}], taint, match_value=False) is None
    )
    assert toleration_for([{"operator": "Exists"}], taint, match_value=False) == 0
    assert toleration_for([{"key": "other"}], taint, match_value=False) is None


def test_extended_resource_toleration_policy(lint_text: LintText) -> None:
    text = server().replace(
        "      tolerations:\n        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n", ""
    )
    tainted = {"gpuTaints": NVIDIA_TAINT}
    assert "GP202" in ours(lint_text(text, {"placement": tainted}), "GP202")
    assert (
        ours(lint_text(text, {"placement": {**tainted, "extendedResourceToleration": True}}), "GP202") == []
    )


def test_gpu_taints_unknown_is_said_once_as_info(lint_text: LintText) -> None:
    text = server().replace(
        "      tolerations:\n        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n", ""
    )
    report = lint_text(text + "---\n" + text.replace("name: llm", "name: llm2"))
    unknown = [f for f in report.findings if f.rule_id == "GP202"]
    assert len(unknown) == 1 and unknown[0].severity is Severity.INFO
    assert "placement.gpuTaints" in unknown[0].message and "cluster snapshot" in unknown[0].message
    assert ours(lint_text(text, {"placement": {"gpuTaints": []}}), "GP202") == []  # declared untainted


def test_pdb_blocking_finding_points_at_the_pdb_and_names_the_workload(lint_text: LintText) -> None:
    report = lint_text(server() + "---\n" + PDB.format(budget="minAvailable: 2"))
    [finding] = [f for f in report.findings if f.rule_id == "GP502"]
    assert finding.object is not None and finding.object.kind == "PodDisruptionBudget"
    assert finding.path == ("spec", "minAvailable")
    assert finding.message.startswith("minAvailable 2 ≥ replicas 2 of Deployment ai-lab/llm")


def test_pdb_percentage_is_rounded_up_in_the_message(lint_text: LintText) -> None:
    report = lint_text(server() + "---\n" + PDB.format(budget="minAvailable: 60%"))
    [finding] = [f for f in report.findings if f.rule_id == "GP502"]
    assert (
        "minAvailable 60% (of 2 pods, rounded up: 2) ≥ replicas 2 of Deployment ai-lab/llm" in finding.message
    )


def test_hpa_min_replicas_is_the_replica_count_and_gp506_points_at_the_hpa(lint_text: LintText) -> None:
    hpa = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: llm, namespace: ai-lab}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: llm}
  minReplicas: 1
  maxReplicas: 4
"""
    report = lint_text(server() + "---\n" + PDB.format(budget="minAvailable: 1") + "---\n" + hpa)
    # One defect, one finding: the budget blocks drains at the HPA's minimum, which is GP506's to
    # say at the HPA; GP502 judges the replicas the workload declares (or a budget that blocks always).
    assert [f for f in report.findings if f.rule_id == "GP502"] == []
    [gp506] = [f for f in report.findings if f.rule_id == "GP506"]
    assert gp506.object is not None and gp506.object.kind == "HorizontalPodAutoscaler"
    assert "PodDisruptionBudget ai-lab/llm" in gp506.message and "minReplicas 1" in gp506.message


def test_gp501_points_at_the_workload(lint_text: LintText) -> None:
    report = lint_text(server())
    [finding] = [f for f in report.findings if f.rule_id == "GP501"]
    assert finding.object is not None and finding.object.kind == "Deployment"
    assert finding.path == ("spec", "replicas") and "namespace ai-lab" in finding.message


def test_overlapping_pdbs_name_each_other(lint_text: LintText) -> None:
    other = PDB.format(budget="maxUnavailable: 1").replace("name: llm\n", "name: llm-copy\n", 1)
    report = lint_text(server() + "---\n" + PDB.format(budget="maxUnavailable: 1") + "---\n" + other)
    messages = sorted(f.message for f in report.findings if f.rule_id == "GP504")
    assert len(messages) == 2
    assert "llm-copy" in messages[1] or "llm-copy" in messages[0]
    assert all("Deployment ai-lab/llm" in message for message in messages)


def test_undefined_priority_class_is_one_info_finding_without_cluster_list(lint_text: LintText) -> None:
    text = server() + "---\n" + server().replace("name: llm\n  namespace", "name: llm-b\n  namespace", 1)
    report = lint_text(text)
    gp302 = [f for f in report.findings if f.rule_id == "GP302"]
    assert len(gp302) == 1 and gp302[0].severity is Severity.INFO
    assert "could not be verified" in gp302[0].message


def test_undefined_priority_class_is_an_error_once_the_policy_lists_the_cluster_classes(
    lint_text: LintText,
) -> None:
    report = lint_text(server(), {"priority": {"clusterClasses": ["gpu-batch"]}})
    [finding] = [f for f in report.findings if f.rule_id == "GP302"]
    assert finding.severity is Severity.ERROR and "'gpu-serving'" in finding.message
    assert ours(lint_text(server(), {"priority": {"clusterClasses": ["gpu-serving"]}}), "GP302") == []


def test_complete_inventory_makes_absence_an_error(lint_text: LintText) -> None:
    report = lint_text(server(), {"inventory": {"completeKinds": ["PriorityClass"]}})
    assert [f.severity for f in report.findings if f.rule_id == "GP302"] == [Severity.ERROR]


class Unavailable:
    """A cluster inventory whose cache cannot answer for some kinds."""

    def __init__(self, resources: Sequence[Resource], kinds: set[str]) -> None:
        self._bundle = Bundle(resources)
        self._kinds = kinds

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        return [] if kind in self._kinds else self._bundle.list(kind, namespace)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
        return None if kind in self._kinds else self._bundle.get(kind, name, namespace)

    def coverage(self, kind: str) -> Coverage:
        return Coverage.UNAVAILABLE if kind in self._kinds else Coverage.COMPLETE


def admit(text: str, inventory: Inventory) -> Report:
    """The webhook's view: one object, evaluated against an inventory of the others."""
    loaded = load_text(text, "admitted.yaml")
    return evaluate(loaded.resources, default_policy(), inventory=inventory)


def test_unavailable_inventory_says_unknown_as_info_never_error() -> None:
    report = admit(server(), Unavailable([], {"PodDisruptionBudget", "PriorityClass"}))
    by_rule = {f.rule_id: f for f in report.findings if f.rule_id in ("GP501", "GP302")}
    assert by_rule["GP501"].severity is Severity.INFO and "unknown" in by_rule["GP501"].message
    assert by_rule["GP302"].severity is Severity.INFO


def test_admitted_pdb_is_checked_against_the_cluster_workloads() -> None:
    workload = load_text(server(), "cluster.yaml").resources
    report = admit(PDB.format(budget="minAvailable: 2"), Unavailable(workload, set()))
    [finding] = [f for f in report.findings if f.rule_id == "GP502"]
    assert "replicas 2 of Deployment ai-lab/llm" in finding.message


def test_admitted_workload_sees_the_cluster_pdb() -> None:
    pdb = load_text(PDB.format(budget="maxUnavailable: 1"), "cluster.yaml").resources
    report = admit(server(), Unavailable(pdb, set()))
    assert ours(report, "GP50") == []


@pytest.mark.parametrize(
    ("budget", "fires"),
    [
        ("maxUnavailable: 0", True),
        ("maxUnavailable: 0%", True),
        ("minAvailable: 100%", True),
        ("maxUnavailable: 1%", False),
    ],
)
def test_budgets_that_never_allow_eviction(lint_text: LintText, budget: str, fires: bool) -> None:
    report = lint_text(server() + "---\n" + PDB.format(budget=budget))
    assert (ours(report, "GP502") == ["GP502"]) is fires


def test_probe_budget_message_names_both_values(lint_text: LintText) -> None:
    text = (
        server()
        .replace("failureThreshold: 60", "failureThreshold: 20")
        .replace(
            "  namespace: ai-lab\nspec:",
            '  namespace: ai-lab\n  annotations: {gpupolicy.io/model-load-seconds: "900"}\nspec:',
            1,
        )
    )
    [finding] = [f for f in lint_text(text).findings if f.rule_id == "GP404"]
    assert "failureThreshold 20 × periodSeconds 10 = 200 s < model load 900 s" in finding.message
    assert "annotation gpupolicy.io/model-load-seconds" in finding.message


def test_policy_default_model_load_budget(lint_text: LintText) -> None:
    text = server().replace("failureThreshold: 60", "failureThreshold: 20")
    assert ours(lint_text(text), "GP404") == ["GP404"]  # 200 s < the default 300 s
    assert ours(lint_text(text, {"probes": {"modelLoadSeconds": 120}}), "GP404") == []


def test_policy_rejects_an_invalid_label_registry_entry() -> None:
    from gpupolicy.policy.validation import PolicyError

    with pytest.raises(PolicyError, match="nodeLabels"):
        policy_from_mapping(
            {"nodeLabels": {"example.com/x": {"source": "somewhere", "owner": "me", "use": "requirement"}}}
        )


def test_vendor_taint_applies_only_to_that_vendors_gpus(lint_text: LintText) -> None:
    pod = """\
apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: ai-lab}}
spec:
  nodeSelector: {{amd.com/gpu.family: MI300}}
  containers:
    - name: c
      image: rocm/pytorch:latest
      resources:
        limits: {{{resource}: 1}}
"""
    tainted = {"placement": {"gpuTaints": NVIDIA_TAINT}}
    assert ours(lint_text(pod.format(resource="amd.com/gpu"), tainted), "GP202") == []
    assert ours(lint_text(pod.format(resource="nvidia.com/gpu"), tainted), "GP202") == ["GP202"]


def test_pdb_against_unlistable_workloads_is_unknown_not_pass() -> None:
    kinds = {"Deployment", "StatefulSet"}
    report = admit(PDB.format(budget="minAvailable: 2"), Unavailable([], kinds))
    found = {f.rule_id: f.severity for f in report.findings if f.rule_id in ("GP502", "GP503")}
    assert found == {"GP502": Severity.INFO, "GP503": Severity.INFO}
    blocked = admit(PDB.format(budget="maxUnavailable: 0"), Unavailable([], kinds))
    assert [f.severity for f in blocked.findings if f.rule_id == "GP502"] == [Severity.ERROR]


def test_a_cpu_workload_pinned_to_a_host_is_not_gp209s(lint_text: LintText) -> None:
    """Volcano's nginx scheduling demo pins a CPU pod to a hostname: no GPU capacity is lost when
    that node drains. A GPU workload's pods are judged, CPU frontends of it included."""
    cpu = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: nginx}\nspec:\n"
        "  nodeSelector: {kubernetes.io/hostname: node-1}\n"
        "  containers: [{name: nginx, image: 'nginx:1.27'}]\n"
    )
    assert not [f for f in lint_text(cpu).findings if f.rule_id == "GP209"]
    gpu = cpu.replace("image: 'nginx:1.27'", "image: 'nginx:1.27', resources: {limits: {nvidia.com/gpu: 1}}")
    assert [f.rule_id for f in lint_text(gpu).findings if f.rule_id == "GP209"] == ["GP209"]


@pytest.mark.parametrize(
    ("selector", "found"),
    [
        # Intel's torchserve chart renders `kubernetes.io/hostname: {{ .Values.deploy.hostname }}`
        # with the value unset: no node has an empty hostname, the pod stays Pending.
        ("{kubernetes.io/hostname: null}", ["GP205"]),
        ("{kubernetes.io/hostname: ''}", ["GP205"]),
        ("{kubernetes.io/arch: ''}", ["GP205"]),
        # llm-d's launcher example: a node name to fill in, which no node has either.
        ("{kubernetes.io/hostname: your-node-name}", ["GP205"]),
        ("{kubernetes.io/hostname: <node-name>}", ["GP205"]),
        ("{kubernetes.io/hostname: gpu-node-1}", ["GP209"]),  # pinned to one node: a preference made a rule
        ("{nvidia.com/gpu.product: ''}", []),  # another label: GP205 does not know every node has it
    ],
)
def test_an_empty_value_of_a_label_every_node_has_matches_no_node(
    lint_text: LintText, selector: str, found: list[str]
) -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: serve}\nspec:\n"
        f"  nodeSelector: {selector}\n"
        "  containers: [{name: c, image: 'vllm/vllm-openai:v0.9.0', resources: {limits: {nvidia.com/gpu: 1}}}]\n"
    )
    assert [f.rule_id for f in lint_text(text).findings if f.rule_id in ("GP205", "GP209")] == found


@pytest.mark.parametrize(
    ("placement", "spread"),
    [
        # llm-d-rl's vLLM engines: four replicas pinned beside their trainer on one node, on purpose.
        ("      nodeSelector: {kubernetes.io/hostname: gc3a4f4}\n", False),
        (
            "      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [gc3a4f4]}]}]}}}\n",
            False,
        ),
        # Two hosts to choose from, or a pool: spreading means something, GP208 stands.
        (
            "      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [a, b]}]}]}}}\n",
            True,
        ),
        ("      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}\n", True),
        # Two terms of one host each: either node will do, two nodes to spread over.
        (
            "      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [a]}]}, "
            "{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [b]}]}]}}}\n",
            True,
        ),
    ],
)
def test_replicas_pinned_to_one_node_cannot_spread(lint_text: LintText, placement: str, spread: bool) -> None:
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: engine, namespace: rl}\nspec:\n  replicas: 4\n"
        "  selector: {matchLabels: {app: engine}}\n  template:\n    metadata: {labels: {app: engine}}\n"
        "    spec:\n" + placement + "      containers: [{name: vllm, image: 'vllm/vllm-openai:v0.9.0', "
        "ports: [{containerPort: 8000}], resources: {limits: {nvidia.com/gpu: 1}}}]\n"
    )
    found = {f.rule_id for f in lint_text(text).findings}
    assert ("GP208" in found) is spread
