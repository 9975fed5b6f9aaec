"""Label selectors and node-selector terms against a small model of the Kubernetes semantics.

The model is written from the API, not from gpupolicy/kube/selectors.py:
- a LabelSelector is matchLabels (each an `In` of one value) ANDed with matchExpressions; an
  empty selector matches everything, a null one nothing (metav1.LabelSelectorAsSelector);
- a requirement matches as labels.Requirement.Matches does: In needs the key and one of the
  values, NotIn holds when the key is absent or its value is none of them, Exists/DoesNotExist
  test the key, Gt/Lt (node selectors only) compare the label's value read by
  strconv.ParseInt(value, 10, 64) with the single bound, and fail when it does not parse;
- nodeSelectorTerms are ORed, their expressions ANDed, and a term with no expression and no
  field matches nothing (k8s.io/component-helpers/scheduling/corev1/nodeaffinity); a pod's
  nodeSelector is ANDed with them.
https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors
https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#node-affinity

Equivalence is checked on selectors the API server accepts (its validation refuses In/NotIn
without values, Exists/DoesNotExist with values, and Gt/Lt without exactly one integer); on
anything else, of any type, the functions answer a bool and never raise.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpupolicy.kube.selectors import node_affinity_matches, node_selector_term_matches, selector_matches

KEYS = ["app", "tier", "zone", "gpu", "nvidia.com/gpu.count", ""]
VALUES = ["a", "b", "", "0", "1", "10", "-3", "+4", "007", "1e3", "١", " 5", "9223372036854775808"]
LABEL_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist"]
NODE_OPERATORS = [*LABEL_OPERATORS, "Gt", "Lt"]
INT64 = re.compile(r"[+-]?[0-9]+")

keys = st.sampled_from(KEYS)
values = st.sampled_from(VALUES) | st.integers(-(2**64), 2**64).map(str)
labels = st.dictionaries(keys, values, max_size=5)


def parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): ASCII digits with an optional sign, within int64."""
    if not INT64.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def requirement_matches(key: str, operator: str, bound: list[str], have: dict[str, str]) -> bool:
    if operator == "In":
        return key in have and have[key] in bound
    if operator == "NotIn":
        return key not in have or have[key] not in bound
    if operator == "Exists":
        return key in have
    if operator == "DoesNotExist":
        return key not in have
    if key not in have:
        return False
    value, limit = parse_int64(have[key]), parse_int64(bound[0])
    if value is None or limit is None:
        return False
    return value > limit if operator == "Gt" else value < limit


def model_label_selector(selector: dict[str, Any] | None, have: dict[str, str]) -> bool:
    if selector is None:
        return False
    requirements = [(key, "In", [value]) for key, value in selector.get("matchLabels", {}).items()]
    requirements += [
        (item["key"], item["operator"], item.get("values", []))
        for item in selector.get("matchExpressions", [])
    ]
    return all(requirement_matches(key, operator, bound, have) for key, operator, bound in requirements)


def model_node_affinity(
    node_selector: dict[str, str], terms: list[dict[str, Any]] | None, have: dict[str, str]
) -> bool:
    if any(have.get(key) != value for key, value in node_selector.items()):
        return False
    if terms is None:
        return True
    return any(
        bool(term.get("matchExpressions"))
        and all(
            requirement_matches(item["key"], item["operator"], item.get("values", []), have)
            for item in term["matchExpressions"]
        )
        for term in terms
    )


@st.composite
def expressions(draw: st.DrawFn, operators: list[str]) -> dict[str, Any]:
    """A requirement the API server's validation accepts."""
    operator = draw(st.sampled_from(operators))
    expression: dict[str, Any] = {"key": draw(keys), "operator": operator}
    if operator in ("In", "NotIn"):
        expression["values"] = draw(st.lists(values, min_size=1, max_size=4))
    elif operator in ("Gt", "Lt"):
        expression["values"] = [str(draw(st.integers(-(2**63), 2**63 - 1)))]
    elif draw(st.booleans()):
        expression["values"] = []  # Exists/DoesNotExist: values absent or empty
    return expression


