"""The cluster facts learned live: the real ClusterInventory (through the real kubernetes client)
against the fake API server serving the Nodes of recorded clusters (tests/data/cluster), the
LiveFacts step, and review() deciding under the engine it makes."""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

with warnings.catch_warnings():  # starlette's notice about httpx2; the client still works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import gpupolicy.rules  # noqa: F401  (registers the rules)
from gpupolicy.core.findings import Finding, Severity
from gpupolicy.kube.inventory import Coverage
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.cluster_facts import node_projection, read_cluster
from gpupolicy.policy.loading import default_policy, load_policy, policy_from_mapping
from gpupolicy.webhook.app import WebhookState, create_app
from gpupolicy.webhook.cluster_inventory import FORBIDDEN, SYNCED, ClusterInventory
from gpupolicy.webhook.live_facts import FACT_KINDS, Fingerprint, LiveFacts
from gpupolicy.webhook.review import Decision, ReviewEngine, review
from gpupolicy.webhook.server import warm_up
from tests.webhook.fake_apiserver import CLUSTER_DATA, FakeApiServer
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import start_server, write_kubeconfig
from tests.webhook.test_cluster_inventory import make_inventory, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

NODES = "/api/v1/nodes"
QUOTAS = "/api/v1/resourcequotas"
RECORDED = ("onprem-gfd.yaml", "gke-l4.json", "aks-a100.yaml", "eks-karpenter.yaml")


def recorded(name: str) -> list[dict[str, Any]]:
    text = (CLUSTER_DATA / name).read_text(encoding="utf-8")
    loaded = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
    return list(loaded["items"]) if isinstance(loaded, dict) and "items" in loaded else []


def recorded_nodes(name: str) -> list[dict[str, Any]]:
    if name == "eks-karpenter.yaml":  # objects one by one, not a List
        text = (CLUSTER_DATA / name).read_text(encoding="utf-8")
        return [obj for obj in yaml.safe_load_all(text) if obj and obj.get("kind") == "Node"]
    return [obj for obj in recorded(name) if obj.get("kind") == "Node"]


