"""Custom rules in the webhook, through the real server over TLS: they run on admitted objects,
/metrics counts their evaluations and failures per rule, and a rule that raises or runs past its
time budget is reported without holding the admission longer than the budget or stopping the
server."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import ServerProcess, start_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
REQUEST_EQUALS_LIMIT = REPO / "examples" / "policies" / "native-rego" / "gpu_request_equals_limit.rego"
RAISES = """\
package acme.raises

import rego.v1

metadata := {"id": "ACME901", "name": "name-is-a-number", "severity": "error",
  "summary": "Fails on every object.", "remediation": "Fix the rule."}

violation contains x if { x := to_number(input.metadata.name) }
"""
SLOW = """\
package acme.slow

import rego.v1

metadata := {"id": "ACME900", "name": "slow-rule", "severity": "error",
  "summary": "Counts for seconds.", "remediation": "Do not."}

violation contains "never" if {
  count([1 | some i in numbers.range(1, 3000); some j in numbers.range(1, 3000); i == j + 5000000]) > 0
}
"""
BUDGET_MS = 300


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("custom")
    rules = folder / "rules"
    write(rules / "gpu.rego", REQUEST_EQUALS_LIMIT.read_text(encoding="utf-8"))
    write(rules / "raises.rego", RAISES)
    write(rules / "slow.rego", SLOW)
    policy = write(
        folder / "policy.yaml",
        f"webhook: {{mode: warn}}\ncustomRules: {{paths: [{rules}], timeBudgetMs: {BUDGET_MS}}}\n",
    )
    process = start_server(folder, "--no-cluster", "--no-provenance", "--policy", str(policy))
    try:
        yield process
    finally:
        process.stop()


def mismatched() -> dict[str, Any]:
    obj = gpu_deployment()
    container = copy.deepcopy(obj["spec"]["template"]["spec"]["containers"][0])
    container["resources"]["requests"]["nvidia.com/gpu"] = "1"
    obj["spec"]["template"]["spec"]["containers"][0] = container
    return obj


def metric(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        series, _, rest = head.partition("{")
        found = dict(pair.split("=", 1) for pair in rest.rstrip("}").split(",") if "=" in pair)
        if series == name and found == {key: f'"{value}"' for key, value in labels.items()}:
            return float(value)
    return 0.0


def test_custom_rules_run_on_admissions_and_are_counted_per_rule(server: ServerProcess) -> None:
    with server.client() as client:
        before = client.get("/metrics").text
        started = time.monotonic()
        response = client.post("/validate", json=admission_review(mismatched()))
        elapsed = time.monotonic() - started
        assert response.status_code == 200
        answer = response.json()["response"]
        assert answer["allowed"] is True  # warn mode
        warnings = " ".join(answer.get("warnings", []))
        assert "ACME001" in warnings  # the Rego rule's finding
        assert "ACME901" in warnings and "ACME900" in warnings, warnings  # rules that could not say
        # The slow rule counts for seconds; the admission waited at most its budget for it.
        assert elapsed < 3 * BUDGET_MS / 1000 + 2, warnings
        after = client.get("/metrics").text
        assert client.get("/healthz").status_code == 200
    for rule in ("ACME001", "ACME900", "ACME901"):
        assert metric(after, "gpupolicy_custom_rule_evaluations_total", rule=rule) > metric(
            before, "gpupolicy_custom_rule_evaluations_total", rule=rule
        )
    assert metric(after, "gpupolicy_custom_rule_errors_total", rule="ACME900", reason="timeout") >= 1
    assert metric(after, "gpupolicy_custom_rule_errors_total", rule="ACME001", reason="raised") == 0


def test_a_rule_that_raises_is_counted_as_raised(server: ServerProcess) -> None:
    """A worker stopped for an overrun is replaced in about a second: meanwhile a rule may find no
    worker within its budget (a timeout); once one is free, the failing rule is counted as raised."""
    with server.client() as client:
        before = metric(
            client.get("/metrics").text, "gpupolicy_custom_rule_errors_total", rule="ACME901", reason="raised"
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert client.post("/validate", json=admission_review(gpu_deployment())).status_code == 200
            text = client.get("/metrics").text
            if metric(text, "gpupolicy_custom_rule_errors_total", rule="ACME901", reason="raised") > before:
                return
            time.sleep(0.5)
    pytest.fail("ACME901 was never counted as raised")


def test_the_server_keeps_answering_while_a_rule_overruns(server: ServerProcess) -> None:
    with server.client() as client:
        for _ in range(3):
            response = client.post("/validate", json=admission_review(gpu_deployment()))
            assert response.status_code == 200
        assert client.get("/healthz").status_code == 200


def test_a_policy_whose_custom_rule_does_not_compile_stops_the_server_at_start(tmp_path: Path) -> None:
    write(
        tmp_path / "rules" / "bad.rego",
        RAISES.replace("violation contains x if {", "violation contains x if {("),
    )
    policy = write(tmp_path / "policy.yaml", f"customRules: {{paths: [{tmp_path / 'rules'}]}}\n")
    with pytest.raises(RuntimeError, match=r"bad.rego:\d+"):
        start_server(tmp_path, "--no-cluster", "--no-provenance", "--policy", str(policy), wait_seconds=20)
