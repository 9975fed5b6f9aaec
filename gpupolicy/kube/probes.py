"""Probe arithmetic and probe ports, in one place.

A probe's time budget is how long the kubelet waits before it acts on failures:
`initialDelaySeconds + failureThreshold × periodSeconds`, with the API's defaults for unset
fields (initialDelaySeconds 0, periodSeconds 10, failureThreshold 3).
https://kubernetes.io/docs/tasks/configure-pod-container/configure-liveness-readiness-startup-probes/#configure-probes
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Probe

Probe ports are an IntOrString: a number, or the name of one of the container's ports.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.identity_enum import IdentityEnum
from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import MODEL_LOAD_ANNOTATION
from gpupolicy.kube.pod_spec import Container, Workload, as_list, as_mapping

PROBES = ("startupProbe", "readinessProbe", "livenessProbe")
DEFAULT_INITIAL_DELAY_SECONDS = 0
DEFAULT_PERIOD_SECONDS = 10
DEFAULT_FAILURE_THRESHOLD = 3
# Deployment.spec.progressDeadlineSeconds defaults to 600 (so does Argo Rollouts').
# https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#progress-deadline-seconds
DEFAULT_PROGRESS_DEADLINE_SECONDS = 600
PORT_HANDLERS = ("httpGet", "tcpSocket", "grpc")


# The probe fields are int32 and validation refuses negative values: anything outside this range
# (or not an integer) never reaches the kubelet, and the default stands in for it.
INT32_MAX = 2**31 - 1


def _int_field(probe: Mapping[str, Any], key: str, default: int) -> int:
    """The field as the kubelet reads it: the API server defaults periodSeconds and
    failureThreshold when they are 0 as when they are unset (SetDefaults_Probe in
    pkg/apis/core/v1/defaults.go), so 0 is the default there, as is a value it would refuse."""
    value = probe.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
        return default
    if value == 0:
        return default  # initialDelaySeconds' default is 0 itself
    return value


@immutable
class ProbeBudget:
    initial_delay: int
    period: int
    failure_threshold: int

    @property
    def seconds(self) -> int:
        """How long after the container starts the kubelet gives up on the probe."""
        return self.initial_delay + self.failure_threshold * self.period

    @property
    def failure_window(self) -> int:
        """How long a running container may fail the probe before the kubelet acts."""
        return self.failure_threshold * self.period

    def describe(self) -> str:
        return (
            f"initialDelaySeconds {self.initial_delay} + failureThreshold {self.failure_threshold} "
            f"× periodSeconds {self.period} = {self.seconds} s"
        )


def probe_budget(probe: Any) -> ProbeBudget:
    """The budget of a probe, with Kubernetes' defaults for the fields it does not set."""
    probe = as_mapping(probe)
    return ProbeBudget(
        initial_delay=_int_field(probe, "initialDelaySeconds", DEFAULT_INITIAL_DELAY_SECONDS),
        period=_int_field(probe, "periodSeconds", DEFAULT_PERIOD_SECONDS),
        failure_threshold=_int_field(probe, "failureThreshold", DEFAULT_FAILURE_THRESHOLD),
    )


def probe_of(container: Container, name: str) -> dict[str, Any] | None:
    probe = container.spec.get(name)
    return probe if isinstance(probe, dict) else None


def container_probe_budget(container: Container, name: str) -> ProbeBudget | None:
    """The budget of the container's probe `name`, None when it has none; found once per
    container (the probe rules read the liveness and startup budgets four times between them)."""
    key = "probe-budget:" + name
    cache = container.cache
    if key in cache:
        found: ProbeBudget | None = cache[key]
        return found
    probe = probe_of(container, name)
    found = cache[key] = probe_budget(probe) if probe is not None else None
    return found


@immutable
class ModelLoadBudget:
    seconds: int
    source: str  # "annotation gpupolicy.io/model-load-seconds" or "policy probes.modelLoadSeconds"


def model_load_budget(workload: Workload, default: int) -> ModelLoadBudget:
    """The annotation on the workload (or its pod template), else the policy's default."""
    sources = [workload.annotations, *(template.annotations for template in workload.templates)]
    for found in sources:
        raw = found.get(MODEL_LOAD_ANNOTATION)
        seconds = parse_seconds(raw)
        if seconds is not None:
            return ModelLoadBudget(seconds, f"annotation {MODEL_LOAD_ANNOTATION}")
    return ModelLoadBudget(default, "policy probes.modelLoadSeconds")


