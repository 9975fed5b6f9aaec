"""Probe budget arithmetic (with Kubernetes' defaults) and probe port resolution."""

from __future__ import annotations

from typing import Any

import pytest

from gpupolicy.kube.pod_spec import Container, Workload, workload_of
from gpupolicy.kube.probes import (
    DEFAULT_PROGRESS_DEADLINE_SECONDS,
    PortStatus,
    model_load_budget,
    parse_seconds,
    probe_budget,
    probe_hosts,
    probe_ports,
    progress_deadline,
    resolve_port,
)
from gpupolicy.loading.documents import Resource
from tests.conftest import LintText


def container(spec: dict[str, Any]) -> Container:
    return Container({"name": "server", **spec}, ("spec", "containers", 0), "container")


def workload(
    annotations: dict[str, Any] | None = None, template_annotations: dict[str, Any] | None = None
) -> Workload:
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "annotations": annotations or {}},
        "spec": {
            "template": {
                "metadata": {"annotations": template_annotations or {}},
                "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3"}]},
            }
        },
    }
    found = workload_of(Resource(obj, file="x.yaml", doc_index=0))
    assert found is not None
    return found


def test_unset_fields_take_kubernetes_defaults() -> None:
    budget = probe_budget({"httpGet": {"path": "/health", "port": 8000}})
    assert (budget.initial_delay, budget.period, budget.failure_threshold) == (0, 10, 3)
    assert budget.seconds == 30
    assert budget.failure_window == 30


def test_budget_is_initial_delay_plus_threshold_times_period() -> None:
    budget = probe_budget({"initialDelaySeconds": 30, "periodSeconds": 10, "failureThreshold": 120})
    assert budget.seconds == 30 + 120 * 10
    assert budget.failure_window == 1200
    assert budget.describe() == "initialDelaySeconds 30 + failureThreshold 120 × periodSeconds 10 = 1230 s"


def test_only_some_fields_set() -> None:
    assert probe_budget({"failureThreshold": 60}).seconds == 600
    assert probe_budget({"periodSeconds": 5}).seconds == 15
    assert probe_budget({"initialDelaySeconds": 120}).seconds == 150


@pytest.mark.parametrize("bad", ["10", None, True, 2.5])
def test_non_integer_fields_fall_back_to_defaults(bad: Any) -> None:
    assert probe_budget({"periodSeconds": bad}).period == 10


@pytest.mark.parametrize(
    "value",
    [0, -1, -(2**40), 2**31, 10**5000],
    ids=["zero", "minus-one", "very-negative", "int32-max-plus-one", "5001-digits"],
)
def test_zero_and_values_the_api_refuses_are_the_defaults(value: int) -> None:
    """The API server defaults periodSeconds and failureThreshold when they are 0 (SetDefaults_Probe)
    and refuses negative or non-int32 values: none of them makes a budget of 0, below 0 or beyond
    int32 arithmetic."""
    budget = probe_budget({"initialDelaySeconds": value, "periodSeconds": value, "failureThreshold": value})
    assert (budget.initial_delay, budget.period, budget.failure_threshold) == (0, 10, 3)


def test_model_load_budget_prefers_the_annotation() -> None:
    found = model_load_budget(workload({"gpupolicy.io/model-load-seconds": "900"}), 300)
    assert (found.seconds, found.source) == (900, "annotation gpupolicy.io/model-load-seconds")


def test_model_load_budget_reads_the_pod_template_annotation_too() -> None:
    found = model_load_budget(workload(template_annotations={"gpupolicy.io/model-load-seconds": 1200}), 300)
    assert found.seconds == 1200


def test_model_load_budget_falls_back_to_the_policy_default() -> None:
    found = model_load_budget(workload(), 300)
    assert (found.seconds, found.source) == (300, "policy probes.modelLoadSeconds")
    invalid = model_load_budget(workload({"gpupolicy.io/model-load-seconds": "ten minutes"}), 300)
    assert invalid.seconds == 300


@pytest.mark.parametrize(
    ("raw", "seconds"), [("900", 900), ("900s", 900), (60, 60), (-1, None), ("1.5", None), (True, None)]
)
def test_parse_seconds(raw: Any, seconds: int | None) -> None:
    assert parse_seconds(raw) == seconds


def test_ports_resolve_by_name_and_by_number() -> None:
    server = container({"ports": [{"name": "http", "containerPort": 8000}]})
    assert resolve_port("http", server) is PortStatus.NAMED_DECLARED
    assert resolve_port("healthz", server) is PortStatus.NAMED_UNDECLARED
    assert resolve_port(8000, server) is PortStatus.NUMBER_DECLARED
    assert resolve_port("8000", server) is PortStatus.NUMBER_DECLARED
    assert resolve_port(9000, server) is PortStatus.NUMBER_UNDECLARED
    assert resolve_port(None, server) is PortStatus.INVALID


