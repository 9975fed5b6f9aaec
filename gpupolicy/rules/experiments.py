"""GP801-GP809: experiments — the experiment ConfigMap and the arms that name it.

An experiment changes one variable at a time, keeps image, model and input fixed, repeats each
run (at least 3 times), keeps a control arm, and writes its definition down under version
control before it runs (DESIGN.md "Experiment ConfigMap"). Workloads join an experiment with the
labels `gpupolicy.io/experiment` (the ConfigMap's name, same namespace) and `gpupolicy.io/arm`.
Other objects are read only through the inventory, so the webhook and the CLI agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpupolicy.core.findings import Severity
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Parameter, Scope, Setting, Violation, rule
from gpupolicy.kube.experiment_arms import ArmComparison, ArmLink, arm_link, compare_arms
from gpupolicy.kube.experiments import (
    CONTROL_ARM,
    DEFAULT_MINIMUM_REPEATS,
    ExperimentConfig,
    is_experiment_config,
    parse_experiment,
)
from gpupolicy.kube.inventory import Coverage, workload_namespace
from gpupolicy.kube.pod_spec import RUNNING_KINDS, Workload, workload_of
from gpupolicy.loading.documents import Resource

CONFIGMAP_DOCS = "https://kubernetes.io/docs/concepts/configuration/configmap/"
IMMUTABLE_DOCS = "https://kubernetes.io/docs/concepts/configuration/configmap/#configmap-immutable"
LABELS_DOCS = "https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/"
EXPERIMENT_SCHEMA = "https://gpupolicy.io/schemas/experiment.schema.json"
WORKLOAD_KINDS = RUNNING_KINDS


def _config(resource: Resource, ctx: Context) -> ExperimentConfig:
    vocabulary = ctx.policy.experiments.vocabulary
    # Kept on the ConfigMap: the webhook reads the same version of it for every admission.
    config: ExperimentConfig = ctx.object_fact(
        resource, "experiments:config", lambda: parse_experiment(resource, vocabulary)
    )
    return config


def _experiment_configs(resource: Resource, ctx: Context) -> Iterator[ExperimentConfig]:
    if is_experiment_config(resource.obj):
        yield _config(resource, ctx)


@rule(
    id="GP801",
    name="experiment-config-invalid",
    severity="error",
    scope=Scope.OBJECT,
    kinds=("ConfigMap",),
    summary="Reports an experiment ConfigMap that breaks the experiment schema: a missing key (change, "
    "fixed, metrics, repeats), a value that is not a string, an unknown key, a `fixed` or `variable` word "
    "that is not a dimension; unknown metric words are reported as warnings.",
    rationale="The ConfigMap is the experiment's written method: what changes, what stays fixed, what is "
    "measured and how often. A missing or unreadable key means the arms cannot be checked against it, and "
    "results cannot be compared later.",
    remediation="Fix the named data key so that the ConfigMap matches policies/schemas/experiment.schema.json.",
    references=(EXPERIMENT_SCHEMA, CONFIGMAP_DOCS),
    settings=(Setting("experiments.metricWords", "extra metric words and their category"),),
)
def experiment_config_invalid(resource: Resource, ctx: Context) -> Iterator[Violation]:
    for config in _experiment_configs(resource, ctx):
        for problem in config.problems:
            severity = Severity.WARNING if problem.severity == "warning" else None
            yield Violation(problem.path, f"experiment {config.name}: {problem.message}", severity=severity)


MINIMUM_REPEATS = Parameter(
    "minimumRepeats",
    DEFAULT_MINIMUM_REPEATS,
    "Each arm must be run at least this many times.",
    setting="experiments.minimumRepeats",
)


@rule(
    id="GP802",
    name="experiment-too-few-repeats",
    severity="error",
    scope=Scope.OBJECT,
    kinds=("ConfigMap",),
    summary="Reports an experiment whose `repeats` is below the policy minimum (3 by default).",
    rationale="GPU benchmarks are noisy (placement, cache state, neighbours, clocks). One or two runs cannot "
    "tell a real difference from noise; the users' method repeats every arm at least three times.",
    remediation="Set data.repeats to at least the policy minimum (3).",
    references=(CONFIGMAP_DOCS,),
    parameters=(MINIMUM_REPEATS,),
)
def experiment_too_few_repeats(resource: Resource, ctx: Context) -> Iterator[Violation]:
    minimum = ctx.policy.param(MINIMUM_REPEATS)
    for config in _experiment_configs(resource, ctx):
        if config.repeats is not None and config.repeats < minimum:
            yield Violation(
                ("data", "repeats"),
                f"experiment {config.name} repeats each arm {config.repeats} time(s); the policy asks for at least {minimum}",
            )


@rule(
    id="GP803",
    name="experiment-utilization-only",
    severity="warning",
    scope=Scope.OBJECT,
    kinds=("ConfigMap",),
    summary="Reports an experiment whose `metrics` hold no service-quality metric (P95, latency, error "
    "rate, errors, accepted throughput ...), only efficiency or scheduling ones.",
    rationale="Higher GPU utilisation does not mean happier users: an arm can raise utilisation while its "
    "tail latency and errors get worse. Cost is measured per request that met its SLO, so an experiment "
    "must measure service quality beside efficiency.",
    remediation="Add a service-quality metric such as P95, error rate or accepted throughput to data.metrics.",
    references=(
        "https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/",
        "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html",
    ),
)
def experiment_utilization_only(resource: Resource, ctx: Context) -> Iterator[Violation]:
    for config in _experiment_configs(resource, ctx):
        if config.metrics and not config.has_service_quality_metric():
            known = ", ".join(
                f"{term.raw} ({term.category.label})" if term.category else f"{term.raw} (unknown)"
                for term in config.metrics
            )
            yield Violation(
                ("data", "metrics"), f"experiment {config.name} measures no service quality: {known}"
            )


# -- arms ------------------------------------------------------------------------------------------


def _lookup(workload: Workload, ctx: Context) -> tuple[ArmLink, Resource | None, Coverage] | None:
    """The workload's arm, its experiment's ConfigMap and whether the inventory could list
    ConfigMaps, looked up once per object (GP804 and `_linked` read them): kept on the view."""
    key, cache = ("experiments:lookup", id(ctx)), workload.cache
    if key in cache:
        found: tuple[ArmLink, Resource | None, Coverage] | None = cache[key]
        return found
    found = cache[key] = _look_up(workload, ctx)
    return found


def _look_up(workload: Workload, ctx: Context) -> tuple[ArmLink, Resource | None, Coverage] | None:
    link = arm_link(workload)
    if link is None:
        return None
    namespace = workload_namespace(workload)
    found = ctx.inventory.get("ConfigMap", link.experiment, namespace)
    return link, found, ctx.inventory.coverage("ConfigMap")


def _linked(workload: Workload, ctx: Context) -> tuple[ArmLink, ExperimentConfig] | None:
    """The workload's arm and its experiment, looked up once per object (four rules read it):
    kept on the view, made per evaluation of the object, for this context's policy and inventory."""
    key, cache = ("experiments:linked", id(ctx)), workload.cache
    if key in cache:
        found: tuple[ArmLink, ExperimentConfig] | None = cache[key]
        return found
    found = cache[key] = _find_linked(workload, ctx)
    return found


