"""Verdicts per treatment, from runs built in memory: each verdict, the rule that raw throughput
never wins over a worse tail, too few repeats, and the run that broke the comparison."""

from __future__ import annotations

from typing import Any

import pytest

from gpupolicy.kube.experiments import parse_experiment
from gpupolicy.loading.documents import Resource
from gpupolicy.results.readers import RequestSample
from gpupolicy.results.report import Report, build_report
from gpupolicy.results.slo import Slo, parse_slo
from gpupolicy.results.store import StoredRun

SLO = parse_slo("ttft_ms<=500, e2e_ms<=2000", source="--slo")


def config(repeats: str = "3", fixed: str = "image, model, input") -> Any:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "exp-experiment", "namespace": "ai-lab"},
        "data": {
            "change": "batching",
            "fixed": fixed,
            "metrics": "accepted throughput, P95",
            "repeats": repeats,
        },
    }
    return parse_experiment(Resource(obj, file="exp.yaml", doc_index=0))


def run(
    arm: str,
    repeat: int,
    *,
    requests: int = 100,
    duration: float = 50.0,
    latency: float = 1000.0,
    slow: int = 0,
    errors: int = 0,
    template: str | None = None,
    image: str = "vllm/vllm-openai:v0.6.3",
) -> StoredRun:
    """`requests` requests over `duration` s (± a little per repeat), `slow` of them missing the
    end-to-end SLO and `errors` failed."""
    jitter = 1 + (repeat - 2) * 0.01
    samples = [RequestSample(False) for _ in range(errors)]
    samples += [
        RequestSample(True, e2e_ms=3000 * jitter, ttft_ms=100, output_tokens=50, start=0) for _ in range(slow)
    ]
    samples += [
        RequestSample(
            True, e2e_ms=latency * jitter * (1 + i / requests), ttft_ms=100, output_tokens=50, start=0
        )
        for i in range(requests - slow - errors)
    ]
    provenance = None if template is None else {"images": [["vllm", image, None]], "model": "m", "input": "i"}
    return StoredRun(
        experiment="exp-experiment",
        arm=arm,
        repeat=repeat,
        format="jsonl",
        files=[f"{arm}-{repeat}.jsonl"],
        duration_s=duration * jitter,
        gpus=1,
        gpu_source="--gpus",
        samples=samples,
        price_per_gpu_hour=2.0,
        template_hash=template,
        provenance=provenance,
    )


def report(runs: list[StoredRun], slo: Slo = SLO, repeats: str = "3") -> Report:
    return build_report("exp-experiment", config(repeats), "exp.yaml", slo, runs, seed=1)


def arms(control: dict[str, Any], treatment: dict[str, Any], count: int = 3) -> list[StoredRun]:
    return [run("control", k, **control) for k in range(1, count + 1)] + [
        run("treatment", k, **treatment) for k in range(1, count + 1)
    ]


def test_improved_when_goodput_is_better_and_nothing_worse() -> None:
    result = report(arms({}, {"duration": 40.0})).treatments[0]
    assert result.verdict == "improved"
    assert {"accepted_rps", "goodput_per_gpu_hour", "cost_per_1k_accepted"} <= set(result.improved)
    assert result.worsened == []


def test_regressed_when_only_worse() -> None:
    result = report(arms({}, {"latency": 1500.0, "errors": 5})).treatments[0]
    assert result.verdict == "regressed"
    assert {"latency_p95_ms", "error_rate"} <= set(result.worsened) and result.improved == []


def test_trade_off_names_what_improved_and_what_got_worse() -> None:
    result = report(arms({}, {"duration": 35.0, "latency": 1100.0})).treatments[0]
    assert result.verdict == "trade-off"
    assert "accepted_rps" in result.improved and "latency_p95_ms" in result.worsened


def test_raw_throughput_never_makes_improved_when_accepted_throughput_and_tail_got_worse() -> None:
    # more requests served, but a third of them miss the SLO: throughput up, goodput and P95 down
    result = report(arms({"requests": 100}, {"requests": 150, "slow": 60})).treatments[0]
    assert "throughput_rps" in result.improved
    assert {"accepted_rps", "latency_p95_ms"} <= set(result.worsened)
    assert result.verdict == "trade-off"


def test_no_change_when_intervals_overlap() -> None:
    result = report(arms({}, {})).treatments[0]
    assert result.verdict == "no-change" and result.improved == result.worsened == []


def test_inconclusive_with_fewer_runs_than_repeats() -> None:
    runs = arms({}, {"duration": 40.0})[:-1]
    result = report(runs).treatments[0]
    assert result.verdict == "inconclusive"
    assert result.reasons == ["arm treatment has 2 run(s), the experiment asks for 3 (repeats)"]


def test_inconclusive_names_the_run_on_another_pod_template() -> None:
    runs = arms({"template": "sha256:aaa"}, {"template": "sha256:bbb", "duration": 40.0})
    runs[4] = run("treatment", 2, template="sha256:ccc", duration=40.0)
    result = report(runs).treatments[0]
    assert result.verdict == "inconclusive"
    assert result.reasons == [
        "run treatment#2 (treatment-2.jsonl) used pod template sha256:ccc, not the arm's sha256:bbb of run treatment#1"
    ]


def test_inconclusive_names_the_run_whose_fixed_factor_differs() -> None:
    runs = arms({"template": "sha256:aaa"}, {"template": "sha256:bbb", "duration": 40.0})
    runs[5] = run("treatment", 3, template="sha256:bbb", duration=40.0, image="vllm/vllm-openai:v0.7.0")
    built = report(runs)
    (reason,) = built.treatments[0].reasons
    assert reason.startswith(
        "run treatment#3 (treatment-3.jsonl) differs from control#1 in the fixed factor image"
    )
    assert built.comparability.unchecked == []
    # a factor the experiment does not fix may differ
    assert (
        build_report("e", config(fixed="model"), "f", SLO, runs, seed=1).treatments[0].verdict == "improved"
    )


def test_runs_without_provenance_are_reported_unchecked() -> None:
    built = report(arms({}, {"duration": 40.0}))
    assert len(built.comparability.unchecked) == 6
    assert built.treatments[0].verdict == "improved"


@pytest.mark.parametrize("missing", ["control", "treatment"])
def test_one_arm_missing(missing: str) -> None:
    runs = [item for item in arms({}, {}) if item.arm != missing]
    treatments = report(runs).treatments
    if missing == "control":
        assert [(t.arm, t.verdict, t.reasons) for t in treatments] == [
            ("treatment", "inconclusive", ["no control arm has runs"])
        ]
    else:
        assert treatments == []