def deployment(gpus: int, *, node_selector: dict[str, str] | None = None) -> dict[str, Any]:
    """The tests' GPU Deployment, asking `gpus` GPUs of one pod, selecting `node_selector`."""
    obj = gpu_deployment(managed_fields=0)
    spec = obj["spec"]["template"]["spec"]
    resources = spec["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = str(gpus)
    if node_selector is None:
        spec.pop("nodeSelector", None)
    else:
        spec["nodeSelector"] = node_selector
    return obj


def decide(live: LiveFacts, inventory: ClusterInventory, obj: dict[str, Any]) -> Decision:
    return review(admission_review(obj), live.engine, inventory)


def of_rule(decision: Decision, rule_id: str) -> list[Finding]:
    return [finding for finding in decision.findings if finding.rule_id == rule_id]


def trial_on(inventory: ClusterInventory) -> Callable[[ReviewEngine], Decision]:
    return lambda engine: warm_up(engine, inventory)


def live_facts(inventory: ClusterInventory, engine: ReviewEngine | None = None, **options: Any) -> LiveFacts:
    return LiveFacts(
        inventory,
        engine or ReviewEngine.from_policy(default_policy()),
        mode=None,
        trial=trial_on(inventory),
        min_interval=options.pop("min_interval", 0.0),
        **options,
    )


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    try:
        yield server
    finally:
        server.stop()


def started(inventory: ClusterInventory) -> ClusterInventory:
    inventory.start()
    assert inventory.wait_synced(15), inventory.status()
    return inventory


@pytest.fixture
def stop_after() -> Iterator[list[ClusterInventory]]:
    inventories: list[ClusterInventory] = []
    yield inventories
    for inventory in inventories:
        inventory.stop()


# -- projection -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", RECORDED)
def test_the_node_projection_keeps_every_fact(name: str) -> None:
    nodes = recorded_nodes(name)
    assert nodes
    projected = [node_projection(node) for node in nodes]
    full = read_cluster(nodes, complete_kinds=["Node"])
    kept = read_cluster(projected, complete_kinds=["Node"])
    assert kept.fragment == full.fragment and kept.notes == full.notes
    for node in projected:
        assert set(node) == {"apiVersion", "kind", "metadata", "spec", "status"}
        assert set(node["metadata"]) <= {"name", "labels"}
        assert set(node["spec"]) <= {"taints", "unschedulable"}
        assert set(node["status"]) <= {"capacity", "allocatable"}
    # what a heartbeat rewrites is gone: conditions, images, addresses, nodeInfo, resourceVersion
    text = json.dumps(projected)
    for gone in ("lastHeartbeatTime", "conditions", "images", "addresses", "nodeInfo", "resourceVersion"):
        assert gone not in text


def test_the_gfd_timestamp_label_keeps_its_key_not_its_value() -> None:
    node = recorded_nodes("onprem-gfd.yaml")[1]
    assert node["metadata"]["labels"]["nvidia.com/gfd.timestamp"] == "1749628800"
    later = copy.deepcopy(node)
    later["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1749628860"
    assert node_projection(later) == node_projection(node)
    assert node_projection(node)["metadata"]["labels"]["nvidia.com/gfd.timestamp"] == ""


# -- precedence -----------------------------------------------------------------------------------


def test_facts_fill_the_defaults_unknowns_and_the_files_win(tmp_path: Path) -> None:
    nodes = recorded_nodes("onprem-gfd.yaml")
    fragment = read_cluster(nodes, complete_kinds=["Node"]).fragment
    assert (
        default_policy().data["nodePools"] == [] and default_policy().data["placement"]["gpuTaints"] is None
    )
    learned = default_policy().with_facts(fragment)
    assert learned.data["nodePools"] == fragment["nodePools"]
    assert learned.data["placement"]["gpuTaints"] == fragment["placement"]["gpuTaints"]
    assert learned.sources[:2] == (default_policy().sources[0], "<cluster facts>")
    file = tmp_path / "policy.yaml"
    file.write_text(
        "placement:\n  gpuTaints: []\n"  # an operator's explicit value, even the empty list, wins
        "nodeLabels:\n  lab.example.com/rack: {source: team, owner: infra, use: requirement}\n",
        encoding="utf-8",
    )
    configured = load_policy(extra=[file])
    effective = configured.with_facts(fragment)
    assert effective.data["placement"]["gpuTaints"] == []
    assert effective.data["nodePools"] == fragment["nodePools"]  # the file does not say: learned
    assert effective.data["placement"]["labelRegistryComplete"] is True
    # mappings merge key by key: the file's entry wins, the learned keys it does not name stay
    assert effective.data["nodeLabels"]["lab.example.com/rack"]["owner"] == "infra"
    assert "nvidia.com/gpu-driver-upgrade-state" in effective.data["nodeLabels"]
    # facts given again replace the earlier ones; no facts is the configured policy itself
    assert effective.with_facts({}).digest != effective.digest
    assert configured.with_facts({}).digest == configured.digest
    assert policy_from_mapping({"failOn": "warning"}).with_facts({}).digest == (
        policy_from_mapping({"failOn": "warning"}).digest
    )


# -- the facts, live ------------------------------------------------------------------------------


def test_gp108_is_unknown_before_the_nodes_sync_and_denies_after(
    fake: FakeApiServer, stop_after: list[ClusterInventory]
) -> None:
    fake.load_cluster("onprem-gfd.yaml")
    inventory = make_inventory(fake.url)
    stop_after.append(inventory)
    live = live_facts(inventory)
    sixteen = deployment(16, node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    # Before the first list: no facts, the rule says "unknown" (logged, not shown), the pod is admitted.
    assert live.check() == "unchanged" and not live.settled
    before = decide(live, inventory, sixteen)
    (unknown,) = of_rule(before, "GP108")
    assert unknown.severity is Severity.INFO and "clusterFact" in unknown.extra and before.allowed
    assert live.status()["missingKinds"] == list(FACT_KINDS)
    started(inventory)
    assert live.check() == "updated" and live.settled
    after = decide(live, inventory, sixteen)
    (error,) = of_rule(after, "GP108")
    assert error.severity is Severity.ERROR
    assert "needs 16 nvidia.com/gpu" in error.message and "has 8 per node" in error.message
    assert not after.allowed  # enforce mode, the shipped default
    assert "GP108" in after.response["response"]["status"]["message"]
    assert (
        after.response["response"]["auditAnnotations"]["policy-hash"] == f"sha256:{live.engine.policy.digest}"
    )
    status = live.status()
    assert status["nodePools"] == 6 and status["gpuTaints"] == 1 and status["gpuNodes"] == 6
    assert status["nodes"] == 7 and status["completeKinds"] == list(FACT_KINDS)
    assert status["source"] == "live" and status["updated"] and status["overriddenByPolicy"] == []
    # eight GPUs fit the largest node
    assert not of_rule(
        decide(live, inventory, deployment(8, node_selector={"nvidia.com/gpu.product": "x"})), "GP108"
    )


def test_a_heartbeat_changes_nothing_and_a_new_product_makes_gp201_fire(
    fake: FakeApiServer, stop_after: list[ClusterInventory]
) -> None:
    nodes = fake.load_cluster("aks-a100.yaml")
    inventory = started(make_inventory(fake.url))
    stop_after.append(inventory)
    live = live_facts(inventory)
    assert live.check() == "updated"
    untargeted = deployment(1)  # no nodeSelector: one kind of GPU node, so nothing to pick wrongly
    assert not of_rule(decide(live, inventory, untargeted), "GP201")
    assert live.status()["pools"] == ["gpunp"]
    recomputes, generation = live.recomputes, inventory.status()["Node"]["generation"]

    # The kubelet's status update: a new heartbeat (and resourceVersion), nothing the facts read.
    gpu_node = next(node for node in nodes if "gpunp" in node["metadata"]["name"])
    beat = copy.deepcopy(gpu_node)
    beat["status"]["conditions"] = [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "lastHeartbeatTime": "2026-12-01T10:00:00Z",
            "lastTransitionTime": "2026-11-02T08:00:00Z",
        }
    ]
    beat["status"]["images"] = [
        {"names": ["mcr.microsoft.com/oss/kubernetes/pause:3.6"], "sizeBytes": 301773}
    ]
    version = fake.emit(NODES, "MODIFIED", beat)
    assert wait_for(lambda: inventory.status()["Node"]["resourceVersion"] == str(version))
    node_status = inventory.status()["Node"]
    assert node_status["generation"] == generation and node_status["unchanged"] >= 1
    assert live.check() is None and live.recomputes == recomputes

    # A node of another GPU joins: two kinds of GPU node offer nvidia.com/gpu, GP201 now fires.
    h100 = copy.deepcopy(gpu_node)
    labels = h100["metadata"]["labels"]
    h100["metadata"]["name"] = "aks-h100np-87654321-vmss000000"
    for key in ("agentpool", "kubernetes.azure.com/agentpool"):
        labels[key] = "h100np"
    labels["node.kubernetes.io/instance-type"] = labels["beta.kubernetes.io/instance-type"] = (
        "Standard_ND96isr_H100_v5"
    )
    labels["kubernetes.io/hostname"] = h100["metadata"]["name"]
    h100["status"]["capacity"]["nvidia.com/gpu"] = "8"
    fake.emit(NODES, "ADDED", h100)
    assert wait_for(lambda: inventory.status()["Node"]["generation"] > generation)
    assert live.check() == "updated"
    assert live.status()["pools"] == ["gpunp", "h100np"]
    (finding,) = of_rule(decide(live, inventory, untargeted), "GP201")
    assert finding.severity is Severity.WARNING and "2 kinds of node pool" in finding.message


def test_the_policy_files_explicit_node_pools_win(
    fake: FakeApiServer, stop_after: list[ClusterInventory], tmp_path: Path
) -> None:
    fake.load_cluster("onprem-gfd.yaml")
    inventory = started(make_inventory(fake.url))
    stop_after.append(inventory)
    file = tmp_path / "policy.yaml"
    file.write_text(
        "nodePools:\n"
        "  - {name: dgx-b200, vendor: nvidia, resource: nvidia.com/gpu, gpuProduct: NVIDIA-B200, gpusPerNode: 16}\n",
        encoding="utf-8",
    )
    live = live_facts(inventory, ReviewEngine.from_policy(load_policy(extra=[file])))
    assert live.check() == "updated"
    sixteen = deployment(16, node_selector={"nvidia.com/gpu.product": "NVIDIA-B200"})
    decision = decide(live, inventory, sixteen)
    assert not of_rule(decision, "GP108") and decision.allowed  # the file's 16-GPU pool, not the cluster's 8
    assert [pool["name"] for pool in live.engine.policy.data["nodePools"]] == ["dgx-b200"]
    # what the file leaves out is still learned: the GPU taint (GP202 judges the toleration)
    assert live.engine.policy.data["placement"]["gpuTaints"] == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule", "vendor": "nvidia"}
    ]
    assert live.status()["overriddenByPolicy"] == ["nodePools"]
    assert not of_rule(decision, "GP202")  # the Deployment tolerates nvidia.com/gpu


def test_facts_from_nodes_are_dropped_when_the_node_cache_is_not_synced(
    fake: FakeApiServer, stop_after: list[ClusterInventory]
) -> None:
    fake.load_cluster("onprem-gfd.yaml")
    inventory = started(make_inventory(fake.url))
    stop_after.append(inventory)
    live = live_facts(inventory)
    assert live.check() == "updated" and live.engine.policy.data["nodePools"]
    fake.forbid(NODES)
    fake.expire(NODES)  # the watch ends; the re-list is refused (RBAC taken away)
    assert wait_for(lambda: inventory.status()["Node"]["state"] == FORBIDDEN)
    assert inventory.coverage("Node") is Coverage.UNAVAILABLE
    assert live.check() == "updated"
    assert (
        live.engine.policy.data["nodePools"] == []
        and live.engine.policy.data["placement"]["gpuTaints"] is None
    )
    assert live.status()["missingKinds"] == ["Node"]
    (unknown,) = of_rule(decide(live, inventory, deployment(16, node_selector={"a": "b"})), "GP108")
    assert unknown.severity is Severity.INFO
    fake.collections[NODES].forbidden = False  # RBAC back: listed again, learned again
    assert wait_for(lambda: inventory.status()["Node"]["state"] == SYNCED)
    assert live.check() == "updated" and len(live.engine.policy.data["nodePools"]) == 6


def test_device_classes_quotas_and_kueue_classes(
    fake: FakeApiServer, stop_after: list[ClusterInventory]
) -> None:
    # Kueue serves v1beta1 only (the inventory tries v1beta2 first), DRA resource.k8s.io/v1.
    fake.load_cluster("onprem-gfd.yaml", kinds=("Node", "DeviceClass", "WorkloadPriorityClass"))
    inventory = started(make_inventory(fake.url))
    stop_after.append(inventory)
    kueue = inventory.status()["WorkloadPriorityClass"]
    assert kueue["state"] == SYNCED and kueue["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert inventory.get("WorkloadPriorityClass", "prod-training") is not None  # GP308 reads it
    live = live_facts(inventory)
    assert live.check() == "updated"
    assert "h100.lab.example.com" in live.engine.policy.data["gpu"]["draDeviceClasses"]
    # A quota letting a namespace use the system classes: kept, projected without its status.
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "critical-pods", "namespace": "dcgm", "resourceVersion": "1"},
        "spec": {
            "hard": {"pods": "10"},
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical"]}
                ]
            },
        },
        "status": {"hard": {"pods": "10"}, "used": {"pods": "3"}},
    }
    fake.emit(QUOTAS, "ADDED", quota)
    assert wait_for(lambda: inventory.get("ResourceQuota", "critical-pods", "dcgm") is not None)
    kept = inventory.get("ResourceQuota", "critical-pods", "dcgm")
    assert kept is not None and "status" not in kept.obj
    assert live.check() == "updated"
    assert "dcgm" in live.engine.policy.data["priority"]["systemNamespaces"]
    generation = inventory.status()["ResourceQuota"]["generation"]
    used = copy.deepcopy(quota)
    used["status"]["used"]["pods"] = "4"  # a pod created in the namespace: nothing the facts read
    version = fake.emit(QUOTAS, "MODIFIED", used)
    assert wait_for(lambda: inventory.status()["ResourceQuota"]["resourceVersion"] == str(version))
    assert inventory.status()["ResourceQuota"]["generation"] == generation
    # other quotas are not kept at all
    fake.emit(QUOTAS, "ADDED", {**quota, "metadata": {"name": "compute", "namespace": "ai-lab"}, "spec": {}})
    assert not wait_for(lambda: inventory.get("ResourceQuota", "compute", "ai-lab") is not None, timeout=0.5)


