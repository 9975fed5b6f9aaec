"""Loaded custom rules as engine `Rule`s: the one place custom rules meet the engine.

Each custom rule becomes an OBJECT-scope rule whose check evaluates the compiled Rego or CEL on
the object (and, for a rule written for Pods, on each pod template of a workload, with paths
mapped back under the template). Findings are made by the engine, so positions, severities,
suppressions, exemptions, baselines and formats treat them as they treat built-in rules.

`installed(rules)` registers them in the engine's registry for the length of a run (a lint,
`gpupolicy rules`, `gpupolicy test`) and takes them out after; an id or name that clashes with a
built-in or another custom rule is refused with the file and line of the rule. The webhook runs
them without registering them (`checked_engine_rules`): a reloaded policy brings its own.

In the webhook each evaluation runs in a worker process within the policy's time budget
(`customRules.timeBudgetMs`, gpupolicy/custom/isolation.py): past it the rule fails for that
object (an internal error) and the admission goes on. Counts of evaluations and failures per
rule are kept (`STATS`) for the webhook's /metrics.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.immutable import replace
from gpupolicy.custom.definitions import (
    CustomRule,
    CustomViolation,
    InventoryDocument,
    LookupTable,
    Review,
)
from gpupolicy.custom.inventory_document import inventory_document
from gpupolicy.custom.isolation import START_SECONDS, IsolatedRunner, WorkerTimeout
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import REGISTRY, Parameter, Rule, RuleRegistry, Scope, Violation
from gpupolicy.kube.pod_spec import PodTemplate, as_mapping, workload_of
from gpupolicy.loading.documents import Resource

# Worker processes that enforce the time budget (gpupolicy/custom/isolation.py): the webhook
# starts them; without them (lint) rules are evaluated in-process, without a budget.
_RUNNER: IsolatedRunner | None = None


def use_workers(workers: int) -> None:
    """Evaluate custom rules in `workers` processes from now on (the webhook, when it first loads
    a policy with custom rules); returns once they have started."""
    global _RUNNER
    if _RUNNER is None:
        _RUNNER = IsolatedRunner(workers)
        _RUNNER.wait_ready(START_SECONDS)


class CustomRuleFailed(Exception):
    """A custom rule that raised or ran past its budget on one object."""


class RuleStats:
    """Evaluations and failures per custom rule since the process started (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.evaluations: Counter[str] = Counter()
        self.errors: Counter[tuple[str, str]] = Counter()  # (rule id, "raised" or "timeout")

    def evaluated(self, rule_id: str) -> None:
        with self._lock:
            self.evaluations[rule_id] += 1

    def failed(self, rule_id: str, reason: str) -> None:
        with self._lock:
            self.errors[(rule_id, reason)] += 1

    def snapshot(self) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        with self._lock:
            return dict(self.evaluations), dict(self.errors)


STATS = RuleStats()


def run_within_budget(
    custom: CustomRule, review: Review, parameters: Mapping[str, Any], budget_ms: int
) -> Sequence[CustomViolation]:
    """The violations of `custom` on `review`: in a worker process within the budget when the
    webhook started workers, else in-process. A failure or an overrun raises CustomRuleFailed."""
    rule_id = custom.metadata.id
    STATS.evaluated(rule_id)
    runner = _RUNNER
    try:
        if runner is None or budget_ms <= 0:
            return custom.check(review, parameters)
        return runner.run(custom.check, _materialized(custom, review), parameters, budget_ms / 1000)
    except WorkerTimeout:
        STATS.failed(rule_id, "timeout")
        raise CustomRuleFailed(f"{rule_id} ran past its time budget of {budget_ms} ms") from None
    except Exception as exc:
        STATS.failed(rule_id, "raised")
        raise CustomRuleFailed(f"{rule_id} ({custom.metadata.language}) failed: {exc}") from exc


def _materialized(custom: CustomRule, review: Review) -> Review:
    """`review` with what its callables would fetch fetched now: a worker gets values only."""
    namespace = as_mapping(review.obj.get("metadata")).get("namespace")
    table = {}
    if review.lookup is not None:
        for kind, fixed in custom.lookups:
            where = fixed if fixed is not None else namespace if isinstance(namespace, str) else None
            table[(kind, where)] = list(review.lookup(kind, where))
    inventory = review.inventory() if review.inventory is not None else None
    return Review(
        review.obj,
        review.namespace,
        InventoryDocument(inventory) if inventory is not None else None,
        lookup=LookupTable(table),
        operation=review.operation,
    )


def _pod_of(resource: Resource, template: PodTemplate) -> dict[str, Any]:
    """The Pod a workload's template makes (what Gatekeeper's ExpansionTemplate judges)."""
    metadata = dict(template.metadata)
    metadata.setdefault("name", resource.name or "")
    if resource.namespace:
        metadata.setdefault("namespace", resource.namespace)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template.spec}


