"""`--format json`: a versioned document described by policies/schemas/lint-report.v1.schema.json."""

from __future__ import annotations

import json
from typing import Any

from gpupolicy import __version__
from gpupolicy.core.findings import Finding
from gpupolicy.core.vocabulary import LINT_REPORT_SCHEMA
from gpupolicy.engine.report import Report, WorkloadRole
from gpupolicy.formats.options import RenderOptions
from gpupolicy.policy.repo_policies import display_source


def finding_dict(finding: Finding) -> dict[str, Any]:
    obj = finding.object
    return {
        "rule": finding.rule_id,
        "name": finding.rule_name,
        "severity": finding.severity.label,
        "message": finding.message,
        "remediation": finding.remediation,
        "object": {"kind": obj.kind, "namespace": obj.namespace, "name": obj.name} if obj else None,
        "path": finding.json_path,
        "file": finding.file,
        "line": finding.line,
        "column": finding.column,
        "document": finding.doc_index,
        "container": finding.container,
    }


def _changed_since(report: Report) -> dict[str, Any]:
    """With --changed-since: the REF and how many unchanged objects were linted but not reported."""
    if report.changed_since is None:
        return {}
    return {"changedSince": report.changed_since, "unchanged": report.unchanged}


def report_dict(report: Report) -> dict[str, Any]:
    return {
        "schema": LINT_REPORT_SCHEMA,
        "tool": {"name": "gpupolicy", "version": __version__},
        "policy": {
            "digest": report.policy_digest,
            "sources": [display_source(source) for source in report.policy_sources],
        },
        "summary": {
            "objects": report.objects,
            "files": report.files,
            "errors": _count(report, "error"),
            "warnings": _count(report, "warning"),
            "info": _count(report, "info"),
            "suppressed": len(report.suppressed),
            **_changed_since(report),
            "skippedFiles": report.skipped_files,
            "skippedDocuments": report.skipped_documents,
        },
        "findings": [finding_dict(finding) for finding in report.findings],
        "suppressed": [{**finding_dict(finding), "reason": reason} for finding, reason in report.suppressed],
        "skipped": [
            {"file": item.file, "document": item.doc_index, "reason": item.reason} for item in report.skipped
        ],
        "workloads": [_workload_dict(item) for item in report.roles],
        "internalErrors": [
            {"rule": error.rule_id, "object": error.object, "message": error.message}
            for error in report.errors
        ],
    }


def _workload_dict(item: WorkloadRole) -> dict[str, Any]:
    ref = item.object
    return {
        "object": {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name},
        "file": item.file,
        "line": item.line,
        "document": item.doc_index,
        **item.decision.as_json(),
    }


def _count(report: Report, severity: str) -> int:
    return sum(1 for finding in report.findings if finding.severity.label == severity)


def render_json(report: Report, options: RenderOptions) -> str:
    return json.dumps(report_dict(report), indent=2, ensure_ascii=False) + "\n"
