"""Suppressions: what keeps a finding from counting, and why.

Three sources, all with a reason:

- the object annotation `gpupolicy.io/ignore: "GP601: driver validation needs it; GP202: ..."`
  (rule ids or names, comma-separated, each optionally scoped to a container: `GP601[cuda-validator]`);
- a comment `# gpupolicy: ignore GP102 -- reason` at the end of the offending line or on the
  line above it (comments exist only in files, so the webhook never sees them);
- policy `exemptions` by rule, kind, namespace, name and file pattern, each with owner, reason
  and `expires`.

The policy's `suppressions` section can switch annotations or comments off and list rules that
neither may suppress (`forbidden`): only a policy exemption can lift those.

Problems with suppressions are findings of their own: GP010 (no reason, unknown rule, forbidden,
switched off, expired exemption) and GP011 (matched nothing). An invalid suppression hides nothing.
`apply()` is a pure pass over findings: it reports those problems as data (`Problem`), and the
engine, which runs it after the rules, makes them findings as it makes every other. It knows rules
only through the `resolve` and `active` it is given: nothing here imports the engine or a rule.
The comments themselves are found while loading (gpupolicy/loading/directives.py); what they mean
is decided here.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import field
from typing import Any

from gpupolicy.core.findings import Finding, JsonPath, ObjectRef
from gpupolicy.core.immutable import immutable, mutable, replace
from gpupolicy.core.vocabulary import IGNORE_ANNOTATION
from gpupolicy.loading.directives import InlineDirective
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.exemptions import Exemption
from gpupolicy.policy.loading import Policy

ANNOTATION_PATH: JsonPath = ("metadata", "annotations", IGNORE_ANNOTATION)
INVALID = "GP010"
UNUSED = "GP011"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")

# one rule token: an id or a kebab-case name, optionally `[container]`
_TOKEN = re.compile(r"^(?P<rule>[A-Za-z][A-Za-z0-9-]*)(?:\[(?P<container>[^\]\s]+)\])?$")
# Possessive `*+`: the rules end at the first `:` (which the class excludes). A lazy `*?` followed
# by `\s*:` retried the spaces at every step: quadratic in a long annotation.
_ENTRY_HEAD = re.compile(r"^\s*(?P<rules>[A-Za-z][A-Za-z0-9\-\[\]\s,.]*+):(?P<reason>.*)$", re.DOTALL)
# A built-in id (any case), or a custom rule's (gpupolicy/custom/: upper case, ending in a digit).
_LOOKS_LIKE_ID = re.compile(r"^(?:[Gg][Pp]\d{3}|[A-Z][A-Z0-9]*[0-9])$")


@immutable
class Target:
    """One rule a suppression names, optionally in one container."""

    rule: str  # as written
    container: str | None = None


@immutable
class Place:
    """Where a problem with a suppression points: the annotation, the comment, the finding."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    doc_index: int | None = None
    object: ObjectRef | None = None
    path: JsonPath = ()


@immutable
class Problem:
    """A problem with a suppression (GP010 `INVALID`, GP011 `UNUSED`), for the engine to make a
    finding of. `unknown`: it comes of a finding that says a fact could not be verified (an expired
    exemption or a forbidden suppression meeting it), so it is no surer than that finding."""

    rule_id: str
    message: str
    place: Place
    unknown: bool = False


@mutable
class _Suppression:
    source: str  # "annotation" or "comment"
    targets: tuple[Target, ...]
    reason: str
    where: str  # for messages
    place: Place  # where GP010/GP011 about this suppression point
    resource: Resource | SuppressionSubject | None = None
    lines: tuple[int, ...] = ()  # comments: the lines they cover
    used: set[Target] = field(default_factory=set)
    refused: set[Target] = field(default_factory=set)  # forbidden targets already reported