def _template_path(template: PodTemplate) -> Callable[[JsonPath], JsonPath]:
    def mapped(path: JsonPath) -> JsonPath:
        if path[:1] == ("spec",):
            return (*template.path, *path[1:])
        if path[:1] == ("metadata",) and template.metadata_path is not None:
            return (*template.metadata_path, *path[1:])
        return template.path

    return mapped


def _same(path: JsonPath) -> JsonPath:
    return path


def _subjects(
    custom: CustomRule, resource: Resource
) -> Iterator[tuple[dict[str, Any], Callable[[JsonPath], JsonPath]]]:
    obj = resource.obj
    yield obj, _same
    if custom.expands_pods and resource.kind != "Pod":
        workload = workload_of(resource)
        for template in workload.templates if workload is not None else ():
            yield _pod_of(resource, template), _template_path(template)


def engine_rule(custom: CustomRule, policies: frozenset[int] | None = None) -> Rule:
    """The engine rule of `custom`, which runs under the policies of `policies` (their `id`s; None:
    under any policy)."""
    metadata = custom.metadata
    origin = metadata.origin

    def check(resource: Resource, ctx: Context) -> Iterator[Violation]:
        policy = ctx.policy
        if not isinstance(resource.obj, dict) or (policies is not None and id(policy) not in policies):
            return
        budget, kinds = policy.custom_rules.time_budget_ms, policy.custom_rules.inventory_kinds
        parameters = {**metadata.parameters, **(policy.rule(metadata.id).params or {})}
        namespace = _namespace_object(ctx, resource)

        def inventory() -> Mapping[str, Any]:  # built once per evaluation, when a rule reads it
            document: Mapping[str, Any] = ctx.memo(
                ("custom-inventory", kinds), lambda: inventory_document(ctx.inventory, kinds)
            )
            return document

        for subject, mapped in _subjects(custom, resource):
            if not custom.matches(subject, namespace):
                continue
            review = Review(
                subject, namespace, inventory if custom.reads_inventory else None, lookup=_lookup(ctx)
            )
            try:
                violations = run_within_budget(custom, review, parameters, budget)
            except CustomRuleFailed as exc:
                if not custom.in_tree:
                    raise
                yield _not_evaluated_on(custom, resource, exc)
                return
            for violation in violations:
                yield Violation(
                    path=mapped(violation.path), message=violation.message, severity=violation.severity
                )

    return Rule(
        id=metadata.id,
        name=metadata.name,
        severity=metadata.severity,
        scope=Scope.OBJECT,
        summary=metadata.summary,
        rationale=metadata.rationale or f"A {_LANGUAGES[metadata.language]} of this repository.",
        remediation=metadata.remediation,
        references=(f"{origin.file}:{origin.line}",),
        parameters=tuple(
            Parameter(name, value, "declared by the rule's metadata.")
            for name, value in metadata.parameters.items()
        ),
        check=check,
        source=origin.file,
    )


def _not_evaluated_on(custom: CustomRule, resource: Resource, failure: CustomRuleFailed) -> Violation:
    """One info finding per rule of the linted tree that fails on an object it selects. The
    repository's admission policies were written for the API server, which evaluates them on the
    object as its admission plugins leave it (DefaultTolerationSeconds adds tolerations to every
    pod, defaults fill fields in): a manifest in Git lacks what the policy may rely on, so the
    outcome is unknown, not gpupolicy's internal error. A rule from customRules.paths, written for
    gpupolicy, still fails loudly."""
    metadata = custom.metadata
    reason = str(failure.__cause__ or failure)
    return Violation(
        path=(),
        message=(
            f"unknown: {_LANGUAGES[metadata.language]} {metadata.id} ({metadata.origin.file}:{metadata.origin.line}) "
            f"could not be evaluated on {resource.ref}: {reason}; the API server evaluates it on the object as "
            "its admission plugins and defaults leave it, which the manifest does not show (said once: other "
            "objects it fails on were not checked against it either)"
        ),
        unknown=True,
        once=("custom-rule-not-evaluated", metadata.id),
    )


