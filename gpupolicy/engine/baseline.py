"""Baselines: accept the findings a repository already has, and fail only on new ones.

A finding's fingerprint is a hash of what it is about, never of where the text happens to sit:
the rule, the object's identity (kind, namespace, name), the JSON path of the field and the
container. Objects without an identity (a file that does not parse) use the file name instead.
Moving an object within a file, reordering documents or adding lines above it keeps the
fingerprint; renaming the object or the field makes a new finding.

The file (`--write-baseline FILE`) is JSON, sorted, one entry per finding, so that it diffs
well in review. The same fingerprint may appear several times (two identical findings): a
baseline accepts as many findings of a fingerprint as it lists.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpupolicy.core.findings import Finding
from gpupolicy.core.immutable import immutable, replace
from gpupolicy.core.vocabulary import BASELINE_SCHEMA
from gpupolicy.engine.report import Report

BASELINE_REASON = "in the baseline {file}"


class BaselineError(Exception):
    """A baseline file that cannot be read."""


def fingerprint(finding: Finding) -> str:
    obj = finding.object
    identity = [obj.kind, obj.namespace or "", obj.name] if obj is not None else ["", "", finding.file or ""]
    parts = [finding.rule_id, *identity, finding.json_path, finding.container or ""]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32]


@immutable
class Baseline:
    counts: Counter[str]
    source: str

    def __contains__(self, fp: object) -> bool:
        return fp in self.counts


def entry(finding: Finding) -> dict[str, Any]:
    obj = finding.object
    return {
        "fingerprint": fingerprint(finding),
        "rule": finding.rule_id,
        "object": str(obj) if obj else None,
        "path": finding.json_path,
        "container": finding.container,
        "file": finding.file,
        "message": finding.message,
    }


def render(findings: Iterable[Finding]) -> str:
    entries = sorted(
        (entry(finding) for finding in findings),
        key=lambda item: (
            item["file"] or "",
            item["object"] or "",
            item["rule"],
            item["path"],
            item["fingerprint"],
        ),
    )
    return json.dumps({"schema": BASELINE_SCHEMA, "findings": entries}, indent=2, ensure_ascii=False) + "\n"


def write(path: Path, report: Report) -> int:
    """Write every current finding to `path`; returns how many."""
    path.write_text(render(report.findings), encoding="utf-8")
    return len(report.findings)


def load(path: Path) -> Baseline:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read baseline: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}:{exc.lineno}:{exc.colno}: baseline is not JSON: {exc.msg}") from exc
    if (
        not isinstance(data, dict)
        or data.get("schema") != BASELINE_SCHEMA
        or not isinstance(data.get("findings"), list)
    ):
        raise BaselineError(f"{path}: not a gpupolicy baseline (expected schema {BASELINE_SCHEMA})")
    counts: Counter[str] = Counter()
    for item in data["findings"]:
        if isinstance(item, dict) and isinstance(item.get("fingerprint"), str):
            counts[item["fingerprint"]] += 1
    return Baseline(counts, str(path))


def apply(report: Report, baseline: Baseline) -> int:
    """Move findings the baseline accepts to `report.suppressed`; returns how many moved."""
    remaining = Counter(baseline.counts)
    kept: list[Finding] = []
    moved = 0
    reason = BASELINE_REASON.format(file=baseline.source)
    for finding in report.findings:
        fp = fingerprint(finding)
        if remaining[fp] > 0:
            remaining[fp] -= 1
            report.suppressed.append(
                (replace(finding, extra={**finding.extra, "suppressedBy": "baseline"}), reason)
            )
            moved += 1
        else:
            kept.append(finding)
    report.findings = kept
    report.suppressed.sort(key=lambda item: item[0].sort_key())
    return moved
