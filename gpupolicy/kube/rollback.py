"""Rollback criteria in the three forms the design accepts, and the objects that carry them.

1. The annotation `gpupolicy.io/rollback-criteria` on the workload: a YAML/JSON list validated
   against `policies/schemas/rollback-criteria.schema.json`.
2. An Argo Rollouts `Rollout` whose strategy runs analysis — background (`canary.analysis`),
   inline canary steps (`canary.steps[].analysis`), experiment steps (`steps[].experiment.analyses`),
   blue-green `prePromotionAnalysis` / `postPromotionAnalysis` — with `AnalysisTemplate`s (or
   `ClusterAnalysisTemplate`s with `clusterScope: true`) whose metrics have conditions.
   https://argo-rollouts.readthedocs.io/en/stable/features/analysis/
   https://argo-rollouts.readthedocs.io/en/stable/features/specification/
   Template args are `{name, value?, valueFrom?}`; a Rollout passes `args` with `value` or
   `valueFrom` (`podTemplateHashValue`, `fieldRef`); placeholders read `{{args.name}}`.
   `failureLimit`/`consecutiveSuccessLimit` are IntOrString (`failureLimit: -1` disables the
   failure limit, which leaves only `consecutiveSuccessLimit` to end the run).
3. A Flagger `Canary` whose `targetRef` is the workload, with `analysis.metrics[].thresholdRange`
   (`min`/`max`), or the v1alpha3 `canaryAnalysis`. https://docs.flagger.app/usage/metrics
   https://docs.flagger.app/usage/how-it-works

Everything other than the workload itself is read through the inventory.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import field
from typing import TYPE_CHECKING, Any

import yaml

from gpupolicy.core.bounded_cache import bounded_memo
from gpupolicy.core.findings import JsonPath, excerpt
from gpupolicy.core.immutable import immutable, mutable
from gpupolicy.core.packaged import policies_dir
from gpupolicy.core.schema_precheck import schema_precheck
from gpupolicy.core.vocabulary import ROLLBACK_ANNOTATION
from gpupolicy.kube.inventory import Coverage, Inventory, namespace_of
from gpupolicy.kube.pod_spec import as_list, as_mapping, int_or_default
from gpupolicy.loading.composer import compose_document
from gpupolicy.loading.documents import DEFAULT_LIMITS, LoadLimits, Resource, UnreadableValue, construct
from gpupolicy.loading.positions import child_of

if TYPE_CHECKING:
    import jsonschema

ARGO_GROUP = "argoproj.io"
FLAGGER_GROUP = "flagger.app"
ARG_PLACEHOLDER = re.compile(r"\{\{\s*args\.([A-Za-z0-9_.\-]+?)\s*\}\}")


# -- form 1: the annotation ---------------------------------------------------------------------


@immutable
class Criterion:
    metric: str
    window: str
    min: float | None = None
    max: float | None = None
    comparator: str | None = None


@functools.cache
def rollback_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        (policies_dir() / "schemas" / "rollback-criteria.schema.json").read_text(encoding="utf-8")
    )
    return loaded


@functools.cache
def _rollback_precheck() -> Callable[[Any], bool]:
    """True only for criteria with no schema error: jsonschema-rs, loaded for the Kubernetes schemas
    anyway, answers in microseconds where importing jsonschema takes a tenth of a second."""
    return schema_precheck(rollback_schema(), formats={})


@functools.cache
def _rollback_validator() -> jsonschema.Draft202012Validator:
    import jsonschema  # here: only criteria the precheck does not pass need its messages

    return jsonschema.Draft202012Validator(rollback_schema())


# PyYAML's C loader when it was built with libyaml (about 10x faster than the pure-Python one).
ANNOTATION_KEYS = ("metadata", "annotations", ROLLBACK_ANNOTATION)
# Real criteria are a few lines; only those are memoised (a cache keyed by 256 KiB annotations
# would hold hundreds of MB). Longer texts are parsed each time, in bounded time.
_CACHED_TEXT_CHARS = 4096
# Each schema error is a finding line: a list of 100,000 bad items gives a handful, and a count.
MAX_ERRORS = 5


def parse_criteria(text: Any, limits: LoadLimits = DEFAULT_LIMITS) -> tuple[list[Criterion], list[str]]:
    """The annotation's criteria and, when it breaks the schema, one message per error naming
    the item and key (`[1].window: ...`). The text is read with the manifest loader's own
    construction, under the policy's `limits` (aliases, depth), so that a value the loader
    refuses is an error here too, never an exception or an expansion."""
    if not isinstance(text, str):
        return [], [f"the annotation must be a string holding a YAML list, not {type(text).__name__}"]
    if len(text) <= _CACHED_TEXT_CHARS:  # the webhook sees the same annotation on every admission
        criteria, errors = _parse_cached(text, limits)
    else:
        criteria, errors = _parse_criteria_text(text, limits)
    return list(criteria), list(errors)


@bounded_memo(max_bytes=2 << 20)  # keyed by the annotation's text: bounded in bytes
def _parse_cached(text: str, limits: LoadLimits) -> tuple[tuple[Criterion, ...], tuple[str, ...]]:
    return _parse_criteria_text(text, limits)


def _parse_criteria_text(text: str, limits: LoadLimits) -> tuple[tuple[Criterion, ...], tuple[str, ...]]:
    try:
        root = compose_document(text)
        data: Any = construct(root, limits)[0] if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1} of the annotation)" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        return (), (f"not valid YAML{where}: {problem}",)
    except UnreadableValue as exc:
        return (), (f"(line {exc.node.start_mark.line + 1} of the annotation): {exc}",)
    most = rollback_schema()["maxItems"]
    if isinstance(data, list) and len(data) > most:  # before validating each: 50,000 items took 6 s
        return (), (f"(list): {len(data):,} criteria; at most {most} are read",)
    errors = []
    found = (
        []
        if _rollback_precheck()(data)
        else sorted(
            _rollback_validator().iter_errors(data), key=lambda item: [str(step) for step in item.path]
        )
    )
    for error in found[:MAX_ERRORS]:
        where = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in error.path)
        if error.path:
            where += f" (line {_inner_line(root, tuple(error.path))} of the annotation)"
        errors.append(f"{where or '(list)'}: {_schema_message(error)}".lstrip("."))
    if len(found) > MAX_ERRORS:
        errors.append(f"(list): {len(found) - MAX_ERRORS} more errors")
    if errors:
        return (), tuple(errors)
    return tuple(
        Criterion(
            metric=str(item["metric"]),
            window=str(item["window"]),
            min=item.get("min"),
            max=item.get("max"),
            comparator=item.get("comparator"),
        )
        for item in data
    ), ()


def _schema_message(error: Any) -> str:
    """jsonschema's message with the offending value cut to an excerpt: its messages quote the
    whole instance (an aliased list, a 3 MB string), ours never more than a few dozen characters."""
    instance = error.instance
    if error.validator == "anyOf":
        return "needs a threshold: min or max"
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = error.schema.get("properties", {})
        unknown = [excerpt(key) for key in instance if key not in allowed]
        return f"unknown key {', '.join(unknown[:3])} (keys: metric, min, max, window, comparator)"
    if error.validator == "required":
        return str(error.message)  # names a key of the schema
    if error.validator in ("type", "pattern", "enum"):
        verb = {"type": "is not of type", "pattern": "does not match", "enum": "is not one of"}[
            error.validator
        ]
        return f"{excerpt(instance)} {verb} {error.validator_value!r}"
    if error.validator == "minItems" and instance == []:
        return "[] should be non-empty"
    return f"{excerpt(instance)} breaks {error.validator} {error.validator_value!r}"


def _inner_line(root: yaml.Node | None, path: tuple[Any, ...]) -> int:
    """1-based line, inside the annotation's text, of the key or item at `path`."""
    node, line = root, 1
    for step in path:
        if isinstance(node, yaml.MappingNode):
            match = next((pair for pair in node.value if getattr(pair[0], "value", None) == step), None)
            if match is None:
                break
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int) and step < len(node.value):
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            break
    return line


