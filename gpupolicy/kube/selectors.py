"""Label selectors and node-selector terms, evaluated the way the API server does.

Label selectors: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors
Node affinity: https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#node-affinity
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpupolicy.kube.quantities import parse_int64


# `(dict, Mapping)`: parsed manifests hold dicts, which the tuple's first type answers at once;
# an ABC check alone goes through ABCMeta.__instancecheck__ in Python on every call.
def _as_str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, (dict, Mapping)):
        return {}
    return {str(key): "" if item is None else str(item) for key, item in value.items()}


def _expression_matches(expression: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(expression, (dict, Mapping)):
        return False
    key = str(expression.get("key", ""))
    operator = expression.get("operator")
    raw_values = expression.get("values")
    if raw_values is not None and not isinstance(raw_values, list):
        return False  # `values: 1` or `values: abc`: the API server refuses the selector (an array)
    values = [str(item) for item in raw_values or [] if item is not None]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):  # node selectors only: integer comparison
        if not present or len(values) != 1:
            return False
        # strconv.ParseInt, as the scheduler reads them (int() would also take "١" and " 5")
        label_value, bound = parse_int64(str(labels[key])), parse_int64(str(values[0]))
        if label_value is None or bound is None:
            return False
        return label_value > bound if operator == "Gt" else label_value < bound
    return False


def selector_matches(selector: Any, labels: Mapping[str, Any]) -> bool:
    """A LabelSelector (matchLabels + matchExpressions, ANDed). An empty selector matches all;
    a null one matches nothing, as for PodDisruptionBudgets."""
    if selector is None or not isinstance(selector, (dict, Mapping)):
        return False
    return selector_matches_text_labels(selector, _as_str_map(labels))


def text_labels(labels: Any) -> dict[str, str]:
    """`labels` as `selector_matches` reads them (keys and values as text, None as ""): made once
    for labels that several selectors are matched against (a workload against each PDB)."""
    return _as_str_map(labels)


def selector_matches_text_labels(selector: Any, label_map: dict[str, str]) -> bool:
    """`selector_matches` for labels already made `text_labels`."""
    return text_selector_matches(text_selector(selector), label_map)


# A LabelSelector as `text_selector_matches` reads it: matchLabels as text, and the expressions.
# None: the selector matches no labels (null, not a mapping, or expressions that are not a list).
TextSelector = tuple[dict[str, str], list[Any]] | None


def text_selector(selector: Any) -> TextSelector:
    """`selector` read once for matching against many label sets (a PDB against every workload of
    its namespace): its matchLabels made text here rather than once per label set."""
    if selector is None or not isinstance(selector, (dict, Mapping)):
        return None
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        return None  # the API server refuses it (an array): it selects nothing
    return _as_str_map(selector.get("matchLabels")), expressions


def text_selector_matches(selector: TextSelector, label_map: dict[str, str]) -> bool:
    """matchLabels and matchExpressions, ANDed, against labels made `text_labels`."""
    if selector is None:
        return False
    match_labels, expressions = selector
    for key, value in match_labels.items():
        if label_map.get(key) != value:
            return False
    return not expressions or all(_expression_matches(expression, label_map) for expression in expressions)


def selector_is_empty(selector: Any) -> bool:
    return (
        isinstance(selector, (dict, Mapping))
        and not selector.get("matchLabels")
        and not selector.get("matchExpressions")
    )


def node_selector_term_matches(term: Any, node_labels: Mapping[str, Any]) -> bool:
    """One NodeSelectorTerm: its matchExpressions are ANDed. matchFields (metadata.name) are
    not label matches and are treated as satisfiable. An empty term matches no node."""
    if not isinstance(term, (dict, Mapping)):
        return False
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    if not isinstance(expressions, list):
        return False  # the API server refuses the term (an array)
    labels = _as_str_map(node_labels)
    return all(_expression_matches(expression, labels) for expression in expressions)


def node_affinity_matches(node_selector: Any, required_terms: Any, node_labels: Mapping[str, Any]) -> bool:
    """nodeSelector AND (any of the required node-selector terms), as the scheduler combines them."""
    labels = _as_str_map(node_labels)
    for key, value in _as_str_map(node_selector).items():
        if labels.get(key) != value:
            return False
    if required_terms is None:
        return True
    if not isinstance(required_terms, list) or not required_terms:
        return False
    return any(node_selector_term_matches(term, labels) for term in required_terms)
