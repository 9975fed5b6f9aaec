"""The rules engine: `evaluate(resources, policy, inventory) -> Report`, pure, no I/O.

The rules (gpupolicy/engine/registry.py) yield `Violation`s (a path and a message); the engine
runs the rules a policy enables (`RulePlan`) over each object, then across the bundle, stamps each
violation into a `Finding` (gpupolicy/engine/report.py: the rule's id, name, severity from the
policy, the position of the path), and applies the suppressions, so every shell reads the same
report. Rules never set their own level and never know where objects came from.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from typing import Any

from gpupolicy.core.findings import Finding, ObjectRef
from gpupolicy.engine import suppressions
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import REGISTRY, Rule, Scope, Violation
from gpupolicy.engine.report import (
    InternalError,
    Report,
    WorkloadRole,
    finding_for,
    finding_from_problem,
    finding_from_suppression,
)
from gpupolicy.engine.suppressions import SuppressionSubject
from gpupolicy.kube.inventory import Bundle, Inventory
from gpupolicy.kube.pod_spec import Workload
from gpupolicy.kube.roles import Role
from gpupolicy.loading.directives import InlineDirective
from gpupolicy.loading.documents import LoadProblem, Resource
from gpupolicy.policy.loading import Policy


def _resolve_rule(token: str) -> str | None:
    """The id of the rule `token` names (an id in any case, or a name); None for no rule."""
    found = REGISTRY.get(token)
    return found.id if found is not None else None


def apply_suppressions(
    findings: Sequence[Finding],
    subjects: Sequence[Resource | SuppressionSubject],
    policy: Policy,
    directives: Iterable[InlineDirective] = (),
    *,
    active: Collection[str],
    today: datetime.date | None = None,
) -> tuple[list[Finding], list[tuple[Finding, str]]]:
    """The suppressions pass (gpupolicy/engine/suppressions.py) over `findings`: the findings kept,
    with its problems made findings, and those suppressed with why. `active`: the rules that ran."""

    def resolve(token: str) -> str | None:
        # A custom rule the webhook runs without registering it is named by its id.
        return _resolve_rule(token) or (token.upper() if token.upper() in active else None)

    outcome = suppressions.apply(
        findings, subjects, policy, directives, resolve=resolve, active=active, today=today
    )
    kept = outcome.findings
    kept.extend(finding_from_suppression(problem, policy) for problem in outcome.problems)
    return kept, outcome.suppressed


WorkloadCheck = Callable[[Workload, Context], Iterable[Violation]]
ObjectCheck = Callable[[Resource, Context], Iterable[Violation]]


def _run(
    rule: Rule, subject: Any, evaluation: Evaluation, resource: Resource | None, ref: ObjectRef | None
) -> None:
    """Run one check and add its findings (those made before a rule raised are kept)."""
    check, ctx = rule.check, evaluation.ctx
    assert check is not None
    try:
        violations = check(subject, ctx) if subject is not None else check(ctx)
        for violation in violations:
            owner = violation.target or resource
            if owner is None:
                raise ValueError(f"{rule.id}: a bundle rule must name the target of each violation")
            evaluation.add(rule, violation, owner, ref if owner is resource else None)
    except Exception as exc:  # a rule bug must not hide every other finding
        _internal_error(rule, resource, exc, evaluation.report)


def _internal_error(rule: Rule, resource: Resource | None, exc: Exception, report: Report) -> None:
    import traceback  # here: only a rule that raised needs it

    where = f"{resource.file}#{resource.doc_index} ({resource.ref})" if resource else "bundle"
    detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
    report.errors.append(InternalError(rule.id, where, detail))


class RulePlan:
    """The rules of a rule set that one policy enables, split by scope, and object rules per
    kind (each kind's list made when an object of it first comes). An evaluation makes its own
    (a filter of the rules, about 30 us); a shell that evaluates one object at a time under one
    policy and rule set (the webhook) makes it once per policy load and passes it as `rules`."""

    __slots__ = (
        "_by_kind",
        "_by_role",
        "active_ids",
        "bundle_rules",
        "object_rules",
        "policy",
        "workload_rules",
    )

    def __init__(self, rules: Iterable[Rule], policy: Policy) -> None:
        self.policy = policy
        active = [rule for rule in rules if policy.rule(rule.id).enabled]
        # Those that cannot find anything under this policy are not called (Rule.can_find); they
        # are still active, as a rule that found nothing is.
        called = [rule for rule in active if rule.can_find is None or rule.can_find(policy)]
        self.object_rules = tuple(rule for rule in called if rule.scope is Scope.OBJECT)
        self.workload_rules = tuple(rule for rule in called if rule.scope is Scope.WORKLOAD)
        self.bundle_rules = tuple(rule for rule in called if rule.scope is Scope.BUNDLE)
        self.active_ids = frozenset(rule.id for rule in active)
        self._by_kind: dict[str, tuple[tuple[Rule, ObjectCheck], ...]] = {}
        self._by_role: dict[Role, tuple[tuple[Rule, WorkloadCheck], ...]] = {}

    def workload_rules_for(self, role: Role) -> tuple[tuple[Rule, WorkloadCheck], ...]:
        """The workload rules that judge workloads of `role`, each with its check function (each
        role's list made once; the engine calls about 80 checks per workload)."""
        found = self._by_role.get(role)
        if found is None:
            found = tuple(
                (rule, rule.check)
                for rule in self.workload_rules
                if rule.check is not None and (rule.roles is None or role in rule.roles)
            )
            self._by_role[role] = found
        return found

    def object_rules_for(self, kind: str) -> tuple[tuple[Rule, ObjectCheck], ...]:
        """The object rules that judge objects of `kind`, each with its check function (each
        kind's list made once)."""
        found = self._by_kind.get(kind)
        if found is None:
            found = tuple(
                (rule, rule.check)
                for rule in self.object_rules
                if rule.check is not None and (rule.kinds is None or kind in rule.kinds)
            )
            self._by_kind[kind] = found
        return found


def plan_for(policy: Policy, rules: Iterable[Rule] | RulePlan | None) -> RulePlan:
    """`rules` (every registered rule when None) as `policy` enables them; a plan made for
    another policy is refused rather than run with the wrong rules enabled."""
    if isinstance(rules, RulePlan):
        if rules.policy is not policy:
            raise ValueError("a RulePlan runs only under the policy it was made for")
        return rules
    return RulePlan(REGISTRY if rules is None else rules, policy)


class Evaluation:
    """One run of the rules, fed one object at a time: `evaluate()` feeds it a list of objects;
    the streaming lint (gpupolicy/lint/streaming.py) feeds each file's objects as it reads them and
    releases them once their findings are made. `finish()` adds the input problems, applies the
    suppressions and sorts."""

    def __init__(
        self,
        policy: Policy,
        inventory: Inventory,
        resources: Sequence[Resource] = (),
        *,
        rules: Iterable[Rule] | RulePlan | None = None,
        said: set[Hashable] | None = None,
        subjects_only: bool = False,
    ) -> None:
        self.policy = policy
        self.ctx = Context(policy, inventory, resources, said=said, subjects_only=subjects_only)
        self.report = Report(policy_digest=policy.digest, policy_sources=policy.sources)
        self.plan = plan_for(policy, rules)
        self.findings: list[Finding] = []
        # The key of each finding said once per run (Violation.once), by its index in `findings`:
        # a lint in several processes (gpupolicy/lint/parallel.py) replays them in the inputs' order.
        self.once: dict[int, Hashable] = {}

    def add(self, rule: Rule, violation: Violation, owner: Resource, ref: ObjectRef | None) -> None:
        """The finding of `violation` about `owner`, unless it says what the run has said once already."""
        once = violation.once
        if once is not None:
            said = self.ctx.said
            if once in said:
                return
            said.add(once)
        self.findings.append(finding_for(rule, self.policy, violation, owner, ref))
        if once is not None:
            self.once[len(self.findings) - 1] = once

    def check(self, resource: Resource, *, view: Workload | None = None) -> None:
        """Run the object rules of its kind and, when it carries pod templates, the workload rules.
        `view`: the object's workload view, when the caller has made it (else made here)."""
        ctx, report = self.ctx, self.report
        ctx.next_subject(resource, view)
        # _run written out, as for the workload rules below: a PDB has ten object rules. Their
        # findings are few: each makes the object's ref (finding_for), an object without pod
        # templates (a PDB, a ConfigMap) then none at all.
        for rule, object_check in self.plan.object_rules_for(resource.kind):
            try:
                for violation in object_check(resource, ctx):
                    self.add(rule, violation, violation.target or resource, None)
            except Exception as exc:  # a rule bug must not hide every other finding
                _internal_error(rule, resource, exc, report)
        workload = ctx.workload_of(resource)
        if workload is not None:
            ref = workload.ref()
            # _run written out: this loop runs ~90 rules per object, most finding nothing.
            decision = ctx.role(workload)
            report.roles.append(WorkloadRole.of(resource, decision, ref))
            for rule, check in self.plan.workload_rules_for(decision.role):
                try:
                    for violation in check(workload, ctx):
                        self.add(rule, violation, resource, ref)
                except Exception as exc:  # a rule bug must not hide every other finding
                    _internal_error(rule, resource, exc, report)

    def check_bundle(self) -> None:
        self.ctx.next_subject()
        for rule in self.plan.bundle_rules:
            _run(rule, None, self, None, None)

    def finish(
        self,
        *,
        problems: Iterable[LoadProblem] = (),
        subjects: Sequence[Resource | SuppressionSubject] = (),
        directives: Iterable[InlineDirective] = (),
        chosen: Collection[tuple[str, int]] | None = None,
    ) -> Report:
        """The report: findings about the `chosen` objects (file, document) only, when given (a
        cross-object rule may point elsewhere), the input problems, and suppressions applied, which
        `subjects` (the objects reported on, or what suppressions read of them) and `directives`
        (the `# gpupolicy: ignore` comments of the files reported on) may hold."""
        policy, report = self.policy, self.report
        active_ids = self.plan.active_ids
        findings = self.findings
        if chosen is not None and findings:
            findings = [finding for finding in findings if (finding.file, finding.doc_index) in chosen]
        # Input problems are the caller's to choose (it knows which files it reports on).
        findings.extend(
            finding_from_problem(problem, policy) for problem in problems if problem.rule_id in active_ids
        )
        # A base file's comments come once with each overlay that renders it: one comment, one directive.
        directives = list(dict.fromkeys(directives))
        findings, suppressed = apply_suppressions(findings, subjects, policy, directives, active=active_ids)
        if suppressed:
            report.suppressed = sorted(suppressed, key=lambda item: item[0].sort_key())
        report.findings = sorted(findings, key=Finding.sort_key) if len(findings) > 1 else findings
        return report


def evaluate(
    resources: Sequence[Resource],
    policy: Policy,
    inventory: Inventory | None = None,
    *,
    problems: Iterable[LoadProblem] = (),
    report_on: Callable[[Resource], bool] | None = None,
    rules: Iterable[Rule] | RulePlan | None = None,
    directives: Iterable[InlineDirective] = (),
    said: set[Hashable] | None = None,
) -> Report:
    """Run every enabled rule over `resources`. `inventory` defaults to a Bundle of them;
    `report_on` keeps only findings about chosen objects (pre-commit's changed files).
    Suppressions (annotations of the chosen objects, `directives` — the `# gpupolicy: ignore`
    comments of the chosen files — and policy exemptions) move findings to `report.suppressed`.
    `said`: what this run has said once already (`Context.said`)."""
    inventory = (
        inventory if inventory is not None else Bundle(resources, complete_kinds=complete_kinds(policy))
    )
    evaluation = Evaluation(policy, inventory, resources, rules=rules, said=said)
    subjects = [resource for resource in resources if report_on is None or report_on(resource)]
    for resource in subjects:
        evaluation.check(resource)
    evaluation.check_bundle()
    chosen = None if report_on is None else {(resource.file, resource.doc_index) for resource in subjects}
    report = evaluation.finish(problems=problems, subjects=subjects, directives=directives, chosen=chosen)
    report.objects = len(resources)
    return report


def evaluate_subject(
    resource: Resource,
    policy: Policy,
    inventory: Inventory,
    *,
    rules: Iterable[Rule] | RulePlan | None = None,
    view: Workload | None = None,
) -> Report:
    """`evaluate([resource], policy, inventory, report_on=...)` for one object the inventory may
    hold beside others (the webhook's admitted object): only findings about it are kept, its
    suppressions applied. `view`: its workload view, when the caller has made it."""
    evaluation = Evaluation(policy, inventory, (resource,), rules=rules, subjects_only=True)
    evaluation.check(resource, view=view)
    evaluation.check_bundle()
    report = evaluation.finish(subjects=(resource,), chosen=((resource.file, resource.doc_index),))
    report.objects = 1
    return report


def complete_kinds(policy: Policy) -> list[str]:
    """The kinds the policy declares the repository holds in full (`inventory.completeKinds`)."""
    return list(policy.inventory.complete_kinds)