def annotation_line(resource: Resource, inner: int) -> int | None:
    """The file line of line `inner` of the criteria annotation when it is written as a block
    scalar (`|`, text from the next line on); None for other styles (the annotation's own line)."""
    written = resource.positions.written(ANNOTATION_KEYS) if resource.positions is not None else None
    block = child_of(written) if written is not None else None  # where a block scalar's text starts
    if isinstance(block, int) and resource.lines is not None:
        line, _ = resource.lines.parsed(block)  # the line as libyaml counts it
        return line + 1 + inner + resource.line_offset
    return None


# -- form 2: Argo Rollouts -------------------------------------------------------------------------


@immutable
class TemplateRef:
    name: str
    cluster_scope: bool
    path: JsonPath

    @property
    def kind(self) -> str:
        return "ClusterAnalysisTemplate" if self.cluster_scope else "AnalysisTemplate"


@immutable
class PassedArg:
    name: str
    path: JsonPath
    has_value: bool  # `value` or `valueFrom`


@immutable
class AnalysisUse:
    """One place a Rollout runs analysis: which templates, with which args."""

    where: str  # "background analysis", "canary step 3", "blue-green pre-promotion analysis" ...
    path: JsonPath
    templates: tuple[TemplateRef, ...]
    args: tuple[PassedArg, ...]


