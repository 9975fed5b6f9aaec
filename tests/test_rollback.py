"""Rollback criteria: the annotation schema, Argo Rollouts and Flagger parsing, surge arithmetic,
and the inventory's coverage (unknown is said, never silently passed)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import gpupolicy.rules  # noqa: F401
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.kube.inventory import Bundle, Coverage
from gpupolicy.kube.rollback import (
    canary_metrics,
    parse_criteria,
    rollback_forms,
    rollout_analyses,
    template_args,
    template_metrics,
    template_placeholders,
)
from gpupolicy.kube.surge import rollout_surge
from gpupolicy.loading.documents import Resource
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy
from tests.conftest import LintText


def _resources(text: str) -> list[Resource]:
    loaded = load_text(text, "test.yaml")
    assert not loaded.problems, loaded.problems
    return loaded.resources


def test_annotation_criteria_parse() -> None:
    criteria, errors = parse_criteria(
        "[{metric: p95_latency_ms, max: 800, window: 10m}, {metric: error_rate, max: 0.01, window: 1h30m}]"
    )
    assert errors == []
    assert [(c.metric, c.max, c.window) for c in criteria] == [
        ("p95_latency_ms", 800, "10m"),
        ("error_rate", 0.01, "1h30m"),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[{metric: p95_latency_ms, max: 800}]",
            "[0] (line 1 of the annotation): 'window' is a required property",
        ),
        (
            "[{metric: error_rate, window: 5m}]",
            "[0] (line 1 of the annotation): needs a threshold: min or max",
        ),
        (
            "[{metric: e, max: 1, window: 5 minutes}]",
            "[0].window (line 1 of the annotation): '5 minutes' does not match",
        ),
        (
            "[{metric: e, max: high, window: 5m}]",
            "[0].max (line 1 of the annotation): 'high' is not of type 'number'",
        ),
        (
            "[{metric: e, max: 1, window: 5m, comparator: about}]",
            "[0].comparator (line 1 of the annotation): 'about' is not one of",
        ),
        ("[{metric: e, max: 1, window: 5m, treshold: 2}]", "(keys: metric, min, max, window, comparator)"),
        ("[]", "(list): [] should be non-empty"),
        ("[{metric: e, max: 1", "not valid YAML"),
    ],
)
def test_annotation_errors_name_item_and_key(text: str, message: str) -> None:
    criteria, errors = parse_criteria(text)
    assert criteria == []
    assert any(message in error for error in errors), errors


ROLLOUT = """\
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: llm, namespace: ai-lab}
spec:
  replicas: 4
  strategy:
    canary:
      analysis:
        templates: [{templateName: bg}]
        args:
          - {name: service-name, value: llm}
          - name: stable-hash
            valueFrom: {podTemplateHashValue: Stable}
      steps:
        - setWeight: 25
        - analysis:
            templateName: legacy
        - experiment:
            templates: [{name: baseline, specRef: stable}]
            analyses:
              - {name: compare, templateName: mann-whitney, args: [{name: x, value: "1"}]}
        - analysis:
            templates: [{templateName: cluster-slo, clusterScope: true}]
  template:
    spec:
      containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]
"""


def test_rollout_analyses_cover_background_steps_experiments_and_cluster_scope() -> None:
    [rollout] = _resources(ROLLOUT)
    uses = rollout_analyses(rollout)
    assert [(u.where, [(t.name, t.kind) for t in u.templates]) for u in uses] == [
        ("background analysis", [("bg", "AnalysisTemplate")]),
        ("canary step 1", [("legacy", "AnalysisTemplate")]),
        ("canary step 2 experiment analysis", [("mann-whitney", "AnalysisTemplate")]),
        ("canary step 3", [("cluster-slo", "ClusterAnalysisTemplate")]),
    ]
    assert [(a.name, a.has_value) for a in uses[0].args] == [("service-name", True), ("stable-hash", True)]
    assert uses[1].templates[0].path == ("spec", "strategy", "canary", "steps", 1, "analysis", "templateName")


def test_blue_green_pre_and_post_promotion() -> None:
    text = ROLLOUT.replace(
        "    canary:\n",
        "    blueGreen:\n      activeService: a\n      prePromotionAnalysis: {templates: [{templateName: smoke}]}\n"
        "      postPromotionAnalysis: {templates: [{templateName: slo}], args: [{name: s}]}\n    canaryX:\n",
    )
    [rollout] = _resources(text)
    uses = rollout_analyses(rollout)
    assert [(u.where, u.templates[0].name) for u in uses] == [
        ("blue-green pre-promotion analysis", "smoke"),
        ("blue-green post-promotion analysis", "slo"),
    ]
    assert uses[1].args[0].has_value is False


TEMPLATE = """\
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: slo, namespace: ai-lab}
spec:
  args:
    - name: service-name
    - {name: port, value: "9090"}
    - name: token
      valueFrom: {secretKeyRef: {name: t, key: k}}
  metrics:
    - name: p95
      successCondition: result[0] <= {{ args.limit }}
      failureLimit: "-1"
      consecutiveSuccessLimit: 3
      provider:
        prometheus:
          address: "http://prom:{{args.port}}"
          query: latency{service="{{args.service-name}}"}
    - name: raw
      provider: {web: {url: "http://x/{{args.token}}"}}
