"""What a custom rule is, whatever its language: metadata, what it matches, and a check.

A check receives a `Review` (the object, its namespace object, the inventory document, the
parameters) and returns `CustomViolation`s: a message and a JSON path into the object. The
engine turns the path into file, line and column as it does for built-in rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol

from gpupolicy.core.findings import JsonPath, Severity
from gpupolicy.core.immutable import immutable
from gpupolicy.custom.errors import CustomRuleError

# Custom ids share the suppression syntax of built-in ones (`gpupolicy.io/ignore: ORG001`):
# letters, digits and hyphens, starting with a letter. Ids starting with GP are the built-in rules'
# (so that a mistyped built-in id in a policy, GP7, is an error rather than a custom rule's id).
CUSTOM_ID = re.compile(r"^[A-Z][A-Z0-9]*(?:-[A-Za-z0-9]+)*$")
KEBAB_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_NOT_KEBAB = re.compile(r"[^a-z0-9]+")  # a run of what a kebab-case name does not hold


def derived_rule_name(object_name: str) -> str:
    """The kebab-case rule name of a Kubernetes object's name (a constraint's, a binding's): a
    name is a DNS subdomain (`demo-binding-test.example.com`, the Kubernetes docs' own binding), so
    each run of dots or other characters becomes one hyphen."""
    return _NOT_KEBAB.sub("-", object_name.lower()).strip("-") or "unnamed"


@immutable
class Origin:
    """Where a custom rule is written: its error messages and `gpupolicy explain` name it."""

    file: str
    line: int = 1

    def error(self, message: str, *, line: int | None = None, column: int | None = None) -> CustomRuleError:
        return CustomRuleError(self.file, line if line is not None else self.line, message, column)


@immutable
class Metadata:
    id: str
    name: str
    severity: Severity
    summary: str
    remediation: str
    origin: Origin
    rationale: str = ""
    language: str = "rego"  # rego, gatekeeper, cel, vap: shown by `gpupolicy explain`
    parameters: Mapping[str, Any] = field(default_factory=dict)  # name -> default value


@immutable
class CustomViolation:
    message: str
    path: JsonPath = ()
    severity: Severity | None = None  # a VAP binding's Warn/Audit, a constraint's enforcementAction


@immutable
class Review:
    """What one evaluation of a custom rule reads besides its code."""

    obj: Mapping[str, Any]
    namespace: Mapping[str, Any] | None = None  # the object's Namespace, when the inventory has it
    inventory: Callable[[], Mapping[str, Any]] | None = None  # Gatekeeper's `data.inventory` shape
    # The objects of a kind (in a namespace) among the linted objects or the cluster's: where a VAP
    # binding finds its params.
    lookup: Callable[[str, str | None], Sequence[Mapping[str, Any]]] | None = None
    operation: str = "CREATE"


class Check(Protocol):
    """The compiled code of one rule: called once per object it matches."""

    def __call__(self, review: Review, parameters: Mapping[str, Any]) -> Sequence[CustomViolation]: ...


@immutable
class CustomRule:
    metadata: Metadata
    matches: Callable[[Mapping[str, Any], Mapping[str, Any] | None], bool]
    check: Check
    reads_inventory: bool = False
    # A rule written for Pods (Gatekeeper's library, most VAPs) also judges each pod template of a
    # workload, as Gatekeeper's ExpansionTemplate does: a GitOps tree holds Deployments, not Pods.
    expands_pods: bool = False
    # What the check looks up (`Review.lookup`): (kind, namespace), None for the object's own
    # namespace. Fetched before a worker process evaluates the rule (gpupolicy/custom/isolation.py).
    lookups: tuple[tuple[str, str | None], ...] = ()
    # Defined in the linted tree (the repository's admission policies, written for the cluster):
    # an id or name taken before it yields rather than stopping the run (gpupolicy/custom/rules.py).
    in_tree: bool = False


@immutable
class InventoryDocument:
    """`Review.inventory` as a value (what a worker process receives)."""

    document: Mapping[str, Any]

    def __call__(self) -> Mapping[str, Any]:
        return self.document


@immutable
class LookupTable:
    """`Review.lookup` answered from what was fetched beforehand (what a worker process receives)."""

    table: Mapping[tuple[str, str | None], Sequence[Mapping[str, Any]]]

    def __call__(self, kind: str, namespace: str | None) -> Sequence[Mapping[str, Any]]:
        return self.table.get((kind, namespace), ())


def check_metadata(metadata: Metadata) -> None:
    """Refuse metadata the engine or the suppressions could not use, at the rule's own line."""
    origin = metadata.origin
    if metadata.id.startswith("GP"):
        raise origin.error(f"rule id {metadata.id}: ids starting with GP are reserved for built-in rules")
    if not CUSTOM_ID.match(metadata.id):
        raise origin.error(
            f"rule id {metadata.id!r} must be upper-case letters and digits, optionally with hyphens (ORG001)"
        )
    if not KEBAB_NAME.match(metadata.name):
        raise origin.error(f"rule name {metadata.name!r} must be kebab-case (gpu-request-equals-limit)")
    if not metadata.summary.strip():
        raise origin.error(f"rule {metadata.id} needs a summary")
    if not metadata.remediation.strip().endswith("."):
        raise origin.error(f"rule {metadata.id}: the remediation must be one sentence ending with a period")


METADATA_FIELDS = ("id", "name", "severity", "summary", "remediation")


def declared_metadata(declared: Mapping[str, Any], origin: Origin, language: str, what: str) -> Metadata:
    """The metadata a native rule declares (a Rego module's `metadata`, a CustomRule's `spec`
    with its name): the fields of METADATA_FIELDS are required strings."""
    missing = [key for key in METADATA_FIELDS if not isinstance(declared.get(key), str)]
    if missing:
        raise origin.error(f"{what} lacks {', '.join(missing)} (strings)")
    parameters = declared.get("parameters")
    metadata = Metadata(
        id=declared["id"],
        name=declared["name"],
        severity=severity_of(declared["severity"], origin),
        summary=declared["summary"],
        remediation=declared["remediation"],
        rationale=str(declared.get("rationale", "")),
        origin=origin,
        language=language,
        parameters=dict(parameters) if isinstance(parameters, Mapping) else {},
    )
    check_metadata(metadata)
    return metadata


def severity_of(value: Any, origin: Origin) -> Severity:
    try:
        return Severity.parse(str(value))
    except ValueError as exc:
        raise origin.error(str(exc)) from None


def line_of(text: str, pattern: str, default: int = 1) -> int:
    """The 1-based line of the first occurrence of `pattern` (a plain string) in `text`."""
    index = text.find(pattern)
    return default if index < 0 else text.count("\n", 0, index) + 1
