"""CEL rules: Kubernetes ValidatingAdmissionPolicies with their bindings, and native CustomRules.

A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1,
https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/) becomes one
rule per ValidatingAdmissionPolicyBinding that names it: `matchConstraints` and the binding's
`matchResources` choose the objects, `matchConditions` must all hold, `variables` are computed
in order (`variables.<name>`), and each `validations` entry whose `expression` is false is a
violation with its `message` (or `messageExpression`) at its `fieldPath`. The binding's
`validationActions` give the severity (Deny: error, Warn: warning, Audit alone: info); its
`paramRef` names the params object of the policy's `paramKind`, looked up among the linted
objects (lint) or the cluster's (the webhook); `parameterNotFoundAction: Deny` makes a missing one
a violation. The rule id is the binding's `gpupolicy.io/rule-id` annotation, else
`VAP-<binding name>`.

A native CEL rule is the same with gpupolicy's metadata, in a document of its own:

    apiVersion: gpupolicy.io/v1alpha1
    kind: CustomRule
    metadata: {name: gpu-request-equals-limit}
    spec:
      id: ACME002
      severity: error
      summary: ...
      remediation: ... .
      match: {kinds: [{apiGroups: ["apps"], kinds: ["Deployment"]}]}   # Gatekeeper's match
      parameters: {resource: nvidia.com/gpu}                           # `params`
      variables: [{name: ..., expression: ...}]
      validations: [{expression: ..., messageExpression: ..., fieldPath: ...}]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpupolicy.core.findings import JsonPath, Severity
from gpupolicy.core.immutable import immutable, replace
from gpupolicy.core.vocabulary import POLICY_API_VERSION, REMEDIATION_ANNOTATION, RULE_ID_ANNOTATION
from gpupolicy.custom.cel import Activation, CelExpression, compile_expression
from gpupolicy.custom.definitions import (
    CustomRule,
    CustomViolation,
    Metadata,
    Origin,
    Review,
    check_metadata,
    declared_metadata,
    derived_rule_name,
)
from gpupolicy.custom.errors import CustomRuleError
from gpupolicy.custom.field_paths import parse_field_path
from gpupolicy.custom.matching import all_of, group_of, plural_of, rule_matching, vap_match
from gpupolicy.custom.unevaluated import unevaluated_rule, unresolved_rule
from gpupolicy.kube.pod_spec import as_list, as_mapping
from gpupolicy.loading.documents import Resource

ADMISSION_GROUP = "admissionregistration.k8s.io"
POLICY_KIND = "ValidatingAdmissionPolicy"
BINDING_KIND = "ValidatingAdmissionPolicyBinding"
NATIVE_KIND = "CustomRule"


def _group(resource: Resource) -> str:
    obj = resource.obj if isinstance(resource.obj, dict) else {}
    return group_of(str(obj.get("apiVersion", "")))


def is_cel_definition(resource: Resource) -> bool:
    if resource.kind in (POLICY_KIND, BINDING_KIND):
        return _group(resource) == ADMISSION_GROUP
    return resource.kind == NATIVE_KIND and as_mapping(resource.obj).get("apiVersion") == POLICY_API_VERSION


@immutable
class Validation:
    expression: CelExpression
    message: str
    message_expression: CelExpression | None
    path: tuple[str | int, ...]


@immutable
class CelProgram:
    """A policy's compiled expressions: what one binding or native rule evaluates."""

    name: str
    conditions: tuple[CelExpression, ...]
    variables: tuple[tuple[str, CelExpression], ...]
    validations: tuple[Validation, ...]


def _compiled(resource: Resource, path: tuple[str | int, ...], text: Any, what: str) -> CelExpression:
    position = resource.position(path)
    line = position[0] if position else 1
    try:
        if not isinstance(text, str) or not text.strip():
            raise Origin(resource.file, line).error(f"{what}: an expression is required")
        first_line = line + 1 if "\n" in text.rstrip("\n") else line  # a block scalar starts below its key
        expression = compile_expression(text, Origin(resource.file, first_line), what)
        unknowable = _UNKNOWABLE_REQUEST.search(text)
        if unknowable is not None:
            raise Origin(resource.file, first_line).error(
                f"CEL: {what}: reads request.{unknowable.group(1)}, which no manifest holds (the API server "
                "fills it in for each request: who sends it, with which options)"
            )
        return expression
    except CustomRuleError as exc:
        exc.path = path
        raise


