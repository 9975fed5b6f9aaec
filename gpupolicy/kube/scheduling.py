"""Where a pod template can land: its nodeSelector and required node affinity, read once.

https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/
"""

from __future__ import annotations

from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.kube.pod_spec import PodTemplate, as_list, as_mapping

REQUIRED_TERMS_PATH = (
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
)


def node_selector(template: PodTemplate) -> dict[str, Any]:
    return template.node_selector


def required_terms(template: PodTemplate) -> list[Any] | None:
    """The required node-selector terms (ORed), or None when the pod has none."""
    node: Any = template.spec
    for step in REQUIRED_TERMS_PATH:
        node = as_mapping(node).get(step)
        if node is None:
            return None
    return as_list(node)


def targeted_keys(template: PodTemplate) -> set[str]:
    """Label keys that constrain placement: nodeSelector keys and keys every required term names."""
    keys = {str(key) for key in node_selector(template)}
    terms = required_terms(template)
    if terms:
        per_term = [
            {str(as_mapping(expr).get("key")) for expr in as_list(as_mapping(term).get("matchExpressions"))}
            for term in terms
        ]
        keys |= set.intersection(*per_term) if per_term else set()
    return keys


def required_values(template: PodTemplate, key: str) -> tuple[set[str], JsonPath] | None:
    """Values `key` may take (nodeSelector equality or `In` in every required term), with the path
    of the first place that says so; None when the key is not constrained to values."""
    selector = node_selector(template)
    if key in selector:
        return {str(selector[key])}, template.field("nodeSelector", key)
    terms = required_terms(template)
    if not terms:
        return None
    values: set[str] = set()
    first_path: JsonPath | None = None
    for index, term in enumerate(terms):
        found = False
        for expr_index, expr in enumerate(as_list(as_mapping(term).get("matchExpressions"))):
            expr = as_mapping(expr)
            if expr.get("key") == key and expr.get("operator") == "In":
                values |= {str(item) for item in as_list(expr.get("values"))}
                found = True
                if first_path is None:
                    first_path = template.field(*REQUIRED_TERMS_PATH, index, "matchExpressions", expr_index)
        if not found:
            return None
    return (values, first_path) if first_path is not None else None
