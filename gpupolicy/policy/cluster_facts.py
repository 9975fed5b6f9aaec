"""What a cluster's own API objects say about it, as a policy fragment (pure: no I/O).

The shipped policy describes no cluster; the rules that need a cluster fact say "unknown" once
(gpupolicy/engine/unknowns.py). Given the cluster's Nodes, PriorityClasses, RuntimeClasses, Kueue
WorkloadPriorityClasses, DRA DeviceClasses and ResourceQuotas, `facts_from_objects` writes those
facts in the policy's own schema (policies/schemas/), so that a policy extending the fragment
turns the unknowns into findings:

- `nodePools` (gpupolicy/kube/gpu_nodes.py), `placement.gpuTaints` (the taints every GPU node of a
  vendor carries), `placement.extendedResourceToleration` (GKE runs the admission plugin),
  `nodeLabels` for the label keys in use that the registry does not know, and
  `placement.labelRegistryComplete` — from Nodes, only when the snapshot holds every Node;
- `priority.clusterClasses` and `priority.globalDefault`, `priority.kueueClasses`,
  `placement.runtimeClass.names` and `inventory.completeKinds` for those kinds — only for kinds
  held completely (a class missing from a partial listing may exist: a list of names claims more);
- `gpu.draDeviceClasses` and `priority.systemNamespaces` gain what the cluster adds (adding a name
  is true however partial the listing).

Facts from kinds held only in part are returned apart (`ClusterFacts.unconfirmed`): what was seen,
for a reader to confirm. Only names, labels, taints and counts are read: never a status
heartbeat, an annotation, or anything a Secret could hold. Everything is sorted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.kube.gpu_nodes import GpuNode, gpu_node, node_labels, pools_of
from gpupolicy.kube.pod_spec import as_list, as_mapping
from gpupolicy.policy.loading import Policy, default_policy
from gpupolicy.policy.node_labels import LabelRegistry
from gpupolicy.policy.node_pools import NodePool

# The kinds a snapshot reads. Namespaces, NetworkPolicies and LimitRanges have no place in a
# policy (the webhook's live inventory holds them); they are counted, not written.
SNAPSHOT_KINDS = (
    "Node",
    "PriorityClass",
    "RuntimeClass",
    "Namespace",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "WorkloadPriorityClass",
    "DeviceClass",
)
# Kinds whose every object the fragment names, so that it may declare them complete: a
# repository's bundle then stands for the cluster (inventory.completeKinds) without holding them.
NAMED_KINDS = ("PriorityClass", "RuntimeClass", "WorkloadPriorityClass")
SOURCE = "cluster-snapshot"
UNKNOWN_OWNER = "unknown"
# Taints that are a node's state, not its pool's: cordoned, not ready, being drained or replaced.
# https://kubernetes.io/docs/reference/labels-annotations-taints/
TRANSIENT_TAINTS = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "karpenter.sh/",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
)
SYSTEM_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
# DRA drivers that hand out GPUs (a DeviceClass selecting their devices is a GPU class):
# https://github.com/NVIDIA/k8s-dra-driver-gpu, AMD's and Intel's GPU DRA drivers.
GPU_DRA_DRIVERS = ("gpu.nvidia.com", "gpu.amd.com", "gpu.intel.com")
# Label-key domains and who writes them.
KUBERNETES_DOMAINS = ("kubernetes.io", "k8s.io")
CLOUD_DOMAINS = (
    "cloud.google.com",
    "gke.io",
    "amazonaws.com",
    "k8s.aws",
    "eksctl.io",
    "karpenter.sh",
    "azure.com",
)
GKE_POOL = "cloud.google.com/gke-nodepool"
# Node labels whose value changes on every relabelling pass while the node stays the same (GPU
# Feature Discovery rewrites its timestamp every minute): the key is a fact, the value is not.
# https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gfd_labels.md
VOLATILE_NODE_LABELS = frozenset({"nvidia.com/gfd.timestamp"})


@immutable
class ClusterFacts:
    fragment: dict[str, Any]  # the policy fragment: what the snapshot holds for certain
    unconfirmed: dict[str, Any]  # facts from kinds held only in part: seen, not claimed
    notes: tuple[str, ...]  # what a reader should know (taints on some GPU nodes only, ...)
    counts: Mapping[str, int]  # objects read, by kind
    complete_kinds: tuple[str, ...]  # the kinds the snapshot held completely
    gpu_nodes: int = 0
    pool_of_node: Mapping[str, str] = field(default_factory=dict)


def facts_from_objects(
    objects: Iterable[Mapping[str, Any]],
    *,
    complete_kinds: Iterable[str] | None = None,
    policy: Policy | None = None,
) -> dict[str, Any]:
    """The policy fragment for `objects` (see `read_cluster`)."""
    return read_cluster(objects, complete_kinds=complete_kinds, policy=policy).fragment


def read_cluster(
    objects: Iterable[Mapping[str, Any]],
    *,
    complete_kinds: Iterable[str] | None = None,
    policy: Policy | None = None,
) -> ClusterFacts:
    """The cluster facts in `objects`. `complete_kinds`: the kinds of which `objects` holds every
    object in the cluster (None: every kind among them, as when each was listed whole from the API
    server; a kind listed and found empty must then be named). `policy` (default: the shipped one)
    gives the GPU resource names, the label registry and the lists the fragment adds to."""
    policy = policy or default_policy()
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for obj in objects:
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
        if isinstance(kind, str) and kind:
            by_kind.setdefault(kind, []).append(obj)
    complete = set(by_kind) if complete_kinds is None else set(complete_kinds)
    facts = _Facts(complete)
    nodes = by_kind.get("Node", [])
    gpu = _gpu_nodes(nodes, policy)
    pools, pool_of_node = pools_of(gpu)
    if "Node" in complete or nodes:
        _node_facts(facts, nodes, gpu, pools, pool_of_node, policy)
    _class_facts(facts, by_kind)
    _additions(facts, by_kind, policy)
    kinds = sorted(kind for kind in NAMED_KINDS if kind in complete)
    if kinds:
        facts.put(True, "inventory.completeKinds", kinds)
    return ClusterFacts(
        fragment=facts.fragment,
        unconfirmed=facts.unconfirmed,
        notes=tuple(facts.notes),
        counts={kind: len(items) for kind, items in sorted(by_kind.items())},
        complete_kinds=tuple(sorted(complete)),
        gpu_nodes=len(gpu),
        pool_of_node=pool_of_node,
    )


class _Facts:
    def __init__(self, complete: set[str]) -> None:
        self.complete = complete
        self.fragment: dict[str, Any] = {}
        self.unconfirmed: dict[str, Any] = {}
        self.notes: list[str] = []

    def put(self, certain: bool, dotted: str, value: Any) -> None:
        target = self.fragment if certain else self.unconfirmed
        *parents, last = dotted.split(".")
        for step in parents:
            target = target.setdefault(step, {})
        target[last] = value


def _gpu_nodes(nodes: Sequence[Mapping[str, Any]], policy: Policy) -> list[GpuNode]:
    found = (gpu_node(node, policy.gpu, policy.gpu.device_resource_of) for node in nodes)
    return sorted((node for node in found if node is not None), key=lambda node: node.name)


def _node_name(node: Mapping[str, Any]) -> str:
    return str(as_mapping(node.get("metadata")).get("name", ""))


# -- Nodes ---------------------------------------------------------------------------------------


def _node_facts(
    facts: _Facts,
    nodes: Sequence[Mapping[str, Any]],
    gpu: Sequence[GpuNode],
    pools: list[dict[str, Any]],
    pool_of_node: Mapping[str, str],
    policy: Policy,
) -> None:
    certain = "Node" in facts.complete
    if gpu:
        facts.put(certain, "nodePools", pools)
        taints, notes = _gpu_taints(nodes, gpu, pool_of_node)
        facts.put(certain, "placement.gpuTaints", taints)
        facts.notes.extend(notes)
    if certain and nodes and all(node_labels(node).get(GKE_POOL) for node in nodes):
        # GKE runs the ExtendedResourceToleration admission plugin: pods requesting nvidia.com/gpu
        # get the toleration for the nvidia.com/gpu taint added for them.
        # https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#gpu_taints
        facts.put(True, "placement.extendedResourceToleration", True)
    registry = LabelRegistry(policy.section("nodeLabels"), pools=[NodePool.parse(pool) for pool in pools])
    labels = _unregistered_labels(nodes, {node.name for node in gpu}, registry)
    if labels:  # keys that exist: true however partial the listing
        facts.put(True, "nodeLabels", labels)
    if certain and nodes:
        facts.put(True, "placement.labelRegistryComplete", True)


TaintKey = tuple[str, str]  # key, effect


def _taints_of(node: Mapping[str, Any]) -> dict[TaintKey, str]:
    found = {}
    for taint in as_list(as_mapping(node.get("spec")).get("taints")):
        taint = as_mapping(taint)
        key, effect = taint.get("key"), taint.get("effect")
        if isinstance(key, str) and isinstance(effect, str) and not key.startswith(TRANSIENT_TAINTS):
            found[(key, effect)] = str(taint.get("value") or "")
    return found


def _gpu_taints(
    nodes: Sequence[Mapping[str, Any]], gpu: Sequence[GpuNode], pool_of_node: Mapping[str, str]
) -> tuple[list[dict[str, str]], list[str]]:
    """The taints every GPU node of a vendor carries (a GPU pod of that vendor must tolerate each to
    land anywhere), less those every other node carries too (not a GPU taint). Taints on some GPU
    nodes only are notes: a pod without their toleration still has somewhere to go."""
    gpu_names = {node.name for node in gpu}
    taints = {_node_name(node): _taints_of(node) for node in nodes}
    others = [taints[_node_name(node)] for node in nodes if _node_name(node) not in gpu_names]
    everywhere = set.intersection(*(set(item) for item in others)) if others else set()
    by_vendor: dict[str, list[GpuNode]] = {}
    for node in gpu:
        by_vendor.setdefault(node.vendor, []).append(node)
    common: dict[str, dict[TaintKey, str | None]] = {}
    notes = []
    for vendor, members in sorted(by_vendor.items()):
        sets = [taints.get(node.name, {}) for node in members]
        shared = set.intersection(*(set(item) for item in sets)) - everywhere
        common[vendor] = {key: _one_value(sets, key) for key in sorted(shared)}
        for key in sorted(set().union(*sets) - shared - everywhere):
            pools = sorted(
                {
                    pool_of_node.get(node.name, node.name)
                    for node, seen in zip(members, sets, strict=True)
                    if key in seen
                }
            )
            notes.append(
                f"The taint {key[0]}:{key[1]} is on some {vendor} GPU nodes only (pools {', '.join(pools)}): "
                "not in placement.gpuTaints, since a pod without its toleration can land on the others"
            )
    return _taint_entries(common), notes


def _one_value(sets: Sequence[Mapping[TaintKey, str]], key: TaintKey) -> str | None:
    values = {item[key] for item in sets}
    return values.pop() if len(values) == 1 else None


def _taint_entries(common: Mapping[str, Mapping[TaintKey, str | None]]) -> list[dict[str, str]]:
    """One entry per taint; `vendor` names the vendor whose GPU nodes carry it, unless every
    vendor's do (GP202 then asks every GPU pod for the toleration)."""
    vendors = list(common)
    entries = []
    for vendor in vendors:
        for (key, effect), value in common[vendor].items():
            everyone = len(vendors) > 1 and all(
                (key, effect) in common[other] and common[other][(key, effect)] == value for other in vendors
            )
            entry = {"key": key, "effect": effect}
            if value:
                entry["value"] = value
            if not everyone:
                entry["vendor"] = vendor
            if entry not in entries:
                entries.append(entry)
    return sorted(entries, key=lambda entry: (entry["key"], entry["effect"], entry.get("vendor", "")))


