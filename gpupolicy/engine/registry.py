"""The rules and their registry: a rule is a small function with metadata (`@rule`), kept in one
registry that refuses an unknown form of id, a duplicate id or name, and a remediation that is not
one sentence. A rule yields `Violation`s (a path and a message); the engine stamps the rest."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

from gpupolicy.core.findings import JsonPath, Severity
from gpupolicy.core.immutable import immutable
from gpupolicy.kube.roles import Role
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.parameters import DECLARED, RuleCatalog, RuleDeclaration
from gpupolicy.policy.parameters import Parameter as Parameter  # rules declare theirs from here


class Scope(enum.Enum):
    INPUT = "input"  # produced while loading (GP001, GP002, GP004): no check function
    OBJECT = "object"  # called once per object (of the rule's kinds)
    WORKLOAD = "workload"  # called once per object that carries pod templates
    BUNDLE = "bundle"  # called once per evaluation, for checks across objects


@immutable
class Setting:
    """A policy setting a rule reads that is not its own: a fact of the cluster or a section
    several rules share (`nodePools`, `gpu.vendors`), named for the docs and `cluster snapshot`.
    A setting the rule alone owns is a `Parameter` (gpupolicy/policy/parameters.py)."""

    key: str  # the policy key, e.g. "gpu.servingImages"
    description: str


@immutable
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
    # Said once per run under this key (`Context.said`): a namespace-level fact once per namespace, an
    # "unknown" once per missing fact (gpupolicy/engine/unknowns.py). The engine keeps the first such
    # finding, in the order the objects are checked, and drops the others.
    once: Hashable | None = None


@immutable
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
    # Whether the check can find anything under a policy (None: under every one). A check that
    # returns at once under some policies (GP703 without an allow list) is then not called at all,
    # for every object; it still counts as run (suppressions of it are not unused).
    can_find: Callable[[Any], bool] | None = None
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
    can_find: Callable[[Any], bool] | None = None,
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
                can_find=can_find,
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
