"""`gpupolicy cluster snapshot` and `gpupolicy init`: the cluster's facts from its recorded API
objects (tests/data/cluster/), as a policy fragment that turns the rules' unknowns into findings."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupolicy.cli.commands.cluster import (
    EXAMPLES_END,
    EXAMPLES_START,
    LISTINGS,
    UNCONFIRMED_START,
    read_file,
    render_snapshot,
)
from gpupolicy.cli.main import main
from gpupolicy.core.findings import Severity
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.registry import REGISTRY
from gpupolicy.loading.inputs import load_file
from gpupolicy.policy.cluster_facts import SNAPSHOT_KINDS, facts_from_objects, read_cluster
from gpupolicy.policy.loading import default_policy, load_policy
from gpupolicy.policy.validation import validate_layer
from tests.conftest import REPO, LintText

DATA = REPO / "tests" / "data" / "cluster"
FIXTURES = ("onprem-gfd.yaml", "gke-l4.json", "eks-karpenter.yaml", "aks-a100.yaml")
BAD_RESOURCES = REPO / "examples" / "gpu" / "bad" / "resources.yaml"
# The rules whose unknowns a snapshot resolves on examples/gpu/bad/resources.yaml.
CLUSTER_RULES = ("GP108", "GP201", "GP202", "GP301")


def objects(name: str) -> list[dict[str, Any]]:
    return [resource.obj for resource in load_file(DATA / name).resources]


def node(name: str, fixture: str = "onprem-gfd.yaml") -> dict[str, Any]:
    return copy.deepcopy(next(obj for obj in objects(fixture) if obj["metadata"]["name"] == name))


def pools_by_name(fragment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {pool["name"]: pool for pool in fragment["nodePools"]}


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "gpupolicy", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
    )
    assert "Traceback" not in completed.stderr, completed.stderr
    return completed


# -- node pools ---------------------------------------------------------------------------------


def test_gfd_nodes_form_pools_by_product_sharing_and_mig() -> None:
    pools = pools_by_name(facts_from_objects(objects("onprem-gfd.yaml")))
    assert sorted(pools) == [
        "nvidia-a100-sxm4-80gb",
        "nvidia-a100-sxm4-80gb-mig-1g.10gb",
        "nvidia-a100-sxm4-80gb-mig-2g.20gb",
        "nvidia-a100-sxm4-80gb-mig-3g.40gb",
        "nvidia-h100-80gb-hbm3",
        "nvidia-l4",
    ]
    # two A100 nodes, one cordoned with a GPU reported unhealthy: capacity is the hardware
    assert pools["nvidia-a100-sxm4-80gb"] == {
        "name": "nvidia-a100-sxm4-80gb",
        "vendor": "nvidia",
        "resource": "nvidia.com/gpu",
        "gpuProduct": "NVIDIA-A100-SXM4-80GB",
        "gpusPerNode": 8,
        "gpuMemoryMiB": 81920,
        "sharing": "none",
        "migStrategy": "none",
        "nodeLabels": {
            "nvidia.com/gpu.count": "8",
            "nvidia.com/gpu.family": "ampere",
            "nvidia.com/gpu.memory": "81920",
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/mig.config": "all-disabled",
            "nvidia.com/mig.strategy": "single",
        },
    }
    assert pools["nvidia-h100-80gb-hbm3"]["gpuMemoryMiB"] == 81559


def test_a_mig_mixed_node_is_one_pool_per_profile_with_the_profiles_memory() -> None:
    pools = pools_by_name(facts_from_objects(objects("onprem-gfd.yaml")))
    mig = {name: pool for name, pool in pools.items() if pool["migStrategy"] == "mixed"}
    assert {pool["resource"]: (pool["gpusPerNode"], pool["gpuMemoryMiB"]) for pool in mig.values()} == {
        "nvidia.com/mig-1g.10gb": (16, 9728),
        "nvidia.com/mig-2g.20gb": (8, 19968),
        "nvidia.com/mig-3g.40gb": (8, 40192),
    }
    # nvidia.com/gpu: "0" on the MIG node is no pool of whole GPUs
    assert all(pool["gpuProduct"] == "NVIDIA-A100-SXM4-80GB" for pool in mig.values())


def test_time_slicing_renamed_counts_physical_gpus() -> None:
    pool = pools_by_name(facts_from_objects(objects("onprem-gfd.yaml")))["nvidia-l4"]
    assert pool["resource"] == "nvidia.com/gpu.shared"  # capacity 16 = 4 GPUs x 4 replicas
    assert (pool["gpusPerNode"], pool["sharing"], pool["sharingReplicas"]) == (4, "time-slicing", 4)
    assert pool["gpuProduct"] == "NVIDIA-L4"


def test_time_slicing_without_renaming_strips_the_shared_suffix() -> None:
    shared = node("l4-1")
    shared["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-L4-SHARED"
    shared["status"]["capacity"] = {"nvidia.com/gpu": "16", "cpu": "48"}
    [pool] = facts_from_objects([shared], complete_kinds=["Node"])["nodePools"]
    assert (pool["resource"], pool["gpuProduct"], pool["gpusPerNode"]) == ("nvidia.com/gpu", "NVIDIA-L4", 4)
    # an older device plugin: -SHARED and replicas but no sharing-strategy label
    del shared["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"]
    [pool] = facts_from_objects([shared], complete_kinds=["Node"])["nodePools"]
    assert (pool["sharing"], pool["sharingReplicas"]) == ("time-slicing", 4)


def test_mps_and_mig_single() -> None:
    mps = node("l4-1")
    mps["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] = "mps"
    [pool] = facts_from_objects([mps], complete_kinds=["Node"])["nodePools"]
    assert pool["sharing"] == "mps"
    single = node("a100-1")
    labels = single["metadata"]["labels"]
    labels.update(
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "nvidia.com/gpu.count": "56"}
    )
    labels["nvidia.com/gpu.memory"] = "9728"
    single["status"]["capacity"]["nvidia.com/gpu"] = "56"
    [pool] = facts_from_objects([single], complete_kinds=["Node"])["nodePools"]
    assert (pool["migStrategy"], pool["gpuProduct"], pool["gpusPerNode"]) == (
        "single",
        "NVIDIA-A100-SXM4-80GB",
        56,
    )
    assert pool["gpuMemoryMiB"] == 9728  # what GFD labels, what a selector on gpu.memory matches


def test_gke_pools_time_sharing_and_accelerator_names() -> None:
    pools = pools_by_name(facts_from_objects(objects("gke-l4.json")))
    assert pools["l4-pool"]["gpuProduct"] == "nvidia-l4" and pools["l4-pool"]["gpusPerNode"] == 2
    shared = pools["t4-shared"]
    # GKE presents each GPU to the kubelet as max-shared-clients-per-gpu GPUs
    assert (shared["resource"], shared["gpusPerNode"], shared["sharing"], shared["sharingReplicas"]) == (
        "nvidia.com/gpu",
        1,
        "time-slicing",
        4,
    )
    assert shared["nodeLabels"]["cloud.google.com/gke-nodepool"] == "t4-shared"


def test_eks_node_group_and_karpenter_instance_sizes() -> None:
    fragment = read_cluster(objects("eks-karpenter.yaml"), complete_kinds=["Node"]).fragment
    pools = pools_by_name(fragment)
    assert sorted(pools) == ["gpu-1gpu", "gpu-4gpu", "gpu-a10g"]  # one NodePool, two instance sizes
    assert (pools["gpu-1gpu"]["gpuProduct"], pools["gpu-1gpu"]["gpuMemoryMiB"]) == ("l4", 22888)
    assert pools["gpu-4gpu"]["gpusPerNode"] == 4
    assert pools["gpu-a10g"]["nodeLabels"]["eks.amazonaws.com/nodegroup"] == "gpu-a10g"


def test_aks_pool_and_a_gpu_node_whose_device_plugin_has_not_registered() -> None:
    pools = pools_by_name(facts_from_objects(objects("aks-a100.yaml")))
    assert pools["gpunp"]["gpusPerNode"] == 1 and "gpuProduct" not in pools["gpunp"]
    waiting = node("ip-10-0-44-9.ec2.internal", "eks-karpenter.yaml")
    del waiting["status"]["capacity"]["nvidia.com/gpu"]
    [pool] = facts_from_objects([waiting], complete_kinds=["Node"])["nodePools"]
    assert (pool["resource"], pool["gpusPerNode"]) == ("nvidia.com/gpu", 4)  # from its Karpenter labels


# -- taints, labels, classes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "taints"),
    [
        # the cordoned node's node.kubernetes.io/unschedulable is its state, not its pool's
        ("onprem-gfd.yaml", [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "vendor": "nvidia"}]),
        (
            "gke-l4.json",
            [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present", "vendor": "nvidia"}],
        ),
        ("aks-a100.yaml", [{"key": "sku", "effect": "NoSchedule", "value": "gpu", "vendor": "nvidia"}]),
        # the node group is untainted: a pod without the toleration lands there
        ("eks-karpenter.yaml", []),
    ],
)
def test_gpu_taints_are_those_every_gpu_node_carries(fixture: str, taints: list[dict[str, str]]) -> None:
    facts = read_cluster(objects(fixture), complete_kinds=["Node"])
    assert facts.fragment["placement"]["gpuTaints"] == taints
    if fixture == "eks-karpenter.yaml":  # karpenter.sh/disrupted is transient; nvidia.com/gpu partial
        assert facts.notes == (
            "The taint nvidia.com/gpu:NoSchedule is on some nvidia GPU nodes only (pools gpu-1gpu, gpu-4gpu): "
            "not in placement.gpuTaints, since a pod without its toleration can land on the others",
        )


def test_a_taint_every_node_carries_is_no_gpu_taint() -> None:
    nodes = [node("cp-1"), node("a100-1")]
    for item in nodes:
        item["spec"]["taints"] = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    assert facts_from_objects(nodes, complete_kinds=["Node"])["placement"]["gpuTaints"] == []


def test_gke_adds_gpu_tolerations_itself() -> None:
    assert facts_from_objects(objects("gke-l4.json"))["placement"]["extendedResourceToleration"] is True
    assert "extendedResourceToleration" not in facts_from_objects(objects("onprem-gfd.yaml"))["placement"]


def test_label_keys_in_use_join_the_registry() -> None:
    fragment = facts_from_objects(objects("onprem-gfd.yaml"))
    assert fragment["placement"]["labelRegistryComplete"] is True
    assert fragment["nodeLabels"] == {
        "lab.example.com/rack": {
            "source": "cluster-snapshot",
            "owner": "unknown",
            "use": "requirement",
            "gpu": True,
            "description": "on 6 of 7 nodes, all with GPUs",
        },
        "node.kubernetes.io/exclude-from-external-load-balancers": {
            "source": "kubernetes",
            "owner": "kubernetes",
            "use": "requirement",
            "description": "on 1 of 7 nodes",
        },
        "nvidia.com/gpu-driver-upgrade-state": {
            "source": "gpu-operator",
            "owner": "unknown",
            "use": "requirement",
            "gpu": True,
            "description": "on 1 of 7 nodes, all with GPUs",
        },
    }
    # a key whose value is each node's name pins a pod to one node
    nodes = [node("a100-1"), node("h100-1")]
    for item in nodes:
        item["metadata"]["labels"]["lab.example.com/host"] = item["metadata"]["name"]
    assert facts_from_objects(nodes)["nodeLabels"]["lab.example.com/host"]["use"] == "preference"


def test_classes_are_named_only_from_complete_listings() -> None:
    fragment = facts_from_objects(objects("onprem-gfd.yaml"))
    assert fragment["priority"] == {
        "clusterClasses": ["gpu-serving", "gpu-training"],
        "kueueClasses": ["prod-training"],
    }
    assert fragment["placement"]["runtimeClass"] == {"names": ["nvidia"]}
    assert fragment["inventory"] == {
        "completeKinds": ["PriorityClass", "RuntimeClass", "WorkloadPriorityClass"]
    }
    assert facts_from_objects(objects("gke-l4.json"))["priority"]["globalDefault"] == "standard"
    partial = read_cluster(objects("onprem-gfd.yaml"), complete_kinds=["Node"])
    assert "priority" not in partial.fragment and "inventory" not in partial.fragment
    assert partial.unconfirmed["priority"]["clusterClasses"] == ["gpu-serving", "gpu-training"]
    # listed whole and empty: the cluster has none, and says so
    empty = facts_from_objects([], complete_kinds=["RuntimeClass", "WorkloadPriorityClass"])
    assert empty["placement"]["runtimeClass"] == {"names": []} and empty["priority"]["kueueClasses"] == []


def test_dra_gpu_classes_and_system_class_quotas_add_to_the_policy() -> None:
    fragment = facts_from_objects(objects("onprem-gfd.yaml"))
    base = default_policy().data["gpu"]["draDeviceClasses"]
    # a class selecting the GPU driver's devices; not NVIDIA's ComputeDomain classes
    assert fragment["gpu"]["draDeviceClasses"] == [*base, "h100.lab.example.com"]
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "system-classes", "namespace": "monitoring"},
        "spec": {
            "hard": {"pods": "20"},
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical"]}
                ]
            },
        },
    }
    closed = copy.deepcopy(quota)
    closed["metadata"]["namespace"], closed["spec"]["hard"]["pods"] = "tenants", "0"
    namespaces = facts_from_objects([quota, closed])["priority"]["systemNamespaces"]
    assert namespaces == [*default_policy().data["priority"]["systemNamespaces"], "monitoring"]


@pytest.mark.parametrize("fixture", FIXTURES)
def test_the_fragment_is_in_the_policy_schema_and_deterministic(fixture: str) -> None:
    items = objects(fixture)
    facts = read_cluster(items, complete_kinds=[*SNAPSHOT_KINDS])
    validate_layer(facts.fragment, None, fixture)
    shuffled = items[:]
    random.Random(13).shuffle(shuffled)
    assert read_cluster(shuffled, complete_kinds=[*SNAPSHOT_KINDS]).fragment == facts.fragment


def _private_values(items: list[dict[str, Any]]) -> set[str]:
    """What a snapshot must never copy: ids, annotations, addresses, heartbeats."""
    found: set[str] = set()
    for obj in items:
        metadata, spec, status = obj.get("metadata", {}), obj.get("spec") or {}, obj.get("status") or {}
        found.update([metadata.get("uid", ""), *metadata.get("annotations", {}).values()])
        found.add(str(spec.get("providerID", "")) if isinstance(spec, dict) else "")
        found.update(item.get("lastHeartbeatTime", "") for item in status.get("conditions", []))
        found.update(item.get("address", "") for item in status.get("addresses", []))
    return {value for value in found if len(value) >= 6}


@pytest.mark.parametrize("fixture", FIXTURES)
def test_the_written_file_loads_as_a_policy_and_copies_nothing_private(fixture: str, tmp_path: Path) -> None:
    read = read_file(str(DATA / fixture), default_policy(), complete=[], partial=False)
    facts = read_cluster(read.objects, complete_kinds=read.complete)
    text = render_snapshot(facts, source=read.source, taken=datetime(2025, 6, 11, 8, 0, tzinfo=UTC))
    target = tmp_path / "snapshot.yaml"
    target.write_text(text)
    load_policy(extra=[target])
    # what was seen in part is written commented out, and is itself a valid policy layer
    if facts.unconfirmed:
        block = text.split(UNCONFIRMED_START + "\n", 1)[1]
        uncommented = yaml.safe_load("\n".join(line.removeprefix("# ") for line in block.splitlines()))
        assert uncommented == facts.unconfirmed
        validate_layer(uncommented, None, "unconfirmed")
    private = _private_values(read.objects)
    assert private and not [value for value in private if value in text]
    assert "2025-06-11T08:00:00Z" in text  # when it was taken


# -- what the facts turn on -----------------------------------------------------------------------


def _lint(path: Path, policy_files: list[Path]) -> list[Any]:
    policy = load_policy(extra=policy_files)
    loaded = load_file(path)
    return evaluate(loaded.resources, policy, problems=loaded.problems).findings


def test_a_snapshot_turns_the_example_deployments_unknowns_into_findings(tmp_path: Path) -> None:
    """The issue's "done when": a snapshot of a recorded GPU cluster turns the example deployments'
    unknowns into definite findings."""
    before = [f for f in _lint(BAD_RESOURCES, []) if f.rule_id in CLUSTER_RULES]
    assert before and all(f.severity is Severity.INFO and f.extra.get("clusterFact") for f in before)
    snapshot = tmp_path / "cluster-snapshot.yaml"
    assert main(["cluster", "snapshot", "--from", str(DATA / "onprem-gfd.yaml"), "-o", str(snapshot)]) == 0
    after = [f for f in _lint(BAD_RESOURCES, [snapshot]) if f.rule_id in CLUSTER_RULES]
    assert not [f for f in after if f.extra.get("clusterFact")]
    found = {(f.rule_id, f.severity, f.object.name) for f in after}
    assert found == {
        ("GP108", Severity.ERROR, "too-big"),  # 16 GPUs, the largest pool has 8 per node
        ("GP201", Severity.WARNING, "tgi"),  # A100, H100 and L4 nodes offer nvidia.com/gpu
        ("GP201", Severity.WARNING, "too-big"),
        ("GP202", Severity.WARNING, "tgi"),  # every GPU node is tainted nvidia.com/gpu
        ("GP202", Severity.WARNING, "too-big"),
        ("GP301", Severity.WARNING, "tgi"),  # the cluster has gpu-serving and gpu-training
        ("GP301", Severity.WARNING, "too-big"),
    }


def test_the_same_through_the_command_line(tmp_path: Path) -> None:
    written = run_cli(
        "cluster", "snapshot", "--from", str(DATA / "onprem-gfd.yaml"), "-o", str(tmp_path / "s.yaml")
    )
    assert written.returncode == 0 and written.stdout == ""
    assert written.stderr.strip() == (
        f"gpupolicy: wrote {tmp_path / 's.yaml'}: 6 node pools from 7 nodes (6 with GPUs)"
    )
    linted = run_cli(
        "lint",
        "--no-repo-policy",
        "--policy",
        str(tmp_path / "s.yaml"),
        "--format",
        "json",
        str(BAD_RESOURCES),
    )
    assert linted.returncode == 1
    report = json.loads(linted.stdout)
    severities = {(f["rule"], f["severity"]) for f in report["findings"] if f["rule"] in CLUSTER_RULES}
    assert severities == {
        ("GP108", "error"),
        ("GP201", "warning"),
        ("GP202", "warning"),
        ("GP301", "warning"),
    }


def test_on_gke_the_api_server_tolerates_and_the_global_default_prioritises(tmp_path: Path) -> None:
    snapshot = tmp_path / "gke.yaml"
    assert main(["cluster", "snapshot", "--from", str(DATA / "gke-l4.json"), "-o", str(snapshot)]) == 0
    found = {f.rule_id for f in _lint(BAD_RESOURCES, [snapshot]) if f.rule_id in CLUSTER_RULES}
    # ExtendedResourceToleration adds the nvidia.com/gpu toleration; `standard` is the global default
    assert found == {"GP108", "GP201"}


def test_gp301_reads_the_clusters_global_default(lint_text: LintText) -> None:
    server = (REPO / "gpupolicy" / "rules" / "examples" / "GP301" / "fires.yaml").read_text()
    classes = {"priority": {"clusterClasses": ["gpu-serving"]}}
    assert [f.rule_id for f in lint_text(server, classes).findings if f.rule_id == "GP301"]
    defaulted = {"priority": {"clusterClasses": ["gpu-serving"], "globalDefault": "standard"}}
    assert not [f for f in lint_text(server, defaulted).findings if f.rule_id == "GP301"]


def test_gp301_is_silent_on_a_cluster_known_to_have_no_classes(lint_text: LintText) -> None:
    server = (REPO / "gpupolicy" / "rules" / "examples" / "GP301" / "fires.yaml").read_text()
    complete = {"inventory": {"completeKinds": ["PriorityClass"]}}
    assert not [f for f in lint_text(server, complete).findings if f.rule_id == "GP301"]


# -- reading files ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "options", "complete"),
    [
        # kubectl's List of cluster-scoped kinds: every object of each kind it holds
        (
            "onprem-gfd.yaml",
            [],
            ["DeviceClass", "Namespace", "Node", "PriorityClass", "RuntimeClass", "WorkloadPriorityClass"],
        ),
        ("gke-l4.json", [], ["Node", "PriorityClass"]),
        ("onprem-gfd.yaml", ["--partial"], []),
        # objects one by one: nothing certain, unless said
        ("eks-karpenter.yaml", [], []),
        ("eks-karpenter.yaml", ["--complete", "Node"], ["Node"]),
    ],
)
def test_which_kinds_a_file_holds_completely(fixture: str, options: list[str], complete: list[str]) -> None:
    partial = "--partial" in options
    named = [options[1]] if "--complete" in options else []
    read = read_file(str(DATA / fixture), default_policy(), complete=named, partial=partial)
    assert sorted(read.complete) == complete


def test_a_partial_listing_writes_its_pools_commented_out(tmp_path: Path) -> None:
    out = tmp_path / "eks.yaml"
    result = run_cli("cluster", "snapshot", "--from", str(DATA / "eks-karpenter.yaml"), "-o", str(out))
    assert result.returncode == 0
    assert "0 node pools, 3 more seen in part (commented out)" in result.stderr
    policy = load_policy(extra=[out])
    assert policy.data["nodePools"] == [] and policy.data["placement"]["gpuTaints"] is None
    assert "# nodePools:\n# - name: gpu-1gpu" in out.read_text()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: [\n",
            "bad.yaml:6:1: YAML syntax error",
        ),
        ("just: a mapping\n", "bad.yaml: holds no Kubernetes objects"),
        ("", "bad.yaml: holds no Kubernetes objects"),
        (
            "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
            "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
            "cannot read value",
        ),
    ],
)
def test_a_bad_file_is_one_line_and_exit_2(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bad.yaml").write_text(text)
    result = run_cli("cluster", "snapshot", "--from", "bad.yaml", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr


def test_usage_errors(tmp_path: Path) -> None:
    assert run_cli("cluster", "snapshot", "--from", "missing.yaml", cwd=tmp_path).returncode == 2
    mixed = run_cli("cluster", "snapshot", "--from", str(DATA / "aks-a100.yaml"), "--context", "prod")
    assert mixed.returncode == 2 and "do not go with --from" in mixed.stderr


# -- the live cluster -----------------------------------------------------------------------------


def test_every_kind_read_has_a_listing() -> None:
    assert [listing.kind for listing in LISTINGS] == list(SNAPSHOT_KINDS)


def test_without_the_kubernetes_client_a_live_snapshot_is_one_line(tmp_path: Path) -> None:
    script = (
        "import sys; sys.modules['kubernetes'] = None\n"
        "from gpupolicy.cli.main import main\n"
        "raise SystemExit(main(['cluster', 'snapshot']))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert completed.returncode == 2 and "Traceback" not in completed.stderr
    assert completed.stderr.strip() == (
        "gpupolicy: a live snapshot needs the kubernetes client: pip install 'gpupolicy[webhook]' "
        "(or use --from FILE with the output of kubectl get ... -o yaml)"
    )


# -- init -------------------------------------------------------------------------------------------


def test_init_writes_a_commented_policy_whose_examples_load(tmp_path: Path) -> None:
    assert main(["init", str(tmp_path)]) == 0
    text = (tmp_path / ".gpupolicy.yaml").read_text()
    policy = load_policy(repo_policy=tmp_path / ".gpupolicy.yaml")
    assert policy.data["nodePools"] == []  # everything about the cluster is commented out
    block = text.split(EXAMPLES_START + "\n", 1)[1].split(EXAMPLES_END, 1)[0]
    examples = yaml.safe_load(
        "\n".join(line.removeprefix("#").removeprefix(" ") for line in block.splitlines())
    )
    validate_layer(examples, None, "examples")
    assert "gpupolicy cluster snapshot -o cluster-snapshot.yaml" in text
    # what each fact turns on names rules that exist
    for line in text.splitlines():
        for word in line.replace(",", " ").split():
            if word.startswith("GP") and word[2:].isdigit():
                assert word in REGISTRY, word
    assert "placement.gpuTaints: GP202 gpu-pod-without-gpu-toleration, GP203" in text


def test_init_refuses_to_overwrite_and_extends_a_snapshot(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gpupolicy.yaml").write_text("failOn: warning\n")
    refused = run_cli("init", str(repo))
    assert refused.returncode == 2 and "exists; --force overwrites it" in refused.stderr
    assert (repo / ".gpupolicy.yaml").read_text() == "failOn: warning\n"
    snapshot = tmp_path / "cluster" / "snapshot.yaml"
    assert main(["cluster", "snapshot", "--from", str(DATA / "onprem-gfd.yaml"), "-o", str(snapshot)]) == 0
    assert main(["init", str(repo), "--snapshot", str(snapshot), "--force"]) == 0
    text = (repo / ".gpupolicy.yaml").read_text()
    assert "extends: ../cluster/snapshot.yaml" in text and EXAMPLES_START not in text
    policy = load_policy(repo_policy=repo / ".gpupolicy.yaml")
    assert len(policy.data["nodePools"]) == 6 and policy.data["placement"]["labelRegistryComplete"] is True
    broken = tmp_path / "broken.yaml"
    broken.write_text("nodePools: [{name: x}]\n")
    bad = run_cli("init", str(repo), "--snapshot", str(broken), "--force")
    assert bad.returncode == 2 and "gpusPerNode" in bad.stderr


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    pytest.importorskip("kubernetes")
    from tests.webhook.fake_apiserver import Collection, FakeApiServer

    fake = FakeApiServer()
    recorded = objects("onprem-gfd.yaml")
    paths = {
        "Node": ("/api/v1/nodes", "NodeList", "v1"),
        "PriorityClass": (
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            "PriorityClassList",
            "scheduling.k8s.io/v1",
        ),
        "RuntimeClass": ("/apis/node.k8s.io/v1/runtimeclasses", "RuntimeClassList", "node.k8s.io/v1"),
        "Namespace": ("/api/v1/namespaces", "NamespaceList", "v1"),
        "NetworkPolicy": (
            "/apis/networking.k8s.io/v1/networkpolicies",
            "NetworkPolicyList",
            "networking.k8s.io/v1",
        ),
        "ResourceQuota": ("/api/v1/resourcequotas", "ResourceQuotaList", "v1"),
        "LimitRange": ("/api/v1/limitranges", "LimitRangeList", "v1"),
        # Kueue serves v1beta1 only; resource.k8s.io serves v1
        "WorkloadPriorityClass": (
            "/apis/kueue.x-k8s.io/v1beta1/workloadpriorityclasses",
            "WorkloadPriorityClassList",
            "kueue.x-k8s.io/v1beta1",
        ),
        "DeviceClass": ("/apis/resource.k8s.io/v1/deviceclasses", "DeviceClassList", "resource.k8s.io/v1"),
    }
    for kind, (path, list_kind, api_version) in paths.items():
        items = {
            (str(obj["metadata"].get("namespace") or ""), obj["metadata"]["name"]): obj
            for obj in recorded
            if obj["kind"] == kind
        }
        fake.collections[path] = Collection(list_kind=list_kind, api_version=api_version, items=items)
    fake.start()
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "recorded", "cluster": {"server": fake.url}}],
                "users": [{"name": "reader", "user": {"token": "test-token"}}],
                "contexts": [{"name": "recorded-gpu", "context": {"cluster": "recorded", "user": "reader"}}],
                "current-context": "recorded-gpu",
            }
        )
    )
    try:
        yield config, fake
    finally:
        fake.stop()


@pytest.mark.timeout(60)
def test_a_live_snapshot_reads_what_the_file_holds(kubeconfig: tuple[Path, Any], tmp_path: Path) -> None:
    config, fake = kubeconfig
    out = tmp_path / "live.yaml"
    assert main(["cluster", "snapshot", "--kubeconfig", str(config), "-o", str(out)]) == 0
    live = yaml.safe_load(out.read_text())
    from_file = facts_from_objects(objects("onprem-gfd.yaml"))
    assert {key: live[key] for key in from_file} == from_file
    assert "from the cluster of kubeconfig context recorded-gpu" in out.read_text().replace("\n# ", " ")
    # list calls only, in pages; Kueue's v1beta2 is not served (404) and v1beta1 is
    assert all(line.split("?")[0].startswith(("/api/", "/apis/")) for line in fake.requests)
    assert any("limit=500" in line for line in fake.requests if line.startswith("/api/v1/nodes"))
    assert any(line.startswith("/apis/kueue.x-k8s.io/v1beta2/") for line in fake.requests)


@pytest.mark.timeout(60)
def test_a_kind_the_reader_may_not_list_is_left_out(
    kubeconfig: tuple[Path, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, fake = kubeconfig
    fake.forbid("/apis/scheduling.k8s.io/v1/priorityclasses")
    out = tmp_path / "live.yaml"
    assert main(["cluster", "snapshot", "--kubeconfig", str(config), "-o", str(out)]) == 0
    assert "not allowed to list PriorityClass (HTTP 403): its facts are left out" in capsys.readouterr().err
    policy = load_policy(extra=[out])
    assert (
        policy.data["priority"]["clusterClasses"] == []
        and "PriorityClass" not in policy.data["inventory"]["completeKinds"]
    )
    assert policy.data["nodePools"]


def test_an_unreachable_cluster_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("kubernetes")
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
    )
    assert main(["cluster", "snapshot", "--kubeconfig", str(config)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("gpupolicy: cannot list Node from the cluster of kubeconfig context x")
        and "Traceback" not in err
    )


# -- whatever a file holds ----------------------------------------------------------------------

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=12)
    | st.sampled_from(["8", "0", "-1", "1.5", "1e3", "16Ki"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
_LABEL_KEYS = st.sampled_from(
    [
        "nvidia.com/gpu.product",
        "nvidia.com/gpu.replicas",
        "nvidia.com/gpu.sharing-strategy",
        "nvidia.com/gpu.count",
        "cloud.google.com/gke-accelerator",
        "cloud.google.com/gke-accelerator-count",
        "karpenter.sh/nodepool",
        "amd.com/gpu.vram",
        "x",
    ]
)


@st.composite
def hostile_nodes(draw: st.DrawFn) -> dict[str, Any]:
    resources = st.sampled_from(
        ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "cpu"]
    )
    return {
        "kind": draw(st.sampled_from(["Node", "PriorityClass", "DeviceClass", "ResourceQuota"])),
        "metadata": draw(
            st.fixed_dictionaries(
                {"name": _SCALARS, "labels": st.dictionaries(_LABEL_KEYS, _VALUES, max_size=5) | _VALUES}
            )
        ),
        "spec": draw(
            _VALUES
            | st.fixed_dictionaries(
                {"taints": st.lists(st.dictionaries(st.sampled_from(["key", "effect", "value"]), _VALUES))}
            )
        ),
        "status": draw(
            _VALUES | st.fixed_dictionaries({"capacity": st.dictionaries(resources, _VALUES, max_size=3)})
        ),
        "globalDefault": draw(_VALUES),
    }


@settings(max_examples=100, deadline=None)
@given(st.lists(hostile_nodes(), max_size=6))
def test_any_objects_give_a_fragment_in_the_schema(items: list[dict[str, Any]]) -> None:
    facts = read_cluster(items, complete_kinds=[*SNAPSHOT_KINDS])
    validate_layer(facts.fragment, None, "hostile")


def test_a_namespaced_kind_counts_as_listed_whole_when_it_spans_namespaces(tmp_path: Path) -> None:
    listed = tmp_path / "list.yaml"
    listed.write_text(
        "apiVersion: v1\nkind: List\nitems:\n"
        "- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: deny, namespace: ai-lab}}\n"
        "- {apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: deny, namespace: serving}}\n"
        "- {apiVersion: v1, kind: LimitRange, metadata: {name: defaults, namespace: ai-lab}}\n"
    )
    # kubectl lists one namespace without -A: one namespace proves nothing
    assert read_file(str(listed), default_policy(), complete=[], partial=False).complete == {"NetworkPolicy"}
