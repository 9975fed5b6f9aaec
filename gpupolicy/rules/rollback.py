"""GP901-GP908: rollout and rollback — criteria written down before the rollout, in one of three forms.

Forms (any one, present and valid): the annotation `gpupolicy.io/rollback-criteria`; an Argo
Rollouts Rollout running analysis with AnalysisTemplates/ClusterAnalysisTemplates; a Flagger Canary
targeting the workload with `thresholdRange` metrics. Parsing lives in `gpupolicy/kube/rollback.py`.
https://argo-rollouts.readthedocs.io/en/stable/features/analysis/
https://docs.flagger.app/usage/metrics
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from gpupolicy.core.vocabulary import ROLLBACK_ANNOTATION
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Scope, Setting, Violation, rule
from gpupolicy.kube.experiments import MetricCategory
from gpupolicy.kube.inventory import Coverage, namespace_of
from gpupolicy.kube.owners import controller_of
from gpupolicy.kube.pod_spec import Workload, as_mapping
from gpupolicy.kube.roles import SERVERS
from gpupolicy.kube.rollback import (
    RollbackForms,
    annotation_line,
    arg_placeholders,
    canaries_for,
    canary_metrics,
    find_template,
    is_argo_rollout,
    is_flagger_canary,
    rollback_forms,
    rollout_analyses,
    template_args,
    template_metrics,
)
from gpupolicy.kube.scheduling import required_values
from gpupolicy.kube.surge import rollout_surge
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy
from gpupolicy.policy.node_pools import node_pools

ARGO_ANALYSIS = "https://argo-rollouts.readthedocs.io/en/stable/features/analysis/"
ARGO_SPEC = "https://argo-rollouts.readthedocs.io/en/stable/features/specification/"
FLAGGER_METRICS = "https://docs.flagger.app/usage/metrics"
FLAGGER_HOW = "https://docs.flagger.app/usage/how-it-works"
ROLLBACK_SCHEMA = "https://gpupolicy.io/schemas/rollback-criteria.schema.json"
TEMPLATE_KINDS = ("AnalysisTemplate", "ClusterAnalysisTemplate")
_INNER_LINE = re.compile(r"\(line ([0-9]+) of the annotation\)")
# What is never rolled out, so has no rollback criteria of its own: a Pod, and a ReplicaSet or
# ReplicationController, which keep their Pods when their template changes (the Deployment that owns
# a ReplicaSet rolls out: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/#when-to-use-a-replicaset).
NOT_ROLLED_OUT = frozenset({"Pod", "ReplicaSet", "ReplicationController"})


def _serving_gpu(workload: Workload, ctx: Context) -> bool:
    return ctx.is_serving(workload) and ctx.uses_gpus(workload)


def _rolls_out(workload: Workload) -> bool:
    """Whether the workload is rolled out as itself: not a kind that never is, and not made by a
    controller, whose owner rolls it out and carries the criteria (a Deployment's annotations,
    which its Pods do not get; a LeaderWorkerSet's, not copied to the StatefulSets it makes; a
    Canary that targets the Deployment, not its ReplicaSet). The webhook reviews what controllers
    make as well as what is applied."""
    return workload.kind not in NOT_ROLLED_OUT and controller_of(workload.resource.metadata) is None


def _forms(workload: Workload, ctx: Context) -> RollbackForms:
    """What the workload has in each form, found once per object (three rules read them): kept
    on the view, made per evaluation of the object, for this context's policy and inventory."""
    key = ("rollback:forms", id(ctx))
    forms: RollbackForms | None = workload.cache.get(key)
    if forms is None:
        forms = workload.cache[key] = rollback_forms(workload.resource, ctx.inventory, ctx.policy.limits)
    return forms


