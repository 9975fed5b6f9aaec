"""The rules engine: `evaluate(resources, policy, inventory) -> Report`, pure, no I/O.

Rules are small functions with metadata, kept in one registry that refuses duplicate ids and
names. A rule yields `Violation`s (a path and a message); the engine stamps the rule's id, name,
severity (from the policy) and the position of the path, so every shell reads the same
`Finding`. Rules never set their own level and never know where objects came from.
"""

from __future__ import annotations

import datetime
import enum
import re
import traceback
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpupolicy.core.findings import Finding, JsonPath, ObjectRef, Severity
from gpupolicy.engine import suppressions
from gpupolicy.engine.suppressions import SuppressionSubject
from gpupolicy.kube.inventory import Bundle, Inventory, namespace_of
from gpupolicy.kube.pod_spec import PodTemplate, Workload, workload_of
from gpupolicy.kube.roles import Role, RoleDecision, decide, service_selects
from gpupolicy.loading.directives import InlineDirective
from gpupolicy.loading.documents import LoadProblem, Resource, Skipped
from gpupolicy.policy.loading import Policy
from gpupolicy.policy.parameters import DECLARED, RuleCatalog, RuleDeclaration
from gpupolicy.policy.parameters import Parameter as Parameter  # rules declare theirs from here


class Scope(enum.Enum):
    INPUT = "input"  # produced while loading (GP001, GP002, GP004): no check function
    OBJECT = "object"  # called once per object (of the rule's kinds)
    WORKLOAD = "workload"  # called once per object that carries pod templates
    BUNDLE = "bundle"  # called once per evaluation, for checks across objects


@dataclass(frozen=True, slots=True)
class Setting:
    """A policy setting a rule reads that is not its own: a fact of the cluster or a section
    several rules share (`nodePools`, `gpu.vendors`), named for the docs and `cluster snapshot`.
    A setting the rule alone owns is a `Parameter` (gpupolicy/policy/parameters.py)."""

    key: str  # the policy key, e.g. "gpu.servingImages"
    description: str


@dataclass(frozen=True, slots=True)
class Violation:
    """What a rule yields. `target` defaults to the object being checked; a cross-object rule
    names the object to change (the PDB for GP502) and mentions the other in the message.
    `unknown` marks a finding that says a fact could not be verified (the inventory cannot list
    what it needs): such a finding is info, whatever the policy's severity override."""

    path: JsonPath
    message: str
    target: Resource | None = None
    severity: Severity | None = None
    container: str | None = None
    # A fact of the cluster that neither the policy nor the inventory holds (gpupolicy/engine/unknowns.py):
    # the finding says so once per evaluation; the webhook logs it rather than warning on every admission.
    cluster_fact: str | None = None
    unknown: bool = False


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    name: str
    severity: Severity
    scope: Scope
    summary: str  # What it does
    rationale: str  # Why is this bad?
    remediation: str  # one sentence, ends with a period
    references: tuple[str, ...] = ()
    parameters: tuple[Parameter[Any], ...] = ()  # its own, set by `rules: {<id or name>: {params: ...}}`
    settings: tuple[Setting, ...] = ()  # policy settings it reads besides its parameters
    kinds: frozenset[str] | None = None  # OBJECT scope: the kinds it applies to (None: all)
    # WORKLOAD scope: the roles (gpupolicy/kube/roles.py) of the workloads it judges (None: every role).
    roles: frozenset[Role] | None = None
    check: Callable[..., Iterable[Violation]] | None = None
    # A custom rule (gpupolicy/custom/): the file that defines it. Custom ids are the team's own
    # (ORG001); GPnnn stays the built-in rules'.
    source: str | None = None

    @property
    def family(self) -> str:
        return self.id[:3] + "xx"

    @property
    def slug(self) -> str:
        return f"{self.id}-{self.name}"


