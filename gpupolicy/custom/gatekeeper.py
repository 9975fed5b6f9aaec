"""Gatekeeper ConstraintTemplates and their Constraints, as custom rules (one rule per Constraint).

What is read (https://open-policy-agent.github.io/gatekeeper/website/docs/constrainttemplates):
the template's `spec.crd.spec.names.kind`, its `admission.k8s.gatekeeper.sh` target's `rego` and
`libs`; the Constraint's `spec.match`, `spec.parameters` (`input.parameters`) and
`spec.enforcementAction` (deny -> error, warn -> warning, dryrun -> info; scoped: the strongest
action of `scopedEnforcementActions` at a point gpupolicy stands in for). The template's Rego
sees `input.review` as Gatekeeper builds it for a CREATE (`object`, `kind`, `name`, `namespace`,
`operation`) and `data.inventory` (gpupolicy/custom/inventory_document.py). Parameters are not
checked against the template's `openAPIV3Schema`.

A Constraint's rule id is its `gpupolicy.io/rule-id` annotation, else `GK-<constraint name>`;
its name is the constraint's name (made kebab-case: `derived_rule_name`); its summary the template's `description` annotation; its
remediation the constraint's (or template's) `gpupolicy.io/remediation` annotation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpupolicy.core.findings import JsonPath, Severity
from gpupolicy.core.immutable import immutable, replace
from gpupolicy.core.vocabulary import REMEDIATION_ANNOTATION, RULE_ID_ANNOTATION
from gpupolicy.custom.definitions import (
    CustomRule,
    CustomViolation,
    Metadata,
    Origin,
    Review,
    check_metadata,
    derived_rule_name,
)
from gpupolicy.custom.errors import CustomRuleError
from gpupolicy.custom.matching import group_of, rule_matching
from gpupolicy.custom.native_rego import violation_of
from gpupolicy.custom.rego import RegoProgram, RegoSource
from gpupolicy.custom.unevaluated import unevaluated_rule, unresolved_rule
from gpupolicy.kube.pod_spec import as_list, as_mapping
from gpupolicy.loading.documents import Resource

TEMPLATES_GROUP = "templates.gatekeeper.sh"
CONSTRAINTS_GROUP = "constraints.gatekeeper.sh"
ADMISSION_TARGET = "admission.k8s.gatekeeper.sh"
ENFORCEMENT_SEVERITY = {"deny": Severity.ERROR, "warn": Severity.WARNING, "dryrun": Severity.INFO}


def is_template(resource: Resource) -> bool:
    return resource.kind == "ConstraintTemplate" and _group(resource) == TEMPLATES_GROUP


def is_constraint(resource: Resource) -> bool:
    return _group(resource) == CONSTRAINTS_GROUP


def _group(resource: Resource) -> str:
    obj = resource.obj if isinstance(resource.obj, dict) else {}
    return group_of(str(obj.get("apiVersion", "")))


def _origin(resource: Resource, path: tuple[str | int, ...] = ()) -> Origin:
    position = resource.position(path)
    return Origin(resource.file, position[0] if position else 1)


@immutable
class Template:
    kind: str
    program: RegoProgram
    package: str
    description: str
    remediation: str
    reads_inventory: bool


def compile_template(resource: Resource) -> Template:
    obj = as_mapping(resource.obj)
    origin = _origin(resource)
    kind_name = _template_kind(resource)
    if kind_name is None:
        raise origin.error("ConstraintTemplate: spec.crd.spec.names.kind is missing")
    targets = as_list(as_mapping(obj.get("spec")).get("targets"))
    index = next(
        (i for i, target in enumerate(targets) if as_mapping(target).get("target") == ADMISSION_TARGET), None
    )
    if index is None:
        raise origin.error(f"ConstraintTemplate {kind_name}: no target {ADMISSION_TARGET}")
    target = as_mapping(targets[index])
    rego = target.get("rego")
    if not isinstance(rego, str) or not rego.strip():
        raise origin.error(
            f"ConstraintTemplate {kind_name}: the target has no rego (CEL code is not supported)"
        )
    base = ("spec", "targets", index)
    sources = [_embedded(resource, (*base, "rego"), rego)]
    for lib_index, lib in enumerate(as_list(target.get("libs"))):
        if isinstance(lib, str):
            sources.append(_embedded(resource, (*base, "libs", lib_index), lib))
    reads_inventory = any("data.inventory" in source.text for source in sources)
    try:
        package = sources[0].package
        program = RegoProgram(
            sources, [package], v0=True
        )  # Gatekeeper's Rego is v0 (v1 with `import rego.v1`)
        program.compile({"inventory": {"cluster": {}, "namespace": {}}} if reads_inventory else {})
    except CustomRuleError as exc:
        exc.path = (*base, "rego")
        raise
    description, remediation = _template_texts(resource)
    return Template(
        kind=kind_name,
        program=program,
        package=package,
        description=description,
        remediation=remediation,
        reads_inventory=reads_inventory,
    )


def _embedded(resource: Resource, path: tuple[str | int, ...], text: str) -> RegoSource:
    """Rego written in a YAML string: a block scalar (`rego: |`) starts on the line below its key."""
    position = resource.position(path)
    line = position[0] if position else 1
    return RegoSource(resource.file, text, line + 1 if "\n" in text.rstrip("\n") else line)


def _template_texts(resource: Resource) -> tuple[str, str]:
    """A template's description and remediation (its annotations)."""
    annotations = as_mapping(as_mapping(as_mapping(resource.obj).get("metadata")).get("annotations"))
    return (
        str(annotations.get("description", "")).strip(),
        str(annotations.get(REMEDIATION_ANNOTATION, "")).strip(),
    )