def parse_seconds(raw: Any) -> int | None:
    """A whole number of seconds, as an int or a string ("900", "900s"); None otherwise."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw >= 0 else None
    if isinstance(raw, str):
        text = raw.strip().removesuffix("s")
        if text.isascii() and text.isdigit():  # str.isdigit() alone takes "²", which int() refuses
            return int(text)
    return None


class PortStatus(IdentityEnum):
    NAMED_DECLARED = "named-declared"
    NAMED_UNDECLARED = "named-undeclared"
    NUMBER_DECLARED = "number-declared"
    NUMBER_UNDECLARED = "number-undeclared"
    INVALID = "invalid"


@immutable
class ProbePort:
    probe: str  # livenessProbe, readinessProbe, startupProbe
    handler: str  # httpGet, tcpSocket, grpc
    value: Any  # as written
    path: JsonPath  # of the port field
    status: PortStatus


def declared_ports(container: Container) -> tuple[set[str], set[int]]:
    names: set[str] = set()
    numbers: set[int] = set()
    for port in as_list(container.spec.get("ports")):
        port = as_mapping(port)
        if isinstance(port.get("name"), str):
            names.add(port["name"])
        number = port.get("containerPort")
        if isinstance(number, int) and not isinstance(number, bool):
            numbers.add(number)
    return names, numbers


def resolve_port(value: Any, container: Container) -> PortStatus:
    """How a probe's port relates to the container's declared ports: by name or by number."""
    return _resolve(value, *declared_ports(container))


def _resolve(value: Any, names: set[str], numbers: set[int]) -> PortStatus:
    if isinstance(value, bool) or value is None:
        return PortStatus.INVALID
    if isinstance(value, str) and value.isascii() and value.isdigit():  # not "²": a (bad) port name
        value = int(value)
    if isinstance(value, int):
        return PortStatus.NUMBER_DECLARED if value in numbers else PortStatus.NUMBER_UNDECLARED
    if isinstance(value, str) and value:
        return PortStatus.NAMED_DECLARED if value in names else PortStatus.NAMED_UNDECLARED
    return PortStatus.INVALID


_HANDLERS = "probe-handlers"  # Container.cache key of `_probe_handlers`


def _probe_handlers(container: Container) -> tuple[tuple[str, str, dict[str, Any]], ...]:
    """(probe, handler, action) for each handler object a probe of the container sets, in the
    order of PROBES and PORT_HANDLERS: walked once per container (GP405 reads their ports,
    GP409 their hosts; each walked three probes and their handlers)."""
    cache = container.cache
    found: tuple[tuple[str, str, dict[str, Any]], ...] | None = cache.get(_HANDLERS)
    if found is None:
        handlers = []
        for name in PROBES:
            probe = probe_of(container, name)
            if probe is not None:
                for handler in PORT_HANDLERS:
                    action = probe.get(handler)
                    if isinstance(action, dict):
                        handlers.append((name, handler, action))
        found = cache[_HANDLERS] = tuple(handlers)
    return found


def probe_ports(container: Container, only: frozenset[PortStatus] | None = None) -> Iterator[ProbePort]:
    """Every port a probe of the container connects to, resolved against its declared ports
    (`only`: just the ports of those statuses)."""
    declared: tuple[set[str], set[int]] | None = None  # read once, when a probe names a port
    for name, handler, action in _probe_handlers(container):
        if "port" in action:
            if declared is None:
                declared = declared_ports(container)
            status = _resolve(action["port"], *declared)
            if only is None or status in only:
                yield ProbePort(name, handler, action["port"], container.field(name, handler, "port"), status)


def probe_hosts(container: Container) -> Iterator[tuple[str, str, Any, JsonPath]]:
    """(probe, handler, host, path) for every probe handler that sets `host` (gRPC has none)."""
    for name, handler, action in _probe_handlers(container):
        if handler != "grpc":
            host = action.get("host")
            if host not in (None, ""):
                yield name, handler, host, container.field(name, handler, "host")


def progress_deadline(spec: Mapping[str, Any]) -> tuple[int, bool]:
    """`progressDeadlineSeconds` and whether it was set (600 when not)."""
    value = spec.get("progressDeadlineSeconds")
    if isinstance(value, int) and not isinstance(value, bool):
        return value, True
    return DEFAULT_PROGRESS_DEADLINE_SECONDS, False
