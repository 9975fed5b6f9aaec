"""PDB ↔ workload matching, HPA targeting, and percentages rounded as the disruption controller does."""

from __future__ import annotations

from typing import Any

import pytest

from gpupolicy.kube.disruption import (
    Budget,
    IntOrPercent,
    budget_of,
    expected_pods,
    first_shared,
    hpa_for,
    max_pods,
    namespace_pdbs,
    parse_int_or_percent,
    pdb_selects,
    pdb_selects_template,
    pdbs_for,
    selected_templates,
    selected_workloads,
    selecting,
    workload_kinds,
)
from gpupolicy.kube.inventory import Bundle
from gpupolicy.kube.pod_spec import Workload, workload_of
from gpupolicy.loading.documents import Resource
from tests.conftest import LintText


def resource(obj: dict[str, Any]) -> Resource:
    return Resource(obj, file="t.yaml", doc_index=0)


def deployment(
    name: str = "llm", *, namespace: str = "ai-lab", replicas: int = 2, labels: dict[str, str] | None = None
) -> Resource:
    return resource(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "template": {
                    "metadata": {"labels": labels or {"app": name}},
                    "spec": {"containers": [{"name": "c"}]},
                },
            },
        }
    )


def pdb(name: str, selector: Any, *, namespace: str = "ai-lab", **spec: Any) -> Resource:
    return resource(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": selector, **spec},
        }
    )


def hpa(
    target: str, *, min_replicas: int | None = 3, max_replicas: int = 8, namespace: str = "ai-lab"
) -> Resource:
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
        "maxReplicas": max_replicas,
    }
    if min_replicas is not None:
        spec["minReplicas"] = min_replicas
    return resource(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": target, "namespace": namespace},
            "spec": spec,
        }
    )


def as_workload(found: Resource) -> Workload:
    workload = workload_of(found)
    assert workload is not None
    return workload


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        (2, IntOrPercent(2, False)),
        ("50%", IntOrPercent(50, True)),
        ("0%", IntOrPercent(0, True)),
        ("2", None),
        (-1, None),
        (True, None),
    ],
)
def test_parse_int_or_percent(raw: Any, parsed: IntOrPercent | None) -> None:
    assert parse_int_or_percent(raw) == parsed


def test_min_available_percent_rounds_up() -> None:
    # The docs' example: 7 pods, minAvailable 50% -> 4 must stay available.
    budget = Budget("minAvailable", IntOrPercent(50, True))
    assert budget.desired_healthy(7) == 4
    assert budget.disruptions_allowed(7) == 3


def test_max_unavailable_percent_rounds_up_too() -> None:
    # getExpectedPodCount scales maxUnavailable with roundUp=true: 30% of 7 = 2.1 -> 3 may be unavailable.
    budget = Budget("maxUnavailable", IntOrPercent(30, True))
    assert budget.desired_healthy(7) == 4
    assert budget.disruptions_allowed(7) == 3
    # ...so any non-zero percentage of a non-empty workload allows one eviction.
    assert Budget("maxUnavailable", IntOrPercent(1, True)).disruptions_allowed(2) == 1


def test_integer_budgets() -> None:
    assert Budget("minAvailable", IntOrPercent(2, False)).disruptions_allowed(2) == 0
    assert Budget("minAvailable", IntOrPercent(1, False)).disruptions_allowed(2) == 1
    assert Budget("maxUnavailable", IntOrPercent(5, False)).desired_healthy(3) == 0


def test_blocks_always() -> None:
    assert Budget("maxUnavailable", IntOrPercent(0, False)).blocks_always()
    assert Budget("maxUnavailable", IntOrPercent(0, True)).blocks_always()
    assert Budget("minAvailable", IntOrPercent(100, True)).blocks_always()
    assert not Budget("minAvailable", IntOrPercent(100, False)).blocks_always()  # depends on the replicas
    assert not Budget("maxUnavailable", IntOrPercent(1, False)).blocks_always()


