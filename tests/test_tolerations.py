"""Tolerations against taints, as the scheduler matches them."""

from __future__ import annotations

from typing import Any

import pytest

from gpupolicy.kube.tolerations import Taint, tolerates, toleration_tolerates

GPU_TAINT = Taint("nvidia.com/gpu", "NoSchedule", "present")
GPU_TAINT_NO_VALUE = Taint("nvidia.com/gpu", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        # Exists ignores the value.
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_TAINT, True),
        # Equal (also the default operator) compares values.
        (
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
            GPU_TAINT,
            True,
        ),
        ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal"}, GPU_TAINT_NO_VALUE, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": ""}, GPU_TAINT_NO_VALUE, True),
        # The key must match.
        ({"key": "amd.com/gpu", "operator": "Exists"}, GPU_TAINT, False),
        # The effect must match when given; an empty effect matches every effect.
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": ""}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, Taint("nvidia.com/gpu", "NoExecute"), True),
        # An empty key with Exists tolerates every taint; with Equal it tolerates nothing.
        ({"operator": "Exists"}, GPU_TAINT, True),
        ({"key": "", "operator": "Exists"}, Taint("dedicated", "NoExecute", "x"), True),
        ({"operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "", "operator": "Equal", "value": "present"}, GPU_TAINT, False),
        ({}, GPU_TAINT, False),
        # Unknown operators tolerate nothing.
        ({"key": "nvidia.com/gpu", "operator": "In", "value": "present"}, GPU_TAINT, False),
    ],
)
def test_toleration_matrix(toleration: dict[str, Any], taint: Taint, expected: bool) -> None:
    assert toleration_tolerates(toleration, taint) is expected


def test_value_is_compared_as_text() -> None:
    assert toleration_tolerates({"key": "gpu-count", "value": 8}, Taint("gpu-count", "NoSchedule", "8"))


def test_tolerates_any_of_a_list() -> None:
    tolerations = [
        {"key": "dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert tolerates(tolerations, GPU_TAINT)
    assert not tolerates(tolerations[:1], GPU_TAINT)
    assert not tolerates([], GPU_TAINT)


def test_malformed_tolerations_tolerate_nothing() -> None:
    assert not tolerates(None, GPU_TAINT)
    assert not tolerates({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_TAINT)
    assert not tolerates(["nvidia.com/gpu"], GPU_TAINT)
