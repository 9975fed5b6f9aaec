"""The node-pool catalogue: one parse per policy, the same defaults for every reader."""

from __future__ import annotations

from pathlib import Path

from gpupolicy.policy.loading import default_policy, load_policy
from gpupolicy.policy.node_pools import DEFAULT_RESOURCE, NodePool, largest_node, node_pools
from tests.conftest import LintText, rule_ids

EXAMPLES = Path(__file__).resolve().parent.parent / "gpupolicy" / "rules" / "examples"


def test_defaults_of_a_minimal_pool() -> None:
    pool = NodePool.parse({"name": "a10", "gpusPerNode": 2})
    assert pool.resource == DEFAULT_RESOURCE and not pool.renamed
    assert pool.sharing == "none" and not pool.shared and pool.mig_strategy == "none"
    assert pool.gpu_product is None and pool.spare_gpus is None and pool.node_labels == {}
    assert pool.label_sets() == [{}]


def test_shared_pool_labels_carry_the_shared_suffix() -> None:
    pool = NodePool.parse(
        {
            "name": "l4",
            "gpusPerNode": 4,
            "gpuProduct": "NVIDIA-L4",
            "sharing": "time-slicing",
            "nodeLabels": {"pool": "l4"},
        }
    )
    assert pool.shared
    assert pool.label_sets() == [
        {"pool": "l4", "nvidia.com/gpu.product": "NVIDIA-L4"},
        {"pool": "l4", "nvidia.com/gpu.product": "NVIDIA-L4-SHARED"},
    ]


def test_parsed_once_per_policy_and_largest_node_per_resource() -> None:
    assert node_pools(default_policy()) == ()  # the shipped policy describes no cluster
    policy = load_policy(extra=[EXAMPLES.parent.parent.parent / "examples" / "cluster" / "policy.yaml"])
    assert node_pools(policy) is node_pools(policy)
    assert largest_node(policy, "nvidia.com/gpu") == (8, "a100-80gb")  # first pool wins the 8-GPU tie
    assert largest_node(policy, "nvidia.com/gpu.shared") == (4, "l4-shared")
    assert largest_node(policy, "example.com/none") is None


def test_spare_gpus_of_a_pool_without_resource_count_for_nvidia_gpu(lint_text: LintText) -> None:
    # GP908 once required `resource` to be written out, unlike every other reader of the pools.
    text = (EXAMPLES / "GP908" / "fires.yaml").read_text(encoding="utf-8")
    pool = {"name": "l4", "vendor": "nvidia", "gpuProduct": "NVIDIA-L4", "gpusPerNode": 4, "spareGpus": 2}
    report = lint_text(text, {"nodePools": [pool]})
    assert "GP908" in rule_ids(report)
    assert "GP908" not in rule_ids(lint_text(text, {"nodePools": [{**pool, "spareGpus": 64}]}))