def test_budget_of_reads_either_field() -> None:
    assert budget_of(pdb("a", {}, minAvailable="90%")) == Budget("minAvailable", IntOrPercent(90, True))
    assert budget_of(pdb("a", {}, maxUnavailable=1)) == Budget("maxUnavailable", IntOrPercent(1, False))
    assert budget_of(pdb("a", {})) is None
    assert budget_of(pdb("a", {}, minAvailable="two")) is None


def test_pdb_selects_by_namespace_and_labels() -> None:
    llm = as_workload(deployment())
    assert pdb_selects(pdb("a", {"matchLabels": {"app": "llm"}}), llm)
    assert not pdb_selects(pdb("a", {"matchLabels": {"app": "llm"}}, namespace="other"), llm)
    assert not pdb_selects(pdb("a", {"matchLabels": {"app": "other"}}), llm)
    assert pdb_selects(
        pdb("a", {"matchExpressions": [{"key": "app", "operator": "In", "values": ["llm"]}]}), llm
    )


def test_empty_selector_selects_all_and_null_selects_none() -> None:
    llm = as_workload(deployment())
    assert pdb_selects(pdb("a", {}), llm)
    assert not pdb_selects(pdb("a", None), llm)


def test_pdbs_for_and_selected_workloads_go_through_the_inventory() -> None:
    llm, gateway = deployment(), deployment("gateway")
    guard = pdb("llm", {"matchLabels": {"app": "llm"}})
    bundle = Bundle([llm, gateway, guard, pdb("elsewhere", {"matchLabels": {"app": "llm"}}, namespace="x")])
    assert pdbs_for(as_workload(llm), bundle) == [guard]
    assert [w.name for w in selected_workloads(guard, bundle, workload_kinds())] == ["llm"]


def test_expected_pods_uses_the_hpa_min_replicas_when_an_hpa_targets_the_workload() -> None:
    llm = deployment(replicas=4)
    scaler = hpa("llm", min_replicas=2)
    bundle = Bundle([llm, scaler])
    found = expected_pods(as_workload(llm), bundle)
    assert found is not None and found.count == 2 and found.hpa is scaler
    assert found.source == "minReplicas 2 of HorizontalPodAutoscaler ai-lab/llm"
    assert max_pods(as_workload(llm), bundle) == 8


def test_hpa_min_replicas_defaults_to_one_and_must_be_in_the_namespace() -> None:
    llm = deployment(replicas=4)
    assert hpa_for(as_workload(llm), Bundle([hpa("llm", namespace="other")])) is None
    found = expected_pods(as_workload(llm), Bundle([llm, hpa("llm", min_replicas=None)]))
    assert found is not None and found.count == 1


def test_expected_pods_without_hpa_is_the_declared_replicas() -> None:
    llm = deployment(replicas=3)
    found = expected_pods(as_workload(llm), Bundle([llm]))
    assert found is not None and (found.count, found.source) == (3, "replicas 3 of Deployment ai-lab/llm")


def test_overlap_is_found_through_a_workload_both_select() -> None:
    llm = as_workload(deployment(labels={"app": "llm", "tier": "gpu"}))
    by_app = pdb("a", {"matchLabels": {"app": "llm"}})
    by_tier = pdb("b", {"matchLabels": {"tier": "gpu"}})
    other = pdb("c", {"matchLabels": {"app": "gateway"}})
    gateway = as_workload(deployment(labels={"app": "gateway"}))
    workloads = [gateway, llm]
    by_app_selects, other_selects = (
        selected_templates(by_app, workloads),
        selected_templates(other, workloads),
    )
    assert first_shared(by_app_selects, selected_templates(by_tier, workloads), workloads) is llm
    assert first_shared(by_app_selects, other_selects, workloads) is None
    assert other_selects == {(0, 0)}


