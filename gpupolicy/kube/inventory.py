"""What cross-object rules may ask about the other objects, wherever they come from.

Two sources answer the same protocol: the `Bundle` of everything loaded from the repository,
and the webhook's cluster inventory (list+watch caches). A rule never knows which one it has.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gpupolicy.core.identity_enum import IdentityEnum
from gpupolicy.loading.documents import Resource

if TYPE_CHECKING:
    from gpupolicy.kube.pod_spec import Workload

DEFAULT_NAMESPACE = "default"


class Coverage(IdentityEnum):
    """How far an inventory's answer about one kind can be trusted."""

    COMPLETE = "complete"  # every object of the kind is known: absence means it does not exist
    PARTIAL = "partial"  # what is known exists, but other objects may exist elsewhere
    UNAVAILABLE = "unavailable"  # the source cannot answer now (cache not synced, no RBAC)


@runtime_checkable
class Inventory(Protocol):
    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        """Objects of `kind` (in `namespace`, when given; cluster-scoped kinds ignore it)."""
        ...

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None: ...

    def coverage(self, kind: str) -> Coverage: ...


def namespace_of(resource: Resource) -> str:
    return resource.namespace or DEFAULT_NAMESPACE


def workload_namespace(workload: Workload) -> str:
    """`namespace_of(workload.resource)`, from the namespace the view read when it was made
    (rules ask it of each workload about ten times)."""
    return workload.namespace or DEFAULT_NAMESPACE


class _Kind:
    """The objects of one kind, in order, and by namespace: `list(kind, namespace)` is asked once per
    workload by several rules, and a scan of every object of the kind made a large lint quadratic.
    Each object has an order key (its place in the bundle, or the streaming lint's (input, object));
    objects that name no namespace are in every namespace's answer, in their place."""

    __slots__ = ("by_namespace", "items", "keys", "unnamespaced")

    def __init__(self) -> None:
        self.keys: list[tuple[int, ...]] = []
        self.items: list[Resource] = []
        self.by_namespace: dict[str, tuple[list[tuple[int, ...]], list[Resource]]] = {}
        self.unnamespaced: tuple[list[tuple[int, ...]], list[Resource]] = ([], [])

    def add(self, key: tuple[int, ...], resource: Resource) -> None:
        namespace = resource.namespace
        group = self.unnamespaced if namespace is None else self.by_namespace.setdefault(namespace, ([], []))
        for keys, items in ((self.keys, self.items), group):
            if not keys or keys[-1] < key:
                keys.append(key)
                items.append(resource)
            else:
                at = bisect.bisect_left(keys, key)
                keys.insert(at, key)
                items.insert(at, resource)

    def in_namespace(self, namespace: str) -> Sequence[Resource]:
        keys, items = self.by_namespace.get(namespace, ([], []))
        other_keys, others = self.unnamespaced
        if not others:
            return items
        if not items:
            return others
        merged = heapq.merge(
            zip(keys, items, strict=True), zip(other_keys, others, strict=True), key=itemgetter(0)
        )
        return [item for _, item in merged]


class Bundle:
    """The objects loaded from the repository (or given on the command line).

    A repository rarely holds every object of the cluster, so the bundle reports PARTIAL
    coverage unless the policy declares a kind complete (`inventory.completeKinds`).
    """

    def __init__(self, resources: Iterable[Resource], *, complete_kinds: Iterable[str] = ()) -> None:
        self._kinds: dict[str, _Kind] = {}
        for position, resource in enumerate(resources):
            self._add((position,), resource)
        self._complete = frozenset(complete_kinds)

    def _add(self, key: tuple[int, ...], resource: Resource) -> None:
        """Add `resource` at its place in the order of `key`s (all of one shape)."""
        kind = resource.kind
        if kind:
            found = self._kinds.get(kind)
            if found is None:
                found = self._kinds[kind] = _Kind()
            found.add(key, resource)

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        found = self._kinds.get(kind)
        if found is None:
            return []  # an empty list, as a scan gave
        return found.items if namespace is None else found.in_namespace(namespace)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
        for item in self.list(kind, namespace):
            if item.name == name:
                return item
        return None

    def coverage(self, kind: str) -> Coverage:
        return Coverage.COMPLETE if kind in self._complete else Coverage.PARTIAL

    def __len__(self) -> int:
        return sum(len(found.items) for found in self._kinds.values())
