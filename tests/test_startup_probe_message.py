"""GP402 says how the liveness probe waits out the model load without a startup probe: a fixed
first delay (volcano-sh/kthena's examples: initialDelaySeconds 900, then a 15 s window), or a
failure window that stays that slow for the life of the pod."""

from __future__ import annotations

from tests.conftest import LintText

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ai-lab}
spec:
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
          args: [--model, /models/llama]
          ports: [{containerPort: 8000}]
          readinessProbe: {httpGet: {path: /health, port: 8000}}
          livenessProbe:
            httpGet: {path: /health, port: 8000}
            LIVENESS
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def message(lint_text: LintText, liveness: str) -> str:
    (finding,) = [
        f for f in lint_text(DEPLOYMENT.replace("LIVENESS", liveness)).findings if f.rule_id == "GP402"
    ]
    return finding.message


def test_a_fixed_first_delay_is_named(lint_text: LintText) -> None:
    said = message(
        lint_text, "initialDelaySeconds: 900\n            periodSeconds: 5\n            failureThreshold: 3"
    )
    assert said.endswith(
        "has no startupProbe: its liveness probe waits a fixed initialDelaySeconds 900 for the model load, "
        "where a startup probe would end the wait when the model is loaded"
    )


def test_a_slow_failure_window_is_named(lint_text: LintText) -> None:
    said = message(lint_text, "periodSeconds: 60\n            failureThreshold: 10")
    assert said.endswith("must wait out the model load on every check, for the life of the pod")
