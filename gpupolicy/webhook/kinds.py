"""Which admitted objects the webhook evaluates, and which cluster objects it caches."""

from __future__ import annotations

from gpupolicy.core.vocabulary import CROSS_OBJECT_KINDS
from gpupolicy.kube.experiments import is_experiment_config
from gpupolicy.kube.gpu import dra_gpu_claims
from gpupolicy.kube.pod_spec import Workload
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy


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
    # ConfigMaps: only experiment configs (the vocabulary's CROSS_OBJECT_KINDS: what rules read).
    return kind != "ConfigMap" or is_experiment_config(resource.obj)