def _unregistered_labels(
    nodes: Sequence[Mapping[str, Any]], gpu_names: set[str], registry: LabelRegistry
) -> dict[str, dict[str, Any]]:
    """Registry entries for the node label keys in use that the registry does not know (the keys it
    knows keep their source, owner and use)."""
    carriers: dict[str, list[tuple[str, str]]] = {}
    for node in nodes:
        name = _node_name(node)
        for key, value in node_labels(node).items():
            carriers.setdefault(key, []).append((name, value))
    entries = {}
    for key in sorted(carriers):
        if registry.lookup(key) is not None:
            continue
        source, owner = _source_of(key)
        on = carriers[key]
        # a key whose value names its node (a hostname) pins a pod to one node: a preference
        pins = len(on) > 1 and all(value == name for name, value in on)
        entry: dict[str, Any] = {
            "source": source,
            "owner": owner,
            "use": "preference" if pins else "requirement",
        }
        only_gpu = all(name in gpu_names for name, _ in on) and len(on) < len(nodes)
        if only_gpu:
            entry["gpu"] = True
        where = ", all with GPUs" if only_gpu else ""
        entry["description"] = f"on {len(on)} of {len(nodes)} nodes{where}"
        entries[key] = entry
    return entries


def _source_of(key: str) -> tuple[str, str]:
    domain = key.partition("/")[0] if "/" in key else ""

    def under(domains: tuple[str, ...]) -> bool:
        return any(domain == item or domain.endswith("." + item) for item in domains)

    if under(KUBERNETES_DOMAINS):
        return "kubernetes", "kubernetes"
    if under(CLOUD_DOMAINS):
        return "cloud-provider", "cloud-provider"
    if under(("nvidia.com",)):
        return "gpu-operator", UNKNOWN_OWNER
    if under(("amd.com", "intel.com")):
        return "vendor", UNKNOWN_OWNER
    return SOURCE, UNKNOWN_OWNER