_RULE_ID = re.compile(r"^GP\d{3}$")
_CUSTOM_RULE_ID = re.compile(r"^[A-Z][A-Z0-9]*(?:-[A-Za-z0-9]+)*$")
# Built-in names as policy.schema.json names rules (a hyphen: `gp104` is no name); a custom rule's
# may lack one (it is then named by its id in a policy).
_RULE_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")
_CUSTOM_RULE_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class RuleRegistry:
    def __init__(self, declarations: RuleCatalog | None = None) -> None:
        # What a policy may say of these rules (their names and parameters): checked when it loads.
        self.declarations = declarations if declarations is not None else RuleCatalog()
        self._by_id: dict[str, Rule] = {}
        self._by_name: dict[str, Rule] = {}
        self._sorted: tuple[Rule, ...] | None = None

    def add(self, rule: Rule) -> Rule:
        if rule.source is None and not _RULE_ID.match(rule.id):
            raise ValueError(f"rule id {rule.id!r} is not of the form GPnnn")
        if rule.source is not None and (rule.id.startswith("GP") or not _CUSTOM_RULE_ID.match(rule.id)):
            raise ValueError(f"custom rule id {rule.id!r} is not of the form ORG001 (GPnnn is built-in)")
        if not (_RULE_NAME if rule.source is None else _CUSTOM_RULE_NAME).match(rule.name):
            raise ValueError(f"rule name {rule.name!r} is not kebab-case")
        if rule.id in self._by_id:
            raise ValueError(f"duplicate rule id {rule.id} ({rule.name} and {self._by_id[rule.id].name})")
        if rule.name in self._by_name:
            raise ValueError(f"duplicate rule name {rule.name} ({rule.id} and {self._by_name[rule.name].id})")
        if not rule.remediation.endswith("."):
            raise ValueError(f"{rule.id}: the remediation must be one sentence ending with a period")
        if (rule.scope is Scope.INPUT) != (rule.check is None):
            raise ValueError(f"{rule.id}: input rules have no check function; every other rule has one")
        names = [parameter.name for parameter in rule.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"{rule.id}: a parameter is declared twice ({', '.join(names)})")
        self.declarations.declare(RuleDeclaration(rule.id, rule.name, rule.parameters))
        self._by_id[rule.id] = rule
        self._by_name[rule.name] = rule
        self._sorted = None
        return rule

    def remove(self, rule: Rule) -> None:
        """Take a custom rule out (its run, or the webhook policy that loaded it, is over)."""
        if self._by_id.get(rule.id) is rule:
            del self._by_id[rule.id]
            del self._by_name[rule.name]
            self._sorted = None

    def __iter__(self) -> Iterator[Rule]:
        ordered = self._sorted
        if ordered is None:
            ordered = self._sorted = tuple(sorted(self._by_id.values(), key=lambda rule: rule.id))
        return iter(ordered)

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, key: object) -> bool:
        return key in self._by_id or key in self._by_name

    def get(self, key: str) -> Rule | None:
        """By id (`GP102`, any case) or by name (`gpu-request-limit-mismatch`)."""
        return self._by_id.get(key.upper()) or self._by_name.get(key)

    def __getitem__(self, key: str) -> Rule:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found


REGISTRY = RuleRegistry(DECLARED)  # the built-in rules: policies are checked against their declarations


def rule(
    *,
    id: str,
    name: str,
    severity: str,
    scope: Scope = Scope.WORKLOAD,
    summary: str,
    rationale: str,
    remediation: str,
    references: Sequence[str] = (),
    parameters: Sequence[Parameter[Any]] = (),
    settings: Sequence[Setting] = (),
    kinds: Iterable[str] | None = None,
    roles: Iterable[Role] | None = None,
    registry: RuleRegistry = REGISTRY,
) -> Callable[[Callable[..., Iterable[Violation]]], Callable[..., Iterable[Violation]]]:
    """Register a check function with its metadata."""

    def register(check: Callable[..., Iterable[Violation]]) -> Callable[..., Iterable[Violation]]:
        registry.add(
            Rule(
                id=id,
                name=name,
                severity=Severity.parse(severity),
                scope=scope,
                summary=summary,
                rationale=rationale,
                remediation=remediation,
                references=tuple(references),
                parameters=tuple(parameters),
                settings=tuple(settings),
                kinds=frozenset(kinds) if kinds is not None else None,
                roles=frozenset(roles) if roles is not None else None,
                check=check,
            )
        )
        return check

    return register


def input_rule(**metadata: Any) -> Rule:
    """Register a rule whose findings come from the loader (no check function)."""
    severity = Severity.parse(metadata.pop("severity"))
    references = tuple(metadata.pop("references", ()))
    parameters = tuple(metadata.pop("parameters", ()))
    settings = tuple(metadata.pop("settings", ()))
    return REGISTRY.add(
        Rule(
            scope=Scope.INPUT,
            severity=severity,
            references=references,
            parameters=parameters,
            settings=settings,
            **metadata,
        )
    )


_MISSING: Any = object()


