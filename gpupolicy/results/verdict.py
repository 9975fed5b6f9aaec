"""Arms across repeats, the comparability checks, and a verdict per treatment against control.

Verdicts, in the field notes' terms (day 29: 如果核心指標改善，但錯誤率、尾端延遲、資源成本或恢復能力變差，
這代表取捨，而不是無條件進步):

- `improved`: at least one metric is better beyond its confidence interval, none worse;
- `regressed`: something got worse, nothing better;
- `trade-off`: something better and something worse — both named;
- `no-change`: every interval overlaps the control's;
- `inconclusive`: fewer runs than the experiment's `repeats`, or a broken comparison (a run on
  another pod template, a fixed factor that differs between arms).

A metric is better or worse only when the bootstrap intervals of the two arms' means do not
overlap. Raw throughput can never make a verdict `improved` on its own when accepted throughput,
a tail latency or the error rate got worse: any worse metric makes it a trade-off at best.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpupolicy.core.immutable import immutable
from gpupolicy.kube.experiments import CONTROL_ARM
from gpupolicy.results.metrics import METRICS, Kind, Metric
from gpupolicy.results.stats import Interval, bootstrap_mean_interval, mean

if TYPE_CHECKING:  # the store needs SQLAlchemy (the [webhook] extra), which the linter must not import
    from gpupolicy.results.store import StoredRun

IMPROVED, REGRESSED, TRADE_OFF, NO_CHANGE, INCONCLUSIVE = (
    "improved",
    "regressed",
    "trade-off",
    "no-change",
    "inconclusive",
)
VERDICTS = (IMPROVED, NO_CHANGE, TRADE_OFF, INCONCLUSIVE, REGRESSED)
COMPARED_KINDS = (Kind.GOODPUT, Kind.QUALITY, Kind.COST, Kind.RAW)
# Provenance fields a fixed dimension is checked on (docs/experiments.md, Dimensions).
FIXED_FIELDS = {
    "image": "images",
    "model": "model",
    "input": "input",
    "placement": "placement",
    "priority": "priority",
    "sharing": "gpu",
}


@immutable
class MetricSummary:
    values: list[float]
    mean: float | None
    low: float | None
    high: float | None
    interval: Interval | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": len(self.values),
            "values": self.values,
            "mean": self.mean,
            "min": self.low,
            "max": self.high,
            "ci_low": self.interval.low if self.interval else None,
            "ci_high": self.interval.high if self.interval else None,
        }


def summarise(values: Sequence[float | None], *, seed: int) -> MetricSummary:
    known = [float(value) for value in values if value is not None]
    return MetricSummary(
        known,
        mean(known),
        min(known) if known else None,
        max(known) if known else None,
        bootstrap_mean_interval(known, seed=seed),
    )


@dataclass(slots=True)
class ArmSummary:
    arm: str
    runs: list[StoredRun]
    run_metrics: list[dict[str, Any]]
    metrics: dict[str, MetricSummary] = field(default_factory=dict)


def summarise_arm(
    arm: str, runs: list[StoredRun], run_metrics: list[dict[str, Any]], *, seed: int
) -> ArmSummary:
    summary = ArmSummary(arm, runs, run_metrics)
    for metric in METRICS:
        summary.metrics[metric.name] = summarise(
            [figures.get(metric.name) for figures in run_metrics], seed=seed
        )
    met = [figures["slo_met"] for figures in run_metrics if figures.get("slo_met") is not None]
    summary.metrics["run_slo_met"] = summarise([1.0 if value else 0.0 for value in met], seed=seed)
    return summary


RUN_SLO_METRIC = Metric("run_slo_met", "runs meeting the run SLO", "fraction", True, Kind.QUALITY)


@dataclass(slots=True)
class TreatmentVerdict:
    arm: str
    verdict: str
    improved: list[str] = field(default_factory=list)
    worsened: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    changes: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "arm": self.arm,
            "verdict": self.verdict,
            "improved": self.improved,
            "worsened": self.worsened,
            "reasons": self.reasons,
            "changes": self.changes,
        }


def _relative(control: float | None, treatment: float | None) -> float | None:
    if control is None or treatment is None or control == 0:
        return None
    return (treatment - control) / abs(control)


def compare_metrics(control: ArmSummary, treatment: ArmSummary) -> TreatmentVerdict:
    """Which metrics got better or worse (intervals apart), without the verdict yet."""
    result = TreatmentVerdict(treatment.arm, NO_CHANGE)
    for metric in (*METRICS, RUN_SLO_METRIC):
        if metric.kind not in COMPARED_KINDS:
            continue
        before, after = control.metrics[metric.name], treatment.metrics[metric.name]
        if before.interval is None or after.interval is None:
            continue
        result.changes[metric.name] = {
            "control": before.mean,
            "treatment": after.mean,
            "relative": _relative(before.mean, after.mean),
        }
        if before.interval.overlaps(after.interval):
            continue
        assert before.mean is not None and after.mean is not None
        better = after.mean > before.mean if metric.higher_is_better else after.mean < before.mean
        (result.improved if better else result.worsened).append(metric.name)
    return result


def decide(comparison: TreatmentVerdict, blockers: Sequence[str]) -> TreatmentVerdict:
    """The verdict from the compared metrics, or `inconclusive` with the blockers as reasons."""
    if blockers:
        comparison.verdict = INCONCLUSIVE
        comparison.reasons = list(blockers)
    elif comparison.improved and comparison.worsened:
        comparison.verdict = TRADE_OFF
    elif comparison.worsened:
        comparison.verdict = REGRESSED
    elif comparison.improved:
        comparison.verdict = IMPROVED
    else:
        comparison.verdict = NO_CHANGE
        comparison.reasons = ["every metric's confidence interval overlaps the control's"]
    return comparison


def too_few_runs(arm: ArmSummary, repeats: int | None) -> str | None:
    if repeats is not None and len(arm.runs) < repeats:
        return f"arm {arm.arm} has {len(arm.runs)} run(s), the experiment asks for {repeats} (repeats)"
    return None


@dataclass(slots=True)
class Comparability:
    problems: list[tuple[str, str]] = field(default_factory=list)  # (arm of the run that broke it, why)
    unchecked: list[str] = field(default_factory=list)  # runs without provenance

    def problems_for(self, arms: Sequence[str]) -> list[str]:
        return [message for arm, message in self.problems if arm in arms]


def check_comparability(arms: Sequence[ArmSummary], fixed: Sequence[str]) -> Comparability:
    """Every run of an arm on the same pod template; the experiment's fixed factors the same in
    every run of every arm as in the control's first run (from the provenance records)."""
    found = Comparability()
    reference: StoredRun | None = None
    for arm in arms:
        first = next((run for run in arm.runs if run.template_hash), None)
        for run in arm.runs:
            if run.provenance is None:
                found.unchecked.append(run.label)
                continue
            if first is not None and run.template_hash != first.template_hash:
                found.problems.append(
                    (
                        run.arm,
                        f"run {run.label} used pod template {run.template_hash}, not the arm's "
                        f"{first.template_hash} of run {first.arm}#{first.repeat}",
                    )
                )
        if arm.arm == CONTROL_ARM and first is not None:
            reference = first
    if reference is None or reference.provenance is None:
        return found
    for arm in arms:
        for run in arm.runs:
            if run.provenance is None or run is reference:
                continue
            for dimension in fixed:
                key = FIXED_FIELDS.get(dimension)
                if key is None:
                    continue
                if run.provenance.get(key) != reference.provenance.get(key):
                    found.problems.append(
                        (
                            run.arm,
                            f"run {run.label} differs from {reference.arm}#{reference.repeat} in the fixed "
                            f"factor {dimension}: {_short(run.provenance.get(key))} vs "
                            f"{_short(reference.provenance.get(key))}",
                        )
                    )
    return found


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 120 else text[:117] + "..."


def verdicts(
    arms: Sequence[ArmSummary], *, repeats: int | None, comparability: Comparability
) -> list[TreatmentVerdict]:
    control = next((arm for arm in arms if arm.arm == CONTROL_ARM), None)
    results = []
    for arm in arms:
        if arm.arm == CONTROL_ARM:
            continue
        if control is None:
            results.append(TreatmentVerdict(arm.arm, INCONCLUSIVE, reasons=["no control arm has runs"]))
            continue
        blockers = [
            reason for reason in (too_few_runs(control, repeats), too_few_runs(arm, repeats)) if reason
        ]
        blockers += comparability.problems_for([CONTROL_ARM, arm.arm])
        results.append(decide(compare_metrics(control, arm), blockers))
    return results
