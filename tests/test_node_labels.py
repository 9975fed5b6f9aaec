"""The node-label registry (did-you-mean, prefixes) and node constraints evaluated as sets."""

from __future__ import annotations

from typing import Any

from gpupolicy.kube.pod_spec import PodTemplate
from gpupolicy.policy.loading import default_policy, load_policy
from gpupolicy.policy.node_constraints import node_contradictions
from gpupolicy.policy.node_labels import LabelRegistry, node_label_uses
from gpupolicy.policy.node_pools import NodePool
from tests.conftest import REPO

TERMS = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")


def registry() -> LabelRegistry:
    return LabelRegistry(default_policy().section("nodeLabels"))


def example_cluster_registry() -> LabelRegistry:
    """The example cluster's policy (examples/cluster/policy.yaml) adds the team's own `accelerator` key."""
    return LabelRegistry(
        load_policy(extra=[REPO / "examples" / "cluster" / "policy.yaml"]).section("nodeLabels")
    )


def template(spec: dict[str, Any]) -> PodTemplate:
    return PodTemplate(spec, ("spec",))


def required(*terms: list[dict[str, Any]], selector: dict[str, str] | None = None) -> PodTemplate:
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": term} for term in terms]
                }
            }
        }
    }
    if selector is not None:
        spec["nodeSelector"] = selector
    return template(spec)


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


def test_default_registry_knows_gfd_operator_cloud_and_seed_keys() -> None:
    labels = registry()
    for key, source in [
        ("nvidia.com/gpu.product", "gpu-feature-discovery"),
        ("nvidia.com/gpu.present", "gpu-operator"),
        ("cloud.google.com/gke-accelerator", "cloud-provider"),
        ("k8s.amazonaws.com/accelerator", "cloud-provider"),
    ]:
        info = labels.lookup(key)
        assert info is not None and info.source == source and info.owner, key
    # A team's own key belongs to that team's cluster policy, not to the shipped one.
    assert labels.lookup("accelerator") is None
    seed_key = example_cluster_registry().lookup("accelerator")
    assert seed_key is not None and seed_key.source == "team" and seed_key.gpu
    memory = labels.lookup("nvidia.com/gpu.memory")
    assert memory is not None and memory.unit == "MiB"


def test_prefix_entries() -> None:
    labels = registry()
    found = labels.lookup("nvidia.com/gpu.deploy.driver")
    assert found is not None and found.key == "nvidia.com/gpu.deploy.*" and found.source == "gpu-operator"
    assert labels.lookup("nvidia.com/cuda.driver.major") is not None
    assert labels.lookup("example.com/team-label") is None


def test_did_you_mean_for_misspelt_known_keys() -> None:
    labels = registry()
    assert labels.lookup("nvidia.com/gpu.prodcut") is None
    assert labels.suggest("nvidia.com/gpu.prodcut") == "nvidia.com/gpu.product"
    assert labels.suggest("node.kubernetes.io/instance-typ") == "node.kubernetes.io/instance-type"
    # The deprecated beta form is still set by kubelets and cloud providers: known, not a typo.
    assert labels.lookup("beta.kubernetes.io/instance-type") is not None
    assert labels.suggest("completely-different") is None
    # A key one dotted part shorter or longer than a registered one is another key (OME's model
    # agent selects nodes labelled nvidia.com/gpu=true): no did-you-mean nvidia.com/gpu.mode.
    assert labels.lookup("nvidia.com/gpu") is None
    assert labels.suggest("nvidia.com/gpu") is None
    assert labels.suggest("nvidia.com/gpu.product.name") is None
    # A misspelling is a typo or two away, not a long shared prefix away: a provider's own key
    # (Azure's proximity placement group) is not its agent pool's.
    assert labels.suggest("nvida.com/gpu.product") == "nvidia.com/gpu.product"
    assert labels.suggest("kubernetes.azure.com/ppg") is None
    assert labels.suggest("cloud.google.com/gke-tpu-topolgy") == "cloud.google.com/gke-tpu-topology"


def test_providers_network_topology_labels_are_known() -> None:
    """GKE's RDMA machines' blocks (Kueue's topology levels, llm-d's wide-EP guides) and EKS's network
    nodes are documented keys: no 'not in the label registry; did you mean …gke-tpu-topology?'."""
    labels = registry()
    for key in (
        "cloud.google.com/gce-topology-block",
        "cloud.google.com/gce-topology-subblock",
        "cloud.google.com/gce-topology-host",
        "topology.k8s.aws/network-node-layer-3",
    ):
        assert labels.lookup(key) is not None, key


def test_gpu_and_preference_marks() -> None:
    labels = registry()
    assert example_cluster_registry().is_gpu_label("accelerator")
    assert labels.is_gpu_label("nvidia.com/mig-1g.10gb.count")
    assert not labels.is_gpu_label("kubernetes.io/os")
    hostname = labels.lookup("kubernetes.io/hostname")
    assert hostname is not None and hostname.use == "preference"


