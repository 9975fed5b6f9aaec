"""An internal rule error in enforce mode is a decision the policy states (`webhook.onRuleError`),
never the accident of which rule crashed; and it is counted in /metrics."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

with warnings.catch_warnings():  # starlette's notice about httpx2; the client still works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from gpupolicy.core.findings import Severity
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Rule, Scope, Violation
from gpupolicy.kube.pod_spec import Workload
from gpupolicy.policy.loading import default_policy, policy_from_mapping
from gpupolicy.webhook.app import WebhookState, create_app
from gpupolicy.webhook.review import ReviewEngine, review, webhook_rules
from gpupolicy.webhook.settings import Mode
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.test_review import CLUSTER


def _crash(workload: Workload, ctx: Context) -> Iterator[Violation]:
    raise RuntimeError("a bug in a rule")
    yield  # pragma: no cover


CRASHING = Rule(
    id="GP998",
    name="crashing-rule",
    severity=Severity.ERROR,
    scope=Scope.WORKLOAD,
    summary="Raises.",
    rationale="A stand-in for a rule with a bug.",
    remediation="None.",
    check=_crash,
)


def engine(on_rule_error: str | None = None, *, mode: Mode | None = None, crash: bool = True) -> ReviewEngine:
    overrides: dict[str, Any] = {"webhook": {"onRuleError": on_rule_error}} if on_rule_error else {}
    policy = policy_from_mapping(overrides) if overrides else default_policy()
    rules = (*webhook_rules(), CRASHING) if crash else None
    return ReviewEngine.from_policy(policy, mode=mode, rules=rules)


def test_the_shipped_policy_denies_an_object_a_rule_failed_on() -> None:
    decision = review(admission_review(gpu_deployment()), engine(), CLUSTER)
    assert decision.allowed is False
    message = decision.response["response"]["status"]["message"]
    assert "GP998 failed with an internal error" in message and "onRuleError" in message
    assert not [finding for finding in decision.findings if finding.severity is Severity.ERROR]


def test_on_rule_error_allow_admits_it_with_a_warning() -> None:
    decision = review(admission_review(gpu_deployment()), engine("allow"), CLUSTER)
    assert decision.allowed is True
    assert any("GP998" in warning for warning in decision.response["response"]["warnings"])


def test_warn_and_audit_modes_allow_whatever_on_rule_error_says() -> None:
    for mode in (Mode.WARN, Mode.AUDIT):
        assert review(admission_review(gpu_deployment()), engine("deny", mode=mode), CLUSTER).allowed


def test_the_quantity_that_crashed_31_rules_no_longer_admits_a_privileged_pod() -> None:
    """nvidia.com/gpu: "1e1000000" made GP601 and 30 other rules raise: enforce mode allowed it."""
    obj = gpu_deployment()
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["privileged"] = True
    container["resources"]["requests"]["nvidia.com/gpu"] = "1e1000000"
    container["resources"]["limits"]["nvidia.com/gpu"] = "1e1000000"
    decision = review(admission_review(obj), engine(crash=False), CLUSTER)
    assert decision.allowed is False
    assert decision.report is not None and decision.report.errors == []
    denied_by = {finding.rule_id for finding in decision.findings if finding.severity is Severity.ERROR}
    assert {"GP103", "GP601"} <= denied_by


@pytest.mark.parametrize(("on_rule_error", "decision"), [("deny", "denied"), ("allow", "allowed")])
def test_rule_errors_are_counted_in_metrics(on_rule_error: str, decision: str) -> None:
    state = WebhookState(engine=engine(on_rule_error), inventory=CLUSTER)
    with TestClient(create_app(state)) as client:
        answer = client.post("/validate", json=admission_review(gpu_deployment())).json()["response"]
        assert answer["allowed"] is (decision == "allowed")
        metrics = client.get("/metrics").text
    assert f'gpupolicy_rule_errors_total{{decision="{decision}",rule="GP998"}} 1.0' in metrics
