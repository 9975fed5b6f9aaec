"""Definitions of the linted tree that gpupolicy cannot evaluate.

A GitOps repository keeps its admission policies beside its workloads, and writes them for the API
server: a CEL library gpupolicy does not implement (the `authorizer`), Gatekeeper Rego that calls
what gpupolicy's engine lacks. Refusing the whole run for one of them would leave every workload
of the repository unlinted. So each rule of such a definition — a binding of the policy, a
Constraint of the template — becomes one info finding on the definition itself, at the expression
that could not be compiled, saying what it could not check; it judges no other object.

The same holds for a Constraint or a binding of the tree that cannot become a rule: its template or
policy is installed in the cluster from elsewhere (Gatekeeper's library, another repository), or it
asks for what gpupolicy does not read. It is reported on itself, once, with how to supply what is
missing (`unresolved_rule`).

Definitions that the policy's `customRules.paths` name are the user's rules for gpupolicy: their
errors still stop the run before anything is linted (exit 2), as docs/custom-rules.md says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpupolicy.core.findings import JsonPath, Severity
from gpupolicy.core.immutable import immutable, replace
from gpupolicy.core.vocabulary import RULE_ID_ANNOTATION
from gpupolicy.custom.definitions import (
    CUSTOM_ID,
    CustomRule,
    CustomViolation,
    Metadata,
    Origin,
    Review,
    derived_rule_name,
)
from gpupolicy.custom.errors import CustomRuleError
from gpupolicy.custom.matching import ObjectMatch, group_of
from gpupolicy.kube.pod_spec import as_mapping
from gpupolicy.loading.documents import Resource


@immutable
class NotEvaluated:
    """The check of a rule that cannot be evaluated: one finding, on its own definition."""

    message: str
    path: JsonPath

    def __call__(self, review: Review, parameters: Mapping[str, Any]) -> Sequence[CustomViolation]:
        return [CustomViolation(self.message, self.path, Severity.INFO)]


def unevaluated_rule(
    metadata: Metadata, definition: Resource, error: CustomRuleError, what: str
) -> CustomRule:
    """`metadata`'s rule, reported once on `definition` (the policy or template that failed to
    compile) instead of judging the objects it selects."""
    group = group_of(str(as_mapping(definition.obj).get("apiVersion", "")))
    where = f"line {error.line}" + (f", column {error.column}" if error.column else "")
    message = (
        f"unknown: {what} was not evaluated: gpupolicy cannot compile it ({where}: {error.reason}); "
        "the objects it selects were not checked against it (the API server applies it)"
    )
    return CustomRule(
        metadata=replace(metadata, severity=Severity.INFO),
        matches=ObjectMatch(kinds=frozenset({(group, definition.kind)}), name=definition.name),
        check=NotEvaluated(message, error.path),
        in_tree=True,
    )


MISSING_HINT = "add the file that defines it to the policy's customRules.paths"


def unresolved_rule(
    definition: Resource,
    what: str,
    why: str,
    path: JsonPath,
    *,
    id_prefix: str,
    language: str,
    missing: bool = False,
) -> CustomRule:
    """One info finding on `definition` (a Constraint, a binding of the linted tree) that cannot
    become a rule, for `why`, at `path`; it judges no other object. `missing`: what it names is
    in neither the tree nor the policy's rule paths (the message says how to supply it)."""
    message = f"unknown: {what} was not evaluated: {why}; the objects it selects were not checked against it"
    if missing:
        message += f" ({MISSING_HINT})"
    name = derived_rule_name(definition.name)
    annotations = as_mapping(as_mapping(as_mapping(definition.obj).get("metadata")).get("annotations"))
    declared = annotations.get(RULE_ID_ANNOTATION)
    if not (isinstance(declared, str) and CUSTOM_ID.match(declared) and not declared.startswith("GP")):
        declared = f"{id_prefix}-{name}"
    position = definition.position(())
    metadata = Metadata(
        id=declared,
        name=name,
        severity=Severity.INFO,
        summary=f"{what} (not evaluated).",
        remediation=f"{MISSING_HINT[0].upper()}{MISSING_HINT[1:]}." if missing else f"Correct the {what}.",
        origin=Origin(definition.file, position[0] if position else 1),
        language=language,
    )
    group = group_of(str(as_mapping(definition.obj).get("apiVersion", "")))
    return CustomRule(
        metadata=metadata,
        matches=ObjectMatch(kinds=frozenset({(group, definition.kind)}), name=definition.name),
        check=NotEvaluated(message, path),
        in_tree=True,
    )
