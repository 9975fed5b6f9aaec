"""Saying "unknown" once: when neither the policy nor the inventory holds a fact of the cluster
(its GPU taints, its node pools, its PriorityClasses, its NetworkPolicies), a rule that needs it
reports that as one info finding per missing fact and evaluation (a lint run whose files fall
under several policies shares one), naming how to supply the fact,
never as an error and never silently. Given the fact, the rule works at full strength."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from gpupolicy.core.findings import JsonPath
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Violation

SNAPSHOT = (
    "`gpupolicy cluster snapshot` writes it from a live cluster; the webhook reads it from its live inventory"
)


class ClusterFact(NamedTuple):
    what: str  # the fact, as a noun phrase
    supply: str  # how to supply it


GPU_TAINTS = ClusterFact(
    "the taints of the cluster's GPU nodes",
    f"declare placement.gpuTaints in the policy ([] when GPU nodes are untainted); {SNAPSHOT}",
)
NODE_POOLS = ClusterFact(
    "the cluster's GPU node pools (products and GPUs per node)",
    f"declare nodePools in the policy; {SNAPSHOT}",
)
PRIORITY_CLASSES = ClusterFact(
    "whether the cluster schedules GPU pods by PriorityClass",
    f"list the cluster's classes in priority.clusterClasses (or add PriorityClass to inventory.completeKinds "
    f"when the repository holds them all); {SNAPSHOT}",
)
NETWORK_POLICIES = ClusterFact(
    "the cluster's NetworkPolicies",
    "keep them in the repository and add NetworkPolicy to inventory.completeKinds; the webhook reads them "
    "from its live inventory",
)


def _once(fact: ClusterFact) -> tuple[str, str]:
    return ("cluster-fact", fact.what)


def said_unknown(ctx: Context, fact: ClusterFact) -> bool:
    """Whether this run has said that `fact` is unknown. A rule whose one possible finding, under
    a policy and inventory without the fact, is that unknown then has nothing left to report for
    any object (the engine would drop it): it returns before reading the object."""
    return _once(fact) in ctx.said


def unknown_fact(ctx: Context, fact: ClusterFact, path: JsonPath, consequence: str) -> Iterator[Violation]:
    """One info finding per run for a missing cluster fact (the engine drops it once it has been said)."""
    once = _once(fact)
    if once in ctx.said:
        # Said already: the engine would drop it (Evaluation.add). Five rules ask of every GPU
        # workload under a policy without these facts (the default one), so it is not made.
        return
    yield Violation(
        path,
        f"unknown: {fact.what}, so {consequence} was not checked; {fact.supply}",
        unknown=True,
        cluster_fact=fact.what,
        once=once,
    )
