"""ClusterInventory against a fake API server speaking the real list/watch wire format, through the
real kubernetes client (its HTTP layer, its model deserialisation and its Watch)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import pytest
from kubernetes import client as k8s

from gpupolicy.kube.inventory import Coverage, Inventory
from gpupolicy.webhook.cluster_inventory import (
    ABSENT,
    FAILED,
    FORBIDDEN,
    KINDS,
    NO_CLIENT,
    SYNCED,
    ClusterInventory,
    pool_size,
)
from tests.webhook.fake_apiserver import FakeApiServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

PRIORITY = "/apis/scheduling.k8s.io/v1/priorityclasses"
CONFIGMAPS = "/api/v1/configmaps"
PDBS = "/apis/policy/v1/poddisruptionbudgets"


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    try:
        yield server
    finally:
        server.stop()


def make_inventory(url: str, **options: object) -> ClusterInventory:
    configuration = k8s.Configuration(host=url)
    configuration.connection_pool_maxsize = pool_size(configuration.connection_pool_maxsize, KINDS)
    api_client = k8s.ApiClient(configuration)
    defaults: dict[str, object] = {"watch_timeout_seconds": 2, "retry_seconds": (0.05, 0.2), "page_size": 2}
    defaults.update(options)
    return ClusterInventory(api_client, **defaults)  # type: ignore[arg-type]


@pytest.fixture
def inventory(fake: FakeApiServer) -> Iterator[ClusterInventory]:
    cache = make_inventory(fake.url)
    cache.start()
    try:
        assert cache.wait_synced(15), cache.status()
        yield cache
    finally:
        cache.stop()


def test_answers_the_inventory_protocol_from_the_recorded_lists(inventory: ClusterInventory) -> None:
    assert isinstance(inventory, Inventory)
    names = sorted(item.name for item in inventory.list("PriorityClass"))
    assert names == ["batch-training", "gpu-serving", "system-cluster-critical"]
    online = inventory.get("PriorityClass", "gpu-serving")
    assert online is not None
    # list items carry no kind/apiVersion on the wire: the cache puts them back
    assert online.kind == "PriorityClass" and online.api_version == "scheduling.k8s.io/v1"
    assert online.obj["value"] == 100000 and online.obj["preemptionPolicy"] == "PreemptLowerPriority"
    assert online.file == "cluster:PriorityClass/gpu-serving" and online.doc_index == 0
    assert online.positions is None and online.position(("value",)) is None
    pdb = inventory.get("PodDisruptionBudget", "llm-server", "ai-lab")
    assert pdb is not None and pdb.file == "cluster:PodDisruptionBudget/ai-lab/llm-server"
    assert pdb.obj["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert inventory.get("PodDisruptionBudget", "llm-server", "other") is None
    assert [item.name for item in inventory.list("PodDisruptionBudget", "ai-lab")] == ["llm-server"]
    assert not inventory.list("PodDisruptionBudget", "elsewhere")
    hpa = inventory.get("HorizontalPodAutoscaler", "llm-server", "ai-lab")
    assert hpa is not None and hpa.obj["spec"]["minReplicas"] == 2
    template = inventory.get("AnalysisTemplate", "llm-slo", "ai-lab")
    assert template is not None and template.obj["spec"]["metrics"][0]["failureLimit"] == 2
    assert inventory.get("RuntimeClass", "nvidia") is not None
    assert inventory.get("NetworkPolicy", "default-deny", "ai-lab") is not None
    namespace = inventory.get("Namespace", "ai-lab")
    assert namespace is not None
    assert namespace.labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for kind in ("PriorityClass", "PodDisruptionBudget", "ConfigMap", "AnalysisTemplate", "Namespace"):
        assert inventory.coverage(kind) is Coverage.COMPLETE


def test_keeps_only_experiment_configmaps(inventory: ClusterInventory) -> None:
    kept = inventory.list("ConfigMap", "ai-lab")
    assert [item.name for item in kept] == ["day29-experiment"]
    assert kept[0].obj["data"]["repeats"] == "3"
    assert kept[0].obj["data"]["change"].startswith("以請求品質")
    assert inventory.get("ConfigMap", "kube-root-ca.crt", "ai-lab") is None


def test_lists_in_pages(fake: FakeApiServer, inventory: ClusterInventory) -> None:
    # three PriorityClasses, pages of two: two list requests, the second with `continue`
    lists = [line for line in fake.requests if line.startswith(PRIORITY) and "watch=true" not in line]
    assert len(lists) >= 2
    assert any("continue=" in line for line in lists)


def test_watch_events_update_the_cache(fake: FakeApiServer, inventory: ClusterInventory) -> None:
    tier = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "embedding", "uid": "2f3a4b5c-6d7e-4f8a-9b0c-1d2e3f4a5b6c"},
        "value": 50000,
        "preemptionPolicy": "Never",
    }
    fake.emit(PRIORITY, "ADDED", tier)
    assert wait_for(lambda: inventory.get("PriorityClass", "embedding") is not None)
    fake.emit(PRIORITY, "MODIFIED", {**tier, "value": 60000})
    assert wait_for(
        lambda: (
            (found := inventory.get("PriorityClass", "embedding")) is not None and found.obj["value"] == 60000
        )
    )
    fake.emit(PRIORITY, "DELETED", tier)
    assert wait_for(lambda: inventory.get("PriorityClass", "embedding") is None)
    # a watched ConfigMap that stops being an experiment config leaves the cache
    experiment = inventory.get("ConfigMap", "day29-experiment", "ai-lab")
    assert experiment is not None
    plain = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "day29-config", "namespace": "ai-lab"},
    }
    fake.emit(CONFIGMAPS, "ADDED", {**plain, "data": {"change": "x", "repeats": "3"}})
    assert wait_for(lambda: inventory.get("ConfigMap", "day29-config", "ai-lab") is not None)
    fake.emit(CONFIGMAPS, "MODIFIED", {**plain, "data": {"log-level": "debug"}})
    assert wait_for(lambda: inventory.get("ConfigMap", "day29-config", "ai-lab") is None)


def test_a_namespace_listing_follows_events_and_relists(
    fake: FakeApiServer, inventory: ClusterInventory
) -> None:
    """list(kind, namespace) answers from an index made once per change of the cache: it must
    follow every change, by event and by re-list."""

    def names(namespace: str) -> list[str]:
        return sorted(item.name for item in inventory.list("PodDisruptionBudget", namespace))

    assert names("ml") == []
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "trainer"}}},
    }
    fake.emit(PDBS, "ADDED", pdb)
    assert wait_for(lambda: names("ml") == ["trainer"])
    assert "trainer" not in names("ai-lab") and "trainer" in [
        i.name for i in inventory.list("PodDisruptionBudget")
    ]
    fake.expire(PDBS)
    fake.emit(PDBS, "ADDED", {**pdb, "metadata": {"name": "eval", "namespace": "ml"}})
    assert wait_for(lambda: names("ml") == ["eval", "trainer"])
    fake.emit(PDBS, "DELETED", pdb)
    assert wait_for(lambda: names("ml") == ["eval"])


def test_relists_when_the_watch_expires(fake: FakeApiServer, inventory: ClusterInventory) -> None:
    before = inventory.status()["PodDisruptionBudget"]["lists"]
    fake.expire(PDBS)  # the open watch ends with ERROR 410; so would a resumed one
    # An object created while the client is between watches arrives through the re-list.
    fake.emit(
        PDBS,
        "ADDED",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "asr", "namespace": "ai-lab"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "asr"}}},
        },
    )
    assert wait_for(lambda: inventory.status()["PodDisruptionBudget"]["relists"] >= 1)
    assert wait_for(lambda: inventory.get("PodDisruptionBudget", "asr", "ai-lab") is not None)
    status = inventory.status()["PodDisruptionBudget"]
    assert status["lists"] > before and status["state"] == SYNCED
    assert inventory.coverage("PodDisruptionBudget") is Coverage.COMPLETE


def test_an_absent_crd_is_skipped_not_fatal(inventory: ClusterInventory) -> None:
    status = inventory.status()["Canary"]
    assert status["state"] == ABSENT and "flagger.app/v1beta1" in status["reason"]
    assert not inventory.list("Canary")
    # no Canary can exist without its CRD: absence is a complete answer
    assert inventory.coverage("Canary") is Coverage.COMPLETE
    assert inventory.synced()


def test_forbidden_kind_is_unavailable_and_blocks_readiness(fake: FakeApiServer) -> None:
    fake.forbid(PRIORITY)
    cache = make_inventory(fake.url)
    cache.start()
    try:
        assert wait_for(lambda: cache.status()["PriorityClass"]["state"] == FORBIDDEN)
        assert wait_for(lambda: cache.status()["PodDisruptionBudget"]["state"] == SYNCED)
        assert "403" in cache.status()["PriorityClass"]["reason"]
        assert cache.coverage("PriorityClass") is Coverage.UNAVAILABLE
        assert not cache.list("PriorityClass")
        assert not cache.synced()
    finally:
        cache.stop()


def test_unreachable_api_server_leaves_every_kind_unavailable() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cache = make_inventory(f"http://127.0.0.1:{port}")
    cache.start()
    try:
        assert wait_for(lambda: all(item["state"] == FAILED for item in cache.status().values()))
        assert not cache.synced()
        assert cache.coverage("PriorityClass") is Coverage.UNAVAILABLE
    finally:
        cache.stop()


def test_no_configuration_means_unavailable_not_empty() -> None:
    cache = ClusterInventory(None, no_client_reason="no Kubernetes configuration: test")
    cache.start()  # nothing to start
    assert {item["state"] for item in cache.status().values()} == {NO_CLIENT}
    assert cache.coverage("PriorityClass") is Coverage.UNAVAILABLE
    assert not cache.list("PriorityClass") and cache.get("Namespace", "default") is None
    assert not cache.synced()
    cache.stop()


def test_kinds_it_does_not_cache_are_unavailable(inventory: ClusterInventory) -> None:
    assert inventory.coverage("Deployment") is Coverage.UNAVAILABLE
    assert not inventory.list("Deployment")
