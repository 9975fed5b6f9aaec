"""`--format junit`: JUnit XML for CI test reports (GitLab, Jenkins, Azure DevOps).

One test suite per file; one test case per rule × object that has findings, failing when any of
its findings is at or above the failing severity (`--fail-on`), passing with the findings in
`system-out` otherwise. Suppressed findings are skipped test cases, with the reason.
A run without findings has one passing case, so the report is never empty.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

from gpupolicy.core.findings import Finding
from gpupolicy.engine.report import Report
from gpupolicy.formats.options import RenderOptions, container_note

Key = tuple[str, str, str]  # file, object, rule


def _key(finding: Finding) -> Key:
    obj = str(finding.object) if finding.object else f"document {finding.doc_index or 0}"
    return (finding.file or "<input>", obj, finding.rule_id)


def _line(finding: Finding) -> str:
    container = container_note(finding)
    return (
        f"{finding.location()}: {finding.severity.label}: {finding.message}{container} at {finding.json_path}"
    )


def render_junit(report: Report, options: RenderOptions) -> str:
    cases: dict[Key, list[Finding]] = defaultdict(list)
    for finding in report.findings:
        cases[_key(finding)].append(finding)
    skipped: dict[Key, list[tuple[Finding, str]]] = defaultdict(list)
    for finding, reason in report.suppressed:
        if _key(finding) not in cases:
            skipped[_key(finding)].append((finding, reason))
    by_file: dict[str, list[Key]] = defaultdict(list)
    for key in sorted({*cases, *skipped}):
        by_file[key[0]].append(key)

    root = ET.Element("testsuites", name="gpupolicy")
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    for file, keys in sorted(by_file.items()):
        suite = ET.SubElement(root, "testsuite", name=file)
        counts = {"tests": 0, "failures": 0, "skipped": 0}
        for key in keys:
            _, obj, rule_id = key
            found = cases.get(key, [])
            name = found[0].rule_name if found else skipped[key][0][0].rule_name
            case = ET.SubElement(suite, "testcase", name=f"{rule_id} {name}: {obj}", classname=file)
            if found and found[0].line is not None:
                case.set("file", file)
                case.set("line", str(found[0].line))
            counts["tests"] += 1
            failing = [finding for finding in found if finding.severity >= options.fail_on]
            if failing:
                counts["failures"] += 1
                worst = max(finding.severity for finding in failing)
                failure = ET.SubElement(case, "failure", message=failing[0].message, type=worst.label)
                failure.text = "\n".join(_line(finding) for finding in found) + (
                    f"\nremediation: {found[0].remediation}"
                )
            elif found:
                ET.SubElement(case, "system-out").text = "\n".join(_line(finding) for finding in found)
            else:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message="; ".join(reason for _, reason in skipped[key]))
        for name, value in counts.items():
            suite.set(name, str(value))
            totals[name] += value
        suite.set("errors", "0")
    if not by_file:
        suite = ET.SubElement(
            root, "testsuite", name="gpupolicy", tests="1", failures="0", errors="0", skipped="0"
        )
        ET.SubElement(
            suite, "testcase", name=f"no findings in {report.objects} objects", classname="gpupolicy"
        )
        totals["tests"] = 1
    for name, value in totals.items():
        root.set(name, str(value))
    root.set("errors", str(len(report.errors)))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
