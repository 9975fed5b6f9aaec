"""Records as text: table (people), json, jsonl and csv (exports). Shared by CLI and API."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any

from gpupolicy.provenance.record import ProvenanceRecord

FORMATS = ("table", "json", "jsonl", "csv")

# Flat columns for CSV and the table; nested fields go into CSV as JSON text.
CSV_COLUMNS = (
    "uid", "time", "status", "status_changed_at", "operation", "user", "kind", "namespace", "name",
    "object_uid", "generation", "experiment", "arm", "fixed", "model", "input", "images",
    "gpu_resources", "git_tool", "git_revision", "policy_version", "policy_digest", "template_hash",
    "findings", "rollback_criteria", "placement", "priority", "controller",
)  # fmt: skip
TABLE_COLUMNS = ("time", "status", "operation", "object", "experiment", "arm", "user", "findings", "uid")


def _images(record: ProvenanceRecord) -> str:
    return " ".join(str(item.get("image")) for item in record.images)


def _gpu_resources(record: ProvenanceRecord) -> str:
    parts = []
    for template in record.gpu:
        for demand in template.get("resources", []):
            amount = demand.get("limit") or demand.get("request")
            parts.append(f"{demand.get('container')}:{demand.get('resource')}={amount}")
        for claim in template.get("resource_claims", []):
            parts.append(f"claim:{claim.get('name')}")
    return " ".join(parts)


def flat(record: ProvenanceRecord) -> dict[str, Any]:
    as_json = json.dumps
    return {
        "uid": record.uid,
        "time": record.time,
        "status": record.status,
        "status_changed_at": record.status_changed_at or "",
        "operation": record.operation,
        "user": record.user.get("username") or "",
        "kind": record.kind,
        "namespace": record.namespace or "",
        "name": record.name,
        "object_uid": record.object_uid or "",
        "generation": "" if record.generation is None else record.generation,
        "experiment": record.experiment or "",
        "arm": record.arm or "",
        "fixed": "" if record.fixed is None else ", ".join(record.fixed),
        "model": record.model or "",
        "input": record.input or "",
        "images": _images(record),
        "gpu_resources": _gpu_resources(record),
        "git_tool": record.git.get("tool") or "",
        "git_revision": record.git_revision or "",
        "policy_version": record.policy_version,
        "policy_digest": record.policy_digest,
        "template_hash": record.template_hash,
        "findings": " ".join(f"{item.get('rule')}:{item.get('severity')}" for item in record.findings),
        "rollback_criteria": record.rollback_criteria or "",
        "placement": as_json(record.placement, sort_keys=True, ensure_ascii=False),
        "priority": as_json(record.priority, sort_keys=True, ensure_ascii=False),
        "controller": f"{record.controller.get('kind')}/{record.controller.get('name')}"
        if record.controller
        else "",
    }


def render(records: Iterable[ProvenanceRecord], fmt: str) -> Iterator[str]:
    """Chunks of text in `fmt`; streamed so an export never holds every record in memory."""
    if fmt == "jsonl":
        for record in records:
            yield json.dumps(record.to_dict(), sort_keys=True, ensure_ascii=False) + "\n"
    elif fmt == "json":
        yield "["
        for index, record in enumerate(records):
            yield (
                ("," if index else "")
                + "\n  "
                + json.dumps(record.to_dict(), sort_keys=True, ensure_ascii=False)
            )
        yield "\n]\n"
    elif fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for record in records:
            writer.writerow(flat(record))
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
        yield buffer.getvalue()
    elif fmt == "table":
        yield render_table(list(records))
    else:
        raise ValueError(f"unknown format {fmt!r} (use {', '.join(FORMATS)})")


def render_table(records: list[ProvenanceRecord]) -> str:
    rows = [
        {
            "time": record.time[:19].replace("T", " "),
            "status": record.status,
            "operation": record.operation,
            "object": f"{record.kind} {record.namespace + '/' if record.namespace else ''}{record.name}",
            "experiment": record.experiment or "-",
            "arm": record.arm or "-",
            "user": record.user.get("username") or "-",
            "findings": str(len(record.findings)),
            "uid": record.uid,
        }
        for record in records
    ]
    if not rows:
        return "no provenance records\n"
    widths = {column: max(len(column), *(len(row[column]) for row in rows)) for column in TABLE_COLUMNS}
    lines = ["  ".join(column.upper().ljust(widths[column]) for column in TABLE_COLUMNS).rstrip()]
    lines += [
        "  ".join(row[column].ljust(widths[column]) for column in TABLE_COLUMNS).rstrip() for row in rows
    ]
    return "\n".join(lines) + "\n"


def render_detail(record: ProvenanceRecord) -> str:
    """One record for `show --format table`: every field, nested ones as indented JSON."""
    lines = []
    for key, value in record.to_dict().items():
        if isinstance(value, (dict, list)):
            text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).replace("\n", "\n  ")
            lines.append(f"{key}:\n  {text}")
        else:
            lines.append(f"{key}: {'-' if value is None else value}")
    return "\n".join(lines) + "\n"