def test_classes_are_judged_from_the_inventory_not_the_fragment(
    fake: FakeApiServer, stop_after: list[ClusterInventory]
) -> None:
    fake.load_cluster("onprem-gfd.yaml")
    inventory = started(make_inventory(fake.url))
    stop_after.append(inventory)
    live = live_facts(inventory)
    assert live.check() == "updated"
    assert live.engine.policy.data["priority"]["clusterClasses"] == []  # not learned into the policy
    classless = deployment(1, node_selector={"nvidia.com/gpu.product": "NVIDIA-L4"})
    del classless["spec"]["template"]["spec"]["priorityClassName"]
    (gp301,) = of_rule(decide(live, inventory, classless), "GP301")  # the cluster has classes
    assert gp301.severity is Severity.WARNING
    typo = deployment(1, node_selector={"nvidia.com/gpu.product": "NVIDIA-L4"})
    typo["spec"]["template"]["spec"]["priorityClassName"] = "gpu-servng"
    (gp302,) = of_rule(decide(live, inventory, typo), "GP302")
    assert gp302.severity is Severity.ERROR


def test_a_reloaded_policy_is_merged_over_the_facts(
    fake: FakeApiServer, stop_after: list[ClusterInventory], tmp_path: Path
) -> None:
    fake.load_cluster("onprem-gfd.yaml")
    inventory = started(make_inventory(fake.url))
    stop_after.append(inventory)
    live = live_facts(inventory)
    assert live.check() == "updated"
    file = tmp_path / "policy.yaml"
    file.write_text("placement:\n  gpuTaints: []\n", encoding="utf-8")
    engine = live.reconfigure(ReviewEngine.from_policy(load_policy(extra=[file])))
    assert engine is live.engine
    assert engine.policy.data["placement"]["gpuTaints"] == [] and len(engine.policy.data["nodePools"]) == 6
    assert live.status()["overriddenByPolicy"] == ["placement.gpuTaints"]


