"""`--format sarif`: SARIF 2.1.0 for code-scanning tools (GitHub code scanning, Azure DevOps, IDEs).

Every registered rule is described in `tool.driver.rules` (summary, help text and URI, default
level; GP6xx security rules carry `security-severity` so GitHub ranks them). Each result points
at the field's line and column (`columnKind: unicodeCodePoints`, the YAML loader's columns), names
the object as a logical location, and carries the baseline fingerprint in `partialFingerprints`,
so code scanning tracks a finding across line shifts. Suppressed findings are included with
their `suppressions` (in source: annotation or comment; external: exemption or baseline).

Spec: https://docs.oasis-open.org/sarif/sarif/v2.1.0/sarif-v2.1.0.html
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.engine.baseline import fingerprint
from gpupolicy.engine.registry import REGISTRY, Rule
from gpupolicy.engine.report import Report
from gpupolicy.formats.options import RenderOptions
from gpupolicy.policy.repo_policies import display_source

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/gpupolicy/gpupolicy"
SRCROOT = "%SRCROOT%"
FINGERPRINT_KEY = "gpupolicy/v1"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
# GitHub code scanning: "security-severity" 9.0+ critical, 7.0-8.9 high, 4.0-6.9 medium, below low.
SECURITY_SEVERITY = {Severity.ERROR: "8.0", Severity.WARNING: "5.0", Severity.INFO: "2.0"}
SUPPRESSION_KINDS = {
    "annotation": "inSource",
    "comment": "inSource",
    "exemption": "external",
    "baseline": "external",
}


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def pascal_case(name: str) -> str:
    """SARIF wants a rule's friendly name as one Pascal-case identifier (SARIF2012)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("-"))


def rule_descriptor(rule: Rule) -> dict[str, Any]:
    from gpupolicy.rules.docs import help_uri

    properties: dict[str, Any] = {"tags": [rule.family, rule.scope.value, rule.name], "precision": "high"}
    if rule.family == "GP6xx":
        properties["tags"].insert(0, "security")
        properties["security-severity"] = SECURITY_SEVERITY[rule.severity]
    first_sentence = rule.summary.split(". ")[0].rstrip(".") + "."
    return {
        "id": rule.id,
        "name": pascal_case(rule.name),
        "shortDescription": {"text": first_sentence},
        "fullDescription": {"text": _sentence(rule.summary)},
        "help": {
            "text": f"{rule.remediation} Why: {_sentence(rule.rationale)}",
            "markdown": f"**{rule.remediation}**\n\n{rule.rationale}\n\n[{rule.slug}]({help_uri(rule)})",
        },
        "helpUri": help_uri(rule),
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": properties,
    }


def _artifact_location(file: str) -> dict[str, Any] | None:
    if file.startswith("<"):  # <stdin>
        return None
    path = Path(file)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    return {"uri": urllib.parse.quote(path.as_posix()), "uriBaseId": SRCROOT}


def result(finding: Finding, rule_index: dict[str, int], reason: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "ruleId": finding.rule_id,
        "level": LEVELS[finding.severity],
        "message": {"text": _sentence(finding.message)},
    }
    if finding.rule_id in rule_index:
        entry["ruleIndex"] = rule_index[finding.rule_id]
    location: dict[str, Any] = {}
    artifact = _artifact_location(finding.file) if finding.file else None
    if artifact is not None:
        physical: dict[str, Any] = {"artifactLocation": artifact}
        if finding.line is not None:
            physical["region"] = {"startLine": finding.line, "startColumn": finding.column or 1}
        location["physicalLocation"] = physical
    if finding.object is not None:
        obj = finding.object
        qualified = "/".join(part for part in (obj.kind, obj.namespace, obj.name) if part)
        location["logicalLocations"] = [
            {"name": obj.name, "fullyQualifiedName": f"{qualified}:{finding.json_path}", "kind": "object"}
        ]
    if location:
        entry["locations"] = [location]
    entry["partialFingerprints"] = {FINGERPRINT_KEY: fingerprint(finding)}
    properties: dict[str, Any] = {"jsonPath": finding.json_path}
    if finding.object is not None:
        properties["object"] = str(finding.object)
    if finding.container:
        properties["container"] = finding.container
    entry["properties"] = properties
    if reason is not None:
        kind = SUPPRESSION_KINDS.get(str(finding.extra.get("suppressedBy")), "external")
        entry["suppressions"] = [{"kind": kind, "status": "accepted", "justification": reason}]
    return entry


def sarif_log(report: Report, options: RenderOptions) -> dict[str, Any]:
    import gpupolicy.rules  # noqa: F401  (registers the built-in rules)

    rules = list(REGISTRY)
    rule_index = {rule.id: index for index, rule in enumerate(rules)}
    results = [result(finding, rule_index) for finding in report.findings]
    results.extend(result(finding, rule_index, reason) for finding, reason in report.suppressed)
    version = options.tool_version or "0"
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "gpupolicy",
                "version": version,
                "semanticVersion": version,
                "informationUri": INFORMATION_URI,
                "rules": [rule_descriptor(rule) for rule in rules],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().as_uri() + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": {
            "policyDigest": report.policy_digest,
            "policySources": [display_source(source) for source in report.policy_sources],
        },
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render_sarif(report: Report, options: RenderOptions) -> str:
    return json.dumps(sarif_log(report, options), indent=2, ensure_ascii=False) + "\n"
