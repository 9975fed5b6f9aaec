"""GPU nodes as the cluster describes them, and the node pools they form.

A Node says what GPUs it has in two places: `status.capacity` (what the device plugin
advertises: `nvidia.com/gpu`, `nvidia.com/gpu.shared` when time-slicing or MPS renames it,
`nvidia.com/mig-<profile>` under the MIG mixed strategy, `amd.com/gpu`) and its labels, written by
GPU Feature Discovery or the cloud provider. Nodes with the same GPUs, sharing and provider pool
form one policy node pool (the schema of policies/schemas/sections/nodePools.json, the fields
`gpupolicy.policy.node_pools.NodePool` parses).

- GPU Feature Discovery: https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gfd_labels.md
  (under the MIG single strategy `gpu.product` gains `-MIG-<profile>` and `gpu.count`/`gpu.memory`
  describe MIG devices; time-slicing without renaming adds `-SHARED`; `gpu.sharing-strategy` and
  `gpu.replicas` say how GPUs are shared).
- GKE: https://cloud.google.com/kubernetes-engine/docs/how-to/gpus and
  https://cloud.google.com/kubernetes-engine/docs/concepts/timesharing-gpus (time-sharing presents
  each GPU to the kubelet as `gke-max-shared-clients-per-gpu` GPUs).
- Karpenter on AWS (`karpenter.k8s.aws/instance-gpu-*`, memory in MiB):
  https://karpenter.sh/docs/concepts/scheduling/#well-known-labels
- EKS managed node groups (`eks.amazonaws.com/nodegroup`) and AKS node pools
  (`kubernetes.azure.com/agentpool`, `kubernetes.azure.com/accelerator`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.kube.gpu import GpuCatalog, GpuKind
from gpupolicy.kube.pod_spec import as_mapping
from gpupolicy.kube.quantities import quantity_or_none

# The label naming a node's provider pool, first match wins (a Karpenter node is in no node group).
POOL_KEYS = (
    "karpenter.sh/nodepool",
    "eks.amazonaws.com/nodegroup",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
)
GFD_PRODUCT = "nvidia.com/gpu.product"
# Where GPU Feature Discovery does not run, the provider names the GPU in a label of its own.
PROVIDER_PRODUCT_KEYS = (
    "cloud.google.com/gke-accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
    "k8s.amazonaws.com/accelerator",
    "amd.com/gpu.product-name",
    "beta.amd.com/gpu.product-name",
)
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
# Labels that identify what kind of GPU node a node is: copied into a pool's nodeLabels when
# every node of the pool carries the same value (a pod selecting them can land on the pool).
IDENTIFYING_KEYS = (
    *POOL_KEYS,
    "node.kubernetes.io/instance-type",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.family",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/gpu.replicas",
    "nvidia.com/mig.config",
    "nvidia.com/mig.strategy",
    GKE_ACCELERATOR,
    "cloud.google.com/gke-accelerator-count",
    "cloud.google.com/gke-gpu-sharing-strategy",
    "cloud.google.com/gke-max-shared-clients-per-gpu",
    "cloud.google.com/gke-gpu-partition-size",
    "k8s.amazonaws.com/accelerator",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "kubernetes.azure.com/accelerator",
    "amd.com/gpu.product-name",
)
# GFD's sharing strategies, and GKE's names for the same two.
SHARING = {"time-slicing": "time-slicing", "mps": "mps", "time-sharing": "time-slicing"}
_SLUG = re.compile(r"[^a-z0-9.]+")


def _int(value: Any) -> int | None:
    amount = quantity_or_none(value) if isinstance(value, str | int) and not isinstance(value, bool) else None
    if amount is None or amount != amount.to_integral_value() or amount < 0:
        return None
    return int(amount)


def _memory_mib(value: str | None) -> int | None:
    """GFD and Karpenter write MiB; the AMD labeller writes `192G` (GiB)."""
    if value is None:
        return None
    if value.endswith("G") and value[:-1].isdigit():
        return int(value[:-1]) * 1024
    return _int(value)


def base_product(product: str) -> str:
    """GFD appends -SHARED (time-slicing/MPS without renaming) and -MIG-<profile> (MIG single)."""
    return product.split("-MIG-", 1)[0].removesuffix("-SHARED")


@immutable
class GpuResource:
    """One GPU resource a node advertises, with its count in `status.capacity`."""

    name: str
    count: int
    kind: GpuKind


@immutable
class GpuNode:
    name: str
    labels: Mapping[str, str]
    vendor: str
    resources: tuple[GpuResource, ...]
    pool: str | None  # the provider's pool (node group, Karpenter NodePool), when labelled
    product: str | None
    memory_mib: int | None
    sharing: str  # none, time-slicing, mps
    replicas: int | None
    mig_strategy: str  # none, single, mixed

    def signature(self) -> tuple[Any, ...]:
        """What nodes of one pool have in common."""
        return (
            self.pool,
            self.vendor,
            self.product,
            self.memory_mib,
            self.sharing,
            self.replicas,
            self.mig_strategy,
            self.resources,
        )


def node_labels(node: Mapping[str, Any]) -> dict[str, str]:
    labels = as_mapping(as_mapping(node.get("metadata")).get("labels"))
    # label keys and values are strings on the API server; anything else is not a label
    return {
        key: value for key, value in labels.items() if isinstance(key, str) and key and isinstance(value, str)
    }


def gpu_node(
    node: Mapping[str, Any], catalog: GpuCatalog, device_resources: Mapping[str, str]
) -> GpuNode | None:
    """The node's GPUs, or None for a node without any. `device_resources` maps a vendor to the
    resource its device plugin advertises whole GPUs under (for a node whose labels say it has GPUs
    before its device plugin has registered them)."""
    labels = node_labels(node)
    status = as_mapping(node.get("status"))
    # capacity: the hardware; allocatable drops a GPU the device plugin reports unhealthy
    capacity = as_mapping(status.get("capacity")) or as_mapping(status.get("allocatable"))
    advertised = _advertised(capacity, catalog)
    if not advertised:
        labelled = _labelled_gpus(labels, device_resources)
        if labelled is None:
            return None
        advertised = [labelled]
    resources = tuple(sorted((item for item, _ in advertised), key=lambda item: item.name))
    product_label = labels.get(GFD_PRODUCT)
    sharing, replicas = _sharing(labels, resources)
    return GpuNode(
        name=str(as_mapping(node.get("metadata")).get("name", "")),
        labels=labels,
        vendor=min(vendor for _, vendor in advertised),
        resources=resources,
        pool=next((labels[key] for key in POOL_KEYS if labels.get(key)), None),
        product=base_product(product_label) if product_label else _provider_product(labels),
        memory_mib=_memory_mib(
            labels.get("nvidia.com/gpu.memory")
            or labels.get("karpenter.k8s.aws/instance-gpu-memory")
            or labels.get("amd.com/gpu.vram")
        ),
        sharing=sharing,
        replicas=replicas if sharing != "none" else None,
        mig_strategy=_mig_strategy(labels, product_label, resources),
    )


def _advertised(capacity: Mapping[str, Any], catalog: GpuCatalog) -> list[tuple[GpuResource, str]]:
    found = []
    for name, raw in capacity.items():
        resource = catalog.classify(str(name))
        count = _int(raw)
        if resource is not None and resource.counts_gpus and count:
            found.append((GpuResource(str(name), count, resource.kind), resource.vendor))
    return found


def _labelled_gpus(
    labels: Mapping[str, str], device_resources: Mapping[str, str]
) -> tuple[GpuResource, str] | None:
    """A GPU node whose device plugin has not registered its GPUs yet: its labels name vendor and count."""
    vendor = labels.get("karpenter.k8s.aws/instance-gpu-manufacturer")
    if (
        labels.get("nvidia.com/gpu.present") == "true"
        or labels.get("kubernetes.azure.com/accelerator") == "nvidia"
        or labels.get(GKE_ACCELERATOR, "").startswith("nvidia-")
    ):
        vendor = "nvidia"
    count = _int(
        labels.get("nvidia.com/gpu.count")
        or (labels.get("cloud.google.com/gke-accelerator-count") if labels.get(GKE_ACCELERATOR) else None)
        or labels.get("karpenter.k8s.aws/instance-gpu-count")
    )
    resource = device_resources.get(vendor or "")
    if vendor is None or resource is None or not count:
        return None
    return GpuResource(resource, count, GpuKind.DEVICE), vendor


def _provider_product(labels: Mapping[str, str]) -> str | None:
    return next((labels[key] for key in PROVIDER_PRODUCT_KEYS if labels.get(key)), None)


def _sharing(labels: Mapping[str, str], resources: Sequence[GpuResource]) -> tuple[str, int | None]:
    strategy = labels.get("nvidia.com/gpu.sharing-strategy") or labels.get(
        "cloud.google.com/gke-gpu-sharing-strategy"
    )
    replicas = _int(
        labels.get("nvidia.com/gpu.replicas") or labels.get("cloud.google.com/gke-max-shared-clients-per-gpu")
    )
    if strategy in SHARING:
        return SHARING[strategy], replicas
    renamed = any(item.kind is GpuKind.SHARED for item in resources)
    if strategy is None and (renamed or labels.get(GFD_PRODUCT, "").endswith("-SHARED")):
        # Device plugins before v0.15 shared only by time-slicing, and wrote no strategy label.
        return "time-slicing", replicas
    return "none", None


def _mig_strategy(
    labels: Mapping[str, str], product_label: str | None, resources: Sequence[GpuResource]
) -> str:
    """`nvidia.com/mig.strategy: single` is on every GFD node, MIG or not: the strategy is in use
    only when MIG devices are advertised (mixed) or GFD names the product's MIG profile (single)."""
    if any(item.kind is GpuKind.MIG for item in resources):
        return "mixed"
    if (product_label and "-MIG-" in product_label) or labels.get("cloud.google.com/gke-gpu-partition-size"):
        return "single"
    return "none"


def slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-.") or "gpu"


def pools_of(nodes: Iterable[GpuNode]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Node pools in the policy's schema, sorted by name (one entry per GPU resource of each group
    of nodes with the same signature), and the pool of each node by name."""
    groups: dict[tuple[Any, ...], list[GpuNode]] = {}
    for node in nodes:
        groups.setdefault(node.signature(), []).append(node)
    named = _unique_names([members for _, members in sorted(groups.items(), key=lambda item: repr(item[0]))])
    entries = []
    pool_of_node: dict[str, str] = {}
    for name, members in named:
        first = members[0]
        several = len(first.resources) > 1
        for resource in first.resources:
            short = resource.name.rpartition("/")[2]
            if name.endswith("-mig"):  # a100-mig and nvidia.com/mig-1g.10gb: a100-mig-1g.10gb
                short = short.removeprefix("mig-")
            suffix = f"-{short}" if several else ""
            entries.append(_entry(name + suffix, members, resource))
        pool_of_node.update((node.name, name) for node in members)
    return sorted(entries, key=lambda entry: str(entry["name"])), pool_of_node


def _entry(name: str, members: Sequence[GpuNode], resource: GpuResource) -> dict[str, Any]:
    first = members[0]
    entry: dict[str, Any] = {"name": name, "vendor": first.vendor, "resource": resource.name}
    if first.product:
        entry["gpuProduct"] = first.product
    entry["gpusPerNode"] = _gpus_per_node(first, resource)
    memory = first.memory_mib
    if resource.kind is GpuKind.MIG:  # GFD's mixed-strategy labels: nvidia.com/mig-1g.10gb.memory
        memory = _int(first.labels.get(f"{resource.name}.memory"))
    if memory is not None:
        entry["gpuMemoryMiB"] = memory
    entry["sharing"] = first.sharing
    if first.sharing != "none" and first.replicas:
        entry["sharingReplicas"] = first.replicas
    entry["migStrategy"] = first.mig_strategy
    labels = _common_labels(members)
    if labels:
        entry["nodeLabels"] = labels
    return entry


def _gpus_per_node(node: GpuNode, resource: GpuResource) -> int:
    """Physical GPUs for a shared pool (each is advertised `replicas` times), MIG devices under MIG."""
    replicas = node.replicas
    if (
        resource.kind is not GpuKind.MIG
        and node.sharing != "none"
        and replicas
        and resource.count % replicas == 0
    ):
        return resource.count // replicas
    return resource.count


def _common_labels(members: Sequence[GpuNode]) -> dict[str, str]:
    common = {}
    for key in IDENTIFYING_KEYS:
        values = {node.labels.get(key) for node in members}
        if len(values) == 1:
            value = values.pop()
            if value is not None:
                common[key] = value
    return dict(sorted(common.items()))


def _unique_names(groups: Sequence[list[GpuNode]]) -> list[tuple[str, list[GpuNode]]]:
    """The provider's pool name, or the product. Where two groups share one, the group that shares
    its GPUs in some way says how (`-mig`, `-time-slicing`, `-mps`), then the GPUs per node tell
    apart a Karpenter NodePool's instance sizes; what is still equal is numbered."""
    schemes: tuple[Callable[[GpuNode], str], ...] = (
        _base_name,
        lambda node: "-".join(part for part in (_base_name(node), _flavour(node)) if part),
        lambda node: "-".join(
            part for part in (_base_name(node), _flavour(node), f"{_gpus(node)}gpu") if part
        ),
    )
    names = [schemes[0](members[0]) for members in groups]
    for scheme in schemes[1:]:
        clashing = {name for name in names if names.count(name) > 1}
        if not clashing:
            break
        names = [
            scheme(members[0]) if name in clashing else name
            for name, members in zip(names, groups, strict=True)
        ]
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if names.count(name) == 1 else f"{name}-{seen[name]}")
    return list(zip(unique, groups, strict=True))


def _base_name(node: GpuNode) -> str:
    return node.pool or slug(node.product or f"{node.vendor}-gpu")


def _flavour(node: GpuNode) -> str:
    if node.mig_strategy != "none":
        return "mig"
    return node.sharing if node.sharing != "none" else ""


def _gpus(node: GpuNode) -> int:
    return sum(_gpus_per_node(node, resource) for resource in node.resources)
