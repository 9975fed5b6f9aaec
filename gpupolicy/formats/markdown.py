"""`--format markdown`: a summary for a pull-request comment.

A headline with the verdict, a table of counts by severity, and a table of findings (file and
line, rule, object, message), at most `MAX_ROWS` of them, worst first; suppressed findings are
counted, and listed with their reasons under `--show-suppressed`.
"""

from __future__ import annotations

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.engine.report import Report
from gpupolicy.formats.options import RenderOptions
from gpupolicy.formats.text import skipped_phrase, unchanged_note

MAX_ROWS = 50
ICONS = {Severity.ERROR: "🔴 error", Severity.WARNING: "🟡 warning", Severity.INFO: "🔵 info"}


def cell(text: str) -> str:
    """Text that stays inside one table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")


def _row(finding: Finding, extra: str | None = None) -> str:
    location = f"`{cell(finding.location())}`"
    rule = f"{finding.rule_id} {finding.rule_name}"
    subject = cell(str(finding.object)) if finding.object else ""
    message = cell(finding.message)
    if extra is not None:
        message += f" — *{cell(extra)}*"
    return f"| {ICONS[finding.severity]} | {location} | {rule} | {subject} | {message} |"


def render_markdown(report: Report, options: RenderOptions) -> str:
    counts = report.counts()
    failing = report.fails(options.fail_on)
    verdict = "❌ failed" if failing else "✅ passed"
    skipped = f" ({skipped_phrase(report)})" if report.skipped else ""
    lines = [
        f"### gpupolicy: {verdict}",
        "",
        f"{report.objects} objects in {report.files} files{skipped}{unchanged_note(report)}; "
        f"fails on {options.fail_on.label} and above.",
        "",
        "| errors | warnings | info | suppressed |",
        "| ---: | ---: | ---: | ---: |",
        f"| {counts[Severity.ERROR]} | {counts[Severity.WARNING]} | {counts[Severity.INFO]} "
        f"| {len(report.suppressed)} |",
    ]
    if report.findings:
        ordered = sorted(report.findings, key=lambda f: (-f.severity, *f.sort_key()))
        lines += ["", "| severity | location | rule | object | message |", "| --- | --- | --- | --- | --- |"]
        lines += [_row(finding) for finding in ordered[:MAX_ROWS]]
        if len(ordered) > MAX_ROWS:
            lines += ["", f"… and {len(ordered) - MAX_ROWS} more (see the full report)."]
    if options.show_suppressed and report.suppressed:
        lines += [
            "",
            "<details><summary>Suppressed findings</summary>",
            "",
            "| severity | location | rule | object | message |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [_row(finding, f"suppressed: {reason}") for finding, reason in report.suppressed[:MAX_ROWS]]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