def _constraint_metadata(resource: Resource, description: str, template_remediation: str) -> Metadata:
    obj = as_mapping(resource.obj)
    origin = _origin(resource)
    metadata_of = as_mapping(obj.get("metadata"))
    name = str(metadata_of.get("name", ""))
    spec = as_mapping(obj.get("spec"))
    annotations = as_mapping(metadata_of.get("annotations"))
    remediation = str(annotations.get(REMEDIATION_ANNOTATION, "")).strip() or template_remediation
    rule_name = derived_rule_name(name)
    metadata = Metadata(
        id=str(annotations.get(RULE_ID_ANNOTATION, f"GK-{rule_name}")),
        name=rule_name,
        severity=_enforcement_severity(spec, origin, name),
        summary=description or f"Gatekeeper constraint {resource.kind}/{name}.",
        remediation=remediation
        or f"Change the object so that the {resource.kind} constraint {name} admits it.",
        origin=origin,
        language="gatekeeper",
        parameters=dict(as_mapping(spec.get("parameters"))),
    )
    check_metadata(metadata)
    return metadata


def _require_template(resource: Resource, known: Mapping[str, Any]) -> None:
    """Refuse a constraint whose kind no ConstraintTemplate defines, compiled or not."""
    if resource.kind not in known:
        name = as_mapping(as_mapping(resource.obj).get("metadata")).get("name", "")
        raise _origin(resource).error(
            f"constraint {resource.kind}/{name}: no ConstraintTemplate defines kind {resource.kind}"
        )


# Where gpupolicy stands in for Gatekeeper: its lint is the shift-left check (gator), its webhook
# an admission check (Gatekeeper's webhook, or the ValidatingAdmissionPolicy Gatekeeper generates).
# https://open-policy-agent.github.io/gatekeeper/website/docs/enforcement-points
ENFORCING_POINTS = frozenset({"*", "gator.gatekeeper.sh", "validation.gatekeeper.sh", "vap.k8s.io"})


def _enforcement_severity(spec: Mapping[str, Any], origin: Origin, name: str) -> Severity:
    """`spec.enforcementAction`'s severity; for `scoped`, the strongest action of
    `scopedEnforcementActions` at a point gpupolicy stands in for (audit alone reports: info)."""
    action = str(spec.get("enforcementAction", "deny")).lower()
    if action in ENFORCEMENT_SEVERITY:
        return ENFORCEMENT_SEVERITY[action]
    if action != "scoped":
        raise origin.error(
            f"constraint {name}: enforcementAction {action!r} is not deny, warn, dryrun or scoped"
        )
    found = [Severity.INFO]
    for entry in as_list(spec.get("scopedEnforcementActions")):
        entry = as_mapping(entry)
        points = {str(as_mapping(point).get("name", "")) for point in as_list(entry.get("enforcementPoints"))}
        scoped_action = str(entry.get("action", "")).lower()
        if scoped_action not in ENFORCEMENT_SEVERITY:
            raise origin.error(
                f"constraint {name}: scopedEnforcementActions action {scoped_action!r} is not deny, warn or dryrun"
            )
        if points & ENFORCING_POINTS:
            found.append(ENFORCEMENT_SEVERITY[scoped_action])
    return max(found)