def _find_linked(workload: Workload, ctx: Context) -> tuple[ArmLink, ExperimentConfig] | None:
    looked_up = _lookup(workload, ctx)
    if looked_up is None or looked_up[1] is None or not is_experiment_config(looked_up[1].obj):
        return None
    return looked_up[0], _config(looked_up[1], ctx)


def _arms(namespace: str, experiment: str, ctx: Context) -> tuple[list[tuple[Workload, ArmLink]], bool]:
    """Workloads of the experiment in the namespace, and whether the inventory could answer."""

    def collect() -> tuple[list[tuple[Workload, ArmLink]], bool]:
        arms = []
        complete = True
        for kind in WORKLOAD_KINDS:
            if ctx.inventory.coverage(kind) is Coverage.UNAVAILABLE:
                complete = False
                continue
            for resource in ctx.inventory.list(kind, namespace):
                workload = workload_of(resource)
                link = arm_link(workload) if workload is not None else None
                if workload is not None and link is not None and link.experiment == experiment:
                    arms.append((workload, link))
        return arms, complete

    result: tuple[list[tuple[Workload, ArmLink]], bool] = ctx.memo(
        ("experiments:arms", namespace, experiment), collect
    )
    return result


def _same_object(a: Workload, b: Workload) -> bool:
    return (a.kind, a.namespace, a.name) == (b.kind, b.namespace, b.name)