# What an AdmissionRequest says that a manifest cannot (https://kubernetes.io/docs/reference/
# access-authn-authz/validating-admission-policy/#validation-expression): `request.userInfo`
# (a policy for the pods a controller updates, or for a group of users), the request's uid and
# its options. A literal pattern with one group: linear in the expression's length.
_UNKNOWABLE_REQUEST = re.compile(r"\brequest\s*\.\s*(userInfo|uid|options)\b")


def compile_program(resource: Resource, spec_path: tuple[str, ...], spec: Mapping[str, Any]) -> CelProgram:
    name = str(as_mapping(as_mapping(resource.obj).get("metadata")).get("name", ""))
    conditions = tuple(
        _compiled(
            resource,
            (*spec_path, "matchConditions", i, "expression"),
            as_mapping(entry).get("expression"),
            f"{name}: matchConditions[{i}]",
        )
        for i, entry in enumerate(as_list(spec.get("matchConditions")))
    )
    variables = tuple(
        (
            str(as_mapping(entry).get("name", "")),
            _compiled(
                resource,
                (*spec_path, "variables", i, "expression"),
                as_mapping(entry).get("expression"),
                f"{name}: variables[{i}]",
            ),
        )
        for i, entry in enumerate(as_list(spec.get("variables")))
    )
    validations = []
    for i, entry in enumerate(as_list(spec.get("validations"))):
        entry = as_mapping(entry)
        base: tuple[str | int, ...] = (*spec_path, "validations", i)
        expression = _compiled(
            resource, (*base, "expression"), entry.get("expression"), f"{name}: validations[{i}]"
        )
        message_expression = (
            _compiled(
                resource,
                (*base, "messageExpression"),
                entry["messageExpression"],
                f"{name}: validations[{i}].messageExpression",
            )
            if "messageExpression" in entry
            else None
        )
        message = str(entry.get("message") or f"failed expression: {expression.text.strip()}")
        field = entry.get("fieldPath")
        validations.append(
            Validation(
                expression,
                message,
                message_expression,
                parse_field_path(field) if isinstance(field, str) else (),
            )
        )
    if not validations:
        raise _origin(resource).error(f"{name}: no validations")
    return CelProgram(name, conditions, variables, tuple(validations))


def _origin(resource: Resource) -> Origin:
    position = resource.position(())
    return Origin(resource.file, position[0] if position else 1)


# -- evaluation ---------------------------------------------------------------------------------


@immutable
class ParamSource:
    """Where a binding's params come from: `paramKind` and `paramRef`."""

    kind: str
    name: str | None
    namespace: str | None
    selector: Mapping[str, Any] | None
    deny_when_missing: bool


class CelCheck:
    def __init__(self, program: CelProgram, params: ParamSource | None, severity: Severity | None) -> None:
        self.program = program
        self.params = params
        self.severity = severity

    def __call__(self, review: Review, parameters: Mapping[str, Any]) -> Sequence[CustomViolation]:
        if self.params is None:
            return self._evaluate(review, dict(parameters) if parameters else None)
        found = _params_for(self.params, review)
        if not found:
            if self.params.deny_when_missing:
                return [
                    CustomViolation(
                        f"{self.program.name}: no params object {self.params.kind} found", (), self.severity
                    )
                ]
            return []
        return [violation for params in found for violation in self._evaluate(review, params)]

    def _evaluate(self, review: Review, params: Any) -> list[CustomViolation]:
        obj = review.obj
        activation: dict[str, Any] = {
            "object": obj,
            "oldObject": None,
            "params": params,
            "namespaceObject": review.namespace,
            "request": _request_of(obj, review.operation),
        }
        program = self.program
        context = Activation({**activation, "variables": {}})
        if not all(context.evaluate(condition) is True for condition in program.conditions):
            return []
        variables: dict[str, Any] = {}
        for name, expression in program.variables:
            variables[name] = context.evaluate(expression)
            context.set("variables", variables)
        violations = []
        for validation in program.validations:
            if context.evaluate(validation.expression) is True:
                continue
            violations.append(CustomViolation(_message(validation, context), validation.path, self.severity))
        return violations