# -- when to recompute (no cluster: a fake fact source and clock) ---------------------------------


class Caches:
    """A fact source whose generations a test moves by hand."""

    def __init__(self) -> None:
        self.generation = 0
        self.synced = True
        self.lists = 0

    def generations(self, kinds: Sequence[str]) -> Fingerprint:
        return tuple((kind, self.generation, self.synced) for kind in kinds)

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        self.lists += 1
        return []

    def coverage(self, kind: str) -> Coverage:
        return Coverage.COMPLETE if self.synced else Coverage.UNAVAILABLE


def test_recomputes_at_most_once_per_interval_and_only_when_changed() -> None:
    caches, now = Caches(), [100.0]
    engine = ReviewEngine.from_policy(default_policy())
    live = LiveFacts(
        caches,
        engine,
        mode=None,
        trial=lambda _: pytest.fail("nothing to try"),
        min_interval=10,
        clock=lambda: now[0],
    )
    assert live.check() == "unchanged" and live.recomputes == 1 and live.settled
    assert live.check() is None  # nothing changed
    caches.generation += 1
    now[0] += 3
    assert live.check() is None and live.recomputes == 1  # changed, not due: later
    now[0] += 7
    assert live.check() == "unchanged" and live.recomputes == 2
    caches.generation += 1
    caches.synced = False  # a cache stops being synced: at once, whatever the interval
    assert live.check() == "unchanged" and live.recomputes == 3
    assert live.engine is engine  # no facts: the configured engine itself