def _control_of(workload: Workload, link: ArmLink, ctx: Context) -> tuple[Workload | None, bool]:
    arms, complete = _arms(workload_namespace(workload), link.experiment, ctx)
    controls = [arm for arm, other in arms if other.arm == CONTROL_ARM and not _same_object(arm, workload)]
    return (controls[0] if controls else None), complete


def _comparison(workload: Workload, ctx: Context) -> tuple[ArmLink, ExperimentConfig, ArmComparison] | None:
    """The treatment arm against its control, under the experiment's fixed and declared variables
    (computed once per object, kept on the view as `_linked` is: GP806 and GP807 both read it)."""
    key, cache = ("experiments:comparison", id(ctx)), workload.cache
    if key in cache:
        found: tuple[ArmLink, ExperimentConfig, ArmComparison] | None = cache[key]
        return found
    found = cache[key] = _compare(workload, ctx)
    return found


def _compare(workload: Workload, ctx: Context) -> tuple[ArmLink, ExperimentConfig, ArmComparison] | None:
    linked = _linked(workload, ctx)
    if linked is None or linked[0].arm in (None, CONTROL_ARM):
        return None
    link, config = linked
    control, _ = _control_of(workload, link, ctx)
    if control is None:
        return None
    comparison = compare_arms(
        control, workload, gpu=ctx.policy.gpu, fixed=config.fixed, declared=config.variables
    )
    return link, config, comparison


@rule(
    id="GP804",
    name="experiment-undefined",
    severity="error",
    summary="Reports a workload whose `gpupolicy.io/experiment` label names no experiment ConfigMap in its "
    "namespace (or a ConfigMap that is not an experiment config).",
    rationale="Results of an arm whose experiment definition is missing cannot be interpreted: nobody can "
    "tell what was changed, what was fixed, or what was measured.",
    remediation="Create the experiment ConfigMap in the workload's namespace, or fix the label to name it.",
    references=(LABELS_DOCS, CONFIGMAP_DOCS),
)
def experiment_undefined(workload: Workload, ctx: Context) -> Iterator[Violation]:
    looked_up = _lookup(workload, ctx)
    if looked_up is None:
        return
    link, found, coverage = looked_up
    namespace = workload_namespace(workload)
    if found is None and coverage is Coverage.UNAVAILABLE:
        yield Violation(
            link.experiment_path,
            f"cannot verify experiment {link.experiment}: the inventory cannot list ConfigMaps in {namespace} now",
            unknown=True,
        )
    elif found is None:
        yield Violation(
            link.experiment_path, f"experiment ConfigMap {namespace}/{link.experiment} does not exist"
        )
    elif not is_experiment_config(found.obj):
        yield Violation(
            link.experiment_path,
            f"ConfigMap {namespace}/{link.experiment} is not an experiment config "
            "(name it *-experiment, label it gpupolicy.io/experiment, or give it change and repeats)",
        )


@rule(
    id="GP805",
    name="experiment-arm-invalid",
    severity="error",
    summary="Reports an experiment workload without the `gpupolicy.io/arm` label, or whose arm is neither "
    "`control` nor one of the experiment's declared `arms`.",
    rationale="The arm label is how runs are grouped and compared; a missing or misspelt arm puts results "
    "into a group the experiment never defined.",
    remediation="Label the workload gpupolicy.io/arm with control or one of the experiment's declared arms.",
    references=(LABELS_DOCS,),
)
def experiment_arm_invalid(workload: Workload, ctx: Context) -> Iterator[Violation]:
    linked = _linked(workload, ctx)
    if linked is None:
        return
    link, config = linked
    if link.arm is None:
        yield Violation(
            link.experiment_path, f"workload joins experiment {config.name} without a gpupolicy.io/arm label"
        )
    elif not config.arm_is_declared(link.arm):
        assert link.arm_path is not None
        declared = ", ".join([CONTROL_ARM, *config.arms])
        yield Violation(
            link.arm_path, f"arm {link.arm!r} is not declared by experiment {config.name} ({declared})"
        )


def _shown(value: Any) -> str:
    text = "(absent)" if value is None else str(value)
    return text if len(text) <= 80 else text[:77] + "..."