class SuppressionSubject:
    """What suppressions read of an object, kept after its positions are released (the streaming
    lint frees each object once its findings are made): its name and place, its ignore annotation
    and where that is written, the lines the object spans (a comment on one of them belongs to
    it), and its values only when the annotation scopes a rule to a container (to tell which
    container a finding is about). `apply()` takes these or the objects themselves."""

    __slots__ = ("_annotation_position", "_span", "annotations", "doc_index", "file", "obj", "ref")

    def __init__(self, resource: Resource) -> None:
        self.ref = resource.ref
        self.file = resource.file
        self.doc_index = resource.doc_index
        self._span = resource.line_span()
        annotations = resource.annotations
        self.annotations: dict[str, Any] = {}
        self._annotation_position: tuple[int, int] | None = None
        self.obj: Any = None
        if IGNORE_ANNOTATION in annotations:
            value = annotations[IGNORE_ANNOTATION]
            self.annotations = {IGNORE_ANNOTATION: value}
            self._annotation_position = resource.position(ANNOTATION_PATH)
            if isinstance(value, str) and "[" in value:  # a target like GP601[cuda-validator]
                self.obj = resource.obj

    def position(self, path: JsonPath) -> tuple[int, int] | None:
        if path != ANNOTATION_PATH:
            raise ValueError(f"a suppression subject knows only where its annotation is, not {path}")
        return self._annotation_position

    def line_span(self) -> tuple[int, int] | None:
        return self._span


# -- reading suppressions ----------------------------------------------------------------------


def parse_targets(text: str) -> tuple[list[Target], list[str]]:
    """`GP601[cuda-validator], GP202` -> targets, and the tokens that are not rule references."""
    targets: list[Target] = []
    bad: list[str] = []
    for token in re.split(r"[\s,]+", text.strip()):
        if not token:
            continue
        match = _TOKEN.match(token)
        if match is None:
            bad.append(token)
        else:
            targets.append(Target(match.group("rule"), match.group("container")))
    return targets, bad


def _rule_like(token: str) -> bool:
    return bool(_LOOKS_LIKE_ID.match(token)) or "-" in token.strip("-")


def parse_annotation(value: str) -> list[tuple[list[Target], list[str], str]]:
    """Entries of a `gpupolicy.io/ignore` value: (targets, malformed tokens, reason).

    Entries are separated by `;`. A piece without `RULES:` continues the previous reason
    (reasons may contain semicolons), unless it is only rule ids: those are entries without a reason.
    """
    entries: list[tuple[list[Target], list[str], str]] = []
    for piece in value.split(";"):
        if not piece.strip():
            continue
        head = _ENTRY_HEAD.match(piece)
        if head is not None:
            targets, bad = parse_targets(head.group("rules"))
            # "also note: ..." inside a reason is not an entry; rule ids and kebab-case names are
            if targets and not bad and all(_rule_like(t.rule) for t in targets):
                entries.append((targets, [], head.group("reason").strip()))
                continue
        targets, bad = parse_targets(piece)
        only_ids = targets and not bad and all(_LOOKS_LIKE_ID.match(t.rule) for t in targets)
        if only_ids or not entries:
            entries.append((targets, bad, ""))
        else:
            previous_targets, previous_bad, reason = entries[-1]
            entries[-1] = (previous_targets, previous_bad, f"{reason}; {piece.strip()}".strip("; "))
    return entries


def exemptions_of(policy: Policy) -> list[Exemption]:
    """The policy's exemptions (parsed when it was compiled; a copy of the list is returned)."""
    return list(policy.exemptions)


# -- applying them -------------------------------------------------------------------------------


@mutable
class Outcome:
    findings: list[Finding]  # kept
    suppressed: list[tuple[Finding, str]]  # each with what suppressed it, and why
    problems: list[Problem]  # of the rules in `active` only


