"""Human output: `file:line:col: GP102 error gpu-request-limit-mismatch: message [Deployment ns/name]`,
grouped by file and sorted by line, then a summary line."""

from __future__ import annotations

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.engine.report import Report
from gpupolicy.formats.options import RenderOptions, container_note

_COLORS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
_RESET = "\033[0m"
_DIM = "\033[2m"


def format_finding(finding: Finding, *, color: bool = False) -> str:
    severity = finding.severity.label
    if color:
        severity = f"{_COLORS[finding.severity]}{severity}{_RESET}"
    subject = f" [{finding.object}]" if finding.object else ""
    container = container_note(finding)
    location = f"{_DIM}{finding.location()}{_RESET}" if color else finding.location()
    return (
        f"{location}: {finding.rule_id} {severity} {finding.rule_name}: {finding.message}{container}{subject}"
    )


def summary_line(report: Report) -> str:
    counts = report.counts()
    parts = [
        f"{counts[Severity.ERROR]} error{'s' if counts[Severity.ERROR] != 1 else ''}",
        f"{counts[Severity.WARNING]} warning{'s' if counts[Severity.WARNING] != 1 else ''}",
        f"{counts[Severity.INFO]} info",
    ]
    suppressed = f", {len(report.suppressed)} suppressed" if report.suppressed else ""
    skipped = f"; {skipped_phrase(report)}" if report.skipped else ""
    return (
        f"{', '.join(parts)}{suppressed} in {report.objects} objects from {report.files} files"
        f"{skipped}{unchanged_note(report)}"
    )


def unchanged_note(report: Report) -> str:
    """With --changed-since: how many objects were linted as context only (gpupolicy/lint/changes.py)."""
    if report.changed_since is None:
        return ""
    return f"; {report.unchanged} unchanged objects not reported (--changed-since {report.changed_since})"


def skipped_phrase(report: Report) -> str:
    """`skipped 3 non-Kubernetes files and 1 document`: what was not linted, and why in one word."""
    files, documents = report.skipped_files, report.skipped_documents
    counted = [f"{files} non-Kubernetes file{'s' if files != 1 else ''}"] if files else []
    if documents:
        noun = "document" if documents == 1 else "documents"
        counted.append(f"{documents} {noun}" if files else f"{documents} non-Kubernetes {noun}")
    return "skipped " + " and ".join(counted)


def render_text(report: Report, options: RenderOptions) -> str:
    lines = [format_finding(finding, color=options.color) for finding in report.findings]
    if options.show_suppressed:
        for finding, reason in report.suppressed:
            line = f"{format_finding(finding)} -- suppressed: {reason}"
            lines.append(f"{_DIM}{line}{_RESET}" if options.color else line)
    lines.append(summary_line(report))
    return "\n".join(lines) + "\n"