def is_argo_rollout(resource: Resource) -> bool:
    return resource.kind == "Rollout" and resource.group in (ARGO_GROUP, "")


def _analysis_use(block: Any, path: JsonPath, where: str) -> AnalysisUse | None:
    block = as_mapping(block)
    templates = []
    for index, item in enumerate(as_list(block.get("templates"))):
        item = as_mapping(item)
        if isinstance(item.get("templateName"), str):
            templates.append(
                TemplateRef(
                    item["templateName"], item.get("clusterScope") is True, (*path, "templates", index)
                )
            )
    if isinstance(block.get("templateName"), str):  # the deprecated single-template form
        templates.append(
            TemplateRef(block["templateName"], block.get("clusterScope") is True, (*path, "templateName"))
        )
    args = tuple(
        PassedArg(str(as_mapping(arg).get("name", "")), (*path, "args", index), _has_value(as_mapping(arg)))
        for index, arg in enumerate(as_list(block.get("args")))
    )
    if not templates:
        return None
    return AnalysisUse(where, path, tuple(templates), args)


def _has_value(arg: dict[str, Any]) -> bool:
    return arg.get("value") is not None or bool(as_mapping(arg.get("valueFrom")))


def rollout_analyses(resource: Resource) -> list[AnalysisUse]:
    """Every analysis a Rollout's strategy runs (background, inline steps, experiment steps,
    blue-green pre/post promotion)."""
    strategy = as_mapping(as_mapping(resource.obj.get("spec")).get("strategy"))
    base: JsonPath = ("spec", "strategy")
    uses: list[AnalysisUse | None] = []
    canary = as_mapping(strategy.get("canary"))
    if canary:
        uses.append(
            _analysis_use(canary.get("analysis"), (*base, "canary", "analysis"), "background analysis")
        )
        for index, step in enumerate(as_list(canary.get("steps"))):
            step = as_mapping(step)
            step_path: JsonPath = (*base, "canary", "steps", index)
            if "analysis" in step:
                uses.append(_analysis_use(step["analysis"], (*step_path, "analysis"), f"canary step {index}"))
            experiment = as_mapping(step.get("experiment"))
            for position, analysis in enumerate(as_list(experiment.get("analyses"))):
                analysis_path: JsonPath = (*step_path, "experiment", "analyses", position)
                uses.append(
                    _analysis_use(analysis, analysis_path, f"canary step {index} experiment analysis")
                )
    blue_green = as_mapping(strategy.get("blueGreen"))
    for key, where in (
        ("prePromotionAnalysis", "blue-green pre-promotion analysis"),
        ("postPromotionAnalysis", "blue-green post-promotion analysis"),
    ):
        if key in blue_green:
            uses.append(_analysis_use(blue_green[key], (*base, "blueGreen", key), where))
    return [use for use in uses if use is not None]


def find_template(ref: TemplateRef, namespace: str, inventory: Inventory) -> Resource | None:
    if ref.cluster_scope:
        return inventory.get("ClusterAnalysisTemplate", ref.name)
    return inventory.get("AnalysisTemplate", ref.name, namespace)