def apply(
    findings: Sequence[Finding],
    resources: Sequence[Resource | SuppressionSubject],
    policy: Policy,
    directives: Iterable[InlineDirective] = (),
    *,
    resolve: Callable[[str], str | None],
    active: Collection[str],
    today: datetime.date | None = None,
) -> Outcome:
    """Split `findings` into kept and suppressed, and say what is wrong with the suppressions.

    `resources` are the objects whose annotations count (the ones reported on), or their
    `SuppressionSubject`s; `directives` the comments of the files reported on; `resolve` the id
    of the rule a token names (an id in any case, or a name; None for no rule); `active` the ids
    of the rules that ran, so that a suppression of a rule that did not run is not called unused
    (and GP010/GP011 problems are reported only when they ran too).
    """
    directives = tuple(directives)
    if (
        not directives
        and not exemptions_of(policy)
        and not any(IGNORE_ANNOTATION in resource.annotations for resource in resources)
    ):  # nothing can suppress: every finding is kept, and no suppression can be misused
        return Outcome(list(findings), [], [])
    run = _Run(policy, resolve, active)
    suppressions = run.manifest_suppressions(resources, directives)
    exemptions = run.checked_exemptions(exemptions_of(policy))
    kept, suppressed = run.split(findings, suppressions, exemptions, today or datetime.date.today())
    run.report_unused(suppressions)
    return Outcome(kept, suppressed, [problem for problem in run.problems if problem.rule_id in run.active])


