"""What the webhook records of an admission, decided beside `review()`, not in the HTTP route:
whether a decision is recorded, and what its provenance record is built from (the request, the
admitted object, the report, the policy it was decided under, the experiment ConfigMap the object
names, and the workload view the rules read). How the record is built and stored is
gpupolicy.provenance's (or a test's fake): the route only hands the inputs over and awaits the
write.

With the admission journal (the default), the route keeps less: `journal_frame` holds the body
as received, the findings, the policy's digest, the experiment ConfigMap and the time, and
`record_of_admission` — run by the replayer, in a process of its own — makes the record of it,
reading the body as `review()` read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from gpupolicy.core.vocabulary import EXPERIMENT_LABEL
from gpupolicy.kube.inventory import Inventory
from gpupolicy.kube.pod_spec import as_mapping, release_views, workload_of
from gpupolicy.policy.loading import Policy
from gpupolicy.provenance.journal.entries import Admission as JournalAdmission
from gpupolicy.provenance.journal.entries import encode_admission
from gpupolicy.provenance.record import (
    RECORDED_OPERATIONS,
    NotRecordable,
    ProvenanceRecord,
    assemble_record,
    finding_entry,
)
from gpupolicy.webhook.review import Admission, Decision, read_admission

try:  # what the route parsed the body with
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - depends on the install
    import json

    _loads = json.loads

# gpupolicy.provenance.build_record (or a test's fake): (request, obj, report, policy, *,
# experiment_config, workload) -> record; raises its store's `not_recordable` for a request that
# must not be recorded.
RecordBuilder = Callable[..., Any]
# journal_frame (or a test's fake): (decision, policy, inventory, body, *, now_ns) -> bytes
JournalRecordBuilder = Callable[..., bytes]


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


def journal_frame(
    decision: Decision, policy: Policy, inventory: Inventory | None, body: bytes, *, now_ns: int
) -> bytes:
    """The journal's frame of a decision `should_record` keeps: `body` is the AdmissionReview as
    received (the replayer reads it again). Raises `NotRecordable` for what no record is made
    of, as `build_record` would."""
    admission = decision.admission
    if decision.report is None or admission.object is None:
        raise ValueError(f"admission {admission.uid} was not evaluated: there is nothing to record")
    if admission.operation.upper() not in RECORDED_OPERATIONS or not admission.uid:
        raise NotRecordable(f"operation {admission.operation!r} of {admission.uid!r} is not recorded")
    return encode_admission(
        uid=admission.uid,
        time_ns=now_ns,
        policy_digest=decision.report.policy_digest or policy.digest,
        findings=[finding_entry(finding) for finding in decision.report.findings],
        experiment_config=_config_snapshot(experiment_config(admission, inventory)),
        body=body,
    )


def _config_snapshot(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a record keeps of the experiment ConfigMap (record.py reads no more of it)."""
    if config is None:
        return None
    metadata = as_mapping(config.get("metadata"))
    return {
        "metadata": {"name": metadata.get("name"), "namespace": metadata.get("namespace")},
        "data": dict(as_mapping(config.get("data"))),
    }


def record_of_admission(entry: JournalAdmission, policy: Policy) -> ProvenanceRecord:
    """The record of a journal entry, as `provenance_record` would have built it at the answer."""
    admission = read_admission(_loads(entry.body))
    if admission.object is None or admission.resource is None:
        raise NotRecordable(f"admission {entry.uid} carries no object")
    # The workload view's memos are cycles (a container's GPU demands name the container): released
    # here, the body parsed for this record is freed by reference counting once it is built,
    # instead of being left for the cyclic collector (about 20 objects per record).
    try:
        return assemble_record(
            admission.request,
            admission.object,
            policy,
            findings=entry.findings,
            policy_digest=entry.policy_digest,
            experiment_config=entry.experiment_config,
            now=datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=entry.time_ns // 1000),
            workload=workload_of(admission.resource),
        )
    finally:
        release_views(admission.resource)