# -- classes -------------------------------------------------------------------------------------


def _names(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    return sorted({name for obj in objects if (name := _node_name(obj))})


def _class_facts(facts: _Facts, by_kind: Mapping[str, list[Mapping[str, Any]]]) -> None:
    """Lists of names claim that nothing else exists: written only for kinds held completely."""
    if "PriorityClass" in facts.complete or "PriorityClass" in by_kind:
        certain = "PriorityClass" in facts.complete
        classes = by_kind.get("PriorityClass", [])
        facts.put(
            certain,
            "priority.clusterClasses",
            [name for name in _names(classes) if name not in SYSTEM_CLASSES],
        )
        defaults = _names(item for item in classes if item.get("globalDefault") is True)
        if defaults:
            facts.put(certain, "priority.globalDefault", defaults[0])
    if "WorkloadPriorityClass" in facts.complete or "WorkloadPriorityClass" in by_kind:
        certain = "WorkloadPriorityClass" in facts.complete
        facts.put(certain, "priority.kueueClasses", _names(by_kind.get("WorkloadPriorityClass", [])))
    if "RuntimeClass" in facts.complete or "RuntimeClass" in by_kind:
        certain = "RuntimeClass" in facts.complete
        facts.put(certain, "placement.runtimeClass.names", _names(by_kind.get("RuntimeClass", [])))


def _additions(facts: _Facts, by_kind: Mapping[str, list[Mapping[str, Any]]], policy: Policy) -> None:
    """Names added to the policy's own lists (lists replace when policies merge: the base's stay)."""
    base = list(policy.gpu.dra_device_class_names)
    added = sorted(
        set(_names(item for item in by_kind.get("DeviceClass", []) if _hands_out_gpus(item))) - set(base)
    )
    if added:
        facts.put(True, "gpu.draDeviceClasses", [*base, *added])
    base = list(policy.priority.system_namespaces)
    allowed = {
        _namespace(quota) for quota in by_kind.get("ResourceQuota", []) if admits_system_classes(quota)
    }
    added = sorted(allowed - set(base) - {""})
    if added:
        facts.put(True, "priority.systemNamespaces", [*base, *added])


def _hands_out_gpus(device_class: Mapping[str, Any]) -> bool:
    """A DeviceClass whose CEL selectors pick a GPU driver's devices (plain text search: the
    expressions come from the cluster, and are never evaluated here)."""
    for selector in as_list(as_mapping(device_class.get("spec")).get("selectors")):
        expression = as_mapping(as_mapping(selector).get("cel")).get("expression")
        if isinstance(expression, str) and any(
            f"'{driver}'" in expression or f'"{driver}"' in expression for driver in GPU_DRA_DRIVERS
        ):
            return True
    return False


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(as_mapping(obj.get("metadata")).get("namespace") or "")


def admits_system_classes(quota: Mapping[str, Any]) -> bool:
    """A ResourceQuota scoped to the system PriorityClasses with room for pods: where the cluster
    lets them be used when it limits them by default.
    https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default"""
    spec = as_mapping(quota.get("spec"))
    if str(as_mapping(spec.get("hard")).get("pods", "1")) == "0":
        return False
    for expression in as_list(as_mapping(spec.get("scopeSelector")).get("matchExpressions")):
        expression = as_mapping(expression)
        if (
            expression.get("scopeName") == "PriorityClass"
            and expression.get("operator") == "In"
            and SYSTEM_CLASSES & {str(value) for value in as_list(expression.get("values"))}
        ):
            return True
    return False


# -- what of each object the facts read ----------------------------------------------------------


def node_projection(node: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a Node the facts read: its name, labels (volatile values blanked), taints
    (key, value, effect), whether it is cordoned, and its capacity and allocatable resources. Not
    its status conditions, images, addresses, heartbeats or resourceVersion, which the kubelet
    rewrites every few minutes while the node stays what it was."""
    metadata = as_mapping(node.get("metadata"))
    spec = as_mapping(node.get("spec"))
    status = as_mapping(node.get("status"))
    labels = {
        key: "" if key in VOLATILE_NODE_LABELS else value
        for key, value in as_mapping(metadata.get("labels")).items()
    }
    taints = [
        {key: taint[key] for key in ("key", "value", "effect") if taint.get(key) is not None}
        for taint in (as_mapping(item) for item in as_list(spec.get("taints")))
    ]
    projected_spec: dict[str, Any] = {"taints": taints} if taints else {}
    if spec.get("unschedulable") is True:
        projected_spec["unschedulable"] = True
    return {
        "apiVersion": node.get("apiVersion", "v1"),
        "kind": node.get("kind", "Node"),
        "metadata": {"name": metadata.get("name"), **({"labels": labels} if labels else {})},
        "spec": projected_spec,
        "status": {
            key: dict(as_mapping(status.get(key))) for key in ("capacity", "allocatable") if status.get(key)
        },
    }


def resource_quota_projection(quota: Mapping[str, Any]) -> dict[str, Any]:
    """Name, namespace and spec: not status.used, which changes with every pod created."""
    metadata = as_mapping(quota.get("metadata"))
    return {
        "apiVersion": quota.get("apiVersion", "v1"),
        "kind": quota.get("kind", "ResourceQuota"),
        "metadata": {key: metadata[key] for key in ("name", "namespace") if key in metadata},
        "spec": quota.get("spec") or {},
    }


def device_class_projection(device_class: Mapping[str, Any]) -> dict[str, Any]:
    """Name and selectors: what says whether the class hands out GPUs; and the extended resource
    it maps to its devices (`extendedResourceName`, KEP-5004), which GP152 reads."""
    spec = as_mapping(device_class.get("spec"))
    kept: dict[str, Any] = {"selectors": as_list(spec.get("selectors"))}
    if isinstance(spec.get("extendedResourceName"), str):
        kept["extendedResourceName"] = spec["extendedResourceName"]
    return {
        "apiVersion": device_class.get("apiVersion"),
        "kind": device_class.get("kind", "DeviceClass"),
        "metadata": {"name": as_mapping(device_class.get("metadata")).get("name")},
        "spec": kept,
    }