def test_controller_labels_count_as_pod_labels() -> None:
    isvc = as_workload(
        resource(
            {
                "apiVersion": "serving.kserve.io/v1beta1",
                "kind": "InferenceService",
                "metadata": {"name": "llama", "namespace": "ai-lab"},
                "spec": {"predictor": {"minReplicas": 2, "model": {"modelFormat": {"name": "huggingface"}}}},
            }
        )
    )
    assert pdb_selects(pdb("a", {"matchLabels": {"serving.kserve.io/inferenceservice": "llama"}}), isvc)
    assert not pdb_selects(pdb("a", {"matchLabels": {"serving.kserve.io/inferenceservice": "other"}}), isvc)


def nim_service(*, platform: str | None = None) -> Workload:
    spec: dict[str, Any] = {"image": {"repository": "nvcr.io/nim/meta/llama", "tag": "1.3.3"}, "replicas": 2}
    if platform is not None:
        spec["inferencePlatform"] = platform
    return as_workload(
        resource(
            {
                "apiVersion": "apps.nvidia.com/v1alpha1",
                "kind": "NIMService",
                "metadata": {"name": "llama", "namespace": "ai-lab"},
                "spec": spec,
            }
        )
    )


def test_the_nim_operator_labels_the_pods_of_its_own_deployment_app_name() -> None:
    by_app = pdb("a", {"matchLabels": {"app": "llama"}})
    for platform in (None, "", "standalone"):
        assert pdb_selects(by_app, nim_service(platform=platform)), platform
    assert not pdb_selects(pdb("a", {"matchLabels": {"app": "other"}}), nim_service())
    # Served through KServe, the pods are KServe's: the operator's `app` label is not theirs.
    assert not pdb_selects(by_app, nim_service(platform="kserve"))


def ray(kind: str, *, worker_labels: dict[str, str] | None = None, group_labels: Any = None) -> Workload:
    """A KubeRay object of `kind` named llm: a head and a worker group `gpu` of 4 pods."""
    worker: dict[str, Any] = {
        "groupName": "gpu",
        "replicas": 4,
        "template": {"metadata": {"labels": worker_labels or {}}, "spec": {"containers": [{"name": "w"}]}},
    }
    if group_labels is not None:
        worker["labels"] = group_labels
    cluster = {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "h"}]}}},
        "workerGroupSpecs": [worker],
    }
    spec = {"rayClusterConfig": cluster} if kind == "RayService" else cluster
    metadata = {"name": "llm", "namespace": "ai-lab"}
    return as_workload(
        resource({"apiVersion": "ray.io/v1", "kind": kind, "metadata": metadata, "spec": spec})
    )


def selects_workers(selector: dict[str, Any], workload: Workload) -> bool:
    head, worker = workload.templates
    assert (head.role, worker.role) == ("head", "worker gpu")
    return pdb_selects_template(pdb("a", selector), workload, worker)


def test_kuberay_labels_every_ray_pod_with_its_node_type_group_and_cluster() -> None:
    cluster = ray("RayCluster")
    workers = {"matchLabels": {"ray.io/cluster": "llm", "ray.io/node-type": "worker"}}
    assert selects_workers(workers, cluster)
    assert selects_workers({"matchLabels": {"ray.io/group": "gpu", "ray.io/is-ray-node": "yes"}}, cluster)
    assert selects_workers({"matchLabels": {"app.kubernetes.io/created-by": "kuberay-operator"}}, cluster)
    assert not selects_workers({"matchLabels": {"ray.io/node-type": "head"}}, cluster)
    head_only = pdb("a", {"matchLabels": {"ray.io/group": "headgroup"}})
    assert pdb_selects_template(head_only, cluster, cluster.templates[0])
    assert not selects_workers({"matchLabels": {"ray.io/cluster": "other"}}, cluster)