def test_probe_ports_walks_every_probe_and_handler() -> None:
    server = container(
        {
            "ports": [{"name": "http", "containerPort": 8000}],
            "readinessProbe": {"httpGet": {"path": "/ready", "port": "http"}},
            "livenessProbe": {"tcpSocket": {"port": 9000}},
            "startupProbe": {"grpc": {"port": 8000}},
            # exec probes have no port
        }
    )
    found = {(p.probe, p.handler): (p.status, p.path) for p in probe_ports(server)}
    assert found == {
        ("startupProbe", "grpc"): (
            PortStatus.NUMBER_DECLARED,
            ("spec", "containers", 0, "startupProbe", "grpc", "port"),
        ),
        ("readinessProbe", "httpGet"): (
            PortStatus.NAMED_DECLARED,
            ("spec", "containers", 0, "readinessProbe", "httpGet", "port"),
        ),
        ("livenessProbe", "tcpSocket"): (
            PortStatus.NUMBER_UNDECLARED,
            ("spec", "containers", 0, "livenessProbe", "tcpSocket", "port"),
        ),
    }


def test_probe_hosts() -> None:
    server = container(
        {
            "readinessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}},
            "livenessProbe": {"tcpSocket": {"host": "", "port": 80}},
        }
    )
    assert [(probe, handler, host) for probe, handler, host, _ in probe_hosts(server)] == [
        ("readinessProbe", "httpGet", "10.0.0.1")
    ]


def test_ports_and_hosts_come_in_probe_and_handler_order_from_one_walk() -> None:
    server = container(
        {
            "livenessProbe": {"httpGet": {"host": "a", "port": 1}, "tcpSocket": {"host": "b", "port": 2}},
            "startupProbe": {"grpc": {"host": "c", "port": 3}, "httpGet": "not a handler"},
            "readinessProbe": {"exec": {"command": ["true"]}},
        }
    )
    assert [(p.probe, p.handler) for p in probe_ports(server)] == [
        ("startupProbe", "grpc"),
        ("livenessProbe", "httpGet"),
        ("livenessProbe", "tcpSocket"),
    ]
    walked = server.cache["probe-handlers"]  # kept on the container: GP405 and GP409 read it
    assert [host for _, _, host, _ in probe_hosts(server)] == ["a", "b"]  # gRPC has no host
    assert server.cache["probe-handlers"] is walked


def test_progress_deadline_defaults_to_600() -> None:
    assert progress_deadline({}) == (DEFAULT_PROGRESS_DEADLINE_SECONDS, False)
    assert DEFAULT_PROGRESS_DEADLINE_SECONDS == 600
    assert progress_deadline({"progressDeadlineSeconds": 1800}) == (1800, True)


OLLAMA = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: ollama}
spec:
  selector: {matchLabels: {app: ollama}}
  template:
    metadata: {labels: {app: ollama}}
    spec:
      containers:
        - name: ollama
          image: ollama/ollama:0.32.4
          ports: [{name: http, containerPort: 11434}]
          resources: {requests: {cpu: "4", memory: 32Gi}, limits: {memory: 32Gi, nvidia.com/gpu: 2}}
          livenessProbe: {httpGet: {path: /, port: http}, initialDelaySeconds: 60, periodSeconds: 10, failureThreshold: 6}
          readinessProbe: {httpGet: {path: /, port: http}}
"""


def test_a_server_that_loads_models_on_request_has_no_load_before_liveness(lint_text: LintText) -> None:
    """Ollama's `/` answers "Ollama is running" at once and loads a model when a request names it;
    over two GPUs llama.cpp splits the layers in one process, without NCCL: no GP403, no GP113.
    The same probes on vLLM are GP403's."""
    fired = {f.rule_id for f in lint_text(OLLAMA).findings}
    assert not {"GP403", "GP113"} & fired
    vllm = OLLAMA.replace("ollama/ollama:0.32.4", "vllm/vllm-openai:v0.10.0")
    assert {"GP403", "GP113"} <= {f.rule_id for f in lint_text(vllm).findings}


def test_a_notebook_loads_no_model_at_start(lint_text: LintText) -> None:
    notebook = OLLAMA.replace("ollama/ollama:0.32.4", "tensorflow/tensorflow:2.16.1-gpu-jupyter")
    assert "GP403" not in {f.rule_id for f in lint_text(notebook).findings}
