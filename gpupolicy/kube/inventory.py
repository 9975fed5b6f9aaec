"""What cross-object rules may ask about the other objects, wherever they come from.

Two sources answer the same protocol: the `Bundle` of everything loaded from the repository,
and the webhook's cluster inventory (list+watch caches). A rule never knows which one it has.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from gpupolicy.loading.documents import Resource

DEFAULT_NAMESPACE = "default"


class Coverage(enum.Enum):
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


class Bundle:
    """The objects loaded from the repository (or given on the command line).

    A repository rarely holds every object of the cluster, so the bundle reports PARTIAL
    coverage unless the policy declares a kind complete (`inventory.completeKinds`).
    """

    def __init__(self, resources: Iterable[Resource], *, complete_kinds: Iterable[str] = ()) -> None:
        self._by_kind: dict[str, list[Resource]] = defaultdict(list)
        for resource in resources:
            if resource.kind:
                self._by_kind[resource.kind].append(resource)
        self._complete = frozenset(complete_kinds)

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        found = self._by_kind.get(kind, [])
        if namespace is None:
            return found
        return [item for item in found if item.namespace is None or namespace_of(item) == namespace]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
        for item in self.list(kind, namespace):
            if item.name == name:
                return item
        return None

    def coverage(self, kind: str) -> Coverage:
        return Coverage.COMPLETE if kind in self._complete else Coverage.PARTIAL

    def __len__(self) -> int:
        return sum(len(items) for items in self._by_kind.values())
