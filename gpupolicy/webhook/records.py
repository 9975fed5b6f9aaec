"""What the webhook records of an admission, decided beside `review()`, not in the HTTP route:
whether a decision is recorded, and what its provenance record is built from (the request, the
admitted object, the report, the policy it was decided under, the experiment ConfigMap the object
names, and the workload view the rules read). How the record is built and stored is
gpupolicy.provenance's (or a test's fake): the route only hands the inputs over and awaits the
write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpupolicy.core.vocabulary import EXPERIMENT_LABEL
from gpupolicy.kube.inventory import Inventory
from gpupolicy.kube.pod_spec import workload_of
from gpupolicy.policy.loading import Policy
from gpupolicy.webhook.review import Admission, Decision

# gpupolicy.provenance.build_record (or a test's fake): (request, obj, report, policy, *,
# experiment_config, workload) -> record; raises its store's `not_recordable` for a request that
# must not be recorded.
RecordBuilder = Callable[..., Any]


def should_record(decision: Decision) -> bool:
    """An admitted GPU workload, not a dry run (docs/provenance.md): what was denied, or only
    tried, never ran."""
    return decision.allowed and decision.gpu_workload and not decision.dry_run


def experiment_config(admission: Admission, inventory: Inventory | None) -> Mapping[str, Any] | None:
    """The experiment ConfigMap the admitted object's experiment label names, as the cluster
    inventory holds it now (the record keeps the config the arm ran under)."""
    resource = admission.resource
    if resource is None or inventory is None:
        return None
    experiment = resource.labels.get(EXPERIMENT_LABEL)
    if not isinstance(experiment, str):
        return None
    found = inventory.get("ConfigMap", experiment, admission.namespace)
    return found.obj if found is not None and isinstance(found.obj, dict) else None


def provenance_record(
    decision: Decision, policy: Policy, inventory: Inventory | None, build: RecordBuilder
) -> Any:
    """The provenance record of a decision `should_record` keeps, built by `build` under the
    policy the decision was made with."""
    admission = decision.admission
    resource = admission.resource
    if decision.report is None or resource is None or admission.object is None:
        raise ValueError(f"admission {admission.uid} was not evaluated: there is nothing to record")
    return build(
        admission.request,
        admission.object,
        decision.report,
        policy,
        experiment_config=experiment_config(admission, inventory),
        workload=workload_of(resource),
    )
