"""What a rollout runs beside the current pods while it progresses (GP908): a Deployment's
maxSurge, an Argo Rollout's canary steps or blue-green preview, a Flagger canary's weights —
each pod of it needing GPUs the cluster must have spare.
https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#max-surge
https://argoproj.github.io/argo-rollouts/features/specification/
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.immutable import immutable
from gpupolicy.kube.pod_spec import as_list, as_mapping, int_or_default
from gpupolicy.kube.rollback import is_argo_rollout
from gpupolicy.loading.documents import Resource


@immutable
class Surge:
    """Extra pods a rollout runs beside the current ones, and the field that decides it."""

    pods: int
    path: JsonPath
    how: str


def _scaled(value: Any, replicas: int, *, round_up: bool) -> int | None:
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            percent = float(value.strip()[:-1])
        except ValueError:
            return None
        exact = replicas * percent / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int_or_default(value, None)


def rollout_surge(resource: Resource, canaries: Sequence[Resource] = ()) -> Surge | None:
    """How many extra pods an update of `resource` creates: a Deployment's maxSurge (default 25%,
    rounded up), an Argo canary's maxSurge (default 1) or its largest canary scale with traffic
    routing, a blue-green preview (previewReplicaCount, else a full copy), a Flagger canary
    (a full copy of the target)."""
    spec = as_mapping(resource.obj.get("spec"))
    replicas = int_or_default(spec.get("replicas"), 1) or 0
    if canaries:
        return Surge(replicas, ("spec", "replicas"), f"Flagger Canary {canaries[0].name} runs a full copy")
    strategy = as_mapping(spec.get("strategy"))
    if resource.kind == "Deployment":
        if strategy.get("type") == "Recreate":
            return None
        rolling = as_mapping(strategy.get("rollingUpdate"))
        surge = _scaled(rolling.get("maxSurge", "25%"), replicas, round_up=True)
        path: JsonPath = (
            ("spec", "strategy", "rollingUpdate", "maxSurge")
            if "maxSurge" in rolling
            else ("spec", "replicas")
        )
        return (
            Surge(surge, path, f"rolling update maxSurge {rolling.get('maxSurge', '25%')}") if surge else None
        )
    if not is_argo_rollout(resource):
        return None
    blue_green = as_mapping(strategy.get("blueGreen"))
    if blue_green:
        if "previewReplicaCount" in blue_green:
            count = int_or_default(blue_green["previewReplicaCount"], replicas) or 0
            return Surge(
                count, ("spec", "strategy", "blueGreen", "previewReplicaCount"), "blue-green preview"
            )
        return Surge(replicas, ("spec", "strategy", "blueGreen"), "blue-green preview (a full copy)")
    canary = as_mapping(strategy.get("canary"))
    if not canary:
        return None
    if canary.get("trafficRouting"):
        return _routed_canary_surge(canary, replicas)
    surge = _scaled(canary.get("maxSurge", 1), replicas, round_up=True)
    path = (
        ("spec", "strategy", "canary", "maxSurge") if "maxSurge" in canary else ("spec", "strategy", "canary")
    )
    return Surge(surge, path, f"canary maxSurge {canary.get('maxSurge', 1)}") if surge else None


def _routed_canary_surge(canary: dict[str, Any], replicas: int) -> Surge | None:
    """With traffic routing the stable set keeps every pod while the canary scales by weight."""
    best: Surge | None = None
    for index, step in enumerate(as_list(canary.get("steps"))):
        step = as_mapping(step)
        path: JsonPath = ("spec", "strategy", "canary", "steps", index)
        count: int | None = None
        scale = as_mapping(step.get("setCanaryScale"))
        if "replicas" in scale:
            count = int_or_default(scale["replicas"], None)
        elif "weight" in scale:
            count = math.ceil(replicas * (int_or_default(scale["weight"], 0) or 0) / 100)
        elif "setWeight" in step:
            count = math.ceil(replicas * (int_or_default(step["setWeight"], 0) or 0) / 100)
        if count is not None and (best is None or count > best.pods):
            best = Surge(count, path, f"canary step {index}")
    return best
