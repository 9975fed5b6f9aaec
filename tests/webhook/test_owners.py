"""What controllers make inherits what their owners declare (gpupolicy/webhook/owners.py): the
owners read through the kubernetes client from the test suite's fake API server, and the webhook's
answer to a DaemonSet's Pod when the suppression and the class are on the DaemonSet's metadata."""

from __future__ import annotations

import asyncio
import copy
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from kubernetes import client as k8s

from gpupolicy.policy.loading import default_policy
from gpupolicy.webhook.app import WebhookState, create_app
from gpupolicy.webhook.owners import OwnerMetadata, wants_owner
from gpupolicy.webhook.review import ReviewEngine
from tests.webhook.fake_apiserver import FakeApiServer
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.test_cluster_inventory import fake as fake  # the fake API server fixture
from tests.webhook.test_review import CLUSTER

IGNORE = "gpupolicy.io/ignore"
CLASS = "gpupolicy.io/workload-class"
ENTRY = "GP601[vllm]: the driver validator needs it"


def owner(kind: str, name: str, uid: str, *, api_version: str = "apps/v1", **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "ai-lab", "uid": uid, **metadata},
    }


def reference(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
    }


def pod_of(parent: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    """A privileged GPU Pod `parent` made: its template's metadata only."""
    template = copy.deepcopy(gpu_deployment()["spec"]["template"])
    template["spec"]["containers"][0]["securityContext"]["privileged"] = True
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template["metadata"],
            "name": "validator-x2kq9",
            "generateName": "validator-",
            "namespace": "ai-lab",
            "ownerReferences": [reference(parent)],
            **metadata,
        },
        "spec": template["spec"],
    }


def owners_of(server: FakeApiServer, **options: Any) -> OwnerMetadata:
    return OwnerMetadata(k8s.ApiClient(k8s.Configuration(host=server.url)), **options)


def test_a_pod_inherits_what_its_daemonset_declares(fake: FakeApiServer) -> None:
    daemon_set = owner("DaemonSet", "validator", "d0", annotations={IGNORE: ENTRY}, labels={CLASS: "dev"})
    fake.put_object(daemon_set)
    owners = owners_of(fake)
    pod = pod_of(daemon_set)
    assert wants_owner(pod)
    inherited = owners.inherited(pod, "ai-lab")
    assert inherited is not None
    assert (inherited.annotations, inherited.labels) == ({IGNORE: ENTRY}, {CLASS: "dev"})
    assert inherited.owners == ("DaemonSet ai-lab/validator",)
    owners.inherited(pod_of(daemon_set, name="validator-b7d4k"), "ai-lab")
    assert owners.reads == 1  # the DaemonSet read once for its Pods


def test_the_walk_goes_up_to_the_deployment_and_the_objects_own_keys_win(fake: FakeApiServer) -> None:
    deployment = owner("Deployment", "llm", "dep0", labels={CLASS: "batch"}, annotations={IGNORE: ENTRY})
    replica_set = owner(
        "ReplicaSet",
        "llm-7d4b9c6f5",
        "rs0",
        annotations={IGNORE: ENTRY},
        ownerReferences=[reference(deployment)],
    )
    for obj in (deployment, replica_set):
        fake.put_object(obj)
    owners = owners_of(fake)
    inherited = owners.inherited(pod_of(replica_set), "ai-lab")
    assert (
        inherited is not None
        and inherited.labels == {CLASS: "batch"}
        and inherited.annotations == {IGNORE: ENTRY}
    )
    assert inherited.owners == ("ReplicaSet ai-lab/llm-7d4b9c6f5", "Deployment ai-lab/llm")
    own = pod_of(replica_set, labels={CLASS: "online"}, annotations={IGNORE: "GP202: runs on CPU nodes"})
    reads = owners.reads
    assert owners.inherited(own, "ai-lab") is None and owners.reads == reads  # it lacks nothing: no read


def test_an_owner_that_cannot_be_read_or_is_another_object_gives_nothing(fake: FakeApiServer) -> None:
    daemon_set = owner("DaemonSet", "validator", "d0", annotations={IGNORE: ENTRY})
    fake.put_object(daemon_set)
    stale = {**reference(daemon_set), "uid": "an-earlier-daemonset"}
    owners = owners_of(fake)
    assert owners.inherited(pod_of(daemon_set, ownerReferences=[stale]), "ai-lab") is None
    gone = {**reference(daemon_set), "name": "deleted"}
    assert owners.inherited(pod_of(daemon_set, ownerReferences=[gone]), "ai-lab") is None  # 404
    with socket.socket() as probe:  # a port nothing listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    unreachable = OwnerMetadata(k8s.ApiClient(k8s.Configuration(host=f"http://127.0.0.1:{port}")))
    assert unreachable.inherited(pod_of(daemon_set), "ai-lab") is None
    for hostile in ("../../../api/v1/secrets", "Validator", "x" * 300, ""):  # never asked for
        named = {**reference(daemon_set), "name": hostile}
        assert owners.inherited(pod_of(daemon_set, ownerReferences=[named]), "ai-lab") is None
    assert owners.inherited(pod_of(daemon_set), "ai-lab/../kube-system") is None
    assert not [path for path in fake.requests if "secrets" in path or "kube-system" in path]
    custom = {**reference(daemon_set), "apiVersion": "example.com/v1", "kind": "Validator"}
    assert not wants_owner(pod_of(daemon_set, ownerReferences=[custom]))


