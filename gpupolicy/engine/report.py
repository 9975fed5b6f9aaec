"""What an evaluation produces: the `Report`, and the one way a finding is made (`make_finding`,
with the one severity rule `severity_for`) of a rule's violation, an input problem or a
suppression problem."""

from __future__ import annotations

from dataclasses import field
from typing import Any

from gpupolicy.core.findings import Finding, JsonPath, ObjectRef, Severity
from gpupolicy.core.immutable import immutable, mutable
from gpupolicy.engine import suppressions
from gpupolicy.engine.registry import REGISTRY, Rule, Violation
from gpupolicy.kube.roles import RoleDecision
from gpupolicy.loading.documents import LoadProblem, Resource, Skipped
from gpupolicy.policy.loading import Policy


@immutable
class InternalError:
    """A rule that raised: a bug in gpupolicy, reported without hiding the other findings."""

    rule_id: str
    object: str
    message: str


@immutable
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


@mutable
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
