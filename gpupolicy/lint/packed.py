"""Workloads kept for the deferred readers, packed: a few bytes each until a rule reads them.

A streaming lint keeps every workload that a PDB, an HPA, a Namespace or a binding of the run may
read (gpupolicy/lint/streaming.py, `_Readers`) until those are checked after the stream. Where a PDB
stands beside every Deployment, that is every workload of the tree: a GPU Deployment's values take
about 17 KB as Python objects and 2 KB marshalled, and 100,000 objects of such a tree peaked at
1.4 GB with the values kept as they are (docs/performance.md, "Memory").

A `PackedResource` keeps its values marshalled, with the kind, name and namespace that the
inventory files it under, and unpacks them when a rule first reads `obj`. The unpacked values stay
while they are among the most recently unpacked (`Unpacked`, bounded by their packed bytes), so the
readers of one namespace, checked one after another, unpack each of its workloads once. Values
that marshal cannot write (subclasses of the plain types, from a loader other than the default
one) are pickled instead.
"""

from __future__ import annotations

import marshal
from collections import OrderedDict
from typing import Any

from gpupolicy.kube.pod_spec import release_views
from gpupolicy.loading.documents import Resource

# The packed bytes of the values kept unpacked at once: about 8 times as much as Python objects,
# the workloads of the largest namespaces of a large tree (a few thousand GPU Deployments).
UNPACKED_BYTES = 8 * 1024 * 1024
_MARSHAL, _PICKLE = b"m", b"p"


def pack(obj: Any) -> bytes:
    try:
        return _MARSHAL + marshal.dumps(obj)
    except ValueError:  # a subclass of dict, list or str
        import pickle  # here: the default loader makes plain values only, which marshal writes

        return _PICKLE + pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def unpack(packed: bytes) -> Any:
    body = memoryview(packed)[1:]
    if packed[:1] == _MARSHAL:
        return marshal.loads(body)
    import pickle

    return pickle.loads(body)


class Unpacked:
    """The packed resources whose values are unpacked, least recently unpacked first, and how many
    packed bytes they hold. `trim()` packs the oldest back: it runs between two objects' checks,
    never during one, where a rule may hold a value it read before (and its `id()`)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = UNPACKED_BYTES if limit is None else limit
        self.held = 0
        self._order: OrderedDict[int, PackedResource] = OrderedDict()

    def note(self, resource: PackedResource) -> None:
        self._order[id(resource)] = resource
        self.held += len(resource.packed)

    def trim(self) -> None:
        order = self._order
        while self.held > self.limit and order:
            _, resource = order.popitem(last=False)
            self.held -= len(resource.packed)
            resource.forget()


class PackedResource(Resource):
    """A kept workload: values packed (`pack`) and unpacked on first read of `obj`; no positions."""

    __slots__ = ("_kind", "_name", "_namespace", "_values", "packed", "unpacked")

    def __init__(
        self,
        packed: bytes,
        identity: tuple[str, str, str | None],
        place: tuple[Any, ...],
        unpacked: Unpacked | None = None,
    ) -> None:
        file, doc_index, rendered_from, line_offset, in_list = place
        super().__init__(
            None,
            file=file,
            doc_index=doc_index,
            rendered_from=rendered_from,
            line_offset=line_offset,
            in_list=in_list,
        )
        self._kind, self._name, self._namespace = identity
        self.packed = packed
        self._values: Any = None
        self.unpacked = Unpacked(0) if unpacked is None else unpacked

    @classmethod
    def of(cls, resource: Resource, unpacked: Unpacked) -> PackedResource:
        return cls(
            pack(resource.obj),
            (resource.kind, resource.name, resource.namespace),
            place_of(resource),
            unpacked,
        )

    @property  # Resource.obj is a slot; here the values are unpacked on demand
    def obj(self) -> Any:
        values = self._values
        if values is None:
            values = self._values = unpack(self.packed)
            self.unpacked.note(self)
        return values

    @obj.setter
    def obj(self, value: Any) -> None:
        if value is not None:  # Resource.__init__ sets it; the values live in `packed`
            raise AttributeError("a packed resource's values are read-only")

    def forget(self) -> None:
        """Drop the unpacked values and what was memoised from them (they are unpacked again on demand)."""
        release_views(self)
        self._values = None
        self.facts = None

    # Read for every object the inventory files or a rule scans past: answered without unpacking.
    @property
    def kind(self) -> str:
        return self._kind

    @property
    def name(self) -> str:
        return self._name

    @property
    def namespace(self) -> str | None:
        return self._namespace

    def __reduce__(self) -> tuple[Any, ...]:
        """Sent from a worker to the parent packed (gpupolicy/lint/parallel.py); the parent adopts it
        into its own `Unpacked` (`StreamInventory.adopt`)."""
        return (PackedResource, (self.packed, (self._kind, self._name, self._namespace), place_of(self)))


def place_of(resource: Resource) -> tuple[Any, ...]:
    """Where the object was read: what a packed resource keeps of the one it was made from (not
    the lines of its text, which only positions read: a packed resource has none)."""
    return (resource.file, resource.doc_index, resource.rendered_from, resource.line_offset, resource.in_list)