def test_an_owner_is_read_again_once_its_time_is_up(fake: FakeApiServer) -> None:
    daemon_set = owner("DaemonSet", "validator", "d0", annotations={IGNORE: ENTRY})
    fake.put_object(daemon_set)
    now = [0.0]
    owners = owners_of(fake, ttl_seconds=30.0, clock=lambda: now[0])
    owners.inherited(pod_of(daemon_set), "ai-lab")
    daemon_set["metadata"]["annotations"] = {}  # the suppression removed from the DaemonSet
    now[0] = 29.0
    assert owners.inherited(pod_of(daemon_set), "ai-lab") is not None  # remembered
    now[0] = 31.0
    inherited = owners.inherited(pod_of(daemon_set), "ai-lab")
    assert inherited is not None and inherited.annotations == {} and owners.reads == 2


@pytest.fixture
def served(fake: FakeApiServer) -> Iterator[TestClient]:
    state = WebhookState(engine=ReviewEngine.from_policy(default_policy()), inventory=CLUSTER)
    state.owners = owners_of(fake)
    with TestClient(create_app(state)) as client:
        yield client


def answer(client: TestClient, obj: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/validate", json=admission_review(obj))
    assert response.status_code == 200
    result: dict[str, Any] = response.json()["response"]
    return result


def test_the_pods_of_a_daemonset_admitted_by_its_suppression_are_admitted(
    fake: FakeApiServer, served: TestClient
) -> None:
    daemon_set = owner("DaemonSet", "validator", "d0", annotations={IGNORE: ENTRY})
    fake.put_object(daemon_set)
    assert answer(served, pod_of(daemon_set))["allowed"] is True
    bare = pod_of(daemon_set)
    del bare["metadata"]["ownerReferences"]  # a Pod of its own is judged on its own metadata
    denied = answer(served, bare)
    assert denied["allowed"] is False and "GP601" in denied["status"]["message"]


def test_an_inherited_suppression_unused_on_the_pod_is_not_reported_there(
    fake: FakeApiServer, served: TestClient
) -> None:
    """The owner's entries about the owner (GP901 here) are its review's to check (GP011)."""
    daemon_set = owner("DaemonSet", "validator", "d0", annotations={IGNORE: f"{ENTRY}; GP901: not served"})
    fake.put_object(daemon_set)
    allowed = answer(served, pod_of(daemon_set))
    assert allowed["allowed"] is True
    assert not any("GP011" in warning or "GP010" in warning for warning in allowed.get("warnings", []))


def test_a_pod_denied_with_its_owners_read_is_not_told_they_do_not_reach_it(
    fake: FakeApiServer, served: TestClient
) -> None:
    daemon_set = owner("DaemonSet", "validator", "d0", annotations={"team": "gpu-ops"})
    fake.put_object(daemon_set)
    denied = answer(served, pod_of(daemon_set))
    assert denied["allowed"] is False and "does not reach it" not in denied["status"]["message"]


def test_the_pods_of_one_owner_admitted_together_wait_for_one_read(fake: FakeApiServer) -> None:
    """A DaemonSet's Pods reach the webhook together, one per node: one read of the DaemonSet."""
    daemon_set = owner("DaemonSet", "validator", "d0", annotations={IGNORE: ENTRY})
    path = fake.put_object(daemon_set)
    state = WebhookState(engine=ReviewEngine.from_policy(default_policy()), inventory=CLUSTER)
    state.owners = owners_of(fake)
    app = create_app(state)

    async def admit_together() -> list[dict[str, Any]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://webhook") as client:
            pods = [pod_of(daemon_set, name=f"validator-{index:05d}") for index in range(16)]
            responses = await asyncio.gather(
                *(
                    client.post("/validate", json=admission_review(pod, uid=str(index)))
                    for index, pod in enumerate(pods)
                )
            )
        return [response.json()["response"] for response in responses]

    answers = asyncio.run(admit_together())
    assert all(answer["allowed"] for answer in answers)
    assert fake.count(path, watch=False) == 1 and state.owners.reads == 1
    assert state.owner_reads == {}  # nothing left in flight