"""


def test_template_metrics_args_and_placeholders() -> None:
    [template] = _resources(TEMPLATE)
    metrics = template_metrics(template)
    assert [(m.name, m.has_condition, m.failure_limit, m.consecutive_success_limit) for m in metrics] == [
        ("p95", True, -1, 3),
        ("raw", False, None, None),
    ]
    assert {name: arg.has_default for name, arg in template_args(template).items()} == {
        "service-name": False,
        "port": True,
        "token": True,
    }
    assert template_placeholders(template) == [
        ("limit", ("spec", "metrics", 0, "successCondition")),
        ("port", ("spec", "metrics", 0, "provider", "prometheus", "address")),
        ("service-name", ("spec", "metrics", 0, "provider", "prometheus", "query")),
        ("token", ("spec", "metrics", 1, "provider", "web", "url")),
    ]


def test_flagger_metrics_both_api_versions() -> None:
    text = """\
apiVersion: flagger.app/v1beta1
kind: Canary
metadata: {name: a}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: a}
  analysis:
    metrics:
      - {name: request-success-rate, thresholdRange: {min: 99}}
      - {name: gpu, templateRef: {name: dcgm}}
---
apiVersion: flagger.app/v1alpha3
kind: Canary
metadata: {name: b}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: b}
  canaryAnalysis:
    metrics: [{name: request-duration, threshold: 500}]
"""
    new, old = _resources(text)
    assert [(m.name, m.threshold_range, m.template) for m in canary_metrics(new)] == [
        ("request-success-rate", {"min": 99}, None),
        ("gpu", None, "dcgm"),
    ]
    assert [(m.name, m.path) for m in canary_metrics(old)] == [
        ("request-duration", ("spec", "canaryAnalysis", "metrics", 0))
    ]


@pytest.mark.parametrize(
    ("kind_and_strategy", "pods", "how"),
    [
        ("kind: Deployment\nspec:\n  replicas: 8\n", 2, "rolling update maxSurge 25%"),
        ("kind: Deployment\nspec:\n  replicas: 8\n  strategy: {rollingUpdate: {maxSurge: 3}}\n", 3, None),
        ("kind: Deployment\nspec:\n  replicas: 8\n  strategy: {type: Recreate}\n", None, None),
        ("kind: Rollout\nspec:\n  replicas: 8\n  strategy: {canary: {steps: []}}\n", 1, "canary maxSurge 1"),
        (
            "kind: Rollout\nspec:\n  replicas: 8\n  strategy: {canary: {trafficRouting: {nginx: {}}, "
            "steps: [{setWeight: 10}, {setCanaryScale: {replicas: 3}}, {setWeight: 25}]}}\n",
            3,
            "canary step 1",
        ),
        ("kind: Rollout\nspec:\n  replicas: 4\n  strategy: {blueGreen: {activeService: a}}\n", 4, None),
        (
            "kind: Rollout\nspec:\n  replicas: 4\n  strategy: {blueGreen: {activeService: a, previewReplicaCount: 1}}\n",
            1,
            None,
        ),
    ],
)
def test_surge_arithmetic(kind_and_strategy: str, pods: int | None, how: str | None) -> None:
    api = "argoproj.io/v1alpha1" if "Rollout" in kind_and_strategy else "apps/v1"
    [resource] = _resources(f"apiVersion: {api}\nmetadata: {{name: x}}\n{kind_and_strategy}")
    surge = rollout_surge(resource)
    assert (surge.pods if surge else None) == pods
    if how is not None:
        assert surge is not None and surge.how == how


class Unavailable(Bundle):
    """A cluster inventory whose caches for some kinds have not synced."""

    def __init__(self, resources: Sequence[Resource], kinds: set[str]) -> None:
        super().__init__(resources)
        self._down = kinds

    def coverage(self, kind: str) -> Coverage:
        return Coverage.UNAVAILABLE if kind in self._down else super().coverage(kind)


SERVER = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ai-lab}
spec:
  replicas: 2
  template:
    spec:
      containers: [{name: c, image: vllm/vllm-openai:v0.6.3, resources: {limits: {nvidia.com/gpu: 1}}}]
"""


