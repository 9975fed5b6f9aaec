"""The cluster's facts, learned live: the webhook's policy = the configured policy over what its
cluster inventory says of the cluster.

`gpupolicy cluster snapshot` turns a cluster's Nodes, DeviceClasses and ResourceQuotas into a
policy fragment (gpupolicy/policy/cluster_facts.py: node pools, GPU taints, node label keys, GPU
DeviceClasses, the namespaces allowed the system PriorityClasses). The webhook computes the same
fragment from its inventory's caches, and decides under

    the shipped default  <  the learned facts  <  the --policy files (the chart's ConfigMap)

merged as policy files are (mappings key by key, lists and scalars replaced): a key any policy
file sets wins over the cluster — even set to the default's "unknown" (`nodePools: []`,
`placement.gpuTaints: null`), which is how an operator keeps a fact from being learned — and
the facts fill what only the shipped default says, as if each file extended a snapshot.

PriorityClasses, RuntimeClasses and WorkloadPriorityClasses are not part of the fragment: the
rules read them from the inventory itself (GP301/GP302/GP308/GP210), which is fresher than any
fragment. Only kinds whose caches are synced count, and they count as complete: when the Node
cache is not synced (before its first list, after a failure, without RBAC), nothing is learned
from Nodes and the rules that need node pools or GPU taints say "unknown" again.

`check()` runs in a worker thread (the app polls it): it compares the caches' generations
(cluster_inventory.py; a Node heartbeat moves none), recomputes at most once per
`min_interval` seconds — at once when a cache becomes synced or stops being so — and, when the
fragment changed, builds a `ReviewEngine` for the new effective policy, tries it on a GPU
Deployment (as a policy reload does) and only then makes it `engine`. A request reads the
engine once, so it is decided under one policy. What was learned is in /readyz
(`clusterFacts`), in /metrics (`gpupolicy_cluster_facts`) and in one info log line per change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from datetime import UTC, datetime
from typing import Any, Protocol

from gpupolicy.core.immutable import immutable
from gpupolicy.kube.inventory import Coverage
from gpupolicy.kube.pod_spec import as_list, as_mapping
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.cluster_facts import read_cluster
from gpupolicy.policy.loading import Policy
from gpupolicy.webhook.logs import LOGGER, excerpt, log
from gpupolicy.webhook.review import Decision, ReviewEngine
from gpupolicy.webhook.settings import Mode

_log = logging.getLogger(LOGGER)

# The kinds the facts come from (each cached, projected, by the inventory).
FACT_KINDS = ("Node", "DeviceClass", "ResourceQuota")
# The fragment's keys (dotted), for /readyz: which the policy files override.
FACT_KEYS = (
    "nodePools",
    "placement.gpuTaints",
    "placement.extendedResourceToleration",
    "placement.labelRegistryComplete",
    "nodeLabels",
    "gpu.draDeviceClasses",
    "priority.systemNamespaces",
)
DEFAULT_MIN_INTERVAL_SECONDS = 10.0
SHOWN_POOLS = 20  # pool names in the log line and /readyz; the count says the rest

Fingerprint = tuple[tuple[str, int, bool], ...]


class FactSource(Protocol):
    """What the facts read of the cluster inventory (`ClusterInventory` has it)."""

    def generations(self, kinds: Sequence[str]) -> Fingerprint: ...

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]: ...

    def coverage(self, kind: str) -> Coverage: ...


@immutable
class Learned:
    """One computation of the facts."""

    fragment: dict[str, Any]
    complete_kinds: tuple[str, ...]  # the fact kinds whose caches were synced
    nodes: int = 0
    gpu_nodes: int = 0
    computed_at: str = ""  # RFC 3339 UTC
    duration_ms: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _dotted(data: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    value: Any = data
    for step in dotted.split("."):
        if not isinstance(value, Mapping) or step not in value:
            return False, None
        value = value[step]
    return True, value


def _steady(fragment: dict[str, Any]) -> dict[str, Any]:
    """The fragment without what changes with every node added or removed while the facts stay
    the same: a snapshot describes a label key as "on 6 of 7 nodes", the live facts do not (a
    scale-up would otherwise rebuild the policy)."""
    labels = as_mapping(fragment.get("nodeLabels"))
    if not labels:
        return fragment
    steady = {}
    for key, entry in labels.items():
        entry = dict(as_mapping(entry))
        entry["description"] = (
            "on the cluster's GPU nodes only" if entry.get("gpu") else "on the cluster's nodes"
        )
        steady[key] = entry
    return {**fragment, "nodeLabels": steady}


class LiveFacts:
    """The effective review engine: the configured policy with the facts learned from `inventory`.

    `check()` and `reconfigure()` run in worker threads, one at a time (a lock); `engine` is read
    by each request, one attribute read."""

    def __init__(
        self,
        inventory: FactSource,
        configured: ReviewEngine,
        *,
        mode: Mode | None,
        trial: Callable[[ReviewEngine], Decision],
        min_interval: float = DEFAULT_MIN_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inventory = inventory
        self.engine = configured
        self.mode = mode
        self.min_interval = min_interval
        self._trial = trial
        self._clock = clock
        self._configured = configured
        self._lock = threading.Lock()
        self._fingerprint: Fingerprint | None = None
        self._computed_at: float | None = None
        self.learned = Learned(fragment={}, complete_kinds=())
        self.updated_at: str | None = None  # when the facts in use last changed
        self.settled = False  # facts computed once with every fact kind synced
        self.recomputes = 0
        self.updates = 0
        self.refusal: str | None = None

    # -- the worker's calls ----------------------------------------------------------------------
    def check(self) -> str | None:
        """Recompute when the caches changed and it is due: "updated" when a new engine is in use,
        "unchanged" when the facts came out the same, "refused" when rules failed under the new
        facts (the engine in use stays), None when nothing was due."""
        with self._lock:
            fingerprint = self.inventory.generations(FACT_KINDS)
            if fingerprint == self._fingerprint:
                return None
            now = self._clock()
            synced_changed = _synced(fingerprint) != _synced(self._fingerprint)
            if (
                not synced_changed
                and self._computed_at is not None
                and now - self._computed_at < self.min_interval
            ):
                return None  # changed, not due yet: a later check recomputes
            self._fingerprint, self._computed_at = fingerprint, now
            learned = self._learn(self._configured.policy)
            self.recomputes += 1
            if learned.fragment == self.learned.fragment:
                self.learned = learned
                outcome = "unchanged"
            else:
                outcome = self._apply(learned)
            # Learned (or refused, which a reload reports rather than blocks on) from every cache.
            self.settled = self.settled or all(synced for _, _, synced in fingerprint)
            return outcome

    def reconfigure(self, configured: ReviewEngine) -> ReviewEngine:
        """A reloaded policy: the facts are learned again under it (its vendors and label
        registry) and merged under it. Returns the engine now in use."""
        with self._lock:
            self._configured = configured
            learned = self._learn(configured.policy)
            if self._apply(learned, announce=learned.fragment != self.learned.fragment) == "refused":
                self.engine = configured  # the new policy alone, not the old one with facts
                self.learned = Learned(fragment={}, complete_kinds=learned.complete_kinds)
            return self.engine

    # -- computing -------------------------------------------------------------------------------
    def _learn(self, policy: Policy) -> Learned:
        started = time.perf_counter()
        complete = tuple(kind for kind in FACT_KINDS if self.inventory.coverage(kind) is Coverage.COMPLETE)
        # Only synced caches: a cache that failed keeps its last objects, which may be stale.
        objects = [resource.obj for kind in complete for resource in self.inventory.list(kind)]
        facts = read_cluster(objects, complete_kinds=complete, policy=policy)
        return Learned(
            fragment=_steady(facts.fragment),
            complete_kinds=complete,
            nodes=facts.counts.get("Node", 0),
            gpu_nodes=facts.gpu_nodes,
            computed_at=_now(),
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
            notes=facts.notes,
        )

    def _apply(self, learned: Learned, *, announce: bool = True) -> str:
        previous = self.learned
        try:
            engine = self._compose(learned.fragment)
        except Exception as exc:  # whatever the facts make fail: keep the engine in use
            self.refusal = excerpt(f"{type(exc).__name__}: {exc}", 500)
            log(
                _log,
                logging.WARNING,
                "cluster facts refused; the policy in use stays",
                reason=self.refusal,
                node_pools=len(as_list(learned.fragment.get("nodePools"))),
            )
            return "refused"
        self.refusal = None
        self.engine = engine
        self.learned = learned
        self.updated_at = learned.computed_at
        self.updates += 1
        if not announce:
            return "updated"
        summary = self.summary()
        log(
            _log,
            logging.INFO,
            "cluster facts changed",
            node_pools=summary["nodePools"],
            pools=summary["pools"],
            gpu_taints=summary["gpuTaints"],
            nodes=learned.nodes,
            gpu_nodes=learned.gpu_nodes,
            complete_kinds=list(learned.complete_kinds),
            dropped=[kind for kind in previous.complete_kinds if kind not in learned.complete_kinds],
            overridden_by_policy=summary["overriddenByPolicy"],
            policy_digest=f"sha256:{engine.policy.digest}",
            duration_ms=learned.duration_ms,
        )
        return "updated"

    def _compose(self, fragment: dict[str, Any]) -> ReviewEngine:
        configured = self._configured
        if not fragment:
            return configured
        policy = configured.policy.with_facts(fragment)
        engine = ReviewEngine.from_policy(policy, mode=self.mode, rules=configured.rules)
        decision = self._trial(engine)  # every rule once, on a GPU Deployment
        errors = decision.report.errors if decision.report is not None else []
        if errors:
            failed = ", ".join(dict.fromkeys(error.rule_id for error in errors))
            raise RuntimeError(f"rules fail under the learned facts: {failed} ({errors[0].message})")
        return engine

    # -- what /readyz, /metrics and the log show -------------------------------------------------
    def summary(self) -> dict[str, Any]:
        fragment = self.learned.fragment
        pools = [str(as_mapping(pool).get("name")) for pool in as_list(fragment.get("nodePools"))]
        found, taints = _dotted(fragment, "placement.gpuTaints")
        return {
            "nodePools": len(pools),
            "pools": pools[:SHOWN_POOLS],
            "gpuTaints": len(as_list(taints)) if found else None,
            "nodeLabels": len(as_mapping(fragment.get("nodeLabels"))),
            "overriddenByPolicy": self._overridden(),
        }

    def _overridden(self) -> list[str]:
        """The learned keys a policy file sets (its value is used, not the cluster's)."""
        layers = self._configured.policy.layers[1:]  # not the shipped default
        return [
            key
            for key in FACT_KEYS
            if _dotted(self.learned.fragment, key)[0] and any(_dotted(layer, key)[0] for layer in layers)
        ]

    def status(self) -> dict[str, Any]:
        """For /readyz."""
        learned = self.learned
        detail: dict[str, Any] = {
            "source": "live",
            **self.summary(),
            "nodes": learned.nodes,
            "gpuNodes": learned.gpu_nodes,
            "completeKinds": list(learned.complete_kinds),
            "missingKinds": [kind for kind in FACT_KINDS if kind not in learned.complete_kinds],
            "settled": self.settled,
            "updated": self.updated_at,
            "computed": learned.computed_at or None,
            "recomputes": self.recomputes,
            "updates": self.updates,
            "durationMs": learned.duration_ms,
        }
        if self.refusal is not None:
            detail["refused"] = self.refusal
        return detail


def _synced(fingerprint: Fingerprint | None) -> tuple[bool, ...] | None:
    return None if fingerprint is None else tuple(synced for _, _, synced in fingerprint)
