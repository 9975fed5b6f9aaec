"""A pod template's node targeting: nodeSelector and required node affinity, read once."""

from __future__ import annotations

from typing import Any

from gpupolicy.kube.pod_spec import PodTemplate
from gpupolicy.kube.scheduling import node_selector, required_terms, required_values, targeted_keys

PRODUCT = "nvidia.com/gpu.product"


def template(spec: dict[str, Any]) -> PodTemplate:
    return PodTemplate(spec, ("spec", "template", "spec"))


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]
                }
            }
        }
    }


def test_no_targeting() -> None:
    bare = template({"containers": []})
    assert node_selector(bare) == {}
    assert required_terms(bare) is None
    assert targeted_keys(bare) == set()
    assert required_values(bare, PRODUCT) is None


def test_preferred_affinity_is_not_targeting() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {"matchExpressions": [{"key": PRODUCT, "operator": "Exists"}]},
                    }
                ]
            }
        }
    }
    assert required_terms(template(spec)) is None
    assert targeted_keys(template(spec)) == set()


def test_node_selector_gives_keys_values_and_path() -> None:
    pod = template({"nodeSelector": {PRODUCT: "NVIDIA-L4", "cloud.google.com/gke-spot": "true"}})
    assert targeted_keys(pod) == {PRODUCT, "cloud.google.com/gke-spot"}
    assert required_values(pod, PRODUCT) == (
        {"NVIDIA-L4"},
        ("spec", "template", "spec", "nodeSelector", PRODUCT),
    )


def test_required_terms_keys_must_be_in_every_term() -> None:
    pod = template(
        affinity(
            [
                {"key": PRODUCT, "operator": "In", "values": ["Tesla-T4"]},
                {"key": "zone", "operator": "Exists"},
            ],
            [{"key": PRODUCT, "operator": "In", "values": ["NVIDIA-L4"]}],
        )
    )
    assert required_terms(pod) is not None and len(required_terms(pod) or []) == 2
    assert targeted_keys(pod) == {PRODUCT}  # `zone` constrains only one of two ORed terms


def test_required_values_union_over_terms_with_first_path() -> None:
    pod = template(
        affinity(
            [
                {"key": "zone", "operator": "Exists"},
                {"key": PRODUCT, "operator": "In", "values": ["Tesla-T4"]},
            ],
            [{"key": PRODUCT, "operator": "In", "values": ["NVIDIA-L4", "NVIDIA-L4-SHARED"]}],
        )
    )
    found = required_values(pod, PRODUCT)
    assert found is not None
    values, path = found
    assert values == {"Tesla-T4", "NVIDIA-L4", "NVIDIA-L4-SHARED"}
    assert path == (
        "spec", "template", "spec", "affinity", "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms", 0, "matchExpressions", 1,
    )  # fmt: skip


def test_required_values_none_when_a_term_leaves_the_key_open() -> None:
    pod = template(
        affinity(
            [{"key": PRODUCT, "operator": "In", "values": ["Tesla-T4"]}],
            [{"key": "zone", "operator": "In", "values": ["a"]}],
        )
    )
    assert required_values(pod, PRODUCT) is None


def test_required_values_ignores_other_operators() -> None:
    pod = template(affinity([{"key": PRODUCT, "operator": "NotIn", "values": ["Tesla-T4"]}]))
    assert required_values(pod, PRODUCT) is None
    assert targeted_keys(pod) == {PRODUCT}


def test_node_selector_wins_over_affinity_for_values() -> None:
    spec = {"nodeSelector": {PRODUCT: "NVIDIA-L4"}} | affinity(
        [{"key": PRODUCT, "operator": "In", "values": ["Tesla-T4"]}]
    )
    found = required_values(template(spec), PRODUCT)
    assert found is not None and found[0] == {"NVIDIA-L4"}


def test_malformed_affinity_does_not_crash() -> None:
    pod = template({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": "x"}}})
    assert required_terms(pod) is None
    assert targeted_keys(pod) == set()
    weird = template({"nodeSelector": ["a"], "affinity": "x"})
    assert node_selector(weird) == {}
    assert targeted_keys(weird) == set()