_LANGUAGES = {
    "rego": "Rego rule",
    "gatekeeper": "Gatekeeper constraint",
    "cel": "CEL rule",
    "vap": "ValidatingAdmissionPolicy binding",
}


def _lookup(ctx: Context) -> Callable[[str, str | None], list[Mapping[str, Any]]]:
    def objects(kind: str, namespace: str | None) -> list[Mapping[str, Any]]:
        return [as_mapping(item.obj) for item in ctx.inventory.list(kind, namespace)]

    return objects


def _namespace_object(ctx: Context, resource: Resource) -> Mapping[str, Any] | None:
    name = resource.namespace
    if not name:
        return None
    found = ctx.inventory.get("Namespace", name)
    return as_mapping(found.obj) if found is not None else None


def _settle_clashes(rules: Sequence[CustomRule], registry: RuleRegistry) -> list[CustomRule]:
    """`rules`, refused when an id or name is taken (by a built-in rule or another custom rule),
    except a definition of the linted tree: the repository's admission policies were written for
    the cluster, where a constraint `privileged-container` or the same binding in two overlays
    clash with nothing, so it takes the first free `-2`, `-3`... of its id and name instead."""
    defined: dict[str, str] = {}  # an id or name -> where it is defined
    settled = []
    for custom in rules:
        metadata = custom.metadata
        here = f"{metadata.origin.file}:{metadata.origin.line}"
        if custom.in_tree:
            custom = _renamed_clear_of(custom, registry, defined)
            metadata = custom.metadata
        for key in (metadata.id, metadata.name):
            existing = registry.get(key)
            if existing is not None and existing.source is None:
                raise metadata.origin.error(
                    f"rule {key} clashes with the built-in rule {existing.id} {existing.name}"
                )
            where = defined.get(key) or (existing.references[0] if existing is not None else None)
            if where is not None:
                raise metadata.origin.error(f"rule {key} is defined twice (also at {where})")
            defined[key] = here
        settled.append(custom)
    return settled


def _renamed_clear_of(custom: CustomRule, registry: RuleRegistry, defined: Mapping[str, str]) -> CustomRule:
    metadata = custom.metadata

    def taken(key: str) -> bool:
        return key in defined or registry.get(key) is not None

    if not (taken(metadata.id) or taken(metadata.name)):
        return custom
    suffix = 2
    while taken(f"{metadata.id}-{suffix}") or taken(f"{metadata.name}-{suffix}"):
        suffix += 1
    renamed = replace(metadata, id=f"{metadata.id}-{suffix}", name=f"{metadata.name}-{suffix}")
    return replace(custom, metadata=renamed)


def checked_engine_rules(rules: Sequence[CustomRule], registry: RuleRegistry = REGISTRY) -> tuple[Rule, ...]:
    """The engine rules of `rules`, without registering them (the webhook runs a rule tuple of its
    own); refused like `installed` refuses them when an id or name clashes."""
    return tuple(engine_rule(custom) for custom in _settle_clashes(rules, registry))


@contextmanager
def installed(
    rules: Sequence[CustomRule | tuple[CustomRule, frozenset[int]]], registry: RuleRegistry = REGISTRY
) -> Iterator[tuple[Rule, ...]]:
    """The custom rules registered for the length of the block (raises CustomRuleError on a clash).
    A rule given with a set of policies (their `id`s) runs only under those."""
    scoped = [item if isinstance(item, tuple) else (item, None) for item in rules]
    settled = _settle_clashes([custom for custom, _ in scoped], registry)
    added = tuple(
        engine_rule(custom, policies) for custom, (_, policies) in zip(settled, scoped, strict=True)
    )
    for rule in added:
        registry.add(rule)
    try:
        yield added
    finally:
        for rule in added:
            registry.remove(rule)
