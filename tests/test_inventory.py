"""The repository's Bundle answers by kind and namespace in the bundle's order, as a scan would."""

from __future__ import annotations

from gpupolicy.kube.inventory import Bundle, namespace_of
from gpupolicy.lint.streaming import StreamInventory
from gpupolicy.loading.documents import Resource


def config_map(name: str, namespace: str | None) -> Resource:
    metadata = {"name": name} if namespace is None else {"name": name, "namespace": namespace}
    return Resource(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}, file="x.yaml", doc_index=0
    )


OBJECTS = [
    config_map("a", "one"),
    config_map("b", None),  # no namespace: in every namespace's answer, in its place
    config_map("c", "two"),
    config_map("d", "one"),
    config_map("e", "default"),
    config_map("f", None),
]


def scanned(kind: str, namespace: str) -> list[str]:
    """What the bundle answered before it kept objects by namespace: a scan in order."""
    return [
        item.name
        for item in OBJECTS
        if item.kind == kind and (item.namespace is None or namespace_of(item) == namespace)
    ]


def test_a_namespace_gets_its_objects_and_those_without_one_in_order() -> None:
    bundle = Bundle(OBJECTS)
    for namespace in ("one", "two", "default", "none-of-these"):
        assert [item.name for item in bundle.list("ConfigMap", namespace)] == scanned("ConfigMap", namespace)
    assert [item.name for item in bundle.list("ConfigMap")] == list("abcdef")
    assert bundle.list("Service", "one") == [] and bundle.get("ConfigMap", "d", "one") is OBJECTS[3]
    assert bundle.get("ConfigMap", "d", "two") is None and len(bundle) == len(OBJECTS)


def test_the_streamed_inventory_keeps_the_inputs_order_whatever_the_order_of_adding() -> None:
    inventory = StreamInventory()
    keys = [(0, 0), (0, 1), (1, 0), (2, 3), (2, 4), (5, 0)]
    for index in (3, 0, 5, 1, 4, 2):
        inventory.add(keys[index], OBJECTS[index])
    for namespace in ("one", "two", "default"):
        assert [item.name for item in inventory.list("ConfigMap", namespace)] == scanned(
            "ConfigMap", namespace
        )
    assert [item.name for item in inventory.list("ConfigMap")] == list("abcdef")
