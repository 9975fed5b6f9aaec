"""Label selectors and node-selector terms, evaluated as the API server and scheduler do."""

from __future__ import annotations

from typing import Any

import pytest

from gpupolicy.kube.selectors import (
    node_affinity_matches,
    node_selector_term_matches,
    selector_is_empty,
    selector_matches,
)

POD = {"app": "vllm", "tier": "serving", "gpupolicy.io/arm": "control"}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


def test_match_labels_all_must_match() -> None:
    assert selector_matches({"matchLabels": {"app": "vllm"}}, POD)
    assert selector_matches({"matchLabels": {"app": "vllm", "tier": "serving"}}, POD)
    assert not selector_matches({"matchLabels": {"app": "vllm", "tier": "batch"}}, POD)
    assert not selector_matches({"matchLabels": {"missing": "x"}}, POD)


def test_match_labels_compare_as_text() -> None:
    # YAML may turn `version: 2` into an int on one side and "2" on the other.
    assert selector_matches({"matchLabels": {"version": 2}}, {"version": "2"})
    assert selector_matches({"matchLabels": {"version": "2"}}, {"version": 2})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (expr("app", "In", "vllm", "tgi"), True),
        (expr("app", "In", "tgi"), False),
        (expr("missing", "In", "x"), False),
        (expr("app", "NotIn", "tgi"), True),
        (expr("app", "NotIn", "vllm"), False),
        (expr("missing", "NotIn", "x"), True),  # an absent key is "not in" any set
        (expr("app", "Exists"), True),
        (expr("missing", "Exists"), False),
        (expr("app", "DoesNotExist"), False),
        (expr("missing", "DoesNotExist"), True),
        (expr("app", "Bogus", "vllm"), False),
    ],
)
def test_match_expressions_operators(expression: dict[str, Any], expected: bool) -> None:
    assert selector_matches({"matchExpressions": [expression]}, POD) is expected


def test_match_labels_and_expressions_are_anded() -> None:
    selector = {"matchLabels": {"app": "vllm"}, "matchExpressions": [expr("tier", "In", "serving")]}
    assert selector_matches(selector, POD)
    selector["matchExpressions"].append(expr("gpupolicy.io/arm", "NotIn", "control"))
    assert not selector_matches(selector, POD)


def test_empty_selector_matches_everything_null_matches_nothing() -> None:
    assert selector_matches({}, POD)
    assert selector_matches({}, {})
    assert selector_matches({"matchLabels": {}, "matchExpressions": []}, POD)
    assert not selector_matches(None, POD)
    assert selector_is_empty({})
    assert selector_is_empty({"matchLabels": {}})
    assert not selector_is_empty(None)
    assert not selector_is_empty({"matchLabels": {"app": "vllm"}})


def test_malformed_selectors_match_nothing() -> None:
    assert not selector_matches("app=vllm", POD)
    assert not selector_matches({"matchExpressions": "app In (vllm)"}, POD)
    assert not selector_matches({"matchExpressions": ["app"]}, POD)


NODE = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.count": "8",
    "kubernetes.io/hostname": "gpu-node-1",
}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (expr("nvidia.com/gpu.memory", "Gt", "40000"), True),
        (expr("nvidia.com/gpu.memory", "Gt", "81559"), False),
        (expr("nvidia.com/gpu.memory", "Lt", "90000"), True),
        (expr("nvidia.com/gpu.memory", "Lt", "81559"), False),
        (expr("nvidia.com/gpu.product", "Gt", "1"), False),  # not an integer label
        (expr("nvidia.com/gpu.memory", "Gt", "80GB"), False),  # not an integer bound
        (expr("nvidia.com/gpu.memory", "Gt", "1", "2"), False),  # exactly one value
        (expr("missing", "Lt", "10"), False),
    ],
)
def test_gt_lt_compare_integers(expression: dict[str, Any], expected: bool) -> None:
    assert node_selector_term_matches({"matchExpressions": [expression]}, NODE) is expected


def test_term_expressions_are_anded() -> None:
    term = {
        "matchExpressions": [
            expr("nvidia.com/gpu.product", "In", "NVIDIA-H100-80GB-HBM3"),
            expr("nvidia.com/gpu.count", "Gt", "7"),
        ]
    }
    assert node_selector_term_matches(term, NODE)
    term["matchExpressions"].append(expr("nvidia.com/mig.config", "Exists"))
    assert not node_selector_term_matches(term, NODE)


def test_empty_term_matches_no_node() -> None:
    assert not node_selector_term_matches({}, NODE)
    assert not node_selector_term_matches({"matchExpressions": []}, NODE)
    assert not node_selector_term_matches(None, NODE)


def test_match_fields_are_treated_as_satisfiable() -> None:
    fields_only = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-1"]}]}
    assert node_selector_term_matches(fields_only, NODE)
    both = {**fields_only, "matchExpressions": [expr("nvidia.com/gpu.product", "In", "Tesla-T4")]}
    assert not node_selector_term_matches(both, NODE)


def test_terms_are_ored() -> None:
    terms = [
        {"matchExpressions": [expr("nvidia.com/gpu.product", "In", "Tesla-T4")]},
        {"matchExpressions": [expr("nvidia.com/gpu.product", "In", "NVIDIA-H100-80GB-HBM3")]},
    ]
    assert node_affinity_matches(None, terms, NODE)
    assert not node_affinity_matches(None, terms[:1], NODE)


def test_node_selector_and_terms_are_anded() -> None:
    terms = [{"matchExpressions": [expr("nvidia.com/gpu.count", "Gt", "4")]}]
    assert node_affinity_matches({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, terms, NODE)
    assert not node_affinity_matches({"nvidia.com/gpu.product": "Tesla-T4"}, terms, NODE)
    assert node_affinity_matches({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, None, NODE)
    assert node_affinity_matches(None, None, NODE)


def test_empty_required_terms_match_no_node() -> None:
    assert not node_affinity_matches(None, [], NODE)
    assert not node_affinity_matches(None, "not a list", NODE)


@pytest.mark.parametrize("values", [1, "vllm", {"a": "vllm"}, True])
def test_values_that_are_no_list_match_nothing(values: Any) -> None:
    """The API server refuses such a selector; `values: 1` raised TypeError (a rule error), and
    `values: vllm` matched each of its letters."""
    for operator in ("In", "NotIn", "Exists"):
        expression = {"key": "app", "operator": operator, "values": values}
        assert not selector_matches({"matchExpressions": [expression]}, POD)
        assert not node_selector_term_matches({"matchExpressions": [expression]}, POD)


@pytest.mark.parametrize("expressions", [5, "app In vllm", {"key": "app"}])
def test_a_term_whose_expressions_are_no_list_matches_no_node(expressions: Any) -> None:
    """The API server refuses it; `matchExpressions: 5` raised TypeError."""
    assert not node_selector_term_matches({"matchExpressions": expressions}, POD)
    assert not node_affinity_matches(None, [{"matchExpressions": expressions}], POD)