class _Run:
    """One application of the suppressions: the rules it may name, what the policy allows of
    manifests, and the problems found so far (in the order they are found)."""

    def __init__(self, policy: Policy, resolve: Callable[[str], str | None], active: Collection[str]) -> None:
        self.resolve = resolve
        self.active = frozenset(active)
        self.settings = policy.suppressions
        self.forbidden = {resolve(item) or item for item in self.settings.forbidden}
        self.problems: list[Problem] = []

    def problem(self, rule_id: str, message: str, place: Place, *, unknown: bool = False) -> None:
        self.problems.append(Problem(rule_id, message, place, unknown))

    def allows(self, source: str) -> bool:
        """Whether the policy lets manifests suppress by `annotations` or by `comments`."""
        return self.settings.comments if source == "comments" else self.settings.annotations

    # -- reading them

    def manifest_suppressions(
        self, resources: Sequence[Resource | SuppressionSubject], directives: Sequence[InlineDirective]
    ) -> list[_Suppression]:
        """The valid suppressions the objects' annotations and the files' comments make."""
        found: list[_Suppression] = []
        annotations_allowed = self.allows("annotations")
        for resource in resources:
            found.extend(self._annotation_suppressions(resource, annotations_allowed))
        by_file: dict[str, list[Resource | SuppressionSubject]] = {}
        for resource in resources:
            by_file.setdefault(resource.file, []).append(resource)
        comments_allowed = self.allows("comments")
        for directive in directives:
            found.extend(
                self._comment_suppression(directive, comments_allowed, by_file.get(directive.file, []))
            )
        return found

    def _annotation_suppressions(
        self, resource: Resource | SuppressionSubject, allowed: bool
    ) -> Iterator[_Suppression]:
        value = resource.annotations.get(IGNORE_ANNOTATION)
        if value is None:
            return
        position = resource.position(ANNOTATION_PATH)
        line, column = position if position else (None, None)
        place = Place(resource.file, line, column, resource.doc_index, resource.ref, ANNOTATION_PATH)

        def problem(message: str) -> None:
            self.problem(INVALID, message, place)

        if not allowed:
            problem(
                f"the policy does not allow {IGNORE_ANNOTATION} annotations (suppressions.annotations: false)"
            )
            return
        if not isinstance(value, str):
            problem(f'{IGNORE_ANNOTATION} must be text like "GP601: reason; GP202: reason"')
            return
        for targets, bad, reason in parse_annotation(value):
            if bad:
                problem(f"{IGNORE_ANNOTATION}: {' '.join(bad)!r} is not a rule id or name")
            valid = _valid_targets(targets, reason, f"{IGNORE_ANNOTATION} entry", self.resolve, problem)
            if valid:
                where = f"{IGNORE_ANNOTATION} on {resource.ref}"
                yield _Suppression("annotation", tuple(valid), reason, where, place, resource=resource)

    def _comment_suppression(
        self,
        directive: InlineDirective,
        allowed: bool,
        resources: Sequence[Resource | SuppressionSubject],
    ) -> Iterator[_Suppression]:
        owner = _resource_at_line(resources, directive.line + (1 if directive.own_line else 0))
        place = Place(
            directive.file,
            directive.line,
            directive.column,
            owner.doc_index if owner else None,
            owner.ref if owner else None,
        )

        def problem(message: str) -> None:
            self.problem(INVALID, message, place)

        if not allowed:
            problem("the policy does not allow `# gpupolicy: ignore` comments (suppressions.comments: false)")
            return
        what = "`# gpupolicy: ignore` comment"
        targets, _ = parse_targets(directive.rules)  # a token that names no rule is not read
        reason = directive.reason
        if not reason and targets:
            names = " ".join(target.rule for target in targets)
            problem(f"{what} for {names} gives no reason; write `# gpupolicy: ignore {names} -- why`")
            return
        valid = _valid_targets(targets, reason, what, self.resolve, problem)
        if valid:
            where = f"comment at {directive.file}:{directive.line}"
            lines = (directive.line, directive.line + 1)
            yield _Suppression("comment", tuple(valid), reason, where, place, lines=lines)

    def checked_exemptions(self, exemptions: Sequence[Exemption]) -> list[Exemption]:
        """The exemptions with their rules named by id; one that names no rule is a problem."""
        for exemption in exemptions:
            unknown = [token for token in exemption.rules if self.resolve(token) is None]
            if unknown:
                message = f"{exemption.label()} names unknown rule {', '.join(unknown)}"
                self.problem(INVALID, message, Place(path=("exemptions", exemption.index, "rules")))
        return [
            replace(exemption, rules=tuple(self.resolve(t) or t for t in exemption.rules))
            for exemption in exemptions
        ]

    # -- matching findings

    def split(
        self,
        findings: Sequence[Finding],
        suppressions: Sequence[_Suppression],
        exemptions: Sequence[Exemption],
        today: datetime.date,
    ) -> tuple[list[Finding], list[tuple[Finding, str]]]:
        """The findings kept, and those suppressed with what suppressed them and why."""
        kept: list[Finding] = []
        suppressed: list[tuple[Finding, str]] = []
        expired_reported: set[tuple[int, ObjectRef | None, str | None]] = set()
        for finding in findings:
            reason = self._suppressing_reason(finding, suppressions)
            if reason is None:
                reason = self._exempting_reason(finding, exemptions, today, expired_reported)
            if reason is None:
                kept.append(finding)
            else:
                suppressed.append((_marked(finding, reason[0]), reason[1]))
        return kept, suppressed

    def _suppressing_reason(
        self, finding: Finding, suppressions: Sequence[_Suppression]
    ) -> tuple[str, str] | None:
        for suppression in suppressions:
            if not _covers(suppression, finding):
                continue
            for target in suppression.targets:
                if self.resolve(target.rule) != finding.rule_id:
                    continue
                if target.container is not None and target.container not in _containers_of(
                    finding, suppression
                ):
                    continue
                suppression.used.add(target)
                if finding.rule_id in self.forbidden:
                    self._refuse(suppression, target, finding)
                    continue
                return suppression.source, f"{suppression.where}: {suppression.reason}"
        return None

    def _refuse(self, suppression: _Suppression, target: Target, finding: Finding) -> None:
        """A manifest suppresses a rule the policy forbids it to: said once per target."""
        if target in suppression.refused:
            return
        suppression.refused.add(target)
        self.problem(
            INVALID,
            f"{suppression.where} may not suppress {finding.rule_id} {finding.rule_name}: "
            "the policy forbids it (suppressions.forbidden); ask for a policy exemption",
            suppression.place,
            unknown=finding.unknown,
        )

    def _exempting_reason(
        self,
        finding: Finding,
        exemptions: Sequence[Exemption],
        today: datetime.date,
        expired_reported: set[tuple[int, ObjectRef | None, str | None]],
    ) -> tuple[str, str] | None:
        for exemption in exemptions:
            if not exemption.matches(finding, finding.rule_id):
                continue
            if exemption.expires is not None and exemption.expires < today:
                key = (exemption.index, finding.object, finding.file)
                if key not in expired_reported:
                    expired_reported.add(key)
                    self._expired(exemption, exemption.expires, finding)
                continue
            until = f", until {exemption.expires.isoformat()}" if exemption.expires else ""
            return "exemption", f"{exemption.label()}{until}: {exemption.reason}"
        return None

    def _expired(self, exemption: Exemption, expires: datetime.date, finding: Finding) -> None:
        """An expired exemption met a finding it would have lifted: said at the finding."""
        self.problem(
            INVALID,
            f"{exemption.label()} expired on {expires.isoformat()}; "
            f"{finding.rule_id} is reported again here (renew it or fix the finding)",
            Place(
                finding.file, finding.line, finding.column, finding.doc_index, finding.object, finding.path
            ),
            unknown=finding.unknown,
        )

    def report_unused(self, suppressions: Sequence[_Suppression]) -> None:
        """GP011 for each target of a suppression that matched no finding of a rule that ran."""
        for suppression in suppressions:
            for target in suppression.targets:
                rule_id = self.resolve(target.rule)
                if target in suppression.used or rule_id is None or rule_id not in self.active:
                    continue
                scope = f" in container {target.container}" if target.container else ""
                self.problem(
                    UNUSED,
                    f"{suppression.where} suppresses {target.rule}{scope} but no such finding is reported",
                    suppression.place,
                )


