"""Native Rego rules: a `.rego` module that declares its metadata and its violations.

    package acme.gpu_request_equals_limit

    import rego.v1

    metadata := {
        "id": "ACME001", "name": "gpu-request-equals-limit", "severity": "error",
        "summary": "...", "remediation": "... .",
        "kinds": ["Deployment", "StatefulSet"],        # optional: Gatekeeper-style match by kind
        "parameters": {"resource": "nvidia.com/gpu"},  # optional: defaults, overridden per policy
    }

    violation contains {"msg": msg, "path": path} if { ... }

`input` is the object; `data.parameters` its parameters (the defaults above, overridden by the
policy's `rules.ACME001.params`); `data.inventory` the other objects, in Gatekeeper's shape
(gpupolicy/custom/inventory_document.py). A module without `metadata` is a library, loaded with every rule
of its folder; `*_test.rego` files are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpupolicy.custom.definitions import (
    CustomRule,
    CustomViolation,
    Origin,
    Review,
    declared_metadata,
    line_of,
)
from gpupolicy.custom.field_paths import path_of
from gpupolicy.custom.matching import rule_matching
from gpupolicy.custom.rego import RegoProgram, RegoSource
from gpupolicy.kube.pod_spec import as_list, as_mapping


def is_rule_module(text: str) -> bool:
    return any(line.startswith(("metadata :=", "metadata =")) for line in text.splitlines())


def load_rego_rules(files: Sequence[Path]) -> list[CustomRule]:
    """Every rule of these `.rego` files; the other modules among them are libraries of each."""
    sources = {path: RegoSource(str(path), path.read_text(encoding="utf-8")) for path in files}
    libraries = [source for source in sources.values() if not is_rule_module(source.text)]
    rules = []
    for source in sources.values():
        if is_rule_module(source.text):
            rules.append(_rule_of(source, libraries))
    return rules


def _rule_of(source: RegoSource, libraries: Sequence[RegoSource]) -> CustomRule:
    package = source.package
    program = RegoProgram([source, *libraries], [package])
    origin = Origin(source.file, line_of(source.text, "metadata"))
    declared = _metadata_document(program, source, package)
    metadata = declared_metadata(declared, origin, "rego", "metadata")
    reads_inventory = "data.inventory" in source.text or any(
        "data.inventory" in lib.text for lib in libraries
    )
    program.compile(
        {"parameters": dict(metadata.parameters), **({"inventory": {}} if reads_inventory else {})}
    )
    match = (
        {"kinds": [{"apiGroups": ["*"], "kinds": as_list(declared["kinds"])}]} if "kinds" in declared else {}
    )
    return rule_matching(
        metadata, match, RegoCheck(program, package, reads_inventory), reads_inventory=reads_inventory
    )


def _metadata_document(program: RegoProgram, source: RegoSource, package: str) -> dict[str, Any]:
    declared = program.query_value(f"data.{package}.metadata")
    if not isinstance(declared, dict):
        raise Origin(source.file, line_of(source.text, "metadata")).error(
            "metadata must be an object with id, name, severity, summary and remediation"
        )
    return declared


class RegoCheck:
    """One native rule's query: `input` the object, `data.parameters`, `data.inventory`."""

    def __init__(self, program: RegoProgram, package: str, reads_inventory: bool) -> None:
        self.program = program
        self.package = package
        self.reads_inventory = reads_inventory

    def __call__(self, review: Review, parameters: Mapping[str, Any]) -> Sequence[CustomViolation]:
        data: dict[str, Any] = {"parameters": dict(parameters)}
        if self.reads_inventory:
            data["inventory"] = review.inventory() if review.inventory is not None else {}
        return [violation_of(item) for item in self.program.violations(self.package, review.obj, data)]


def violation_of(item: Any) -> CustomViolation:
    """A violation as rules write it: a message string (`deny[msg]`), or an object with `msg` (or
    `message`) and a `path` (list or field path; also read from Gatekeeper's `details.path`)."""
    if isinstance(item, str):
        return CustomViolation(item)
    entry = as_mapping(item)
    message = entry.get("msg", entry.get("message", ""))
    path = entry.get("path", entry.get("field", as_mapping(entry.get("details")).get("path")))
    return CustomViolation(str(message), path_of(path) if path is not None else ())
