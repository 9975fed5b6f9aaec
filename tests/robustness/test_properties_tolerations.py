"""Tolerations against taints, checked against the scheduler's rule (k8s.io/api/core/v1
Toleration.ToleratesTaint), written here from the API documentation:
- an empty toleration effect matches every effect, otherwise the effects must be equal;
- an empty key (allowed with operator Exists only) matches every key, otherwise keys are equal;
- operator Exists matches any value; Equal (also the empty operator) needs equal values; any
  other operator matches nothing.
https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/

Equivalence is checked on tolerations the API server's validation accepts (an empty key only
with Exists; no value with Exists; effects and operators from the API's enums); tolerations of
any other shape or type answer a bool and never raise.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpupolicy.kube.tolerations import Taint, tolerates, toleration_for, toleration_tolerates

EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
KEYS = ["nvidia.com/gpu", "dedicated", "node.kubernetes.io/not-ready", "a"]
TAINT_VALUES = ["", "present", "true", "h100", "a"]

taints = st.builds(
    Taint, key=st.sampled_from(KEYS), effect=st.sampled_from(EFFECTS), value=st.sampled_from(TAINT_VALUES)
)


@st.composite
def tolerations(draw: st.DrawFn) -> dict[str, Any]:
    """A toleration the API server accepts, with optional fields left out as often as set."""
    operator = draw(st.sampled_from([None, "Equal", "Exists"]))
    key = draw(st.sampled_from(["", *KEYS])) if operator == "Exists" else draw(st.sampled_from(KEYS))
    toleration: dict[str, Any] = {}
    if key or draw(st.booleans()):
        toleration["key"] = key
    if operator is not None:
        toleration["operator"] = operator
    if operator != "Exists" and draw(st.booleans()):
        toleration["value"] = draw(st.sampled_from(TAINT_VALUES))
    effect = draw(st.sampled_from(["", *EFFECTS]))
    if effect or draw(st.booleans()):
        toleration["effect"] = effect
    if draw(st.booleans()):
        toleration["tolerationSeconds"] = draw(st.integers(0, 3600))
    return toleration


def model_tolerates(toleration: dict[str, Any], taint: Taint) -> bool:
    effect = toleration.get("effect", "")
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key", "")
    if key and key != taint.key:
        return False
    operator = toleration.get("operator", "")
    if operator in ("", "Equal"):
        return bool(toleration.get("value", "") == taint.value)
    return operator == "Exists"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
odd_tolerations = json_values | st.dictionaries(
    st.sampled_from(["key", "operator", "value", "effect", "tolerationSeconds"]),
    json_values | st.sampled_from(["", "Exists", "Equal", "Gt", *EFFECTS, *KEYS]),
)


@given(tolerations(), taints)
def test_a_toleration_tolerates_as_the_scheduler_decides(toleration: dict[str, Any], taint: Taint) -> None:
    assert toleration_tolerates(toleration, taint) is model_tolerates(toleration, taint)


@given(st.sampled_from(["", *EFFECTS]), taints)
def test_an_empty_key_with_exists_tolerates_every_taint_of_its_effect(effect: str, taint: Taint) -> None:
    toleration = {"operator": "Exists", "effect": effect} if effect else {"operator": "Exists"}
    assert toleration_tolerates(toleration, taint) is (not effect or effect == taint.effect)


@given(tolerations(), taints)
def test_an_empty_effect_matches_every_effect(toleration: dict[str, Any], taint: Taint) -> None:
    without_effect = {key: value for key, value in toleration.items() if key != "effect"}
    for effect in EFFECTS:
        other = Taint(taint.key, effect, taint.value)
        assert toleration_tolerates(without_effect, other) is toleration_tolerates(without_effect, taint)


@given(st.lists(tolerations(), max_size=5), taints)
def test_a_list_tolerates_when_one_of_its_tolerations_does(items: list[dict[str, Any]], taint: Taint) -> None:
    expected = [index for index, item in enumerate(items) if model_tolerates(item, taint)]
    assert tolerates(items, taint) is bool(expected)
    assert toleration_for(items, taint, match_value=True) == (expected[0] if expected else None)


@given(st.lists(tolerations(), max_size=5), taints)
def test_matching_without_values_finds_what_matching_with_values_finds(
    items: list[dict[str, Any]], taint: Taint
) -> None:
    """`match_value=False` ignores values only: whatever tolerates the taint is found, no later."""
    with_values = toleration_for(items, taint, match_value=True)
    without = toleration_for(items, taint, match_value=False)
    if with_values is not None:
        assert without is not None and without <= with_values


@given(st.lists(odd_tolerations, max_size=4) | json_values, taints, st.booleans())
def test_tolerations_of_any_shape_answer_without_raising(items: Any, taint: Taint, match_value: bool) -> None:
    assert tolerates(items, taint) in (True, False)
    found = toleration_for(items, taint, match_value=match_value)
    assert found is None or (isinstance(items, list) and 0 <= found < len(items))
    for item in items if isinstance(items, list) else [items]:
        assert toleration_tolerates(item, taint) in (True, False)