@immutable
class AnalysisMetric:
    name: str
    path: JsonPath
    success_condition: str | None
    failure_condition: str | None
    failure_limit: int | None
    consecutive_success_limit: int | None
    detail: str  # the provider block as text (the query), for classifying the metric
    provider: str | None = None  # prometheus, job, kayenta, web…

    @property
    def has_condition(self) -> bool:
        return bool(self.success_condition or self.failure_condition)

    @property
    def judged_by_provider(self) -> bool:
        """A Job's exit code, Kayenta's score thresholds or a plugin decide the measurement, not
        `successCondition`/`failureCondition` (Argo Rollouts' metricproviders/job, kayenta, plugin:
        https://argo-rollouts.readthedocs.io/en/stable/analysis/job/)."""
        return self.provider in PROVIDERS_WITH_THEIR_OWN_OUTCOME


PROVIDERS_WITH_THEIR_OWN_OUTCOME = frozenset({"job", "kayenta", "plugin"})


def _provider_name(provider: Any) -> str | None:
    return next(iter(provider), None) if isinstance(provider, dict) and len(provider) == 1 else None


def _int_or_string(value: Any) -> int | None:
    if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
        return int(value)
    return int_or_default(value, None)


def template_metrics(template: Resource) -> list[AnalysisMetric]:
    metrics = []
    for index, metric in enumerate(as_list(as_mapping(template.obj.get("spec")).get("metrics"))):
        metric = as_mapping(metric)
        success, failure = metric.get("successCondition"), metric.get("failureCondition")
        metrics.append(
            AnalysisMetric(
                name=str(metric.get("name", "")),
                path=("spec", "metrics", index),
                success_condition=success if isinstance(success, str) and success.strip() else None,
                failure_condition=failure if isinstance(failure, str) and failure.strip() else None,
                failure_limit=_int_or_string(metric.get("failureLimit")),
                consecutive_success_limit=_int_or_string(metric.get("consecutiveSuccessLimit")),
                detail=json.dumps(metric.get("provider"), default=str),
                provider=_provider_name(metric.get("provider")),
            )
        )
    return metrics


@immutable
class DeclaredArg:
    name: str
    path: JsonPath
    has_default: bool  # `value` or `valueFrom` in the template


def template_args(template: Resource) -> dict[str, DeclaredArg]:
    declared = {}
    for index, arg in enumerate(as_list(as_mapping(template.obj.get("spec")).get("args"))):
        arg = as_mapping(arg)
        name = str(arg.get("name", ""))
        declared[name] = DeclaredArg(name, ("spec", "args", index), _has_value(arg))
    return declared