@st.composite
def label_selectors(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.integers(0, 20)) == 0:
        return None
    selector: dict[str, Any] = {}
    if draw(st.booleans()):
        selector["matchLabels"] = draw(st.dictionaries(keys, values, max_size=3))
    if draw(st.booleans()):
        selector["matchExpressions"] = draw(st.lists(expressions(LABEL_OPERATORS), max_size=4))
    return selector


node_terms = st.fixed_dictionaries({"matchExpressions": st.lists(expressions(NODE_OPERATORS), max_size=4)})

# Anything a YAML or JSON document can hold, for the never-raise properties.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | keys | values,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6) | keys, children, max_size=4)
    ),
    max_leaves=20,
)
odd_expressions = st.dictionaries(
    st.sampled_from(["key", "operator", "values"]),
    json_values | st.sampled_from(NODE_OPERATORS) | st.lists(values, max_size=3),
)
odd_selectors = json_values | st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": json_values | st.dictionaries(keys, json_values, max_size=3),
        "matchExpressions": json_values | st.lists(odd_expressions | json_values, max_size=3),
    },
)


@given(label_selectors(), labels)
def test_label_selector_matches_as_the_api_server(
    selector: dict[str, Any] | None, have: dict[str, str]
) -> None:
    assert selector_matches(selector, have) is model_label_selector(selector, have)


@given(labels)
def test_an_empty_selector_matches_every_object(have: dict[str, str]) -> None:
    assert selector_matches({}, have)
    assert selector_matches({"matchLabels": {}, "matchExpressions": []}, have)
    assert not selector_matches(None, have)


@given(label_selectors(), label_selectors(), labels)
def test_two_selectors_together_match_what_both_match(
    first: dict[str, Any] | None, second: dict[str, Any] | None, have: dict[str, str]
) -> None:
    """matchExpressions are ANDed: the union of two selectors' expressions matches exactly the
    objects both match (matchLabels kept apart: a key may hold one value only)."""
    if first is None or second is None:
        return
    expressions_only = {
        "matchExpressions": [
            *first.get("matchExpressions", []),
            *second.get("matchExpressions", []),
            *(
                {"key": key, "operator": "In", "values": [value]}
                for key, value in first.get("matchLabels", {}).items()
            ),
            *(
                {"key": key, "operator": "In", "values": [value]}
                for key, value in second.get("matchLabels", {}).items()
            ),
        ]
    }
    assert selector_matches(expressions_only, have) is (
        selector_matches(first, have) and selector_matches(second, have)
    )


@given(st.dictionaries(keys, values, max_size=3), st.none() | st.lists(node_terms, max_size=3), labels)
def test_node_affinity_matches_as_the_scheduler(
    node_selector: dict[str, str], terms: list[dict[str, Any]] | None, have: dict[str, str]
) -> None:
    assert node_affinity_matches(node_selector, terms, have) is model_node_affinity(
        node_selector, terms, have
    )


@given(node_terms, labels)
def test_a_node_selector_term_ands_its_expressions(term: dict[str, Any], have: dict[str, str]) -> None:
    expected = model_node_affinity({}, [term], have)
    assert node_selector_term_matches(term, have) is expected


@given(st.lists(node_terms, min_size=1, max_size=4), labels)
def test_node_selector_terms_are_ored(terms: list[dict[str, Any]], have: dict[str, str]) -> None:
    assert node_affinity_matches(None, terms, have) is any(
        node_selector_term_matches(term, have) for term in terms
    )


@given(odd_selectors, json_values | labels)
def test_any_selector_of_any_type_answers_a_bool(selector: Any, have: Any) -> None:
    assert selector_matches(selector, have if isinstance(have, dict) else {}) in (True, False)


odd_terms = st.fixed_dictionaries(
    {},
    optional={
        "matchExpressions": json_values | st.lists(odd_expressions | json_values, max_size=3),
        "matchFields": json_values | st.lists(odd_expressions, max_size=2),
    },
)


@given(
    json_values | odd_terms | st.lists(json_values | odd_terms, max_size=3), json_values, json_values | labels
)
def test_any_node_affinity_of_any_type_answers_a_bool(terms: Any, node_selector: Any, have: Any) -> None:
    have = have if isinstance(have, dict) else {}
    assert node_affinity_matches(node_selector, terms, have) in (True, False)
    assert node_selector_term_matches(terms, have) in (True, False)