@rule(
    id="GP806",
    name="experiment-fixed-drift",
    severity="error",
    summary="Reports a treatment arm that differs from the control arm in a dimension the experiment keeps "
    "fixed (image, model, input by default), path by path.",
    rationale="When the image, model or input differs between arms, a difference in the results cannot be "
    "attributed to the variable under test.",
    remediation="Make the fixed dimensions of the treatment arm identical to the control arm.",
    references=(LABELS_DOCS, CONFIGMAP_DOCS),
)
def experiment_fixed_drift(workload: Workload, ctx: Context) -> Iterator[Violation]:
    found = _comparison(workload, ctx)
    if found is None:
        return
    link, config, comparison = found
    for diff in comparison.fixed_drift:
        yield Violation(
            diff.path,
            f"arm {link.arm} differs from control in fixed {diff.dimension} at {diff.shown_path}: "
            f"{_shown(diff.a_value)} -> {_shown(diff.b_value)} (experiment {config.name})",
        )


@rule(
    id="GP807",
    name="experiment-multiple-variables",
    severity="error",
    summary="Reports a treatment arm that differs from the control arm in more than one dimension (placement, "
    "priority, sharing, resources, probes, replicas, image, model, input, runtime, other), or in one the "
    "experiment's `variable` does not declare.",
    rationale="An arm that changes two things at once cannot say which of them caused the result. An "
    "experiment over several variables (affinity, priority and sharing) is a set of single-variable arms.",
    remediation="Split the arm into one arm per changed dimension, or declare the changed dimension in data.variable.",
    references=(LABELS_DOCS, "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/"),
)
def experiment_multiple_variables(workload: Workload, ctx: Context) -> Iterator[Violation]:
    found = _comparison(workload, ctx)
    if found is None:
        return
    link, config, comparison = found
    path = link.arm_path or link.experiment_path
    if comparison.multiple:
        first_paths: dict[str, str] = {}
        for diff in comparison.diffs:
            if diff.dimension in comparison.variables:
                first_paths.setdefault(diff.dimension, diff.shown_path)
        detail = "; ".join(f"{dim} ({shown})" for dim, shown in first_paths.items())
        yield Violation(
            path, f"arm {link.arm} differs from control in {len(first_paths)} dimensions: {detail}"
        )
    elif comparison.undeclared:
        yield Violation(
            path,
            f"arm {link.arm} changes {comparison.undeclared[0]}, which experiment {config.name} does not declare "
            f"as a variable ({', '.join(config.variables)})",
        )


@rule(
    id="GP808",
    name="experiment-without-control",
    severity="warning",
    summary="Reports a treatment arm of an experiment that has no `control` arm in the namespace.",
    rationale="Without a control group run under the same conditions, a treatment's numbers have nothing "
    "to be compared with: a change in the cluster looks like an effect of the treatment.",
    remediation="Add a control workload labelled gpupolicy.io/arm: control to the experiment.",
    references=(LABELS_DOCS,),
)
def experiment_without_control(workload: Workload, ctx: Context) -> Iterator[Violation]:
    linked = _linked(workload, ctx)
    if linked is None or linked[0].arm in (None, CONTROL_ARM):
        return
    link, config = linked
    control, complete = _control_of(workload, link, ctx)
    if control is not None:
        return
    path = link.arm_path or link.experiment_path
    if not complete:
        yield Violation(
            path,
            f"cannot verify that experiment {config.name} has a control arm: the inventory cannot list every workload kind now",
            unknown=True,
        )
    else:
        yield Violation(path, f"experiment {config.name} has no workload labelled gpupolicy.io/arm: control")


@rule(
    id="GP809",
    name="experiment-config-mutable",
    severity="warning",
    scope=Scope.OBJECT,
    kinds=("ConfigMap",),
    summary="Reports an experiment ConfigMap that is not `immutable: true`.",
    rationale="An experiment's definition must not change under running arms: results recorded against one "
    "method would silently be read against another. An immutable ConfigMap must be replaced under a new "
    "name, which keeps the history honest (and spares the kubelet from watching it).",
    remediation="Set immutable: true on the experiment ConfigMap and give each revision a new name.",
    references=(IMMUTABLE_DOCS,),
)
def experiment_config_mutable(resource: Resource, ctx: Context) -> Iterator[Violation]:
    for config in _experiment_configs(resource, ctx):
        if not config.immutable:
            path = ("immutable",) if "immutable" in resource.obj else ("metadata", "name")
            yield Violation(path, f"experiment ConfigMap {config.name} is not immutable: true")
