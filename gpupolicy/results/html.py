"""The report as one self-contained HTML page: inline SVG plots drawn here, inline CSS, no
script and nothing fetched. Two kinds of plot:

- goodput per GPU-hour against P95 latency, one point per run and a larger one per arm mean,
  with the SLO's latency bound as a vertical dashed line (SLO_COLOUR);
- each compared metric's spread across repeats: the runs as dots, the mean as a bar, the
  bootstrap interval as a whisker, one column per arm.

The goodput plot sits at a fixed place (GOODPUT_BOX) so a screenshot test knows where to look.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from gpupolicy.results.metrics import METRIC_BY_NAME
from gpupolicy.results.report import HEADLINE, Report, describe_treatment, fmt, header_lines, report_notes

SLO_COLOUR = "#d62728"
ARM_COLOURS = ("#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf")
# (left, top, width, height) of the goodput plot on the page, in CSS pixels.
GOODPUT_BOX = (16, 150, 640, 400)
SPREAD_SIZE = (300, 190)
_MARGIN = (64, 20, 24, 48)  # left, right, top, bottom


def _colour(index: int) -> str:
    return ARM_COLOURS[index % len(ARM_COLOURS)]


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), default=raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(count + 2) if first + i * step <= high + 1e-9]


def _range(values: Sequence[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    pad = (high - low) * 0.08 or (abs(high) * 0.1 or 1.0)
    return max(0.0, low - pad) if low >= 0 else low - pad, high + pad


class _Axes:
    def __init__(self, width: int, height: int, x: tuple[float, float], y: tuple[float, float]) -> None:
        self.width, self.height = width, height
        self.left, self.right, self.top, self.bottom = _MARGIN
        self.x, self.y = x, y

    def px(self, value: float) -> float:
        span = self.x[1] - self.x[0] or 1.0
        return self.left + (value - self.x[0]) / span * (self.width - self.left - self.right)

    def py(self, value: float) -> float:
        span = self.y[1] - self.y[0] or 1.0
        return self.height - self.bottom - (value - self.y[0]) / span * (self.height - self.top - self.bottom)

    def frame(self, x_label: str, y_label: str, *, x_ticks: bool = True) -> list[str]:
        parts = [
            f'<rect x="{self.left}" y="{self.top}" width="{self.width - self.left - self.right}" '
            f'height="{self.height - self.top - self.bottom}" fill="#ffffff" stroke="#444444"/>'
        ]
        for tick in _ticks(*self.y):
            y = self.py(tick)
            parts.append(
                f'<line x1="{self.left}" x2="{self.width - self.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e6e6e6"/>'
            )
            parts.append(f'<text x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end">{fmt(tick)}</text>')
        if x_ticks:
            for tick in _ticks(*self.x):
                x = self.px(tick)
                parts.append(
                    f'<text x="{x:.1f}" y="{self.height - self.bottom + 16}" text-anchor="middle">{fmt(tick)}</text>'
                )
        parts.append(
            f'<text x="{(self.left + self.width - self.right) / 2:.1f}" y="{self.height - 8}" '
            f'text-anchor="middle">{html.escape(x_label)}</text>'
        )
        parts.append(
            f'<text transform="translate(14 {(self.top + self.height - self.bottom) / 2:.1f}) rotate(-90)" '
            f'text-anchor="middle">{html.escape(y_label)}</text>'
        )
        return parts


def goodput_plot(report: Report) -> str:
    width, height = GOODPUT_BOX[2], GOODPUT_BOX[3]
    points = []  # (arm index, x, y, is mean)
    for index, arm in enumerate(report.arms):
        for figures in arm.run_metrics:
            x, y = figures.get("latency_p95_ms"), figures.get("goodput_per_gpu_hour")
            if x is not None and y is not None:
                points.append((index, float(x), float(y), False))
        x_mean, y_mean = arm.metrics["latency_p95_ms"].mean, arm.metrics["goodput_per_gpu_hour"].mean
        if x_mean is not None and y_mean is not None:
            points.append((index, x_mean, y_mean, True))
    line = report.slo.latency_line()
    parts = [
        f'<svg id="goodput" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="goodput per GPU-hour against P95 latency">'
    ]
    if not points:
        parts.append(
            f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no runs with latency data</text></svg>'
        )
        return "".join(parts)
    xs = [p[1] for p in points] + ([line] if line is not None else [])
    axes = _Axes(width, height, _range(xs), _range([p[2] for p in points]))
    parts += axes.frame("P95 latency (ms)", "goodput (accepted requests per GPU-hour)")
    if line is not None:
        x = axes.px(line)
        parts.append(
            f'<line class="slo" x1="{x:.1f}" x2="{x:.1f}" y1="{axes.top}" y2="{height - axes.bottom}" '
            f'stroke="{SLO_COLOUR}" stroke-width="3" stroke-dasharray="10 5"/>'
            f'<text x="{x - 4:.1f}" y="{height - axes.bottom - 6}" text-anchor="end" '
            f'fill="{SLO_COLOUR}">SLO: P95 ≤ {fmt(line)} ms</text>'
        )
    for index, x, y, is_mean in points:
        colour = _colour(index)
        if is_mean:
            parts.append(
                f'<rect x="{axes.px(x) - 8:.1f}" y="{axes.py(y) - 8:.1f}" width="16" height="16" '
                f'fill="{colour}" stroke="#000000"/>'
            )
        else:
            parts.append(
                f'<circle cx="{axes.px(x):.1f}" cy="{axes.py(y):.1f}" r="7" fill="{colour}" fill-opacity="0.85"/>'
            )
    for index, arm in enumerate(report.arms):
        y = axes.top + 16 + index * 18
        parts.append(
            f'<rect x="{width - axes.right - 150}" y="{y - 10}" width="12" height="12" fill="{_colour(index)}"/>'
            f'<text x="{width - axes.right - 132}" y="{y}">{html.escape(arm.arm)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def spread_plot(report: Report, name: str) -> str:
    metric = METRIC_BY_NAME[name]
    width, height = SPREAD_SIZE
    values = [v for arm in report.arms for v in arm.metrics[name].values]
    title = f"{metric.label} ({metric.unit})"
    head = (
        f'<svg class="spread" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">'
        f'<text x="{width / 2}" y="14" text-anchor="middle" font-weight="bold">{html.escape(title)}</text>'
    )
    if not values:
        return head + f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no data</text></svg>'
    count = len(report.arms)
    axes = _Axes(width, height, (0.0, float(count)), _range(values))
    parts = [head, *axes.frame("", "", x_ticks=False)]
    for index, arm in enumerate(report.arms):
        summary = arm.metrics[name]
        centre = axes.px(index + 0.5)
        colour = _colour(index)
        parts.append(
            f'<text x="{centre:.1f}" y="{height - axes.bottom + 16}" text-anchor="middle">{html.escape(arm.arm)}</text>'
        )
        if summary.interval is not None:
            parts.append(
                f'<line x1="{centre:.1f}" x2="{centre:.1f}" y1="{axes.py(summary.interval.low):.1f}" '
                f'y2="{axes.py(summary.interval.high):.1f}" stroke="{colour}" stroke-width="2"/>'
            )
        if summary.mean is not None:
            y = axes.py(summary.mean)
            parts.append(
                f'<line x1="{centre - 22:.1f}" x2="{centre + 22:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="3"/>'
            )
        for offset, value in enumerate(summary.values):
            x = centre + (offset - (len(summary.values) - 1) / 2) * 10
            parts.append(
                f'<circle cx="{x:.1f}" cy="{axes.py(value):.1f}" r="5" fill="{colour}" fill-opacity="0.8"/>'
            )
    parts.append("</svg>")
    return "".join(parts)


_STYLE = f"""
body {{ font: 13px/1.4 system-ui, "Noto Sans CJK TC", "PingFang TC", "Microsoft JhengHei", sans-serif; margin: 0; color: #222222; background: #ffffff; }}
header {{ position: absolute; left: 16px; top: 8px; width: 1200px; height: 136px; overflow: hidden; }}
header h1 {{ font-size: 18px; margin: 0 0 4px; }}
header p {{ margin: 0; }}
#goodput {{ position: absolute; left: {GOODPUT_BOX[0]}px; top: {GOODPUT_BOX[1]}px; }}
#verdicts {{ position: absolute; left: {GOODPUT_BOX[0] + GOODPUT_BOX[2] + 24}px; top: {GOODPUT_BOX[1]}px; width: 520px; }}
#rest {{ position: absolute; left: 16px; top: {GOODPUT_BOX[1] + GOODPUT_BOX[3] + 24}px; right: 16px; }}
svg text {{ font: 11px system-ui, sans-serif; fill: #222222; }}
.spread {{ margin: 0 12px 12px 0; }}
table {{ border-collapse: collapse; margin: 8px 0; }}
td, th {{ border: 1px solid #cccccc; padding: 3px 8px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.verdict {{ font-weight: bold; }}
"""


def render_html(report: Report) -> str:
    escape = html.escape
    header = "".join(f"<p>{escape(line)}</p>" for line in header_lines(report)[1:])
    verdict_lines = []
    for treatment in report.treatments:
        lines = describe_treatment(treatment)
        verdict_lines.append(f'<p class="verdict">{escape(lines[0])}</p>')
        verdict_lines.extend(f"<p>{escape(line.strip())}</p>" for line in lines[1:])
    rows = [
        "<tr><th>metric</th>"
        + "".join(f"<th>{escape(a.arm)} ({len(a.runs)} runs)</th>" for a in report.arms)
        + "</tr>"
    ]
    for name in HEADLINE:
        metric = METRIC_BY_NAME[name]
        cells = "".join(f"<td>{escape(fmt(a.metrics[name].mean, metric.unit))}</td>" for a in report.arms)
        rows.append(f"<tr><td>{escape(metric.label)} ({escape(metric.unit)})</td>{cells}</tr>")
    spreads = "".join(
        spread_plot(report, name) for name in HEADLINE if any(arm.metrics[name].values for arm in report.arms)
    )
    notes = "".join(f"<p>note: {escape(note)}</p>" for note in report_notes(report))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(report.experiment)}: experiment results</title><style>{_STYLE}</style></head><body>"
        f"<header><h1>Experiment {escape(report.experiment)}</h1>{header}</header>"
        f"{goodput_plot(report)}"
        f'<section id="verdicts"><h2>Verdict against control</h2>{"".join(verdict_lines) or "<p>no treatment arm</p>"}</section>'
        f'<div id="rest"><h2>Arms (means across repeats)</h2><table>{"".join(rows)}</table>{notes}'
        f"<h2>Spread across repeats</h2><div>{spreads}</div></div>"
        "</body></html>\n"
    )
