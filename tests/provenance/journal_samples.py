"""Admissions as the route journals them, for the journal's tests: frames of AdmissionReviews of
the sample Deployment, under the default policy."""

from __future__ import annotations

import json
import time
from typing import Any

from gpupolicy.policy.loading import Policy
from gpupolicy.provenance.journal.entries import encode_admission
from gpupolicy.provenance.record import finding_entry
from tests.provenance.samples import admission_request, deployment, report_for


def review_body(uid: str, **fields: Any) -> bytes:
    obj = deployment()
    request = admission_request(obj, uid=uid, **fields)
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(review).encode()


def admission_frame(uid: str, policy: Policy, *, time_ns: int | None = None, **fields: Any) -> bytes:
    """The frame the route appends for an admitted CREATE of the sample Deployment."""
    obj = deployment()
    report = report_for(obj, policy)
    return encode_admission(
        uid=uid,
        time_ns=time_ns if time_ns is not None else time.time_ns(),
        policy_digest=report.policy_digest or policy.digest,
        findings=[finding_entry(finding) for finding in report.findings],
        experiment_config=None,
        body=review_body(uid, **fields),
    )