def test_custom_registry_entries() -> None:
    labels = LabelRegistry(
        {"example.com/pool": {"source": "team", "owner": "ml-infra", "use": "preference", "gpu": True}}
    )
    info = labels.lookup("example.com/pool")
    assert info is not None and (info.owner, info.use, info.gpu) == ("ml-infra", "preference", True)


def test_node_label_uses_finds_every_place_with_its_path() -> None:
    spec = {
        "nodeSelector": {"accelerator": "nvidia-gpu"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [expr("nvidia.com/gpu.product", "In", "NVIDIA-L4")]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 1,
                        "preference": {"matchExpressions": [expr("topology.kubernetes.io/zone", "In", "a")]},
                    }
                ],
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
                ]
            },
        },
        "topologySpreadConstraints": [{"topologyKey": "topology.kubernetes.io/zone"}],
    }
    uses = [(u.key, u.where, u.required) for u in node_label_uses(template(spec), topology=True)]
    assert uses == [
        ("accelerator", "nodeSelector", True),
        ("nvidia.com/gpu.product", "required", True),
        ("topology.kubernetes.io/zone", "preferred", False),
        ("topology.kubernetes.io/zone", "topology", False),
        ("kubernetes.io/hostname", "topology", False),
    ]
    first_required = next(u for u in node_label_uses(template(spec)) if u.where == "required")
    assert first_required.path == ("spec", *TERMS, 0, "matchExpressions", 0)


def test_seed_affinity_is_satisfiable() -> None:
    seed = required([expr("accelerator", "In", "nvidia-gpu")])
    assert list(node_contradictions(seed)) == []


def test_node_selector_against_required_term() -> None:
    found = list(
        node_contradictions(
            required([expr("accelerator", "In", "amd-gpu")], selector={"accelerator": "nvidia-gpu"})
        )
    )
    assert len(found) == 1
    assert found[0].key == "accelerator"
    assert found[0].path == ("spec", *TERMS, 0, "matchExpressions", 0)
    assert (
        "nodeSelector accelerator=nvidia-gpu" in found[0].reason
        and "accelerator In [amd-gpu]" in found[0].reason
    )


def test_values_are_sets_across_expressions_of_a_term() -> None:
    # In [a, b] then In [b, c] leaves {b}: satisfiable; then NotIn [b] leaves nothing.
    ok = required([expr("k", "In", "a", "b"), expr("k", "In", "b", "c")])
    assert list(node_contradictions(ok)) == []
    dead = required([expr("k", "In", "a", "b"), expr("k", "In", "b", "c"), expr("k", "NotIn", "b")])
    [found] = node_contradictions(dead)
    assert found.path[-1] == 2 and "every allowed value is excluded" in found.reason


def test_in_empty_exists_does_not_exist_and_bounds() -> None:
    assert "no values" in next(node_contradictions(required([expr("k", "In")]))).reason
    assert (
        "exist"
        in next(node_contradictions(required([expr("k", "Exists"), expr("k", "DoesNotExist")]))).reason
    )
    bounds = required(
        [expr("nvidia.com/gpu.memory", "Gt", "40000"), expr("nvidia.com/gpu.memory", "Lt", "40001")]
    )
    assert "no integer" in next(node_contradictions(bounds)).reason
    outside = required(
        [expr("nvidia.com/gpu.memory", "In", "24576"), expr("nvidia.com/gpu.memory", "Gt", "40000")]
    )
    assert list(node_contradictions(outside))
    assert list(node_contradictions(required([expr("m", "Gt", "1"), expr("m", "Lt", "3")]))) == []


A100 = "NVIDIA-A100-SXM4-80GB"
H100 = "NVIDIA-H100-80GB-HBM3"
PRODUCT = "nvidia.com/gpu.product"


def test_terms_are_ored_each_with_the_node_selector() -> None:
    # nodeSelector A100 AND (term 0: H100 OR term 1: A100): a node with A100 matches term 1.
    either = required([expr(PRODUCT, "In", H100)], [expr(PRODUCT, "In", A100)], selector={PRODUCT: A100})
    assert list(node_contradictions(either)) == []
    # The first term contradicts the nodeSelector; the second is fine: nothing to report.
    template_ = required(
        [expr("accelerator", "NotIn", "nvidia-gpu")],
        [expr("nvidia.com/gpu.product", "In", "NVIDIA-L4")],
        selector={"accelerator": "nvidia-gpu"},
    )
    assert list(node_contradictions(template_)) == []


