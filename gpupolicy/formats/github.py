"""`--format github`: GitHub Actions workflow commands, shown as annotations on the pull request.

`::error file=deploy/vllm.yaml,line=12,col=9,title=GP102 gpu-request-limit-mismatch::message`
(warning → `::warning`, info → `::notice`). Values are escaped as the runner's toolkit does.
https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands
"""

from __future__ import annotations

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.engine.report import Report
from gpupolicy.formats.options import RenderOptions
from gpupolicy.formats.text import summary_line

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    properties = []
    if finding.file and not finding.file.startswith("<"):
        properties.append(f"file={escape_property(finding.file)}")
        if finding.line is not None:
            properties.append(f"line={finding.line}")
            properties.append(f"col={finding.column or 1}")
    properties.append(f"title={escape_property(f'{finding.rule_id} {finding.rule_name}')}")
    subject = f" [{finding.object}]" if finding.object else ""
    message = f"{finding.message}{subject}\n{finding.remediation}"
    return f"::{COMMANDS[finding.severity]} {','.join(properties)}::{escape_data(message)}"


def render_github(report: Report, options: RenderOptions) -> str:
    lines = [annotation(finding) for finding in report.findings]
    lines.append(f"gpupolicy: {summary_line(report)}")
    return "\n".join(lines) + "\n"
