"""The report of an experiment: a JSON document (schema:
policies/schemas/results-report.v1.schema.json) and its renderings as a terminal table and as
Markdown for a pull-request comment (the HTML page is `html.py`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpupolicy.kube.experiments import CONTROL_ARM, ExperimentConfig
from gpupolicy.results.metrics import METRIC_BY_NAME, METRICS, run_metrics
from gpupolicy.results.slo import Slo
from gpupolicy.results.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES
from gpupolicy.results.verdict import (
    RUN_SLO_METRIC,
    ArmSummary,
    Comparability,
    TreatmentVerdict,
    check_comparability,
    summarise_arm,
    verdicts,
)

if TYPE_CHECKING:  # the store needs SQLAlchemy (the [webhook] extra), which the linter must not import
    from gpupolicy.results.store import StoredRun

REPORT_VERSION = 1
FORMATS = ("table", "json", "markdown", "html")
# The metrics the table and the Markdown show (the JSON has them all).
HEADLINE = (
    "accepted_rps",
    "goodput_per_gpu_hour",
    "throughput_rps",
    "latency_p95_ms",
    "latency_p99_ms",
    "ttft_p95_ms",
    "tpot_p95_ms",
    "error_rate",
    "cost_per_1k_accepted",
    "cost_per_1m_accepted_output_tokens",
    "gpu_hours",
)


@dataclass(slots=True)
class Report:
    experiment: str
    config: ExperimentConfig
    config_source: str
    slo: Slo
    arms: list[ArmSummary]
    comparability: Comparability
    treatments: list[TreatmentVerdict]
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": REPORT_VERSION,
            "experiment": self.experiment,
            "config": {
                "source": self.config_source,
                "change": self.config.change,
                "fixed": self.config.fixed,
                "metrics": [term.canonical or term.raw for term in self.config.metrics],
                "repeats": self.config.repeats,
            },
            "slo": self.slo.to_dict(),
            "statistics": {
                "percentiles": "linear interpolation between closest ranks (numpy's default)",
                "interval": "percentile bootstrap of the mean across repeats",
                "level": DEFAULT_LEVEL,
                "resamples": DEFAULT_RESAMPLES,
                "seed": self.seed,
            },
            "arms": [_arm_dict(arm) for arm in self.arms],
            "comparability": {
                "problems": [message for _, message in self.comparability.problems],
                "unchecked": self.comparability.unchecked,
            },
            "treatments": [treatment.to_dict() for treatment in self.treatments],
        }


def _arm_dict(arm: ArmSummary) -> dict[str, Any]:
    runs = []
    for run, figures in zip(arm.runs, arm.run_metrics, strict=True):
        runs.append(
            {
                "run_id": run.run_id,
                "repeat": run.repeat,
                "files": run.files,
                "format": run.format,
                "run_date": run.run_date,
                "ingested_at": run.ingested_at,
                "gpus": run.gpus,
                "gpu_source": run.gpu_source,
                "price_per_gpu_hour": run.price_per_gpu_hour,
                "node_pool": run.node_pool,
                "record_uid": run.record_uid,
                "template_hash": run.template_hash,
                "slo_met": figures["slo_met"],
                "slo_violations": figures["slo_violations"],
                "metrics": {metric.name: figures.get(metric.name) for metric in METRICS},
            }
        )
    return {
        "arm": arm.arm,
        "runs": runs,
        "metrics": {name: summary.to_dict() for name, summary in arm.metrics.items()},
    }


def build_report(
    experiment: str,
    config: ExperimentConfig,
    config_source: str,
    slo: Slo,
    runs: Sequence[StoredRun],
    *,
    seed: int,
    price_override: float | None = None,
) -> Report:
    """Metrics per run under `slo`, arms (control first), comparability and verdicts."""
    by_arm: dict[str, list[StoredRun]] = {}
    for run in sorted(runs, key=lambda item: (item.arm != CONTROL_ARM, item.arm, item.repeat)):
        by_arm.setdefault(run.arm, []).append(run)
    arms = []
    for arm, arm_runs in by_arm.items():
        figures = [
            run_metrics(
                run.samples,
                duration_s=run.duration_s,
                gpus=run.gpus,
                price_per_gpu_hour=price_override if price_override is not None else run.price_per_gpu_hour,
                slo=slo,
            )
            for run in arm_runs
        ]
        arms.append(summarise_arm(arm, arm_runs, figures, seed=seed))
    comparability = check_comparability(arms, config.fixed)
    treatments = verdicts(arms, repeats=config.repeats, comparability=comparability)
    return Report(experiment, config, config_source, slo, arms, comparability, treatments, seed)


# -- rendering ----------------------------------------------------------------------------------


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "fraction":
        return f"{value * 100:.2f}%"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.4g}"


def _label(name: str) -> str:
    metric = METRIC_BY_NAME.get(name, RUN_SLO_METRIC if name == RUN_SLO_METRIC.name else None)
    if metric is None:
        return name
    unit = "" if metric.unit in ("fraction", "count") else f" ({metric.unit})"
    return metric.label + unit


def _cell(arm: ArmSummary, name: str) -> str:
    summary = arm.metrics[name]
    unit = METRIC_BY_NAME[name].unit
    if summary.mean is None:
        return "-"
    if summary.interval is None or len(summary.values) < 2:
        return fmt(summary.mean, unit)
    return (
        f"{fmt(summary.mean, unit)} [{fmt(summary.interval.low, unit)}, {fmt(summary.interval.high, unit)}]"
    )


def _rows(report: Report) -> list[list[str]]:
    rows = [["metric (mean [95% CI])", *[f"{arm.arm} ({len(arm.runs)} runs)" for arm in report.arms]]]
    for name in HEADLINE:
        rows.append([_label(name), *[_cell(arm, name) for arm in report.arms]])
    return rows


def describe_treatment(treatment: TreatmentVerdict) -> list[str]:
    lines = [f"{treatment.arm}: {treatment.verdict}"]
    if treatment.improved:
        lines.append("  improved: " + ", ".join(_change(treatment, name) for name in treatment.improved))
    if treatment.worsened:
        lines.append("  worsened: " + ", ".join(_change(treatment, name) for name in treatment.worsened))
    lines.extend(f"  - {reason}" for reason in treatment.reasons)
    return lines


def _change(treatment: TreatmentVerdict, name: str) -> str:
    relative = treatment.changes.get(name, {}).get("relative")
    label = METRIC_BY_NAME[name].label if name in METRIC_BY_NAME else RUN_SLO_METRIC.label
    return f"{label} {relative:+.1%}" if relative is not None else label


def header_lines(report: Report) -> list[str]:
    slo = ", ".join(item.text() for item in report.slo.objectives) or "none (every successful request counts)"
    return [
        f"experiment: {report.experiment} ({report.config_source})",
        f"change: {report.config.change}",
        f"fixed: {', '.join(report.config.fixed) or '-'}; repeats: {report.config.repeats}",
        f"SLO ({report.slo.source}): {slo}",
    ]


def report_notes(report: Report) -> list[str]:
    notes = [f"comparison broken: {message}" for _, message in report.comparability.problems]
    if report.comparability.unchecked:
        notes.append(
            f"not checked against provenance ({len(report.comparability.unchecked)} runs ingested with "
            "--gpus, not --workload): pod template and fixed factors unverified"
        )
    for arm in report.arms:
        for run, figures in zip(arm.runs, arm.run_metrics, strict=True):
            if figures["slo_violations"]:
                notes.append(
                    f"run {run.arm}#{run.repeat} misses the run SLO: {', '.join(figures['slo_violations'])}"
                )
    return notes


def render_table(report: Report) -> str:
    rows = _rows(report)
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = [*header_lines(report), ""]
    for index, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(widths[column]) for column, cell in enumerate(row)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    lines.append("")
    for treatment in report.treatments:
        lines.extend(describe_treatment(treatment))
    lines.extend(f"note: {note}" for note in report_notes(report))
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render_markdown(report: Report) -> str:
    icons = {"improved": "✅", "regressed": "❌", "trade-off": "⚖️", "no-change": "➖", "inconclusive": "❔"}
    lines = [f"### Experiment `{_md_escape(report.experiment)}`", ""]
    for treatment in report.treatments:
        line = (
            f"- {icons.get(treatment.verdict, '')} **{_md_escape(treatment.arm)}**: **{treatment.verdict}**"
        )
        if treatment.improved:
            line += "; improved: " + ", ".join(_md_escape(_change(treatment, n)) for n in treatment.improved)
        if treatment.worsened:
            line += "; worsened: " + ", ".join(_md_escape(_change(treatment, n)) for n in treatment.worsened)
        lines.append(line)
        lines.extend(f"  - {_md_escape(reason)}" for reason in treatment.reasons)
    lines.append("")
    lines.extend(f"{_md_escape(line)}  " for line in header_lines(report)[1:])
    lines.append("")
    rows = _rows(report)
    lines.append("| " + " | ".join(_md_escape(cell) for cell in rows[0]) + " |")
    lines.append("| --- |" + " ---: |" * (len(rows[0]) - 1))
    lines.extend("| " + " | ".join(_md_escape(cell) for cell in row) + " |" for row in rows[1:])
    notes = report_notes(report)
    if notes:
        lines.append("")
        lines.extend(f"> {_md_escape(note)}" for note in notes)
    return "\n".join(lines) + "\n"


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
