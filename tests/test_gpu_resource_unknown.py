"""GP109 judges the unknown names under a GPU vendor's domain that are meant as its GPUs, and only those."""

from __future__ import annotations

import pytest

from gpupolicy.kube.gpu import GpuKind
from gpupolicy.policy.loading import default_policy, policy_from_mapping
from tests.conftest import LintText

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: ai}}
spec:
  containers:
    - name: c
      image: registry.example.com/app:1.0
      resources:
        requests: {{cpu: "1"}}
        limits: {{memory: 1Gi, {resource}: 1}}
"""


@pytest.mark.parametrize(
    ("resource", "suggestion"),
    [
        ("nvidia.com/gpus", "nvidia.com/gpu"),
        ("nvidia.com/GPU", "nvidia.com/gpu"),  # case is not a different name to a reader
        ("nvidia.com/gpu-shared", "nvidia.com/gpu.shared"),
        ("nvidia.com/a100-gpu", None),  # says gpu, close to no known name
        ("amd.com/Gpus", "amd.com/gpu"),
        ("gpu.intel.com/tile", "gpu.intel.com/tiles"),  # a letter from a known name, no "gpu" in it
    ],
)
def test_a_name_meant_as_a_gpu_is_reported(
    lint_text: LintText, resource: str, suggestion: str | None
) -> None:
    (finding,) = [f for f in lint_text(POD.format(resource=resource)).findings if f.rule_id == "GP109"]
    assert resource in finding.message
    if suggestion is None:
        assert "did you mean" not in finding.message
    else:
        assert finding.message.endswith(f"(did you mean {suggestion}?)")


@pytest.mark.parametrize(
    "resource",
    [
        "nvidia.com/hostdev",  # NVIDIA's Network Operator: NICs under nvidia.com, named by the cluster
        "nvidia.com/mlnxnics",
        "nvidia.com/sriovlegacy",
        "gpu.intel.com/dxg",  # Intel's GPU plugin under WSL (known)
        "gpu.intel.com/monitoring",  # Intel's monitoring resource (known, counts no GPU)
        "nvidia.com/pgpu",  # a passthrough GPU of NVIDIA's Kata sandbox device plugin (known)
        "nvidia.com/nvswitch",  # the NVSwitches it passes through beside them (known, not a GPU)
    ],
)
def test_other_names_of_a_vendors_domain_are_not_judged(lint_text: LintText, resource: str) -> None:
    assert "GP109" not in [f.rule_id for f in lint_text(POD.format(resource=resource)).findings]


def test_the_domain_does_not_make_names_alike(lint_text: LintText) -> None:
    """`gpu.intel.com/dxg` and `gpu.intel.com/xe` share 14 of 17 characters; `dxg` and `xe` one of five."""
    only_xe = {
        "gpu": {
            "vendors": [
                {"name": "intel", "domains": ["gpu.intel.com"], "deviceResources": ["gpu.intel.com/xe"]}
            ]
        }
    }
    assert policy_from_mapping(only_xe).gpu.classify("gpu.intel.com/dxg").kind is GpuKind.UNKNOWN  # type: ignore[union-attr]
    assert "GP109" not in [
        f.rule_id for f in lint_text(POD.format(resource="gpu.intel.com/dxg"), only_xe).findings
    ]
    (finding,) = [
        f
        for f in lint_text(POD.format(resource="gpu.intel.com/xee"), only_xe).findings
        if f.rule_id == "GP109"
    ]
    assert finding.message.endswith("(did you mean gpu.intel.com/xe?)")


def test_a_passthrough_gpu_is_a_whole_gpu_and_an_nvswitch_none() -> None:
    """NVIDIA's GPU Operator with Kata Containers advertises `nvidia.com/pgpu` by default (the
    sandbox device plugin, P_GPU_ALIAS) and `nvidia.com/nvswitch` for the switches; the NIM
    operator's confidential-computing sample requests `nvidia.com/pgpu: 1` (GP109 asked "did you
    mean nvidia.com/gpu?")."""
    gpu = default_policy().gpu
    assert gpu.classify("nvidia.com/pgpu").kind is GpuKind.DEVICE  # type: ignore[union-attr]
    assert gpu.classify("nvidia.com/nvswitch").kind is not GpuKind.DEVICE  # type: ignore[union-attr]