def test_facts_under_which_rules_fail_are_refused(
    fake: FakeApiServer, stop_after: list[ClusterInventory]
) -> None:
    fake.load_cluster("onprem-gfd.yaml")
    inventory = started(make_inventory(fake.url))
    stop_after.append(inventory)
    configured = ReviewEngine.from_policy(default_policy())

    def failing_trial(engine: ReviewEngine) -> Decision:
        decision = warm_up(engine, inventory)
        raise RuntimeError(f"GP108 failed on {decision.name}")

    live = LiveFacts(inventory, configured, mode=None, trial=failing_trial, min_interval=0)
    assert live.check() == "refused"
    assert live.engine is configured and "GP108 failed" in live.status()["refused"]


def test_not_ready_until_the_facts_were_learned_from_synced_caches() -> None:
    caches = Caches()
    caches.synced = False
    engine = ReviewEngine.from_policy(default_policy())
    live = LiveFacts(
        caches, engine, mode=None, trial=lambda _: pytest.fail("no facts to try"), min_interval=0
    )
    state = WebhookState(engine=engine, inventory_status=SyncedInventory())
    state.live_facts = live
    client = TestClient(create_app(state))  # no lifespan: the test drives the checks
    assert live.check() == "unchanged"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["clusterFacts"]["settled"] is False
    assert response.json()["clusterFacts"]["missingKinds"] == list(FACT_KINDS)
    caches.synced = True
    caches.generation += 1
    assert live.check() == "unchanged" and live.settled
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json()["clusterFacts"]["completeKinds"] == list(
        FACT_KINDS
    )
    metrics = client.get("/metrics").text
    assert 'gpupolicy_cluster_facts{fact="nodePools"} 0.0' in metrics
    assert 'gpupolicy_cluster_facts{fact="gpuTaints"}' not in metrics  # unknown: no value


