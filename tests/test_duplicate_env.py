"""GP002 on a variable a container's env defines twice: the kubelet sets the later value and the
API server only warns (pkg/api/pod/warnings.go, "hides previous definition"). GKE's gpu-recipes
gemma vLLM chart sets LD_LIBRARY_PATH twice, and the second drops /usr/local/gib/lib64."""

from __future__ import annotations

from typing import Any

import yaml

from gpupolicy.policy.loading import default_policy
from gpupolicy.webhook.review import ReviewEngine, review
from gpupolicy.webhook.settings import Mode
from tests.conftest import LintText
from tests.webhook.reviews import admission_review

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: gemma, namespace: ai-lab}
spec:
  selector: {matchLabels: {app: gemma}}
  template:
    metadata: {labels: {app: gemma}}
    spec:
      initContainers:
        - name: fetch
          image: google/cloud-sdk:490.0.0-slim
          env: [{name: LD_LIBRARY_PATH, value: /usr/lib}]
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
          resources: {limits: {nvidia.com/gpu: 1}}
          env:
            - {name: LD_LIBRARY_PATH, value: /usr/local/nvidia/lib64:/usr/local/gib/lib64}
            - {name: MODEL_ID, value: google/gemma-3-27b-it}
            - {name: LD_LIBRARY_PATH, value: /usr/local/nvidia/lib64}
"""


def test_a_variable_defined_again_is_reported_at_the_later_definition(lint_text: LintText) -> None:
    found = [f for f in lint_text(DEPLOYMENT).findings if f.rule_id == "GP002"]
    # one container's env: the init container's own LD_LIBRARY_PATH is another process's
    assert [(f.line, f.message) for f in found] == [
        (
            DEPLOYMENT.splitlines().index(
                "            - {name: LD_LIBRARY_PATH, value: /usr/local/nvidia/lib64}"
            )
            + 1,
            "container 'vllm' env LD_LIBRARY_PATH is defined again (first as item 0); this value silently "
            "replaces it",
        )
    ]


def test_an_admission_is_told_the_same(lint_text: LintText) -> None:
    obj: dict[str, Any] = yaml.safe_load(DEPLOYMENT)
    decision = review(
        admission_review(obj), ReviewEngine.from_policy(default_policy(), mode=Mode.ENFORCE), None
    )
    admitted = [(f.path, f.message) for f in decision.findings if f.rule_id == "GP002"]
    linted = [(f.path, f.message) for f in lint_text(DEPLOYMENT).findings if f.rule_id == "GP002"]
    assert admitted == linted and len(admitted) == 1


def test_a_repeated_key_in_rendered_output_cites_no_line_of_the_render() -> None:
    """kubeflow/manifests' katib chart repeats a Service's selector: GP002 said 'first at line 522',
    a line of helm's output, which is no file's. In rendered output the finding (at the later key,
    in the template) says what happens, without the render's lines."""
    from gpupolicy.engine.evaluation import evaluate
    from gpupolicy.loading.inputs import load_text

    text = (
        "apiVersion: v1\nkind: Service\nmetadata: {name: katib-controller}\nspec:\n"
        "  selector: {app: katib}\n  ports: [{port: 443}]\n  selector: {app: katib-controller}\n"
    )
    loaded = load_text(text, "charts/katib/templates/service.yaml", rendered_from="helm")
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    (finding,) = [f for f in report.findings if f.rule_id == "GP002"]
    assert (
        finding.message
        == "key 'selector' appears again in its mapping; the later value silently replaces the first"
    )


def test_a_definition_repeated_exactly_or_built_on_replaces_nothing(lint_text: LintText) -> None:
    """llm-d's rendered XPU example writes VLLM_USE_V1: "1" twice: the container gets the same
    value either way. `PATH: $(PATH):/opt/bin` extends the earlier value (the kubelet expands the
    reference, and the API server does not warn of it). Neither silently replaces anything; a
    different value, a reference alone, or a valueFrom after a value still does."""
    env = [
        {"name": "VLLM_USE_V1", "value": "1"},
        {"name": "PATH", "value": "/usr/bin"},
        {"name": "VLLM_USE_V1", "value": "1"},
        {"name": "PATH", "value": "$(PATH):/opt/bin"},
        {"name": "MODE", "value": "a"},
        {"name": "MODE", "value": "$(MODE)"},
        {"name": "TOKEN", "value": "x"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}},
        {"name": "WORKERS", "value": "2"},
        {"name": "WORKERS", "value": "4"},
    ]
    obj: dict[str, Any] = yaml.safe_load(DEPLOYMENT)
    obj["spec"]["template"]["spec"]["containers"][0]["env"] = env
    found = [f.message for f in lint_text(yaml.safe_dump(obj)).findings if f.rule_id == "GP002"]
    assert found == [
        f"container 'vllm' env {name} is defined again (first as item {first}); this value silently replaces it"
        for name, first in (("MODE", 4), ("TOKEN", 6), ("WORKERS", 8))
    ]