def _request_of(obj: Mapping[str, Any], operation: str) -> dict[str, Any]:
    """`request` as the API server fills it for the object (an AdmissionRequest without who sends
    it: policies that read that are refused when compiled)."""
    metadata = as_mapping(obj.get("metadata"))
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    kind = str(obj.get("kind", ""))
    kind_of = {"group": group, "version": version, "kind": kind}
    resource = {"group": group, "version": version, "resource": plural_of(kind)}
    return {
        "operation": operation,
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
        "kind": kind_of,
        "resource": resource,
        "subResource": "",
        "requestKind": kind_of,
        "requestResource": resource,
        "requestSubResource": "",
        "dryRun": False,
    }


def _message(validation: Validation, context: Activation) -> str:
    """`messageExpression` when it gives a non-empty string, else `message` (as Kubernetes does)."""
    if validation.message_expression is not None:
        try:
            text = context.evaluate(validation.message_expression)
        except Exception:  # a message that fails to build must not hide the violation
            text = None
        if isinstance(text, str) and text.strip():
            return text
    return validation.message


def _params_for(source: ParamSource, review: Review) -> list[Any]:
    if review.lookup is None:
        return []
    namespace = source.namespace
    if namespace is None:
        namespace = as_mapping(review.obj.get("metadata")).get("namespace")
    candidates = review.lookup(source.kind, namespace if isinstance(namespace, str) else None)
    if source.name is not None:
        return [obj for obj in candidates if as_mapping(obj.get("metadata")).get("name") == source.name]
    from gpupolicy.kube.selectors import selector_matches

    selector = source.selector or {}
    return [
        obj
        for obj in candidates
        if selector_matches(selector, as_mapping(as_mapping(obj.get("metadata")).get("labels")))
    ]


# -- the rules ------------------------------------------------------------------------------------

ACTION_SEVERITY = {"Deny": Severity.ERROR, "Warn": Severity.WARNING, "Audit": Severity.INFO}


def _binding_severity(binding: Resource, actions: Sequence[Any]) -> Severity:
    known = [ACTION_SEVERITY[action] for action in actions if action in ACTION_SEVERITY]
    if not known:
        raise _origin(binding).error("validationActions must hold Deny, Warn or Audit")
    return max(known)


def _param_source(
    policy: Mapping[str, Any], binding_spec: Mapping[str, Any], binding: Resource
) -> ParamSource | None:
    kind = as_mapping(policy.get("paramKind")).get("kind")
    if not isinstance(kind, str):
        return None
    ref = as_mapping(binding_spec.get("paramRef"))
    if not ref:
        raise _origin(binding).error(f"the policy has paramKind {kind}: the binding needs a paramRef")
    name = ref.get("name")
    namespace = ref.get("namespace")
    return ParamSource(
        kind=kind,
        name=name if isinstance(name, str) else None,
        namespace=namespace if isinstance(namespace, str) else None,
        selector=as_mapping(ref.get("selector")) if "selector" in ref else None,
        deny_when_missing=ref.get("parameterNotFoundAction", "Deny") == "Deny",
    )


def _binding_metadata(binding: Resource, policy_resource: Resource) -> Metadata:
    obj = as_mapping(binding.obj)
    metadata_of = as_mapping(obj.get("metadata"))
    name = str(metadata_of.get("name", ""))
    spec = as_mapping(obj.get("spec"))
    policy_name = str(spec.get("policyName", ""))
    annotations = {
        **as_mapping(as_mapping(as_mapping(policy_resource.obj).get("metadata")).get("annotations")),
        **as_mapping(metadata_of.get("annotations")),
    }
    rule_name = derived_rule_name(name)
    metadata = Metadata(
        id=str(annotations.get(RULE_ID_ANNOTATION, f"VAP-{rule_name}")),
        name=rule_name,
        severity=_binding_severity(binding, as_list(spec.get("validationActions"))),
        summary=str(annotations.get("description", "")).strip()
        or f"ValidatingAdmissionPolicy {policy_name} (binding {name}).",
        remediation=str(annotations.get(REMEDIATION_ANNOTATION, "")).strip()
        or f"Change the object so that the ValidatingAdmissionPolicy {policy_name} admits it.",
        origin=_origin(binding),
        language="vap",
    )
    check_metadata(metadata)
    return metadata


def _policy_of(binding: Resource, known: Mapping[str, Any]) -> str:
    obj = as_mapping(binding.obj)
    policy_name = str(as_mapping(obj.get("spec")).get("policyName", ""))
    if policy_name not in known:
        name = as_mapping(obj.get("metadata")).get("name", "")
        raise _origin(binding).error(f"binding {name}: no ValidatingAdmissionPolicy named {policy_name!r}")
    return policy_name