class Context:
    """What a rule may read besides its object: the policy, the inventory, and memos for work
    that several rules share (computed once per evaluation, or once per object, not once per rule)."""

    def __init__(
        self,
        policy: Policy,
        inventory: Inventory,
        resources: Sequence[Resource],
        *,
        said: set[Hashable] | None = None,
    ) -> None:
        self.policy = policy
        self.inventory = inventory
        self.resources = resources
        # What has been said once (gpupolicy/engine/unknowns.py): one run may evaluate several groups of
        # files, each under its own policy (gpupolicy/lint/scopes.py), and say it once in all.
        self.said: set[Hashable] = set() if said is None else said
        self._memo: dict[Any, Any] = {}
        self._subject_memo: dict[Any, Any] = {}
        self.gpu = policy.gpu
        # Keys of the facts memoised on a Workload view: specific to this policy's settings.
        self._uses_key = ("uses-gpus", id(policy.gpu))
        self._role_key = ("role", id(policy))

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        memo = self._memo
        value = memo.get(key, _MISSING)
        if value is _MISSING:
            value = memo[key] = compute()
        return value

    def subject_memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Like `memo`, for work about the object being checked (several of its rules read it):
        forgotten when the engine moves to the next object. Keys may hold `id()`s of objects, which
        a streaming run frees after their findings and which Python then reuses for others."""
        memo = self._subject_memo
        value = memo.get(key, _MISSING)
        if value is _MISSING:
            value = memo[key] = compute()
        return value

    def next_subject(self) -> None:
        """The engine starts on another object: per-object memos no longer apply."""
        if self._subject_memo:
            self._subject_memo = {}

    def object_fact(self, resource: Resource, key: Hashable, compute: Callable[[], Any]) -> Any:
        """A fact computed from `resource` and the policy alone, kept on the resource for as long as
        the policy is the same. The cluster inventory keeps each version of an object across
        admissions (a watch event replaces it), so an experiment ConfigMap is parsed once per
        version rather than once per admission. Never for a fact that reads other objects: those
        change without the resource changing."""
        facts = resource.facts
        if facts is None:
            facts = resource.facts = {}
        entry = facts.get(key)
        if entry is None or entry[0] is not self.policy:
            entry = facts[key] = (self.policy, compute())
        return entry[1]

    def uses_gpus(self, workload: Workload) -> bool:
        cache = workload.cache
        uses: bool | None = cache.get(self._uses_key)
        if uses is None:
            gpu = self.gpu
            uses = cache[self._uses_key] = any(gpu.uses_gpus(template) for template in workload.templates)
        return uses

    def role(self, workload: Workload) -> RoleDecision:
        """What the workload is (server, batch, dev, agent or plain workload), from evidence."""
        cache = workload.cache
        decision: RoleDecision | None = cache.get(self._role_key)
        if decision is None:
            workloads = self.policy.workloads
            decision = cache[self._role_key] = decide(
                workload,
                service_of=self._service_of,
                serving_classes=workloads.serving_classes,
                batch_classes=workloads.batch_classes,
                serving_kinds=workloads.serving_kinds,
            )
        return decision

    def is_serving(self, workload: Workload) -> bool:
        return self.role(workload).role is Role.SERVER

    def _service_of(self, workload: Workload, template: PodTemplate) -> str | None:
        """The name of a Service of the inventory that selects the template's pods."""
        labels = template.labels
        if not labels:
            return None
        namespace = namespace_of(workload.resource)
        for service in self.inventory.list("Service", namespace):
            if service_selects(service.obj, labels):
                return service.name
        return None


@dataclass(frozen=True, slots=True)
class InternalError:
    """A rule that raised: a bug in gpupolicy, reported without hiding the other findings."""

    rule_id: str
    object: str
    message: str


@dataclass(frozen=True, slots=True)
class WorkloadRole:
    """What the workload model decided an object is, and why (shown by --format json). It names
    the object rather than holding it: a streaming run releases each object after its findings."""

    object: ObjectRef
    file: str
    line: int | None
    doc_index: int
    decision: RoleDecision

    @classmethod
    def of(cls, resource: Resource, decision: RoleDecision, ref: ObjectRef | None = None) -> WorkloadRole:
        position = resource.position(())
        line = position[0] if position else None
        return cls(ref or resource.ref, resource.file, line, resource.doc_index, decision)


