"""Percentiles, bootstrap intervals, SLO parsing and one run's metrics, checked by hand."""

from __future__ import annotations

import pytest

from gpupolicy.results.metrics import accepted, run_metrics
from gpupolicy.results.readers import RequestSample
from gpupolicy.results.slo import SloError, parse_slo, slo_from
from gpupolicy.results.stats import bootstrap_mean_interval, mean, percentile


def test_percentile_is_linear_interpolation_between_closest_ranks() -> None:
    values = [15.0, 20.0, 35.0, 40.0, 50.0]
    # numpy.percentile(values, p) with its default method="linear"
    assert percentile(values, 0) == 15
    assert percentile(values, 50) == 35
    assert percentile(values, 40) == pytest.approx(29.0)
    assert percentile(values, 95) == pytest.approx(48.0)
    assert percentile(values, 100) == 50
    assert percentile([7.0], 99) == 7
    assert percentile([], 50) is None
    with pytest.raises(ValueError, match="not between 0 and 100"):
        percentile(values, 101)


def test_bootstrap_interval_is_reproducible_with_its_seed() -> None:
    values = [2.31, 2.44, 2.40, 2.52, 2.29, 2.47, 2.35, 2.41]
    first = bootstrap_mean_interval(values, seed=7)
    assert first == bootstrap_mean_interval(values, seed=7)
    assert first != bootstrap_mean_interval(values, seed=8)
    assert first is not None and min(values) < first.low < mean(values) < first.high < max(values)
    assert bootstrap_mean_interval([3.0]) is not None and bootstrap_mean_interval([]) is None


def test_with_three_repeats_the_interval_is_the_range() -> None:
    # Each of the 27 resamples has probability 1/27 > 2.5 %: the all-lowest and all-highest
    # resamples are the interval's ends. Three repeats cannot say more than their range.
    interval = bootstrap_mean_interval([2.31, 2.44, 2.40])
    assert interval is not None and (interval.low, interval.high) == (2.31, 2.44)


def test_slo_objectives_per_request_and_per_run() -> None:
    slo = parse_slo(
        "ttft_ms<=500, tpot_ms=50, e2e_ms<8000, p95_latency_ms<=6000, p99_ttft_ms<=900, error_rate<=0.01",
        source="config",
    )
    assert [(o.metric, o.op, o.threshold) for o in slo.per_request] == [
        ("ttft", "<=", 500),
        ("tpot", "<=", 50),
        ("e2e", "<", 8000),
    ]
    assert [(o.metric, o.threshold) for o in slo.per_run] == [
        ("latency_p95_ms", 6000),
        ("ttft_p99_ms", 900),
        ("error_rate", 0.01),
    ]
    assert slo.latency_line() == 6000
    assert slo_from(["p95_latency_ms<=800"], "ttft_ms=300").source == "--slo"
    assert slo_from([], None).objectives == ()
    for bad, message in (
        ("ttft_ms>=5", "upper bound"),
        ("gpu_util>=0.9", "unknown objective"),
        ("p95 under 800", "is not an objective"),
    ):
        with pytest.raises(SloError, match=message):
            parse_slo(bad, source="--slo")


def sample(e2e: float, ttft: float, tpot: float | None, tokens: int = 10, ok: bool = True) -> RequestSample:
    return RequestSample(
        ok, e2e_ms=e2e, ttft_ms=ttft, tpot_ms=tpot, input_tokens=100, output_tokens=tokens, start=0.0
    )


def test_accepted_requests_meet_every_objective() -> None:
    slo = parse_slo("ttft_ms<=500, tpot_ms<=50, e2e_ms<=2000", source="--slo")
    assert accepted(sample(1000, 400, 40), slo)
    assert not accepted(sample(1000, 600, 40), slo)  # TTFT
    assert not accepted(sample(2500, 400, 40), slo)  # end-to-end
    assert accepted(sample(400, 400, None, tokens=1), slo)  # one token: no TPOT to judge
    assert not accepted(RequestSample(False), slo)


def test_run_metrics_goodput_per_gpu_hour_and_cost() -> None:
    samples = (
        [sample(1000, 100, 20, tokens=100)] * 6
        + [sample(3000, 900, 20, tokens=100)] * 3
        + [RequestSample(False)]
    )
    slo = parse_slo("ttft_ms<=500, p95_latency_ms<=2000, error_rate<=0.2", source="--slo")
    figures = run_metrics(samples, duration_s=360, gpus=2, price_per_gpu_hour=2.5, slo=slo)
    assert figures["requests"] == 10 and figures["accepted"] == 6
    assert figures["error_rate"] == pytest.approx(0.1)
    assert figures["throughput_rps"] == pytest.approx(9 / 360)
    assert figures["accepted_rps"] == pytest.approx(6 / 360)
    assert figures["gpu_hours"] == pytest.approx(0.2)  # 2 GPUs x 0.1 h
    assert figures["goodput_per_gpu_hour"] == pytest.approx(30)  # 6 accepted / 0.2 GPU-h
    assert figures["cost_per_1k_accepted"] == pytest.approx(0.5 / 6 * 1000)  # 0.2 GPU-h x 2.5
    assert figures["cost_per_1m_accepted_output_tokens"] == pytest.approx(0.5 / 600 * 1e6)
    assert figures["latency_p50_ms"] == 1000 and figures["latency_p95_ms"] == 3000
    assert figures["slo_met"] is False and figures["slo_violations"] == ["p95_latency_ms<=2000 (3000)"]
    unpriced = run_metrics(samples, duration_s=360, gpus=2, price_per_gpu_hour=None, slo=slo)
    assert unpriced["cost_per_1k_accepted"] is None and unpriced["goodput_per_gpu_hour"] == pytest.approx(30)