def _marked(finding: Finding, source: str) -> Finding:
    return replace(finding, extra={**finding.extra, "suppressedBy": source})


def _valid_targets(
    targets: Sequence[Target],
    reason: str,
    what: str,
    resolve: Callable[[str], str | None],
    problem: Callable[[str], None],
) -> list[Target]:
    if not targets:
        problem(f"{what} names no rule")
        return []
    valid = []
    for target in targets:
        if resolve(target.rule) is None:
            problem(f"{what} names unknown rule {target.rule!r} (`gpupolicy rules` lists them)")
        else:
            valid.append(target)
    if valid and not reason:
        names = ", ".join(target.rule for target in valid)
        problem(f"{what} for {names} gives no reason; write `{names}: why it is needed`")
        return []
    return valid


def _resource_at_line(
    resources: Sequence[Resource | SuppressionSubject], line: int
) -> Resource | SuppressionSubject | None:
    for resource in resources:
        span = resource.line_span()
        if span is not None and span[0] <= line <= span[1]:
            return resource
    return None


def _covers(suppression: _Suppression, finding: Finding) -> bool:
    if suppression.source == "comment":
        return finding.file == suppression.place.file and finding.line in suppression.lines
    resource = suppression.resource
    assert resource is not None
    return (
        finding.object == resource.ref
        and finding.file == resource.file
        and finding.doc_index == resource.doc_index
    )


def _containers_of(finding: Finding, suppression: _Suppression) -> set[str]:
    """The container a finding is about: as the rule named it, or as its JSON path shows."""
    names = {finding.container} if finding.container else set()
    value: Any = suppression.resource.obj if suppression.resource is not None else None
    path = finding.path
    for index, step in enumerate(path):
        if value is None:
            break
        if (
            step in CONTAINER_LISTS
            and index + 1 < len(path)
            and isinstance(value, dict)
            and isinstance(value.get(step), list)
        ):
            position = path[index + 1]
            items = value[step]
            if isinstance(position, int) and 0 <= position < len(items) and isinstance(items[position], dict):
                name = items[position].get("name")
                if isinstance(name, str):
                    names.add(name)
        if isinstance(value, dict) and isinstance(step, str):
            value = value.get(step)
        elif isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value):
            value = value[step]
        else:
            value = None
    return names