def test_node_selector_against_every_term_is_one_contradiction_at_the_terms() -> None:
    neither = required(
        [expr(PRODUCT, "In", H100)], [expr(PRODUCT, "In", "NVIDIA-L40S")], selector={PRODUCT: A100}
    )
    [found] = node_contradictions(neither)
    assert found.fatal and found.term_index is None and found.path == ("spec", *TERMS)
    assert found.where == "required node affinity"
    assert "rules out every required term" in found.reason
    assert (
        "term 0: " in found.reason
        and "term 1: " in found.reason
        and f"nodeSelector {PRODUCT}={A100}" in found.reason
    )


def test_a_dead_term_among_live_ones_is_reported_as_dead_not_fatal() -> None:
    template_ = required(
        [expr(PRODUCT, "In", A100)],
        [expr(PRODUCT, "In", H100), expr(PRODUCT, "NotIn", H100)],
    )
    [found] = node_contradictions(template_)
    assert not found.fatal and found.term_index == 1 and found.where == "required term 1"
    assert found.path == ("spec", *TERMS, 1, "matchExpressions", 1)
    assert "every allowed value is excluded" in found.reason and "alternative is dead" in found.reason


def test_every_term_dead_is_fatal_for_each() -> None:
    template_ = required([expr(PRODUCT, "In")], [expr("k", "Exists"), expr("k", "DoesNotExist")])
    found = list(node_contradictions(template_))
    assert [(item.term_index, item.fatal) for item in found] == [(0, True), (1, True)]
    assert "alternative is dead" not in found[0].reason


def test_dead_terms_and_node_selector_conflicts_together() -> None:
    # term 0 can never match; term 1 is fine alone but not with the nodeSelector: both reported.
    template_ = required([expr(PRODUCT, "In")], [expr(PRODUCT, "In", H100)], selector={PRODUCT: A100})
    found = list(node_contradictions(template_))
    assert [(item.term_index, item.fatal) for item in found] == [(0, True), (1, True)]
    assert found[1].path == ("spec", *TERMS, 1, "matchExpressions", 0) and "nodeSelector" in found[1].reason


def test_an_empty_term_matches_no_node() -> None:
    [found] = node_contradictions(required([]))
    assert found.fatal and found.path == ("spec", *TERMS, 0) and "empty term" in found.reason
    fields = template(
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [expr("metadata.name", "In", "gpu-node-1")]}]
        }}}}
    )  # fmt: skip
    assert list(node_contradictions(fields)) == []


def test_a_foreign_label_kills_only_its_term() -> None:
    def foreign(key: str) -> str | None:
        return "an nvidia label on an amd pod" if key.startswith("nvidia.com/") else None

    amd_or_nvidia = required(
        [expr("nvidia.com/gpu.present", "Exists")], [expr("amd.com/gpu.present", "Exists")]
    )
    [found] = node_contradictions(amd_or_nvidia, foreign)
    assert found.term_index == 0 and not found.fatal
    not_nvidia = required([expr("nvidia.com/gpu.present", "DoesNotExist")])
    assert list(node_contradictions(not_nvidia, foreign)) == []


def test_no_required_terms_means_no_contradiction() -> None:
    assert list(node_contradictions(template({"nodeSelector": {"a": "b"}}))) == []


POOLS = [
    NodePool.parse(pool)
    for pool in (
        {
            "name": "l4-shared",
            "resource": "nvidia.com/gpu.shared",
            "gpuProduct": "NVIDIA-L4",
            "gpusPerNode": 4,
        },
        {"name": "l40s", "resource": "nvidia.com/gpu", "gpuProduct": "NVIDIA-L40S", "gpusPerNode": 4},
    )
]


def test_pool_catalogue_resource_and_count() -> None:
    from decimal import Decimal

    from gpupolicy.policy.node_constraints import pool_conflicts

    l4 = template({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4-SHARED"}})
    [wrong] = pool_conflicts(l4, POOLS, {"nvidia.com/gpu": Decimal(1)})
    assert "advertise nvidia.com/gpu.shared, not nvidia.com/gpu" in wrong.reason
    assert wrong.path == ("spec", "nodeSelector", "nvidia.com/gpu.product")
    assert list(pool_conflicts(l4, POOLS, {"nvidia.com/gpu.shared": Decimal(1)})) == []
    l40s = template({"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}})
    [many] = pool_conflicts(l40s, POOLS, {"nvidia.com/gpu": Decimal(8)})
    assert many.count == 8 and "at most 4" in many.reason
    unknown = template({"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}})
    assert list(pool_conflicts(unknown, POOLS, {"nvidia.com/gpu": Decimal(1)})) == []


def test_node_pool_labels_are_registered_gpu_labels() -> None:
    labels = LabelRegistry(
        {}, pools=[NodePool.parse({"name": "h100", "nodeLabels": {"example.com/pool": "h100"}})]
    )
    info = labels.lookup("example.com/pool")
    assert info is not None and info.gpu and info.owner == "node pool h100" and info.source == "nodePools"