def constraint_rule(resource: Resource, templates: Mapping[str, Template]) -> CustomRule:
    _require_template(resource, templates)
    template = templates[resource.kind]
    metadata = _constraint_metadata(resource, template.description, template.remediation)
    return rule_matching(
        metadata,
        as_mapping(as_mapping(as_mapping(resource.obj).get("spec")).get("match")),
        GatekeeperCheck(template),
        reads_inventory=template.reads_inventory,
    )


class GatekeeperCheck:
    def __init__(self, template: Template) -> None:
        self.template = template

    def __call__(self, review: Review, parameters: Mapping[str, Any]) -> Sequence[CustomViolation]:
        template = self.template
        data: dict[str, Any] = {}
        if template.reads_inventory:
            data["inventory"] = review.inventory() if review.inventory is not None else {}
        document = {"review": admission_review_of(review), "parameters": dict(parameters)}
        return [violation_of(item) for item in template.program.violations(template.package, document, data)]


def admission_review_of(review: Review) -> dict[str, Any]:
    """`input.review` as Gatekeeper fills it for an admission request."""
    obj = review.obj
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    metadata = as_mapping(obj.get("metadata"))
    return {
        "kind": {"group": group, "version": version, "kind": str(obj.get("kind", ""))},
        "name": metadata.get("name", ""),
        "namespace": metadata.get("namespace", ""),
        "operation": review.operation,
        "object": obj,
        "oldObject": None,
        "userInfo": {},
    }


def _never(resource: Resource) -> bool:
    return False


def gatekeeper_rules(
    resources: Sequence[Resource], tolerated: Callable[[Resource], bool] = _never
) -> list[CustomRule]:
    """The rules of the Constraints among `resources`, with the templates among them. A template
    that fails to compile stops the run, unless `tolerated` (a definition of the linted tree): its
    constraints are then reported on it as not evaluated (gpupolicy/custom/unevaluated.py)."""
    templates: dict[str, Template] = {}
    unusable: dict[str, tuple[Resource, CustomRuleError]] = {}
    for resource in resources:
        if is_template(resource):
            try:
                template = compile_template(resource)
            except CustomRuleError as exc:
                kind = _template_kind(resource)
                if not tolerated(resource) or kind is None:
                    raise
                unusable[kind] = (resource, exc)
                continue
            templates[template.kind] = template
    rules = []
    for resource in resources:
        if not is_constraint(resource):
            continue
        try:
            rules.append(_rule_of_constraint(resource, templates, unusable))
        except CustomRuleError as exc:
            if not tolerated(resource):
                raise
            rules.append(_unresolved(resource, exc, templates, unusable))
            continue
        if tolerated(resource):
            rules[-1] = replace(rules[-1], in_tree=True)
    return rules


def _rule_of_constraint(
    resource: Resource,
    templates: Mapping[str, Template],
    unusable: Mapping[str, tuple[Resource, CustomRuleError]],
) -> CustomRule:
    _require_template(resource, {**unusable, **templates})
    if resource.kind in templates:
        return constraint_rule(resource, templates)
    template_resource, error = unusable[resource.kind]
    metadata = _constraint_metadata(resource, *_template_texts(template_resource))
    what = f"Gatekeeper constraint {resource.kind}/{resource.name}"
    return unevaluated_rule(metadata, template_resource, error, what)


def _unresolved(
    resource: Resource,
    error: CustomRuleError,
    templates: Mapping[str, Template],
    unusable: Mapping[str, tuple[Resource, CustomRuleError]],
) -> CustomRule:
    """A constraint of the linted tree that cannot become a rule, reported on itself: most often its
    template is installed from elsewhere (Gatekeeper's library)."""
    path: JsonPath
    missing = resource.kind not in templates and resource.kind not in unusable
    if missing:
        why, path = (
            f"no ConstraintTemplate in the linted tree or customRules.paths defines kind {resource.kind}",
            ("kind",),
        )
    else:
        why, path = error.reason, error.path
    what = f"Gatekeeper constraint {resource.kind}/{resource.name}"
    return unresolved_rule(resource, what, why, path, id_prefix="GK", language="gatekeeper", missing=missing)


def _template_kind(resource: Resource) -> str | None:
    crd = as_mapping(as_mapping(as_mapping(resource.obj).get("spec")).get("crd"))
    kind = as_mapping(as_mapping(crd.get("spec")).get("names")).get("kind")
    return kind if isinstance(kind, str) and kind else None