@rule(
    id="GP901",
    roles=SERVERS,
    name="rollback-criteria-missing",
    severity="error",
    summary="Reports a serving GPU workload with no rollback criteria in any accepted form: the annotation "
    "`gpupolicy.io/rollback-criteria`, an Argo Rollouts analysis, or a Flagger Canary targeting it. Pods, "
    "ReplicaSets and ReplicationControllers are never rolled out, and what a controller makes (its "
    "ownerReference says so) is rolled out by its owner: neither is judged.",
    rationale="Rollback criteria decided after a failure are decided under pressure and bent to the moment. "
    "A GPU server that is Running may not have loaded its model or met its SLO; the criteria that pull it "
    "back must exist before the rollout.",
    remediation="Add a gpupolicy.io/rollback-criteria annotation, an Argo Rollouts analysis, or a Flagger Canary with thresholdRange metrics.",
    references=(ROLLBACK_SCHEMA, ARGO_ANALYSIS, FLAGGER_METRICS),
)
def rollback_criteria_missing(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not _rolls_out(workload) or not _serving_gpu(workload, ctx):
        return
    forms = _forms(workload, ctx)
    if forms.present:
        return
    if forms.unknown:
        yield Violation(
            ("metadata", "name"),
            f"{workload.kind} {workload.name} has no rollback-criteria annotation, and the inventory cannot "
            f"list {' or '.join(forms.unknown)} objects now to look for the other forms",
            unknown=True,
        )
        return
    yield Violation(
        ("metadata", "name"),
        f"serving GPU {workload.kind} {workload.name} has no rollback criteria (annotation "
        f"{ROLLBACK_ANNOTATION}, Argo Rollouts analysis, or Flagger Canary)",
    )


@rule(
    id="GP902",
    name="rollback-criteria-invalid",
    severity="error",
    summary="Reports a `gpupolicy.io/rollback-criteria` annotation that breaks its schema "
    "(each criterion: metric, min and/or max, window, optional comparator).",
    rationale="Criteria that cannot be read cannot trigger a rollback; a typo in a threshold or window "
    "makes the safety net silently absent.",
    remediation="Write the annotation as a list of {metric, max or min, window} as in policies/schemas/rollback-criteria.schema.json.",
    references=(ROLLBACK_SCHEMA,),
)
def rollback_criteria_invalid(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not _rolls_out(workload):
        return
    forms = _forms(workload, ctx)
    if forms.annotation_path is None:
        return
    for error in forms.annotation_errors:
        inner = _INNER_LINE.search(error)
        absolute = annotation_line(workload.resource, int(inner.group(1))) if inner else None
        if inner and absolute is not None:
            error = error.replace(inner.group(0), f"(line {absolute})")
        yield Violation(forms.annotation_path, f"{ROLLBACK_ANNOTATION}: {error}")


@rule(
    id="GP903",
    name="rollback-criteria-utilization-only",
    severity="warning",
    summary="Reports rollback criteria (in any form) that hold no service-quality metric: only GPU "
    "utilisation, memory or other efficiency signals (a metric whose kind cannot be told, such as a Job's "
    "test or an unrecognised query, is not judged).",
    rationale="A release that keeps the GPUs busy while latency and errors climb passes utilisation-only "
    "criteria. Users feel P95 latency, error rate and accepted throughput; the criteria must watch those.",
    remediation="Add a service-quality criterion such as P95 latency, error rate or request success rate.",
    references=(ROLLBACK_SCHEMA, ARGO_ANALYSIS, FLAGGER_METRICS),
)
def rollback_criteria_utilization_only(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not _rolls_out(workload):
        return
    forms = _forms(workload, ctx)
    names = forms.metric_names(ctx.inventory)
    if not names:
        return
    vocabulary = ctx.policy.experiments.vocabulary
    categories = [vocabulary.categorise(name, detail=detail) for name, detail in names]
    # A metric whose kind cannot be told (a Job's test, an unrecognised query) may well watch the
    # service: only criteria made entirely of efficiency or scheduling signals are claimed.
    if MetricCategory.SERVICE_QUALITY in categories or None in categories:
        return
    path = forms.annotation_path or ("metadata", "name")
    shown = ", ".join(dict.fromkeys(name for name, _ in names))
    yield Violation(
        path, f"rollback criteria of {workload.kind} {workload.name} watch no service quality: {shown}"
    )


@rule(
    id="GP904",
    name="analysis-template-undefined",
    severity="error",
    scope=Scope.OBJECT,
    kinds=("Rollout",),
    summary="Reports a Rollout whose analysis (background, inline step, experiment step, blue-green "
    "pre/post promotion) names an AnalysisTemplate or ClusterAnalysisTemplate that is not in the inventory.",
    rationale="Argo Rollouts cannot create the AnalysisRun: the rollout errors at the analysis step instead "
    "of judging the release, so the rollback criteria never run.",
    remediation="Create the AnalysisTemplate in the Rollout's namespace (or set clusterScope: true for a ClusterAnalysisTemplate), or fix its name.",
    references=(ARGO_ANALYSIS, ARGO_SPEC),
)
def analysis_template_undefined(resource: Resource, ctx: Context) -> Iterator[Violation]:
    if not is_argo_rollout(resource):
        return
    namespace = namespace_of(resource)
    for use in rollout_analyses(resource):
        for ref in use.templates:
            if find_template(ref, namespace, ctx.inventory) is not None:
                continue
            if ctx.inventory.coverage(ref.kind) is Coverage.UNAVAILABLE:
                yield Violation(
                    ref.path,
                    f"cannot verify {ref.kind} {ref.name}: the inventory cannot list them now",
                    unknown=True,
                )
            else:
                where = "cluster" if ref.cluster_scope else f"namespace {namespace}"
                yield Violation(
                    ref.path, f"{use.where} uses {ref.kind} {ref.name}, which is not in the {where}"
                )


@rule(
    id="GP905",
    name="analysis-without-failure-condition",
    severity="error",
    scope=Scope.OBJECT,
    kinds=TEMPLATE_KINDS,
    summary="Reports an AnalysisTemplate metric with neither `successCondition` nor `failureCondition` (but for "
    "a Job, Kayenta or plugin metric, whose provider decides the outcome), or with `failureLimit: -1` and no "
    "`consecutiveSuccessLimit`.",
    rationale="A measured metric without conditions can never fail the analysis: Argo Rollouts counts every "
    "measurement as Successful (utils/evaluate/evaluate.go; its documentation says Inconclusive, which would "
    "pause the rollout instead), so it never rolls back. `failureLimit: -1` disables failing altogether; "
    "without a consecutive-success limit the metric can never end the run either way.",
    remediation="Give each metric a successCondition or failureCondition, and pair failureLimit: -1 with a consecutiveSuccessLimit.",
    references=(ARGO_ANALYSIS,),
)
def analysis_without_failure_condition(resource: Resource, ctx: Context) -> Iterator[Violation]:
    for metric in template_metrics(resource):
        if not metric.has_condition and not metric.judged_by_provider:
            yield Violation(
                metric.path, f"metric {metric.name!r} has neither successCondition nor failureCondition"
            )
        elif metric.failure_limit == -1 and metric.consecutive_success_limit is None:
            yield Violation(
                (*metric.path, "failureLimit"),
                f"metric {metric.name!r} sets failureLimit: -1 without consecutiveSuccessLimit",
            )


def _declared_without_value(template: Resource) -> dict[str, Any]:
    return {name: arg for name, arg in template_args(template).items() if not arg.has_default}


@rule(
    id="GP906",
    name="analysis-args-unresolved",
    severity="error",
    scope=Scope.OBJECT,
    kinds=("Rollout", *TEMPLATE_KINDS),
    summary="Reports a `{{args.x}}` placeholder in an AnalysisTemplate that the template does not declare, "
    "and a declared argument without a value that a Rollout using the template does not pass.",
    rationale="Argo Rollouts resolves args when it creates the AnalysisRun; an unresolved argument makes the "
    "run error out, so the analysis guarding the rollout never measures anything.",
    remediation="Declare the argument in the template's spec.args and pass it from the Rollout with value or valueFrom.",
    references=(ARGO_ANALYSIS,),
)
def analysis_args_unresolved(resource: Resource, ctx: Context) -> Iterator[Violation]:
    if resource.kind in TEMPLATE_KINDS:
        declared = template_args(resource)
        metrics = as_mapping(resource.obj.get("spec")).get("metrics")
        for name, path in arg_placeholders(metrics, ("spec", "metrics")):
            if name not in declared:
                yield Violation(
                    path, f"{{{{args.{name}}}}} is used but not declared in spec.args of {resource.name}"
                )
        return
    if not is_argo_rollout(resource):
        return
    for use in rollout_analyses(resource):
        passed = {arg.name for arg in use.args if arg.has_value}
        for ref in use.templates:
            template = find_template(ref, namespace_of(resource), ctx.inventory)
            if template is None:
                continue  # GP904
            for name in _declared_without_value(template):
                if name not in passed:
                    yield Violation(
                        ref.path,
                        f"{use.where}: {ref.kind} {ref.name} needs argument {name!r}, which is not passed",
                    )


@rule(
    id="GP907",
    name="flagger-metric-without-threshold",
    severity="warning",
    scope=Scope.OBJECT,
    kinds=("Canary",),
    summary="Reports a Flagger Canary analysis metric without `thresholdRange`.",
    rationale="Flagger judges a metric by its thresholdRange (min/max); without one the metric is "
    "measured but can never fail the canary, so it is no rollback criterion.",
    remediation="Give each Canary metric a thresholdRange with min or max.",
    references=(FLAGGER_METRICS, FLAGGER_HOW),
)
def flagger_metric_without_threshold(resource: Resource, ctx: Context) -> Iterator[Violation]:
    if not is_flagger_canary(resource):
        return
    for metric in canary_metrics(resource):
        if metric.threshold_range is None:
            yield Violation(metric.path, f"Canary metric {metric.name!r} has no thresholdRange")


def _gpus_per_pod(workload: Workload, ctx: Context) -> tuple[Decimal, str] | None:
    if len(workload.templates) != 1:
        return None
    template = workload.templates[0]
    demands = [demand for demand in ctx.gpu.counted_demands(template) if (demand.amount or 0) > 0]
    if not demands:
        return None
    total = sum((demand.amount or Decimal(0) for demand in demands), Decimal(0))
    return total, demands[0].resource.name


def _spare_gpus(workload: Workload, resource_name: str, ctx: Context) -> tuple[int, list[str]] | None:
    """Declared spare GPUs of the pools the workload may land on (its resource, and its product
    selector when it has one); None when no such pool declares spareGpus."""
    products = required_values(workload.templates[0], "nvidia.com/gpu.product")
    wanted = {value.removesuffix("-SHARED") for value in products[0]} if products else None
    spare, names = 0, []
    for pool in node_pools(ctx.policy):
        if pool.resource != resource_name or pool.spare_gpus is None:
            continue
        if wanted is not None and pool.gpu_product not in wanted:
            continue
        spare += pool.spare_gpus
        names.append(pool.name)
    return (spare, names) if names else None


def _pools_keep_spare_gpus(policy: Policy) -> bool:
    """Whether a node pool declares spare GPUs (the default policy declares no pools): else there
    are none to run out of."""
    return any(pool.spare_gpus is not None for pool in node_pools(policy))


@rule(
    id="GP908",
    can_find=_pools_keep_spare_gpus,
    roles=SERVERS,
    name="surge-needs-spare-gpus",
    severity="warning",
    summary="Reports a rollout whose extra pods (rolling maxSurge, an Argo canary's scale, a blue-green "
    "preview, a Flagger canary copy) need more GPUs than the policy declares spare in the node pools the "
    "workload can use.",
    rationale="Surge pods wait Pending for GPUs nobody has; the rollout stalls at its progress deadline, or "
    "evicts lower-priority GPU work, in the middle of a release.",
    remediation="Lower maxSurge (or previewReplicaCount / canary scale), use maxUnavailable instead, or declare more spare GPUs.",
    references=(
        "https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#max-surge",
        ARGO_SPEC,
        FLAGGER_HOW,
    ),
    settings=(Setting("nodePools[].spareGpus", "GPUs a pool keeps free for surges"),),
)
def surge_needs_spare_gpus(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not _pools_keep_spare_gpus(ctx.policy):
        return
    per_pod = _gpus_per_pod(workload, ctx)
    if per_pod is None:
        return
    gpus, resource_name = per_pod
    spare = _spare_gpus(workload, resource_name, ctx)
    if spare is None:
        return
    canaries = canaries_for(workload.resource, ctx.inventory) if workload.kind == "Deployment" else []
    surge = rollout_surge(workload.resource, canaries)
    if surge is None or surge.pods <= 0:
        return
    needed = gpus * surge.pods
    if needed > spare[0]:
        yield Violation(
            surge.path,
            f"{surge.how} adds {surge.pods} pod(s) x {gpus} {resource_name} = {needed} GPUs; "
            f"node pool(s) {', '.join(spare[1])} declare {spare[0]} spare",
        )