def test_a_rayservice_cluster_has_a_generated_name_so_its_pods_are_not_labelled_with_the_service() -> None:
    service = ray("RayService")
    assert selects_workers({"matchLabels": {"ray.io/node-type": "worker", "ray.io/group": "gpu"}}, service)
    assert not selects_workers({"matchLabels": {"ray.io/cluster": "llm"}}, service)


def test_kuberay_merges_the_group_labels_and_keeps_its_own_node_type() -> None:
    # A template's label cannot override the node type, group or cluster; the group's top-level
    # `labels` (KubeRay 1.5+) win over the template's; both override the other operator labels.
    cluster = ray(
        "RayCluster",
        worker_labels={"ray.io/node-type": "head", "tier": "a", "app.kubernetes.io/name": "mine"},
        group_labels={"tier": "b"},
    )
    assert selects_workers({"matchLabels": {"ray.io/node-type": "worker", "tier": "b"}}, cluster)
    assert selects_workers({"matchLabels": {"app.kubernetes.io/name": "mine"}}, cluster)
    assert not selects_workers({"matchLabels": {"tier": "a"}}, cluster)
    assert not selects_workers({"matchLabels": {"ray.io/node-type": "head"}}, cluster)
    # Not a mapping: ignored, as the operator's API would refuse it.
    assert selects_workers({"matchLabels": {"ray.io/group": "gpu"}}, ray("RayCluster", group_labels=["x"]))


def test_gp503_accepts_a_pdb_of_a_ray_clusters_workers(lint_text: LintText) -> None:
    text = """
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: llm, namespace: ml}
spec:
  headGroupSpec:
    template:
      spec:
        containers: [{name: head, image: "rayproject/ray:2.40.0"}]
  workerGroupSpecs:
    - groupName: gpu
      replicas: 4
      template:
        spec:
          containers:
            - name: worker
              image: "rayproject/ray:2.40.0"
              resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: llm-workers, namespace: ml}
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {ray.io/cluster: llm, ray.io/node-type: worker}
"""
    assert "GP503" in {
        f.rule_id for f in lint_text(text.replace("ray.io/cluster: llm", "ray.io/cluster: x")).findings
    }
    assert "GP503" not in {f.rule_id for f in lint_text(text).findings}


def test_gp501_names_the_labels_a_pdb_could_select_the_pods_by(lint_text: LintText) -> None:
    lws = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: vllm, namespace: ai-lab}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    leaderTemplate:
      spec:
        containers:
          - name: leader
            image: vllm/vllm-openai:v0.6.3
            command: [vllm, serve, /models/llama, --port, "8000"]
            ports: [{containerPort: 8000}]
            resources: {limits: {nvidia.com/gpu: 8}}
"""
    llmisvc = """
apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceService
metadata: {name: qwen, namespace: ai-lab}
spec:
  replicas: 2
  model: {uri: "hf://Qwen/Qwen2.5-7B-Instruct"}
  template:
    containers:
      - name: main
        image: vllm/vllm-openai:v0.6.3
        resources: {limits: {nvidia.com/gpu: 1}}
