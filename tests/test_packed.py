"""Workloads kept packed for the deferred readers of a streaming lint (gpupolicy/lint/packed.py)."""

from __future__ import annotations

import pickle
from collections import OrderedDict
from typing import Any

import pytest

from gpupolicy.engine import context as context_module
from gpupolicy.engine.context import Context
from gpupolicy.kube.inventory import Bundle
from gpupolicy.kube.pod_spec import workload_of
from gpupolicy.lint.packed import PackedResource, Unpacked, pack, unpack
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import default_policy

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "llm", "namespace": "team", "labels": {"app": "llm"}},
    "spec": {
        "replicas": 2,
        "template": {
            "metadata": {"labels": {"app": "llm"}},
            "spec": {"containers": [{"name": "vllm", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        },
    },
}


def kept(obj: Any = DEPLOYMENT, unpacked: Unpacked | None = None, doc_index: int = 3) -> PackedResource:
    resource = Resource(obj, file="apps/llm.yaml", doc_index=doc_index, line_offset=7, in_list=True)
    return PackedResource.of(resource, Unpacked() if unpacked is None else unpacked)


def test_values_come_back_equal_with_their_types() -> None:
    values = {"a": [1, 2.5, True, None, "x"], "b": {"c": False}}
    assert pack(values).startswith(b"m")
    assert unpack(pack(values)) == values
    assert type(unpack(pack(values))["a"][2]) is bool


def test_what_marshal_cannot_write_is_pickled() -> None:
    values = OrderedDict(kind="Deployment")
    packed = pack(values)
    assert packed.startswith(b"p")
    assert unpack(packed) == values and type(unpack(packed)) is OrderedDict


def test_the_inventory_files_a_packed_workload_without_unpacking_it() -> None:
    resource = kept()
    assert (resource.kind, resource.name, resource.namespace) == ("Deployment", "llm", "team")
    assert resource.unpacked.held == 0
    bundle = Bundle([resource])
    assert bundle.get("Deployment", "llm", "team") is resource
    assert resource.unpacked.held == 0


def test_a_packed_workload_reads_as_the_one_it_was_made_from() -> None:
    resource = kept()
    assert resource.obj == DEPLOYMENT and resource.obj is resource.obj  # unpacked once
    assert resource.labels == {"app": "llm"}
    assert (resource.file, resource.doc_index, resource.line_offset, resource.in_list) == (
        "apps/llm.yaml",
        3,
        7,
        True,
    )
    assert resource.positions is None
    workload = workload_of(resource)
    assert workload is not None and workload.total_replicas() == 2
    assert resource.unpacked.held == len(resource.packed)


def test_its_values_cannot_be_replaced() -> None:
    with pytest.raises(AttributeError):
        kept().obj = {"kind": "Pod"}


def test_trim_packs_back_the_least_recently_unpacked() -> None:
    unpacked = Unpacked(limit=1)
    first, second = kept(unpacked=unpacked, doc_index=0), kept(unpacked=unpacked, doc_index=1)
    first_values = first.obj
    assert workload_of(first) is not None
    second.obj  # noqa: B018  # unpacks it
    unpacked.trim()
    assert unpacked.held <= 1
    assert first._values is None and first._templates is None and first.facts is None
    assert first.obj == first_values and first.obj is not first_values  # unpacked again, equal
    assert unpacked.held == len(first.packed)


def test_it_is_sent_packed_between_processes() -> None:
    resource = kept()
    payload = pickle.dumps(resource)
    assert resource.packed in payload  # the values travel as they are kept, marshalled
    received = pickle.loads(payload)
    assert isinstance(received, PackedResource)
    assert (received.kind, received.name, received.namespace, received.doc_index) == (
        "Deployment",
        "llm",
        "team",
        3,
    )
    assert received._values is None
    assert received.obj == DEPLOYMENT


def test_namespace_memos_are_forgotten_together_and_only_beyond_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(context_module, "NAMESPACES_REMEMBERED", 2)
    ctx = Context(default_policy(), Bundle([]), [])
    made: list[tuple[str, str]] = []

    def remember(namespace: str, key: str) -> tuple[str, str]:
        value: tuple[str, str] = ctx.namespace_memo(
            namespace, key, lambda: made.append((namespace, key)) or (namespace, key)
        )
        return value

    remember("a", "workloads"), remember("a", "selection"), remember("b", "workloads")
    remember("a", "workloads")  # a is now the most recent: c evicts b
    remember("c", "workloads")
    remember("a", "selection"), remember("b", "workloads")
    assert made == [
        ("a", "workloads"),
        ("a", "selection"),
        ("b", "workloads"),
        ("c", "workloads"),
        ("b", "workloads"),
    ]