class SyncedInventory:
    def synced(self) -> bool:
        return True

    def status(self) -> dict[str, dict[str, Any]]:
        return {"Node": {"state": "synced", "synced": True}}


# -- through the real server ----------------------------------------------------------------------


def changed_digest(logs: str) -> str:
    entries = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    digests = [entry["policy_digest"] for entry in entries if entry.get("message") == "cluster facts changed"]
    return str(digests[-1])


def test_the_server_learns_the_nodes_and_denies_what_fits_no_node(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    fake.load_cluster("onprem-gfd.yaml")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
    process = start_server(tmp_path, "--kubeconfig", str(kubeconfig), "--no-provenance")
    try:
        with process.client() as http:
            assert wait_for(lambda: http.get("/readyz").status_code == 200, timeout=30), http.get(
                "/readyz"
            ).text
            ready = http.get("/readyz").json()
            facts = ready["clusterFacts"]
            assert facts["source"] == "live" and facts["settled"] is True
            assert facts["nodePools"] == 6 and facts["gpuTaints"] == 1 and facts["nodes"] == 7, facts
            assert facts["completeKinds"] == ["Node", "DeviceClass", "ResourceQuota"]
            assert ready["inventory"]["kinds"]["Node"]["objects"] == 7
            assert ready["inventory"]["kinds"]["DeviceClass"]["state"] == "absent"
            # /readyz names the policy that decides: the configured one with the facts under it
            assert ready["policy"]["digest"] == changed_digest(process.logs())
            sixteen = deployment(16, node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
            response = http.post("/validate", json=admission_review(sixteen))
            answer = response.json()["response"]
            assert answer["allowed"] is False
            message = answer["status"]["message"]
            assert "GP108" in message and "has 8 per node" in message
            assert answer["auditAnnotations"]["policy-hash"] == ready["policy"]["digest"]
            eight = deployment(8, node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
            assert http.post("/validate", json=admission_review(eight)).json()["response"]["allowed"] is True
            metrics = http.get("/metrics").text
            assert 'gpupolicy_cluster_facts{fact="nodePools"} 6.0' in metrics
            assert 'gpupolicy_cluster_facts{fact="gpuTaints"} 1.0' in metrics
            assert 'gpupolicy_cluster_facts_recomputes_total{outcome="updated"}' in metrics
            assert 'gpupolicy_inventory_synced{kind="Node"} 1.0' in metrics
        entries = [json.loads(line) for line in process.logs().splitlines() if line.startswith("{")]
        (changed,) = [entry for entry in entries if entry.get("message") == "cluster facts changed"]
        assert changed["node_pools"] == 6 and changed["gpu_taints"] == 1 and changed["level"] == "info"
    finally:
        process.stop()
