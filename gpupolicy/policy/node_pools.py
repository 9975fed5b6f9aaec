"""The policy's node-pool catalogue, parsed once per policy into typed `NodePool`s.

Every reader (GP108 node size, GP152/GP153/GP154 sharing, GP205 pool conflicts, GP206 label
registry, GP207 GPU memory, GP605 MPS pools, GP908 spare GPUs) sees the same defaults: a pool
without `resource` advertises `nvidia.com/gpu`, without `sharing` shares nothing, without
`migStrategy` has MIG off. Schema: policies/schemas/sections/nodePools.json.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any, Protocol

from gpupolicy.core.immutable import immutable
from gpupolicy.kube.pod_spec import as_mapping

DEFAULT_RESOURCE = "nvidia.com/gpu"
PRODUCT_LABEL = "nvidia.com/gpu.product"
SHARING_STRATEGIES = ("time-slicing", "mps")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _price(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@immutable
class NodePool:
    name: str
    resource: str = DEFAULT_RESOURCE
    vendor: str | None = None
    gpu_product: str | None = None
    gpus_per_node: int | None = None
    gpu_memory_mib: int | None = None
    sharing: str = "none"
    mig_strategy: str = "none"
    node_labels: Mapping[str, str] = field(default_factory=dict)
    spare_gpus: int | None = None
    price_per_gpu_hour: float | None = None  # what one GPU of the pool costs an hour (results cost)

    @classmethod
    def parse(cls, raw: Any) -> NodePool:
        pool = as_mapping(raw)
        product = pool.get("gpuProduct")
        return cls(
            name=str(pool.get("name", "?")),
            resource=str(pool.get("resource", DEFAULT_RESOURCE)),
            vendor=str(pool["vendor"]) if pool.get("vendor") else None,
            gpu_product=str(product) if product else None,
            gpus_per_node=_int(pool.get("gpusPerNode")),
            gpu_memory_mib=_int(pool.get("gpuMemoryMiB")),
            sharing=str(pool.get("sharing", "none")),
            mig_strategy=str(pool.get("migStrategy", "none")),
            node_labels={str(key): str(value) for key, value in as_mapping(pool.get("nodeLabels")).items()},
            spare_gpus=_int(pool.get("spareGpus")),
            price_per_gpu_hour=_price(pool.get("pricePerGpuHour")),
        )

    @property
    def shared(self) -> bool:
        """Time-sliced or MPS: several pods share each GPU."""
        return self.sharing in SHARING_STRATEGIES

    @property
    def renamed(self) -> bool:
        """The device plugin advertises the shared GPUs under another name (renameByDefault)."""
        return self.resource != DEFAULT_RESOURCE

    def label_sets(self) -> list[dict[str, str]]:
        """Labels a node of the pool may carry: its nodeLabels, and the product label with and
        without the -SHARED suffix GPU Feature Discovery adds on shared nodes."""
        base = dict(self.node_labels)
        if not self.gpu_product:
            return [base]
        return [{**base, PRODUCT_LABEL: f"{self.gpu_product}{suffix}"} for suffix in ("", "-SHARED")]


class Policy(Protocol):
    """What these helpers read of the compiled policy (gpupolicy/policy/loading.py, which holds
    the pools and so imports this module)."""

    @property
    def node_pools(self) -> tuple[NodePool, ...]: ...

    @property
    def largest_nodes(self) -> Mapping[str, tuple[int, str]]: ...


def pool_for_selector(policy: Policy, node_selector: Mapping[str, Any]) -> NodePool | None:
    """The one pool a node selector points at: by its GPU product label (with or without
    -SHARED) or by all of the pool's nodeLabels; None when no pool or several match."""
    product = str(node_selector.get(PRODUCT_LABEL, ""))
    matches = [
        pool
        for pool in node_pools(policy)
        if (pool.gpu_product and product in (pool.gpu_product, f"{pool.gpu_product}-SHARED"))
        or (pool.node_labels and all(node_selector.get(k) == v for k, v in pool.node_labels.items()))
    ]
    return matches[0] if len(matches) == 1 else None


def node_pools(policy: Policy) -> tuple[NodePool, ...]:
    return policy.node_pools


def largest_nodes(pools: Iterable[NodePool]) -> dict[str, tuple[int, str]]:
    """The largest node (GPUs per node, pool name) of each resource; the first pool wins a tie."""
    largest: dict[str, tuple[int, str]] = {}
    for pool in pools:
        best = largest.get(pool.resource)
        if pool.gpus_per_node is not None and (best is None or pool.gpus_per_node > best[0]):
            largest[pool.resource] = (pool.gpus_per_node, pool.name)
    return largest


def largest_node(policy: Policy, resource_name: str) -> tuple[int, str] | None:
    """The largest node (GPUs per node, pool name) among the pools advertising `resource_name`."""
    return policy.largest_nodes.get(resource_name)
