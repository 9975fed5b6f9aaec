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
`apply()` is pure: the CLI, the pre-commit hook and the webhook all reach it through `evaluate()`.
"""

from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpupolicy.core.findings import Finding, JsonPath, ObjectRef
from gpupolicy.core.vocabulary import IGNORE_ANNOTATION
from gpupolicy.loading.documents import Resource, comment_starts
from gpupolicy.policy.loading import Policy

ANNOTATION_PATH: JsonPath = ("metadata", "annotations", IGNORE_ANNOTATION)
INVALID = "GP010"
UNUSED = "GP011"
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")

# `# gpupolicy: ignore GP102, GP104[worker] -- reason` (the body runs to the end of the line)
_DIRECTIVE = re.compile(r"#[ \t]*gpupolicy:[ \t]*ignore\b")
# one rule token: an id or a kebab-case name, optionally `[container]`
_TOKEN = re.compile(r"^(?P<rule>[A-Za-z][A-Za-z0-9-]*)(?:\[(?P<container>[^\]\s]+)\])?$")
# Possessive `*+`: the rules end at the first `:` (which the class excludes). A lazy `*?` followed
# by `\s*:` retried the spaces at every step: quadratic in a long annotation.
_ENTRY_HEAD = re.compile(r"^\s*(?P<rules>[A-Za-z][A-Za-z0-9\-\[\]\s,.]*+):(?P<reason>.*)$", re.DOTALL)
# A built-in id (any case), or a custom rule's (gpupolicy/custom/: upper case, ending in a digit).
_LOOKS_LIKE_ID = re.compile(r"^(?:[Gg][Pp]\d{3}|[A-Z][A-Z0-9]*[0-9])$")


@dataclass(frozen=True, slots=True)
class Target:
    """One rule a suppression names, optionally in one container."""

    rule: str  # as written
    container: str | None = None


@dataclass(frozen=True, slots=True)
class InlineDirective:
    """A `# gpupolicy: ignore` comment found in a file (by `scan_comments`)."""

    file: str
    line: int
    column: int
    targets: tuple[Target, ...]
    reason: str
    own_line: bool  # the comment is alone on its line (it then covers the next line)


@dataclass(slots=True)
class _Suppression:
    source: str  # "annotation" or "comment"
    targets: tuple[Target, ...]
    reason: str
    where: str  # for messages
    # where GP010/GP011 about this suppression point
    file: str | None
    line: int | None
    column: int | None
    doc_index: int | None
    object: ObjectRef | None
    path: JsonPath = ()
    resource: Resource | SuppressionSubject | None = None
    lines: tuple[int, ...] = ()  # comments: the lines they cover
    used: set[Target] = field(default_factory=set)
    refused: set[Target] = field(default_factory=set)  # forbidden targets already reported


class SuppressionSubject:
    """What suppressions read of an object, kept after its node tree is released (the streaming
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


@dataclass(frozen=True, slots=True)
class Exemption:
    index: int
    rules: tuple[str, ...]
    kinds: tuple[str, ...]
    namespaces: tuple[str, ...]
    names: tuple[str, ...]
    paths: tuple[str, ...]
    owner: str
    reason: str
    expires: datetime.date | None

    def label(self) -> str:
        return f"policy exemption #{self.index + 1} (owner {self.owner})"

    def matches(self, finding: Finding, rule_id: str | None) -> bool:
        if self.rules and rule_id not in self.rules:
            return False
        obj = finding.object
        if self.kinds and not (obj and _any_glob(obj.kind, self.kinds)):
            return False
        if self.namespaces and not (obj and _any_glob(obj.namespace or "default", self.namespaces)):
            return False
        if self.names and not (obj and _any_glob(obj.name, self.names)):
            return False
        return not self.paths or (finding.file is not None and _any_glob(finding.file, self.paths))


def _any_glob(value: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


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


def scan_comments(text: str, file: str) -> list[InlineDirective]:
    """Every `# gpupolicy: ignore ...` comment of a file's text.

    Only a real YAML comment is a directive, and only when the directive starts it: text inside a
    quoted, plain or block scalar is not (a JSON string that mentions the syntax, a shell script
    in a ConfigMap), and JSON has no comments at all. Linear in the text: the directive pattern
    is searched once, and the file is tokenized (libyaml) only when it holds a candidate.
    """
    if file.endswith(".json") or "gpupolicy:" not in text:
        return []
    lines = _candidate_lines(text)
    if not lines:
        return []
    hashes = [offset for start, end in lines for offset in _hashes(text, start, end)]
    comments = comment_starts(text, hashes)
    found: list[InlineDirective] = []
    number, counted = 1, 0
    for start, end in lines:
        first = next((offset for offset in _hashes(text, start, end) if offset in comments), None)
        match = _DIRECTIVE.match(text, first) if first is not None else None
        if match is None:
            continue
        number += text.count("\n", counted, start)
        counted = start
        rules_text, separator, reason = text[match.end() : end].rstrip("\r").partition("--")
        targets, _ = parse_targets(rules_text)
        found.append(
            InlineDirective(
                file=file,
                line=number,
                column=match.start() - start + 1,
                targets=tuple(targets),
                reason=reason.strip() if separator else "",
                own_line=not text[start : match.start()].strip(),
            )
        )
    return found


def _candidate_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the lines that hold the directive pattern, each line once."""
    lines: list[tuple[int, int]] = []
    line_end = -1
    for match in _DIRECTIVE.finditer(text):
        if match.start() < line_end:
            continue  # a second candidate on a line already taken
        start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        if line_end < 0:
            line_end = len(text)
        lines.append((start, line_end))
    return lines


def _hashes(text: str, start: int, end: int) -> Iterator[int]:
    """Offsets of `#` in text[start:end]."""
    offset = text.find("#", start, end)
    while offset >= 0:
        yield offset
        offset = text.find("#", offset + 1, end)


def exemptions_of(policy: Policy) -> list[Exemption]:
    """The policy's exemptions (parsed once per policy; a copy of the list is returned)."""
    return list(policy.derived("suppressions:exemptions", lambda: tuple(_parse_exemptions(policy))))


def _parse_exemptions(policy: Policy) -> list[Exemption]:
    exemptions = []
    raw = policy.get("exemptions", [])
    for index, item in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(item, dict):
            continue
        exemptions.append(
            Exemption(
                index=index,
                rules=_strings(item.get("rules")),
                kinds=_strings(item.get("kinds")),
                namespaces=_strings(item.get("namespaces")),
                names=_strings(item.get("names")),
                paths=_strings(item.get("paths")),
                owner=str(item.get("owner", "")),
                reason=str(item.get("reason", "")).strip(),
                expires=_date(item.get("expires")),
            )
        )
    return exemptions


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def _date(value: Any) -> datetime.date | None:
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str):
        try:
            return datetime.date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


# -- applying them -------------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    findings: list[Finding]
    suppressed: list[tuple[Finding, str]]


_ENGINE: Any = None


def _engine() -> Any:
    """The engine module, with GP010/GP011 registered (imported late: the engine imports us)."""
    global _ENGINE
    if _ENGINE is None:
        from gpupolicy.engine import evaluation as engine

        if engine.REGISTRY.get(INVALID) is None:
            import gpupolicy.rules.suppression  # noqa: F401  (registers GP010/GP011)
        _ENGINE = engine
    return _ENGINE


class _Rules:
    """Rule lookups (ids or names) and the engine's finding constructor, imported late."""

    def __init__(self, policy: Policy, active: Collection[str] | None) -> None:
        self.engine = _engine()
        self.policy = policy
        self.active = None if active is None else frozenset(active)

    def resolve(self, token: str) -> str | None:
        found = self.engine.REGISTRY.get(token)
        if found is None and self.active is not None and token.upper() in self.active:
            return token.upper()  # a custom rule the webhook runs without registering it
        return found.id if found else None

    def enabled(self, rule_id: str) -> bool:
        if self.active is not None:
            return rule_id in self.active
        return self.policy.rule(rule_id).enabled

    def finding(
        self,
        rule_id: str,
        message: str,
        *,
        file: str | None,
        line: int | None,
        column: int | None,
        doc_index: int | None,
        obj: ObjectRef | None,
        path: JsonPath = (),
    ) -> Finding:
        rule = self.engine.REGISTRY[rule_id]
        return Finding(
            rule_id=rule.id,
            rule_name=rule.name,
            severity=self.engine.severity_for(rule, self.policy),
            message=message,
            remediation=rule.remediation,
            object=obj,
            path=path,
            file=file,
            line=line,
            column=column,
            doc_index=doc_index,
        )


def apply(
    findings: Sequence[Finding],
    resources: Sequence[Resource | SuppressionSubject],
    policy: Policy,
    directives: Iterable[InlineDirective] = (),
    *,
    active: Collection[str] | None = None,
    today: datetime.date | None = None,
) -> Outcome:
    """Split `findings` into kept and suppressed, and add GP010/GP011 findings.

    `resources` are the objects whose annotations count (the ones reported on), or their
    `SuppressionSubject`s; `directives` the
    comments of the files reported on; `active` the ids of the rules that ran (default: every rule
    the policy enables), so that a suppression of a rule that did not run is not called unused.
    """
    _engine()
    directives = tuple(directives)
    if (
        not directives
        and not exemptions_of(policy)
        and not any(IGNORE_ANNOTATION in resource.annotations for resource in resources)
    ):  # nothing can suppress: every finding is kept, and no suppression can be misused
        return Outcome(list(findings), [])
    rules = _Rules(policy, active)
    today = today or datetime.date.today()
    settings = policy.section("suppressions")
    forbidden = {rules.resolve(str(item)) or str(item) for item in settings.get("forbidden", []) or []}
    problems: list[Finding] = []

    manifest_suppressions: list[_Suppression] = []
    for resource in resources:
        manifest_suppressions.extend(
            _annotation_suppressions(
                resource, settings.get("annotations", True) is not False, rules, problems
            )
        )
    by_file: dict[str, list[Resource | SuppressionSubject]] = {}
    for resource in resources:
        by_file.setdefault(resource.file, []).append(resource)
    for directive in directives:
        manifest_suppressions.extend(
            _comment_suppression(
                directive,
                settings.get("comments", True) is not False,
                by_file.get(directive.file, []),
                rules,
                problems,
            )
        )
    exemptions = exemptions_of(policy)
    for exemption in exemptions:
        unknown = [token for token in exemption.rules if rules.resolve(token) is None]
        if unknown:
            problems.append(
                rules.finding(
                    INVALID,
                    f"{exemption.label()} names unknown rule {', '.join(unknown)}",
                    file=None,
                    line=None,
                    column=None,
                    doc_index=None,
                    obj=None,
                    path=("exemptions", exemption.index, "rules"),
                )
            )
    resolved_exemptions = [
        dataclasses.replace(exemption, rules=tuple(rules.resolve(t) or t for t in exemption.rules))
        for exemption in exemptions
    ]

    kept: list[Finding] = []
    suppressed: list[tuple[Finding, str]] = []
    expired_reported: set[tuple[int, ObjectRef | None, str | None]] = set()
    for finding in findings:
        reason = _suppressing_reason(finding, manifest_suppressions, forbidden, rules, problems)
        if reason is None:
            reason = _exempting_reason(finding, resolved_exemptions, today, rules, problems, expired_reported)
        if reason is None:
            kept.append(finding)
        else:
            suppressed.append((_marked(finding, reason[0]), reason[1]))

    for suppression in manifest_suppressions:
        for target in suppression.targets:
            rule_id = rules.resolve(target.rule)
            if target in suppression.used or rule_id is None or not rules.enabled(rule_id):
                continue
            scope = f" in container {target.container}" if target.container else ""
            problems.append(
                rules.finding(
                    UNUSED,
                    f"{suppression.where} suppresses {target.rule}{scope} but no such finding is reported",
                    file=suppression.file,
                    line=suppression.line,
                    column=suppression.column,
                    doc_index=suppression.doc_index,
                    obj=suppression.object,
                    path=suppression.path,
                )
            )
    kept.extend(problem for problem in problems if rules.enabled(problem.rule_id))
    return Outcome(kept, suppressed)


def _marked(finding: Finding, source: str) -> Finding:
    return dataclasses.replace(finding, extra={**finding.extra, "suppressedBy": source})


def _annotation_suppressions(
    resource: Resource | SuppressionSubject, allowed: bool, rules: _Rules, problems: list[Finding]
) -> Iterator[_Suppression]:
    value = resource.annotations.get(IGNORE_ANNOTATION)
    if value is None:
        return
    position = resource.position(ANNOTATION_PATH)
    line, column = position if position else (None, None)

    def problem(message: str) -> None:
        problems.append(
            rules.finding(
                INVALID,
                message,
                file=resource.file,
                line=line,
                column=column,
                doc_index=resource.doc_index,
                obj=resource.ref,
                path=ANNOTATION_PATH,
            )
        )

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
        valid = _valid_targets(targets, reason, f"{IGNORE_ANNOTATION} entry", rules, problem)
        if valid:
            yield _Suppression(
                source="annotation",
                targets=tuple(valid),
                reason=reason,
                where=f"{IGNORE_ANNOTATION} on {resource.ref}",
                file=resource.file,
                line=line,
                column=column,
                doc_index=resource.doc_index,
                object=resource.ref,
                path=ANNOTATION_PATH,
                resource=resource,
            )


def _valid_targets(
    targets: Sequence[Target], reason: str, what: str, rules: _Rules, problem: Any
) -> list[Target]:
    if not targets:
        problem(f"{what} names no rule")
        return []
    valid = []
    for target in targets:
        if rules.resolve(target.rule) is None:
            problem(f"{what} names unknown rule {target.rule!r} (`gpupolicy rules` lists them)")
        else:
            valid.append(target)
    if valid and not reason:
        names = ", ".join(target.rule for target in valid)
        problem(f"{what} for {names} gives no reason; write `{names}: why it is needed`")
        return []
    return valid


def _comment_suppression(
    directive: InlineDirective,
    allowed: bool,
    resources: Sequence[Resource | SuppressionSubject],
    rules: _Rules,
    problems: list[Finding],
) -> Iterator[_Suppression]:
    owner = _resource_at_line(resources, directive.line + (1 if directive.own_line else 0))

    def problem(message: str) -> None:
        problems.append(
            rules.finding(
                INVALID,
                message,
                file=directive.file,
                line=directive.line,
                column=directive.column,
                doc_index=owner.doc_index if owner else None,
                obj=owner.ref if owner else None,
            )
        )

    if not allowed:
        problem("the policy does not allow `# gpupolicy: ignore` comments (suppressions.comments: false)")
        return
    what = "`# gpupolicy: ignore` comment"
    reason = directive.reason
    if not reason and directive.targets:
        names = " ".join(target.rule for target in directive.targets)
        problem(f"{what} for {names} gives no reason; write `# gpupolicy: ignore {names} -- why`")
        return
    valid = _valid_targets(directive.targets, reason, what, rules, problem)
    if valid:
        yield _Suppression(
            source="comment",
            targets=tuple(valid),
            reason=reason,
            where=f"comment at {directive.file}:{directive.line}",
            file=directive.file,
            line=directive.line,
            column=directive.column,
            doc_index=owner.doc_index if owner else None,
            object=owner.ref if owner else None,
            lines=(directive.line, directive.line + 1),
        )


def _resource_at_line(
    resources: Sequence[Resource | SuppressionSubject], line: int
) -> Resource | SuppressionSubject | None:
    for resource in resources:
        span = resource.line_span()
        if span is not None and span[0] <= line <= span[1]:
            return resource
    return None


def _suppressing_reason(
    finding: Finding,
    suppressions: Sequence[_Suppression],
    forbidden: set[str],
    rules: _Rules,
    problems: list[Finding],
) -> tuple[str, str] | None:
    for suppression in suppressions:
        if not _covers(suppression, finding):
            continue
        for target in suppression.targets:
            if rules.resolve(target.rule) != finding.rule_id:
                continue
            if target.container is not None and target.container not in _containers_of(finding, suppression):
                continue
            suppression.used.add(target)
            if finding.rule_id in forbidden:
                if target in suppression.refused:
                    continue
                suppression.refused.add(target)
                problems.append(
                    rules.finding(
                        INVALID,
                        f"{suppression.where} may not suppress {finding.rule_id} {finding.rule_name}: "
                        "the policy forbids it (suppressions.forbidden); ask for a policy exemption",
                        file=suppression.file,
                        line=suppression.line,
                        column=suppression.column,
                        doc_index=suppression.doc_index,
                        obj=suppression.object,
                        path=suppression.path,
                    )
                )
                continue
            return suppression.source, f"{suppression.where}: {suppression.reason}"
    return None


def _covers(suppression: _Suppression, finding: Finding) -> bool:
    if suppression.source == "comment":
        return finding.file == suppression.file and finding.line in suppression.lines
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


def _exempting_reason(
    finding: Finding,
    exemptions: Sequence[Exemption],
    today: datetime.date,
    rules: _Rules,
    problems: list[Finding],
    expired_reported: set[tuple[int, ObjectRef | None, str | None]],
) -> tuple[str, str] | None:
    for exemption in exemptions:
        if not exemption.matches(finding, finding.rule_id):
            continue
        if exemption.expires is not None and exemption.expires < today:
            key = (exemption.index, finding.object, finding.file)
            if key not in expired_reported:
                expired_reported.add(key)
                problems.append(
                    rules.finding(
                        INVALID,
                        f"{exemption.label()} expired on {exemption.expires.isoformat()}; "
                        f"{finding.rule_id} is reported again here (renew it or fix the finding)",
                        file=finding.file,
                        line=finding.line,
                        column=finding.column,
                        doc_index=finding.doc_index,
                        obj=finding.object,
                        path=finding.path,
                    )
                )
            continue
        until = f", until {exemption.expires.isoformat()}" if exemption.expires else ""
        return "exemption", f"{exemption.label()}{until}: {exemption.reason}"
    return None
