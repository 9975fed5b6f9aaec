"""Definitions of the linted tree that gpupolicy cannot evaluate.

A GitOps repository keeps its admission policies beside its workloads, and writes them for the API
server: a CEL library gpupolicy does not implement (the `authorizer`), Gatekeeper Rego that calls
what gpupolicy's engine lacks. Refusing the whole run for one of them would leave every workload
of the repository unlinted. So each rule of such a definition — a binding of the policy, a
Constraint of the template — becomes one info finding on the definition itself, at the expression
that could not be compiled, saying what it could not check; it judges no other object.

Definitions that the policy's `customRules.paths` name are the user's rules for gpupolicy: their
errors still stop the run before anything is linted (exit 2), as docs/custom-rules.md says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpupolicy.core.findings import JsonPath, Severity
from gpupolicy.core.immutable import immutable, replace
from gpupolicy.custom.definitions import CustomRule, CustomViolation, Metadata, Review
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
    )
