"""GP401-GP409: `Running` is not `Ready` — probes of GPU servers and their time budgets.

Probes: https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/
The budget arithmetic (initialDelaySeconds + failureThreshold × periodSeconds, with Kubernetes'
defaults) and port resolution live in gpupolicy/kube/probes.py.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpupolicy.core.vocabulary import MODEL_LOAD_ANNOTATION
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Parameter, Setting, Violation, rule
from gpupolicy.kube.placeholders import field_placeholder
from gpupolicy.kube.pod_spec import Container, PodTemplate, Workload, as_mapping
from gpupolicy.kube.probes import (
    PortStatus,
    ProbeBudget,
    container_probe_budget,
    model_load_budget,
    probe_hosts,
    probe_of,
    probe_ports,
    progress_deadline,
)
from gpupolicy.kube.roles import (
    LAZY_LOADING_PARTS,
    MODEL_LOADING,
    NOT_AGENT,
    SERVERS,
    injected,
    runs_one_of,
    serving_templates_of,
)

PROBES_DOC = (
    "https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/"
)
STARTUP_DOC = f"{PROBES_DOC}#define-startup-probes"
PROBE_API = "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Probe"
# Container.ports "is primarily informational": an undeclared port is still reachable and probed.
CONTAINER_PORTS = "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#ports"
PROGRESS_DOC = (
    "https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#progress-deadline-seconds"
)
PSS_BASELINE = "https://kubernetes.io/docs/concepts/security/pod-security-standards/#baseline"


def server_containers(template: PodTemplate, ctx: Context) -> list[Container]:
    """The containers that hold the model: those with GPUs, else (DRA, fractions) every main container."""
    holders = [c for c in ctx.gpu.gpu_containers(template) if c.role == "container"]
    return holders or template.main_containers()


def _gpu_servers(workload: Workload, ctx: Context) -> tuple[tuple[PodTemplate, Container], ...]:
    """The GPU containers that hold a model. Of a server, only the templates that answer requests
    (a LeaderWorkerSet's leader, a Ray cluster's head); probes its controller writes are not ours.
    Seven rules ask, so the answer is kept on the view (made per evaluation of the object), for
    this policy, as the role it depends on is (Context.role)."""
    key = ("gpu-servers", id(ctx.policy))
    found: tuple[tuple[PodTemplate, Container], ...] | None = workload.cache.get(key)
    if found is None:
        found = workload.cache[key] = tuple(_find_gpu_servers(workload, ctx))
    return found


def _find_gpu_servers(workload: Workload, ctx: Context) -> Iterator[tuple[PodTemplate, Container]]:
    if injected(workload.kind, "probes"):
        return
    templates = serving_templates_of(workload) if ctx.is_serving(workload) else workload.templates
    for template in templates:
        if ctx.template_uses_gpus(template, workload):
            for container in server_containers(template, ctx):
                yield template, container


def _probed_servers(workload: Workload, ctx: Context) -> tuple[tuple[PodTemplate, Container], ...]:
    if ctx.is_serving(workload) and workload.kind not in ctx.policy.probes.controller_managed_kinds:
        return _gpu_servers(workload, ctx)
    return ()


def _load_seconds(workload: Workload, ctx: Context) -> tuple[int, str]:
    key = ("model-load-seconds", id(ctx.policy))
    found: tuple[int, str] | None = workload.cache.get(key)
    if found is None:
        budget = model_load_budget(workload, ctx.policy.probes.model_load_seconds)
        found = workload.cache[key] = (budget.seconds, budget.source)
    return found


@rule(
    id="GP401",
    roles=SERVERS,
    name="gpu-server-without-readiness-probe",
    severity="error",
    summary="Reports a serving GPU workload whose model container has no readiness probe.",
    rationale="Without one, a pod is Ready as soon as its container starts: the Service sends requests to a "
    "server still loading its model, and users see errors during every rollout, drain and rescale.",
    remediation="Add a readinessProbe on the server's health endpoint (for example httpGet /health).",
    references=(PROBES_DOC,),
    settings=(Setting("probes.controllerManagedKinds", "Kinds whose controller injects probes."),),
)
def gpu_server_without_readiness_probe(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if injected(workload.kind, "readiness"):
        return
    for _, container in _probed_servers(workload, ctx):
        if probe_of(container, "readinessProbe") is None:
            yield Violation(
                container.path,
                f"{container.label} of serving GPU {workload.kind} has no readinessProbe",
                container=container.name,
            )


@rule(
    id="GP402",
    roles=SERVERS,
    name="gpu-server-without-startup-probe",
    severity="warning",
    summary="Reports a serving GPU workload whose model container has no startup probe.",
    rationale="Model loading takes minutes; without a startup probe the liveness probe must be slow for the "
    "whole life of the pod, or it kills the server mid-load and the pod never becomes Ready.",
    remediation="Add a startupProbe whose failureThreshold × periodSeconds covers the model load time.",
    references=(STARTUP_DOC,),
)
def gpu_server_without_startup_probe(workload: Workload, ctx: Context) -> Iterator[Violation]:
    needed, _ = _load_seconds(workload, ctx)
    for _, container in _probed_servers(workload, ctx):
        liveness = container_probe_budget(container, "livenessProbe")
        # Without liveness nothing restarts a loading server: a startup probe would gate nothing.
        # A liveness window shorter than the load is GP403's finding, not also ours.
        if liveness is None or liveness.seconds < needed:
            continue
        if probe_of(container, "startupProbe") is None:
            yield Violation(
                container.path,
                f"GPU {container.label} of serving {workload.kind} has no startupProbe: {_liveness_waits(liveness, needed)}",
                container=container.name,
            )


def _liveness_waits(liveness: ProbeBudget, needed: int) -> str:
    """How the liveness probe waits out the model load without a startup probe: a fixed first
    delay (a guess of the load, too long for a quick one and too short for a slow one), or a
    failure window that then stays that slow for the life of the pod."""
    if liveness.failure_window < needed:
        return (
            f"its liveness probe waits a fixed initialDelaySeconds {liveness.initial_delay} for the model load, "
            "where a startup probe would end the wait when the model is loaded"
        )
    return "its liveness probe must wait out the model load on every check, for the life of the pod"


@rule(
    id="GP403",
    roles=MODEL_LOADING,
    name="liveness-during-model-load",
    severity="error",
    summary="Reports a GPU container with a liveness probe, no startup probe, and a liveness budget "
    "(initialDelaySeconds + failureThreshold × periodSeconds) shorter than the model-load budget.",
    rationale="The kubelet restarts the container when the liveness budget runs out: a model that loads for "
    "longer is killed mid-load, forever — CrashLoopBackOff with no error in the server's log.",
    remediation="Add a startupProbe that covers the model load (liveness only starts after it succeeds).",
    references=(STARTUP_DOC, PROBE_API),
    settings=(
        Setting("probes.modelLoadSeconds", f"Model-load budget when {MODEL_LOAD_ANNOTATION} is not set."),
    ),
)
def liveness_during_model_load(workload: Workload, ctx: Context) -> Iterator[Violation]:
    needed, source = _load_seconds(workload, ctx)
    for _, container in _gpu_servers(workload, ctx):
        budget = container_probe_budget(container, "livenessProbe")
        if budget is None or probe_of(container, "startupProbe") is not None:
            continue
        # Asked last: a server that loads on request has its health endpoint answer before any load.
        if budget.seconds < needed and not runs_one_of(container, LAZY_LOADING_PARTS):
            yield Violation(
                container.field("livenessProbe"),
                f"liveness probe of {container.label} kills it after {budget.describe()} < model load {needed} s "
                f"({source}), and there is no startupProbe",
                container=container.name,
            )


@rule(
    id="GP404",
    roles=MODEL_LOADING,
    name="startup-budget-too-short",
    severity="error",
    summary="Reports a GPU container whose startup probe budget (initialDelaySeconds + failureThreshold × "
    "periodSeconds, defaults 0, 3 and 10) is shorter than the model-load budget "
    "(annotation gpupolicy.io/model-load-seconds, else the policy default).",
    rationale="When the startup budget runs out the kubelet restarts the container: a model that takes longer "
    "to load never finishes, and the pod crash-loops.",
    remediation="Raise the startupProbe's failureThreshold (or periodSeconds) so that the budget covers the model load.",
    references=(STARTUP_DOC, PROBE_API),
    settings=(
        Setting("probes.modelLoadSeconds", f"Model-load budget when {MODEL_LOAD_ANNOTATION} is not set."),
    ),
)
def startup_budget_too_short(workload: Workload, ctx: Context) -> Iterator[Violation]:
    needed, source = _load_seconds(workload, ctx)
    for _, container in _gpu_servers(workload, ctx):
        budget = container_probe_budget(container, "startupProbe")
        if budget is None:
            continue
        if budget.seconds < needed and not runs_one_of(container, LAZY_LOADING_PARTS):
            yield Violation(
                container.field("startupProbe"),
                f"startup probe of {container.label} allows {budget.describe()} < model load {needed} s ({source})",
                container=container.name,
            )


_NAMED_UNDECLARED = frozenset({PortStatus.NAMED_UNDECLARED})


@rule(
    id="GP405",
    name="probe-port-undeclared",
    severity="error",
    summary="Reports a probe that names a port (`port: healthz`) the container's ports list does not name. A port "
    "number is not reported: the kubelet probes the number whether or not it is declared.",
    rationale="The kubelet resolves a named probe port against the container's own ports; a name that is not "
    "there cannot resolve, so the probe fails on every try and the pod never becomes Ready (or is restarted "
    "forever). The ports list is informational for numbers, so an undeclared number is not an error.",
    remediation="Name a port from the container's ports list, or give the probe the port number.",
    references=(PROBE_API, f"{PROBES_DOC}#use-a-named-port", CONTAINER_PORTS),
)
def probe_port_undeclared(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if injected(workload.kind, "ports"):
        return  # the controller declares the ports its probes check
    for _, container in workload.containers():
        for port in probe_ports(container, _NAMED_UNDECLARED):
            if isinstance(port.value, str) and field_placeholder(port.value) is not None:
                continue  # `port: ${HEALTH_PORT:-9003}` is a template's, and GP004's
            yield Violation(
                port.path,
                f"{port.probe} of {container.label} uses port {port.value!r}, which the container does not declare",
                container=container.name,
            )


@rule(
    id="GP406",
    roles=NOT_AGENT,
    name="liveness-equals-readiness",
    severity="warning",
    summary="Reports a GPU container whose liveness and readiness probes are identical.",
    rationale="Readiness failing under load should take the pod out of the Service; liveness failing restarts "
    "it. When they are the same, a busy server is killed and must reload its model, deepening the overload.",
    remediation="Make the liveness probe more tolerant than readiness (higher failureThreshold, or a cheaper endpoint).",
    references=(PROBES_DOC,),
)
def liveness_equals_readiness(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for _, container in _gpu_servers(workload, ctx):
        liveness, readiness = probe_of(container, "livenessProbe"), probe_of(container, "readinessProbe")
        if liveness is not None and liveness == readiness:
            yield Violation(
                container.field("livenessProbe"),
                f"livenessProbe of {container.label} is identical to its readinessProbe",
                container=container.name,
            )


LIVENESS_MINIMUM_SECONDS = Parameter(
    "livenessMinimumSeconds",
    30,
    "The shortest failure window (failureThreshold × periodSeconds, in seconds) a liveness probe may have.",
    setting="probes.livenessMinimumSeconds",
)


@rule(
    id="GP407",
    roles=NOT_AGENT,
    name="liveness-too-aggressive",
    severity="warning",
    summary="Reports a GPU container whose liveness probe has `failureThreshold: 1` or tolerates failures for "
    "less than the policy's minimum (failureThreshold × periodSeconds, default 30 s).",
    rationale="A model server stalls for seconds during a long generation, a garbage collection or a CUDA "
    "graph capture; an aggressive liveness probe restarts it, and the restart costs a full model reload.",
    remediation="Let liveness fail several times over at least 30 s before the kubelet acts (e.g. failureThreshold 3, periodSeconds 10).",
    references=(PROBES_DOC, PROBE_API),
    parameters=(LIVENESS_MINIMUM_SECONDS,),
)
def liveness_too_aggressive(workload: Workload, ctx: Context) -> Iterator[Violation]:
    minimum = ctx.policy.param(LIVENESS_MINIMUM_SECONDS)
    for _, container in _gpu_servers(workload, ctx):
        budget = container_probe_budget(container, "livenessProbe")
        if budget is None:
            continue
        if budget.failure_threshold <= 1 or budget.failure_window < minimum:
            yield Violation(
                container.field("livenessProbe"),
                f"liveness probe of {container.label} restarts it after failureThreshold {budget.failure_threshold} "
                f"× periodSeconds {budget.period} = {budget.failure_window} s (minimum {minimum} s, failureThreshold > 1)",
                container=container.name,
            )


@rule(
    id="GP408",
    roles=NOT_AGENT,
    name="progress-deadline-before-ready",
    severity="error",
    summary="Reports a Deployment or Rollout whose progressDeadlineSeconds (default 600) is shorter than the "
    "startup budget of one of its GPU containers.",
    rationale="When the deadline passes before new pods can become Ready, the rollout is marked failed "
    "(ProgressDeadlineExceeded): CD tools roll back or page although the pods would have become Ready.",
    remediation="Set progressDeadlineSeconds above the longest startup budget (plus image pull time).",
    references=(PROGRESS_DOC, STARTUP_DOC),
)
def progress_deadline_before_ready(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if workload.kind not in ("Deployment", "Rollout"):
        return
    deadline, given = progress_deadline(as_mapping(as_mapping(workload.resource.obj).get("spec")))
    for _, container in _gpu_servers(workload, ctx):
        budget = container_probe_budget(container, "startupProbe")
        if budget is None:
            continue
        if deadline < budget.seconds:
            shown = (
                f"progressDeadlineSeconds {deadline}"
                if given
                else f"progressDeadlineSeconds (default) {deadline}"
            )
            yield Violation(
                ("spec", "progressDeadlineSeconds") if given else ("spec",),
                f"{shown} < startup budget of {container.label}: {budget.describe()}",
            )
            return


@rule(
    id="GP409",
    roles=NOT_AGENT,  # the cluster's own components run privileged, as GP601-GP606 leave them
    name="probe-host-set",
    severity="error",
    summary="Reports a probe with `httpGet.host` or `tcpSocket.host` set.",
    rationale="A probe host makes the kubelet connect to an address of the pod's choosing, from the node: the "
    "Pod Security baseline forbids it since Kubernetes 1.34 (KEP-4940), and it probes something other than the pod.",
    remediation="Remove host from the probe; the kubelet then probes the pod's own IP.",
    references=(PSS_BASELINE, "https://www.kubernetes.dev/resources/keps/4940/"),
)
def probe_host_set(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for _, container in workload.containers():
        for probe, handler, host, path in probe_hosts(container):
            yield Violation(
                path,
                f"{probe}.{handler}.host of {container.label} is set to {host!r}",
                container=container.name,
            )
