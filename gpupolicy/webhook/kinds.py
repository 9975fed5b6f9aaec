"""Which admitted objects the webhook evaluates, and which cluster objects it caches."""

from __future__ import annotations

from typing import Any

from gpupolicy.documents import Resource
from gpupolicy.gpu import dra_gpu_claims
from gpupolicy.pod_spec import Workload, as_mapping
from gpupolicy.policy import Policy

EXPERIMENT_LABEL = "gpupolicy.io/experiment"

# Objects that cross-object rules read about GPU workloads: admitting a change to one of them
# can break a workload that was fine (a PDB that now blocks drains, a deleted tier...).
CROSS_OBJECT_KINDS = frozenset(
    {
        "ConfigMap",  # only experiment configs
        "PodDisruptionBudget",
        "PriorityClass",
        "Rollout",  # also a workload; a Rollout with workloadRef carries no template of its own
        "AnalysisTemplate",
        "ClusterAnalysisTemplate",
        "Canary",
    }
)


def is_experiment_config(obj: Any) -> bool:
    """DESIGN.md: a ConfigMap whose name ends in `-experiment`, that has the experiment label,
    or whose data has both `change` and `repeats`."""
    if not isinstance(obj, dict) or obj.get("kind") != "ConfigMap":
        return False
    metadata = as_mapping(obj.get("metadata"))
    name = metadata.get("name")
    if isinstance(name, str) and name.endswith("-experiment"):
        return True
    if EXPERIMENT_LABEL in as_mapping(metadata.get("labels")):
        return True
    data = as_mapping(obj.get("data"))
    return "change" in data and "repeats" in data


def names_gpus(workload: Workload, policy: Policy) -> bool:
    """Whether any pod template names a GPU resource (any amount, even a broken one such as `0.5`
    or `0`, so that the quantity rules still see it), claims a GPU through DRA, or asks a
    sharing scheduler for a fraction of one."""
    catalog = policy.gpu
    return any(
        catalog.template_demands(template) or dra_gpu_claims(template) or catalog.uses_gpu_fraction(template)
        for template in workload.templates
    )


def is_cross_object(resource: Resource) -> bool:
    kind = resource.kind
    if kind not in CROSS_OBJECT_KINDS:
        return False
    return kind != "ConfigMap" or is_experiment_config(resource.obj)