"""
    report = lint_text(lws + "---\n" + llmisvc)
    messages = {f.object.kind: f.message for f in report.findings if f.rule_id == "GP501" and f.object}
    # The controller's own label is on every LeaderWorkerSet pod: a PDB may select by it.
    assert "(pod labels: leaderworkerset.sigs.k8s.io/name=vllm)" in messages["LeaderWorkerSet"]
    # KServe's controller labels the pods it builds from the spec; the manifest does not say how.
    assert (
        "none in the manifest; the LLMInferenceService controller sets its pods' labels"
        in (messages["LLMInferenceService"])
    )


def test_pod_labels_match_as_text_and_every_view_of_the_object_reads_them() -> None:
    # Labels the YAML wrote as numbers or nulls match as the API server reads them (text, "" for
    # null); they are made text once per template, so a second view of the object (GP504 and the
    # streaming lint make several) matches the same way, and a PDB of another namespace never does.
    numbered = deployment(labels={"app": "llm", "shard": 1, "canary": None})  # type: ignore[dict-item]
    first, second = as_workload(numbered), as_workload(numbered)
    by_text = pdb("a", {"matchLabels": {"shard": "1", "canary": ""}})
    by_expression = pdb("b", {"matchExpressions": [{"key": "shard", "operator": "In", "values": [1]}]})
    for view in (first, second):
        assert pdb_selects(by_text, view) and pdb_selects(by_expression, view)
        assert not pdb_selects(pdb("c", {"matchLabels": {"shard": "2"}}), view)
        assert not pdb_selects(pdb("a", {"matchLabels": {"shard": "1"}}, namespace="other"), view)


def test_pdb_rules_read_the_namespace_workloads_once_and_agree_with_selected_workloads() -> None:
    from gpupolicy.engine.evaluation import evaluate
    from gpupolicy.policy.loading import default_policy

    llm, gateway, other = deployment(replicas=2), deployment("gateway"), deployment("llm", namespace="x")
    guards = [
        pdb("llm", {"matchLabels": {"app": "llm"}}, minAvailable=2),  # GP502: no eviction at 2 replicas
        pdb("nothing", {"matchLabels": {"app": "gone"}}, maxUnavailable=1),  # GP503
        pdb("gateway", {"matchLabels": {"app": "gateway"}}, maxUnavailable=1),
    ]
    objects = [llm, gateway, other, *guards]
    report = evaluate(objects, default_policy())
    found = sorted((f.rule_id, f.object.name) for f in report.findings if f.rule_id in ("GP502", "GP503"))
    assert found == [("GP502", "llm"), ("GP503", "nothing")]
    bundle = Bundle(objects)
    assert [[w.name for w in selected_workloads(guard, bundle, workload_kinds())] for guard in guards] == [
        ["llm"],
        [],
        ["gateway"],
    ]


def test_pdb_overlap_compares_each_pdb_with_every_other_of_its_namespace_only() -> None:
    from gpupolicy.engine.evaluation import evaluate
    from gpupolicy.policy.loading import default_policy

    llm = deployment(labels={"app": "llm", "tier": "gpu"})
    gateway = deployment("gateway", labels={"app": "gateway", "tier": "cpu"})
    guards = [
        pdb("by-app", {"matchLabels": {"app": "llm"}}, maxUnavailable=1),
        pdb("by-tier", {"matchLabels": {"tier": "gpu"}}, maxUnavailable=1),  # the pods of llm, as by-app
        pdb("gone-1", {"matchLabels": {"app": "gone"}}, maxUnavailable=1),
        pdb("gone-2", {"matchLabels": {"app": "gone"}}, maxUnavailable=1),  # the same selector
        pdb("gateway", {"matchLabels": {"app": "gateway"}}, maxUnavailable=1),
        pdb("by-app", {"matchLabels": {"app": "llm"}}, namespace="x", maxUnavailable=1),
    ]
    report = evaluate([llm, gateway, *guards], default_policy())
    found = sorted(
        (f.object.namespace, f.object.name, f.message.split(" both select ")[1])
        for f in report.findings
        if f.rule_id == "GP504" and f.object is not None
    )
    assert found == [
        ("ai-lab", "by-app", "the pods of Deployment ai-lab/llm; such pods cannot be evicted"),
        ("ai-lab", "by-tier", "the pods of Deployment ai-lab/llm; such pods cannot be evicted"),
        ("ai-lab", "gone-1", "the same selector; such pods cannot be evicted"),
        ("ai-lab", "gone-2", "the same selector; such pods cannot be evicted"),
    ]


def test_pdbs_for_and_selected_templates_agree_with_matching_each_pair() -> None:
    """pdbs_for and selected_templates read a PDB's namespace and selector once: they must pick
    what `pdb_selects` picks pair by pair, an unnamespaced PDB (listed in every namespace, of
    `default`) and selectors the API server refuses included."""
    workloads = [
        deployment("a", labels={"app": "a", "tier": "gpu"}),
        deployment("b", labels={"app": "b"}),
        deployment("c", namespace="default", labels={"app": "c"}),
    ]
    selectors: list[Any] = [
        {"matchLabels": {"app": "a"}},
        {
            "matchLabels": {"tier": "gpu"},
            "matchExpressions": [{"key": "app", "operator": "In", "values": ["a"]}],
        },
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]},
        {"matchExpressions": "app"},
        {},
        None,
        "app=a",
    ]
    pdbs = [pdb(f"p{index}", selector) for index, selector in enumerate(selectors)]
    unnamespaced = resource(
        {"kind": "PodDisruptionBudget", "metadata": {"name": "u"}, "spec": {"selector": {}}}
    )
    bundle = Bundle([*workloads, *pdbs, unnamespaced])
    views = [view for view in map(workload_of, workloads) if view is not None]
    for view in views:
        listed = bundle.list("PodDisruptionBudget", view.namespace or "default")
        assert pdbs_for(view, bundle) == [item for item in listed if pdb_selects(item, view)]
        # GP501 keeps a namespace's PDBs with their selectors and matches each workload against them.
        assert selecting(view, namespace_pdbs(bundle, view.namespace or "default")) == pdbs_for(view, bundle)
    for item in [*pdbs, unnamespaced]:
        assert selected_templates(item, views) == frozenset(
            (index, 0) for index, view in enumerate(views) if pdb_selects(item, view)
        )


def test_an_llm_inference_service_config_runs_no_pods_for_a_pdb_to_count(lint_text: LintText) -> None:
    # A config is part of the pods of the services that name it: a PDB selecting its labels
    # protects none of its own (GP503), and its replicas are no pods to block (no GP502).
    text = """
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceServiceConfig
metadata: {name: decode-base, namespace: ai-lab, labels: {app: llm}}
spec:
  replicas: 1
  template:
    containers:
      - name: main
        image: ghcr.io/llm-d/llm-d-cuda:v0.9.0
        resources: {limits: {nvidia.com/gpu: "1"}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: llm, namespace: ai-lab}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: llm}}