def arg_placeholders(value: Any, path: JsonPath = ()) -> Iterator[tuple[str, JsonPath]]:
    """Every `{{args.name}}` in a template's metrics (or any value), with the field's path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from arg_placeholders(item, (*path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from arg_placeholders(item, (*path, index))
    elif isinstance(value, str) and "args." in value:
        for match in ARG_PLACEHOLDER.finditer(value):
            yield match.group(1), path


def template_placeholders(template: Resource) -> list[tuple[str, JsonPath]]:
    metrics = as_mapping(template.obj.get("spec")).get("metrics")
    return list(arg_placeholders(metrics, ("spec", "metrics")))


# -- form 3: Flagger ---------------------------------------------------------------------------------


def is_flagger_canary(resource: Resource) -> bool:
    return resource.kind == "Canary" and resource.group.startswith(FLAGGER_GROUP)


@immutable
class CanaryMetric:
    name: str
    path: JsonPath
    threshold_range: dict[str, Any] | None
    template: str | None  # templateRef.name (a MetricTemplate)


def canary_analysis_path(canary: Resource) -> JsonPath | None:
    spec = as_mapping(canary.obj.get("spec"))
    for key in ("analysis", "canaryAnalysis"):  # canaryAnalysis: flagger.app/v1alpha3
        if isinstance(spec.get(key), dict):
            return ("spec", key)
    return None


def canary_metrics(canary: Resource) -> list[CanaryMetric]:
    path = canary_analysis_path(canary)
    if path is None:
        return []
    analysis = as_mapping(as_mapping(canary.obj.get("spec")).get(str(path[1])))
    metrics = []
    for index, metric in enumerate(as_list(analysis.get("metrics"))):
        metric = as_mapping(metric)
        threshold = metric.get("thresholdRange")
        template = as_mapping(metric.get("templateRef")).get("name")
        metrics.append(
            CanaryMetric(
                str(metric.get("name", "")),
                (*path, "metrics", index),
                threshold if isinstance(threshold, dict) and threshold else None,
                template if isinstance(template, str) else None,
            )
        )
    return metrics


def canary_targets(canary: Resource, workload: Resource) -> bool:
    target = as_mapping(as_mapping(canary.obj.get("spec")).get("targetRef"))
    return (
        target.get("name") == workload.name
        and target.get("kind", "Deployment") == workload.kind
        and namespace_of(canary) == namespace_of(workload)
    )


def canaries_for(workload: Resource, inventory: Inventory, namespace: str | None = None) -> list[Resource]:
    """Flagger Canaries targeting the workload; `namespace`: its namespace, when the caller has it."""
    return [
        canary
        for canary in inventory.list("Canary", namespace_of(workload) if namespace is None else namespace)
        if is_flagger_canary(canary) and canary_targets(canary, workload)
    ]


def rollouts_referencing(
    workload: Resource, inventory: Inventory, namespace: str | None = None
) -> list[Resource]:
    """Argo Rollouts that take their pod template from this workload (`spec.workloadRef`);
    `namespace`: its namespace, when the caller has it."""
    found = []
    for rollout in inventory.list("Rollout", namespace_of(workload) if namespace is None else namespace):
        ref = as_mapping(as_mapping(rollout.obj.get("spec")).get("workloadRef"))
        if ref.get("name") == workload.name and ref.get("kind", "Deployment") == workload.kind:
            found.append(rollout)
    return found


# -- all forms together -------------------------------------------------------------------------------


@mutable
class RollbackForms:
    """What a workload has in each accepted form."""

    annotation_path: JsonPath | None = None
    criteria: list[Criterion] = field(default_factory=list)
    annotation_errors: list[str] = field(default_factory=list)
    rollouts: list[Resource] = field(default_factory=list)  # the workload itself, or Rollouts referencing it
    analyses: list[tuple[Resource, AnalysisUse]] = field(default_factory=list)
    canaries: list[Resource] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # kinds the inventory could not answer for

    @property
    def present(self) -> bool:
        return self.annotation_path is not None or bool(self.analyses) or bool(self.canaries)

    def metric_names(self, inventory: Inventory) -> list[tuple[str, str]]:
        """(name, detail) of every criterion metric, across the forms (for GP903)."""
        names = [(criterion.metric, "") for criterion in self.criteria]
        for rollout, use in self.analyses:
            for ref in use.templates:
                template = find_template(ref, namespace_of(rollout), inventory)
                if template is not None:
                    names.extend((metric.name, metric.detail) for metric in template_metrics(template))
        for canary in self.canaries:
            names.extend((metric.name, metric.template or "") for metric in canary_metrics(canary))
        return names


def rollback_forms(
    workload: Resource, inventory: Inventory, limits: LoadLimits = DEFAULT_LIMITS
) -> RollbackForms:
    """`limits` (the policy's) bound the annotation's YAML as they bound a manifest's. (Made in
    one call: three rules read it of every serving GPU workload.)"""
    annotations = workload.annotations
    annotation_path: JsonPath | None = None
    criteria: list[Criterion] = []
    errors: list[str] = []
    if ROLLBACK_ANNOTATION in annotations:
        annotation_path = ANNOTATION_KEYS
        criteria, errors = parse_criteria(annotations[ROLLBACK_ANNOTATION], limits)
    unknown = [kind for kind in ("Rollout", "Canary") if inventory.coverage(kind) is Coverage.UNAVAILABLE]
    namespace = namespace_of(workload)
    rollouts = [workload] if is_argo_rollout(workload) else []
    if "Rollout" not in unknown:
        rollouts += rollouts_referencing(workload, inventory, namespace)
    analyses = [(rollout, use) for rollout in rollouts for use in rollout_analyses(rollout)]
    canaries = canaries_for(workload, inventory, namespace) if "Canary" not in unknown else []
    return RollbackForms(annotation_path, criteria, errors, rollouts, analyses, canaries, unknown)


# -- surge (GP908) ---------------------------------------------------------------------------------------
