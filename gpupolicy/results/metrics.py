"""One run's figures: latency percentiles, errors, throughput, accepted throughput, GPU-hours,
goodput per GPU-hour and cost — the denominator is the work that met its SLO (the field notes,
day 29: 成本指標以符合 SLO 的工作量為分母), never GPU utilisation.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.results.readers import RequestSample
from gpupolicy.results.slo import Slo
from gpupolicy.results.stats import percentile


class Kind(enum.Enum):
    GOODPUT = "goodput"  # work that met the SLO
    QUALITY = "quality"  # what the users feel: tail latency, errors
    COST = "cost"  # money per accepted work
    RAW = "raw"  # raw throughput: never a win on its own
    INFO = "info"  # shown, not compared (counts, the run's GPU-hours)


@immutable
class Metric:
    name: str
    label: str
    unit: str
    higher_is_better: bool
    kind: Kind


METRICS: tuple[Metric, ...] = (
    Metric("accepted_rps", "accepted throughput", "req/s", True, Kind.GOODPUT),
    Metric("goodput_per_gpu_hour", "goodput per GPU-hour", "accepted req/GPU-h", True, Kind.GOODPUT),
    Metric("slo_attainment", "SLO attainment", "fraction", True, Kind.GOODPUT),
    Metric("throughput_rps", "throughput", "req/s", True, Kind.RAW),
    Metric("output_tokens_per_s", "output token throughput", "tok/s", True, Kind.RAW),
    Metric("error_rate", "error rate", "fraction", False, Kind.QUALITY),
    Metric("latency_p50_ms", "P50 latency", "ms", False, Kind.QUALITY),
    Metric("latency_p95_ms", "P95 latency", "ms", False, Kind.QUALITY),
    Metric("latency_p99_ms", "P99 latency", "ms", False, Kind.QUALITY),
    Metric("ttft_p50_ms", "P50 TTFT", "ms", False, Kind.QUALITY),
    Metric("ttft_p95_ms", "P95 TTFT", "ms", False, Kind.QUALITY),
    Metric("ttft_p99_ms", "P99 TTFT", "ms", False, Kind.QUALITY),
    Metric("tpot_p50_ms", "P50 TPOT", "ms", False, Kind.QUALITY),
    Metric("tpot_p95_ms", "P95 TPOT", "ms", False, Kind.QUALITY),
    Metric("tpot_p99_ms", "P99 TPOT", "ms", False, Kind.QUALITY),
    Metric("cost_per_1k_accepted", "cost per 1,000 accepted requests", "price unit", False, Kind.COST),
    Metric(
        "cost_per_1m_accepted_output_tokens",
        "cost per million accepted output tokens",
        "price unit",
        False,
        Kind.COST,
    ),
    Metric("requests", "requests", "count", True, Kind.INFO),
    Metric("accepted", "accepted requests", "count", True, Kind.INFO),
    Metric("duration_s", "duration", "s", False, Kind.INFO),
    Metric("gpus", "GPUs", "count", False, Kind.INFO),
    Metric("gpu_hours", "GPU-hours", "GPU-h", False, Kind.INFO),
)
METRIC_BY_NAME = {metric.name: metric for metric in METRICS}
# Tail latencies: a worse one makes any gain a trade-off (P50 is not a tail).
TAILS = frozenset(name for name in METRIC_BY_NAME if name.endswith(("_p95_ms", "_p99_ms")))

_FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "e2e": "e2e_ms"}


def accepted(sample: RequestSample, slo: Slo) -> bool:
    """Succeeded and met every per-request objective. A TPOT objective does not apply to a
    one-token answer (no TPOT), as in vLLM's goodput."""
    if not sample.ok:
        return False
    for objective in slo.per_request:
        value = getattr(sample, _FIELDS[objective.metric])
        if value is None:
            if objective.metric == "tpot":
                continue
            return False
        if not objective.holds(value):
            return False
    return True


def _percentiles(values: Sequence[float], prefix: str) -> dict[str, float | None]:
    return {f"{prefix}_p{p}_ms": percentile(values, p) for p in (50, 95, 99)}


def _per(numerator: float, denominator: float | None) -> float | None:
    return numerator / denominator if denominator else None


def run_metrics(
    samples: Sequence[RequestSample],
    *,
    duration_s: float,
    gpus: float,
    price_per_gpu_hour: float | None,
    slo: Slo,
) -> dict[str, Any]:
    """Every metric of METRICS for one run (None where the data cannot say: no TTFT in a k6 run,
    no price), plus `slo_met` and `slo_violations` for the per-run objectives."""
    good = [sample for sample in samples if sample.ok]
    kept = [sample for sample in good if accepted(sample, slo)]
    gpu_hours = gpus * duration_s / 3600
    cost = gpu_hours * price_per_gpu_hour if price_per_gpu_hour is not None else None
    accepted_tokens = sum(sample.output_tokens or 0 for sample in kept)
    has_tokens = any(sample.output_tokens is not None for sample in good)
    figures: dict[str, Any] = {
        "requests": len(samples),
        "accepted": len(kept),
        "duration_s": duration_s,
        "gpus": gpus,
        "gpu_hours": gpu_hours,
        "error_rate": _per(len(samples) - len(good), len(samples)),
        "throughput_rps": len(good) / duration_s,
        "accepted_rps": len(kept) / duration_s,
        "slo_attainment": _per(len(kept), len(samples)),
        "output_tokens_per_s": sum(s.output_tokens or 0 for s in good) / duration_s if has_tokens else None,
        "goodput_per_gpu_hour": _per(len(kept), gpu_hours),
        "cost_per_1k_accepted": _per(cost * 1000, len(kept)) if cost is not None else None,
        "cost_per_1m_accepted_output_tokens": (
            _per(cost * 1_000_000, accepted_tokens) if cost is not None and has_tokens else None
        ),
        **_percentiles([s.e2e_ms for s in good if s.e2e_ms is not None], "latency"),
        **_percentiles([s.ttft_ms for s in good if s.ttft_ms is not None], "ttft"),
        **_percentiles([s.tpot_ms for s in good if s.tpot_ms is not None], "tpot"),
    }
    violations = []
    for objective in slo.per_run:
        value = figures.get(objective.metric)
        if value is None or not objective.holds(value):
            shown = "no data" if value is None else f"{value:.4g}"
            violations.append(f"{objective.text()} ({shown})")
    figures["slo_met"] = not violations if slo.per_run else None
    figures["slo_violations"] = violations
    return figures