"""
    found = {f.rule_id for f in lint_text(text).findings}
    assert "GP503" in found and "GP502" not in found
    assert "LLMInferenceServiceConfig" not in workload_kinds()


WORKER_ONLY_LWS = """
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: vllm, namespace: ai-lab}}
spec:
  replicas: {groups}
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
          - name: vllm
            image: vllm/vllm-openai:v0.10.0
            command: [sh, -c, "vllm serve Qwen/Qwen3-8B --revision abc --pipeline-parallel-size 2"]
            ports: [{{containerPort: 8000}}]
            readinessProbe: {{httpGet: {{path: /health, port: 8000}}}}
            resources: {{limits: {{nvidia.com/gpu: 8}}}}
"""


@pytest.mark.parametrize(("groups", "expected"), [(1, set()), (3, {"GP208", "GP501"})])
def test_a_worker_only_leader_worker_set_serves_one_copy_per_group(
    lint_text: LintText, groups: int, expected: set[str]
) -> None:
    """Without a leaderTemplate, the workerTemplate is the leader's too: `replicas: 1, size: 2` is
    one server of two ranks, not two replicas to spread or keep up (llm-d's wide-EP guides)."""
    report = lint_text(WORKER_ONLY_LWS.format(groups=groups))
    fired = {f for f in report.findings if f.rule_id in ("GP208", "GP501")}
    assert {f.rule_id for f in fired} == expected
    if groups == 3:
        (spread,) = [f for f in fired if f.rule_id == "GP208"]
        assert spread.message.startswith("3 replicas of pod template 'worker'")