@dataclass(slots=True)
class Report:
    findings: list[Finding] = field(default_factory=list)
    roles: list[WorkloadRole] = field(default_factory=list)
    suppressed: list[tuple[Finding, str]] = field(default_factory=list)
    errors: list[InternalError] = field(default_factory=list)
    objects: int = 0
    files: int = 0  # files linted: those skipped whole are counted in `skipped`, not here
    policy_digest: str = ""
    # The policy files behind the findings (Policy.sources), in merge order; several policies'
    # files when the inputs had different nearest `.gpupolicy.yaml`s (gpupolicy/lint/scopes.py).
    policy_sources: tuple[str, ...] = ()
    # --changed-since REF: the objects linted as context only, because they equal REF's (changes.py).
    unchanged: int = 0
    changed_since: str | None = None
    # Documents that are not Kubernetes objects, and files that hold none (doc_index None): not linted.
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def skipped_files(self) -> int:
        return sum(1 for item in self.skipped if item.doc_index is None)

    @property
    def skipped_documents(self) -> int:
        """Documents skipped in files that were linted (a file skipped whole is counted as a file)."""
        return len(self.skipped) - self.skipped_files

    def counts(self) -> dict[Severity, int]:
        counts = dict.fromkeys(Severity, 0)
        for finding in self.findings:
            counts[finding.severity] += 1
        return counts

    def fails(self, threshold: Severity) -> bool:
        return any(finding.severity >= threshold for finding in self.findings)


def severity_for(
    rule: Rule, policy: Policy, requested: Severity | None = None, *, unknown: bool = False
) -> Severity:
    """The one severity rule: the policy's override for the rule, else the level the rule asked
    for this finding, else the rule's own. A finding that only says something could not be
    verified stays info whatever the override: the webhook in enforce mode must not deny because
    its cache has not synced."""
    if unknown:
        return Severity.INFO
    return policy.rule(rule.id).severity or requested or rule.severity


# The `extra` of most findings: shared, never changed in place (a finding is frozen; whoever adds
# to `extra` makes a new finding with a new dict, as suppressions and baselines do).
_NO_EXTRA: dict[str, Any] = {}
_UNKNOWN: dict[str, Any] = {"unknown": True}


def make_finding(
    rule: Rule,
    policy: Policy,
    message: str,
    *,
    object: ObjectRef | None,
    path: JsonPath,
    file: str | None,
    line: int | None,
    column: int | None,
    doc_index: int | None,
    container: str | None = None,
    requested: Severity | None = None,
    unknown: bool = False,
    cluster_fact: str | None = None,
) -> Finding:
    """The one way a finding is made, whether a rule, the loader or the suppressions found it: the
    rule's id, name and remediation, and its severity by `severity_for`. `unknown`: it says a fact
    could not be verified; `cluster_fact`: the fact of the cluster it lacks (an unknown too). Both
    are kept in `extra`, where `Finding.unknown` reads them."""
    unknown = unknown or bool(cluster_fact)
    extra = {"clusterFact": cluster_fact} if cluster_fact else _UNKNOWN if unknown else _NO_EXTRA
    return Finding(
        rule_id=rule.id,
        rule_name=rule.name,
        severity=severity_for(rule, policy, requested, unknown=unknown),
        message=message,
        remediation=rule.remediation,
        object=object,
        path=path,
        file=file,
        line=line,
        column=column,
        doc_index=doc_index,
        container=container,
        extra=extra,
    )


def finding_for(
    rule: Rule, policy: Policy, violation: Violation, resource: Resource, ref: ObjectRef | None = None
) -> Finding:
    """The finding of `violation` about `resource` (or its target); `ref` is `resource.ref` when
    the caller has it (one per object rather than one per finding)."""
    target = violation.target or resource
    position = target.position(violation.path)
    return make_finding(
        rule,
        policy,
        violation.message,
        object=ref if ref is not None and target is resource else target.ref,
        path=violation.path,
        file=target.file,
        line=position[0] if position else None,
        column=position[1] if position else None,
        doc_index=target.doc_index,
        container=violation.container,
        requested=violation.severity,
        unknown=violation.unknown,
        cluster_fact=violation.cluster_fact,
    )


def finding_from_problem(problem: LoadProblem, policy: Policy) -> Finding:
    """The finding of a problem met while reading input (GP0xx)."""
    return make_finding(
        REGISTRY[problem.rule_id],
        policy,
        problem.message,
        object=None,
        path=problem.path,
        file=problem.file,
        line=problem.line,
        column=problem.column,
        doc_index=problem.doc_index,
        requested=Severity.parse(problem.severity) if problem.severity else None,
    )