def binding_rule(binding: Resource, policies: Mapping[str, tuple[Resource, CelProgram]]) -> CustomRule:
    policy_resource, program = policies[_policy_of(binding, policies)]
    metadata = _binding_metadata(binding, policy_resource)
    policy = as_mapping(as_mapping(policy_resource.obj).get("spec"))
    spec = as_mapping(as_mapping(binding.obj).get("spec"))
    matches = [vap_match(as_mapping(policy.get("matchConstraints")))]
    if "matchResources" in spec:
        matches.append(vap_match(as_mapping(spec.get("matchResources"))))
    params = _param_source(policy, spec, binding)
    return CustomRule(
        metadata=metadata,
        matches=all_of(matches),
        check=CelCheck(program, params, metadata.severity),
        expands_pods=any(match.matches_pods() for match in matches),
        lookups=((params.kind, params.namespace),) if params is not None else (),
    )


def native_rule(resource: Resource) -> CustomRule:
    obj = as_mapping(resource.obj)
    spec = as_mapping(obj.get("spec"))
    declared = {**spec, "name": str(as_mapping(obj.get("metadata")).get("name", ""))}
    metadata = declared_metadata(declared, _origin(resource), "cel", "CustomRule spec")
    check = CelCheck(compile_program(resource, ("spec",), spec), None, None)
    return rule_matching(metadata, as_mapping(spec.get("match")), check)


def _never(resource: Resource) -> bool:
    return False


def cel_rules(
    resources: Sequence[Resource], tolerated: Callable[[Resource], bool] = _never
) -> list[CustomRule]:
    """The rules of the bindings and native CustomRules among `resources`. A policy that fails to
    compile stops the run, unless `tolerated` (a definition of the linted tree): its bindings are
    then reported on it as not evaluated (gpupolicy/custom/unevaluated.py)."""
    policies: dict[str, tuple[Resource, CelProgram]] = {}
    unusable: dict[str, tuple[Resource, CustomRuleError]] = {}
    for resource in resources:
        if resource.kind == POLICY_KIND and is_cel_definition(resource):
            spec = as_mapping(as_mapping(resource.obj).get("spec"))
            try:
                program = compile_program(resource, ("spec",), spec)
            except CustomRuleError as exc:
                if not tolerated(resource):
                    raise
                unusable[resource.name] = (resource, exc)
                continue
            policies[program.name] = (resource, program)
    rules: list[CustomRule] = []
    for resource in resources:
        if resource.kind == BINDING_KIND and is_cel_definition(resource):
            try:
                rule = _rule_of_binding(resource, policies, unusable)
            except CustomRuleError as exc:
                if not tolerated(resource):
                    raise
                rule = _unresolved(resource, exc, {**unusable, **policies})
            rules.append(replace(rule, in_tree=True) if tolerated(resource) else rule)
        elif resource.kind == NATIVE_KIND and is_cel_definition(resource):
            rules.append(native_rule(resource))
    return rules


def _rule_of_binding(
    binding: Resource,
    policies: Mapping[str, tuple[Resource, CelProgram]],
    unusable: Mapping[str, tuple[Resource, CustomRuleError]],
) -> CustomRule:
    policy_name = _policy_of(binding, {**unusable, **policies})
    if policy_name in policies:
        return binding_rule(binding, policies)
    policy_resource, error = unusable[policy_name]
    what = f"ValidatingAdmissionPolicy {policy_name} (binding {binding.name})"
    return unevaluated_rule(_binding_metadata(binding, policy_resource), policy_resource, error, what)


def _unresolved(binding: Resource, error: CustomRuleError, known: Mapping[str, Any]) -> CustomRule:
    """A binding of the linted tree that cannot become a rule, reported on itself: most often its
    policy is installed from elsewhere."""
    policy_name = str(as_mapping(as_mapping(binding.obj).get("spec")).get("policyName", ""))
    missing = bool(policy_name) and policy_name not in known
    if policy_name not in known:
        why = (
            f"no ValidatingAdmissionPolicy named {policy_name!r} is in the linted tree or customRules.paths"
            if policy_name
            else "it names no policy (spec.policyName)"
        )
        path: JsonPath = ("spec", "policyName") if policy_name else ("spec",)
    else:
        why, path = error.reason, error.path
    what = f"ValidatingAdmissionPolicyBinding {binding.name}"
    return unresolved_rule(binding, what, why, path, id_prefix="VAP", language="vap", missing=missing)
