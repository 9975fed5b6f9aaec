"""The node-label registry and where a pod template names node labels.

The policy's `nodeLabels` section lists each node label key a workload may select on, with its
source (GPU Feature Discovery, GPU Operator, the cloud provider, the team...), its owner, and
whether it is a hard requirement or a preference. Keys ending in `*` are prefixes.
Node labels: https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/
GFD labels: https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gfd_labels.md
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.immutable import immutable
from gpupolicy.kube.pod_spec import PodTemplate, as_list, as_mapping
from gpupolicy.kube.scheduling import REQUIRED_TERMS_PATH
from gpupolicy.policy.node_pools import NodePool

PREFERRED_TERMS_PATH = ("affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
REQUIREMENT = "requirement"
PREFERENCE = "preference"


@immutable
class LabelInfo:
    key: str  # as registered (a prefix ends in "*")
    source: str
    owner: str
    use: str  # "requirement" or "preference"
    gpu: bool  # selecting on it targets GPU nodes
    unit: str | None = None  # e.g. "MiB" for nvidia.com/gpu.memory

    @property
    def is_prefix(self) -> bool:
        return self.key.endswith("*")


class LabelRegistry:
    def __init__(self, section: Mapping[str, Any], *, pools: Sequence[NodePool] = ()) -> None:
        """`section` is the policy's nodeLabels; the `nodeLabels` keys of the policy's node pools
        are registered too (source nodePools, owner the pool), as GPU labels, unless listed."""
        self._exact: dict[str, LabelInfo] = {}
        self._prefixes: list[LabelInfo] = []
        for pool in pools:
            for key in pool.node_labels:
                self._exact[key] = LabelInfo(key, "nodePools", f"node pool {pool.name}", REQUIREMENT, True)
        for key, entry in section.items():
            entry = as_mapping(entry)
            info = LabelInfo(
                key=str(key),
                source=str(entry.get("source", "unknown")),
                owner=str(entry.get("owner", "unknown")),
                use=str(entry.get("use", REQUIREMENT)),
                gpu=entry.get("gpu") is True,
                unit=str(entry["unit"]) if isinstance(entry.get("unit"), str) else None,
            )
            if info.is_prefix:
                self._prefixes.append(info)
            else:
                self._exact[info.key] = info
        self._prefixes.sort(key=lambda info: -len(info.key))

    def lookup(self, key: str) -> LabelInfo | None:
        found = self._exact.get(key)
        if found is not None:
            return found
        for info in self._prefixes:
            if key.startswith(info.key[:-1]):
                return info
        return None

    def suggest(self, key: str) -> str | None:
        """The registered key closest to a misspelt one (nvidia.com/gpu.prodcut → nvidia.com/gpu.product).
        A key that a registered one extends by a dotted part, or that extends one (`nvidia.com/gpu`
        beside `nvidia.com/gpu.mode`), is another key, not a misspelling of it."""
        matches = difflib.get_close_matches(key, list(self._exact), n=3, cutoff=0.8)
        return next(
            (
                match
                for match in matches
                if not _extends(match, key) and not _extends(key, match) and _a_typo_apart(key, match)
            ),
            None,
        )

    def gpu_keys(self) -> frozenset[str]:
        return frozenset(key for key, info in self._exact.items() if info.gpu)

    def is_gpu_label(self, key: str) -> bool:
        info = self.lookup(key)
        return info is not None and info.gpu


# How many single-character edits (insert, delete, replace, swap of neighbours) a misspelling is
# from its key: a long shared prefix makes difflib's ratio high for keys that are another key
# (`cloud.google.com/gce-topology-block` is not `…/gke-tpu-topology`).
TYPO_EDITS = 2


def _a_typo_apart(typed: str, key: str) -> bool:
    """Whether `typed` is at most TYPO_EDITS edits from `key` (optimal string alignment distance,
    over the two names only when they differ by at most that many characters: linear in the
    registry key's length)."""
    if abs(len(typed) - len(key)) > TYPO_EDITS:
        return False
    before: list[int] = []
    previous = list(range(len(key) + 1))
    for i, typed_char in enumerate(typed, 1):
        current = [i] + [0] * len(key)
        for j, key_char in enumerate(key, 1):
            cost = 0 if typed_char == key_char else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and typed_char == key[j - 2] and typed[i - 2] == key_char:
                current[j] = min(current[j], before[j - 2] + 1)
        before, previous = previous, current
    return previous[-1] <= TYPO_EDITS


@immutable
class LabelUse:
    """One place a pod template names a node label key."""

    key: str
    path: JsonPath  # the nodeSelector entry, the match expression, or the topologyKey
    where: str  # "nodeSelector", "required", "preferred", "topology"
    operator: str  # "In" for nodeSelector equality
    values: tuple[str, ...]

    @property
    def required(self) -> bool:
        return self.where in ("nodeSelector", "required")

    @property
    def place(self) -> str:
        """Where it is named, as a reader says it."""
        return {
            "required": "required node affinity",
            "preferred": "preferred node affinity",
            "topology": "topologyKey",
        }.get(self.where, self.where)


def _expressions(term: Any, base: JsonPath, where: str) -> Iterator[LabelUse]:
    for index, expr in enumerate(as_list(as_mapping(term).get("matchExpressions"))):
        expr = as_mapping(expr)
        key = expr.get("key")
        if isinstance(key, str):
            values = tuple(str(item) for item in as_list(expr.get("values")))
            operator = str(expr.get("operator", ""))
            yield LabelUse(key, (*base, "matchExpressions", index), where, operator, values)


def node_label_uses(template: PodTemplate, *, topology: bool = False) -> Iterator[LabelUse]:
    """Node label keys in nodeSelector, required and preferred node affinity, and (with
    `topology`) the topologyKeys of pod (anti-)affinity and topology spread constraints.
    Collected once per template (several rules read them)."""
    cache = template.cache
    key = _USES_KEYS[topology]
    found: tuple[LabelUse, ...] | None = cache.get(key)
    if found is None:
        every: tuple[LabelUse, ...] | None = cache.get(_USES_KEYS[True])
        if every is None:
            every = cache[_USES_KEYS[True]] = tuple(_node_label_uses(template, topology=True))
        # Without topology: the same uses less the topologyKeys (which come last, and only there).
        found = every if topology else tuple(use for use in every if use.where != "topology")
        cache[key] = found
    return iter(found)


_USES_KEYS = {False: "node-label-uses", True: "node-label-uses+topology"}


def _node_label_uses(template: PodTemplate, *, topology: bool) -> Iterator[LabelUse]:
    for key, value in template.node_selector.items():
        yield LabelUse(
            str(key), template.field("nodeSelector", str(key)), "nodeSelector", "In", (str(value),)
        )
    if as_mapping(template.spec.get("affinity")):  # most pods have none: nothing to walk
        yield from _affinity_uses(template)
    if topology:
        yield from _topology_keys(template)


def _affinity_uses(template: PodTemplate) -> Iterator[LabelUse]:
    """The keys of required and preferred node affinity."""
    node: Any = template.spec
    for step in REQUIRED_TERMS_PATH:
        node = as_mapping(node).get(step)
    for index, term in enumerate(as_list(node)):
        yield from _expressions(term, template.field(*REQUIRED_TERMS_PATH, index), "required")
    preferred: Any = template.spec
    for step in PREFERRED_TERMS_PATH:
        preferred = as_mapping(preferred).get(step)
    for index, item in enumerate(as_list(preferred)):
        base = template.field(*PREFERRED_TERMS_PATH, index, "preference")
        yield from _expressions(as_mapping(item).get("preference"), base, "preferred")


def _topology_keys(template: PodTemplate) -> Iterator[LabelUse]:
    for index, constraint in enumerate(as_list(template.spec.get("topologySpreadConstraints"))):
        key = as_mapping(constraint).get("topologyKey")
        if isinstance(key, str):
            yield LabelUse(
                key, template.field("topologySpreadConstraints", index, "topologyKey"), "topology", "", ()
            )
    affinity = as_mapping(template.spec.get("affinity"))
    if not affinity:
        return
    for kind in ("podAffinity", "podAntiAffinity"):
        section = as_mapping(affinity.get(kind))
        for mode in (
            "requiredDuringSchedulingIgnoredDuringExecution",
            "preferredDuringSchedulingIgnoredDuringExecution",
        ):
            for index, term in enumerate(as_list(section.get(mode))):
                term = as_mapping(term)
                steps: JsonPath = ("affinity", kind, mode, index)
                if "podAffinityTerm" in term:
                    term, steps = as_mapping(term.get("podAffinityTerm")), (*steps, "podAffinityTerm")
                key = term.get("topologyKey")
                if isinstance(key, str):
                    yield LabelUse(key, template.field(*steps, "topologyKey"), "topology", "", ())


def _extends(longer: str, shorter: str) -> bool:
    """`nvidia.com/gpu.mode` extends `nvidia.com/gpu`: the same key with a dotted part more."""
    return longer.startswith(shorter + ".")