def finding_from_suppression(problem: suppressions.Problem, policy: Policy) -> Finding:
    """The finding of a problem with a suppression (GP010, GP011)."""
    place = problem.place
    return make_finding(
        REGISTRY[problem.rule_id],
        policy,
        problem.message,
        object=place.object,
        path=place.path,
        file=place.file,
        line=place.line,
        column=place.column,
        doc_index=place.doc_index,
        unknown=problem.unknown,
    )


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


def _run(
    rule: Rule,
    subject: Any,
    ctx: Context,
    resource: Resource | None,
    report: Report,
    out: list[Finding],
    ref: ObjectRef | None = None,
) -> None:
    """Run one check and append its findings to `out` (those made before a rule raised are kept)."""
    check = rule.check
    assert check is not None
    try:
        violations = check(subject, ctx) if subject is not None else check(ctx)
        for violation in violations:
            owner = violation.target or resource
            if owner is None:
                raise ValueError(f"{rule.id}: a bundle rule must name the target of each violation")
            out.append(finding_for(rule, ctx.policy, violation, owner, ref if owner is resource else None))
    except Exception as exc:  # a rule bug must not hide every other finding
        _internal_error(rule, resource, exc, report)


def _internal_error(rule: Rule, resource: Resource | None, exc: Exception, report: Report) -> None:
    where = f"{resource.file}#{resource.doc_index} ({resource.ref})" if resource else "bundle"
    detail = traceback.format_exception_only(type(exc), exc)[-1].strip()
    report.errors.append(InternalError(rule.id, where, detail))


class RulePlan:
    """The rules of a rule set that one policy enables, split by scope, and object rules per
    kind (each kind's list made when an object of it first comes). An evaluation makes its own
    (a filter of the rules, about 30 us); a shell that evaluates one object at a time under one
    policy and rule set (the webhook) makes it once per policy load and passes it as `rules`."""

    __slots__ = ("_by_kind", "active_ids", "bundle_rules", "object_rules", "policy", "workload_rules")

    def __init__(self, rules: Iterable[Rule], policy: Policy) -> None:
        self.policy = policy
        active = [rule for rule in rules if policy.rule(rule.id).enabled]
        self.object_rules = tuple(rule for rule in active if rule.scope is Scope.OBJECT)
        self.workload_rules = tuple(rule for rule in active if rule.scope is Scope.WORKLOAD)
        self.bundle_rules = tuple(rule for rule in active if rule.scope is Scope.BUNDLE)
        self.active_ids = frozenset(rule.id for rule in active)
        self._by_kind: dict[str, tuple[Rule, ...]] = {}

    def object_rules_for(self, kind: str) -> tuple[Rule, ...]:
        found = self._by_kind.get(kind)
        if found is None:
            found = tuple(rule for rule in self.object_rules if rule.kinds is None or kind in rule.kinds)
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
    ) -> None:
        self.policy = policy
        self.ctx = Context(policy, inventory, resources, said=said)
        self.report = Report(policy_digest=policy.digest, policy_sources=policy.sources)
        self.plan = plan_for(policy, rules)
        self.findings: list[Finding] = []

    def check(self, resource: Resource) -> None:
        """Run the object rules of its kind and, when it carries pod templates, the workload rules."""
        ctx, report, findings, policy = self.ctx, self.report, self.findings, self.policy
        ctx.next_subject()
        ref = resource.ref
        for rule in self.plan.object_rules_for(resource.kind):
            _run(rule, resource, ctx, resource, report, findings, ref)
        workload = workload_of(resource)
        if workload is not None:
            # _run written out: this loop runs ~90 rules per object, most finding nothing.
            decision = ctx.role(workload)
            report.roles.append(WorkloadRole.of(resource, decision, ref))
            role = decision.role
            for rule in self.plan.workload_rules:
                if rule.roles is not None and role not in rule.roles:
                    continue
                try:
                    for violation in rule.check(workload, ctx):  # type: ignore[misc]
                        findings.append(finding_for(rule, policy, violation, resource, ref))
                except Exception as exc:  # a rule bug must not hide every other finding
                    _internal_error(rule, resource, exc, report)

    def check_bundle(self) -> None:
        self.ctx.next_subject()
        for rule in self.plan.bundle_rules:
            _run(rule, None, self.ctx, None, self.report, self.findings)

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


def complete_kinds(policy: Policy) -> list[str]:
    """The kinds the policy declares the repository holds in full (`inventory.completeKinds`)."""
    return list(policy.inventory.complete_kinds)