def test_missing_criteria_with_unavailable_inventory_is_info_not_error() -> None:
    resources = _resources(SERVER)
    report = evaluate(resources, default_policy(), Unavailable(resources, {"Canary"}))
    [finding] = [f for f in report.findings if f.rule_id == "GP901"]
    assert finding.severity.label == "info"
    assert "cannot" in finding.message and "Canary" in finding.message
    report = evaluate(resources, default_policy(), Bundle(resources))
    assert [f.severity.label for f in report.findings if f.rule_id == "GP901"] == ["error"]


def test_forms_are_found_through_the_inventory() -> None:
    canary = (
        "apiVersion: flagger.app/v1beta1\nkind: Canary\nmetadata: {name: c, namespace: ai-lab}\n"
        "spec:\n  targetRef: {kind: Deployment, name: llm}\n  analysis: {metrics: [{name: request-duration, "
        "thresholdRange: {max: 500}}]}\n"
    )
    resources = _resources(SERVER + "---\n" + canary)
    forms = rollback_forms(resources[0], Bundle(resources))
    assert forms.present and [c.name for c in forms.canaries] == ["c"]
    other_namespace = canary.replace("namespace: ai-lab", "namespace: other")
    resources = _resources(SERVER + "---\n" + other_namespace)
    assert not rollback_forms(resources[0], Bundle(resources)).present


def test_template_missing_from_unavailable_cache_is_info(lint_text: LintText) -> None:
    resources = _resources(ROLLOUT)
    report = evaluate(resources, default_policy(), Unavailable(resources, {"AnalysisTemplate"}))
    gp904 = [(f.severity.label, f.message.split(":")[0]) for f in report.findings if f.rule_id == "GP904"]
    assert ("info", "cannot verify AnalysisTemplate bg") in gp904
    assert (
        "error",
        "canary step 3 uses ClusterAnalysisTemplate cluster-slo, which is not in the cluster",
    ) in [(f.severity.label, f.message) for f in report.findings if f.rule_id == "GP904"]


def test_unresolved_args_point_at_template_and_rollout(lint_text: LintText) -> None:
    rollout = ROLLOUT.replace("templates: [{templateName: bg}]", "templates: [{templateName: slo}]")
    report = lint_text(TEMPLATE + "---\n" + rollout)
    gp906 = sorted(
        (f.object.kind if f.object else "", f.line) for f in report.findings if f.rule_id == "GP906"
    )
    # {{args.limit}} is not declared (template line 12); service-name is passed by the background analysis.
    assert gp906 == [("AnalysisTemplate", 12)]
    without_arg = rollout.replace("          - {name: service-name, value: llm}\n", "")
    report = lint_text(TEMPLATE + "---\n" + without_arg)
    messages = [
        f.message for f in report.findings if f.rule_id == "GP906" and f.object and f.object.kind == "Rollout"
    ]
    assert messages == [
        "background analysis: AnalysisTemplate slo needs argument 'service-name', which is not passed"
    ]


def test_block_annotation_errors_give_the_file_line_of_the_item(lint_text: LintText) -> None:
    text = SERVER.replace(
        "metadata: {name: llm, namespace: ai-lab}\n",
        "metadata:\n  name: llm\n  namespace: ai-lab\n  annotations:\n    gpupolicy.io/rollback-criteria: |\n"
        "      - {metric: p95_latency_ms, max: 800, window: 10m}\n      - {metric: error_rate, window: 10m}\n",
    )
    [finding] = [f for f in lint_text(text).findings if f.rule_id == "GP902"]
    assert finding.line == 7  # the annotation's key
    assert "[1] (line 9): needs a threshold: min or max" in finding.message
