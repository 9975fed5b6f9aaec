"""`review()` as a plain function: no HTTP, no cluster."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from gpupolicy.core.findings import Finding, ObjectRef, Severity
from gpupolicy.core.vocabulary import ROLLBACK_ANNOTATION
from gpupolicy.kube.inventory import Bundle, Coverage
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy, default_policy, policy_from_mapping
from gpupolicy.webhook.answers import WARNING_MAX_CHARS, WARNINGS_MAX_BYTES, format_warnings
from gpupolicy.webhook.cluster_inventory import ClusterInventory
from gpupolicy.webhook.records import should_record
from gpupolicy.webhook.review import (
    AdmissionInventory,
    MalformedReview,
    NoInventory,
    ReviewEngine,
    review,
)
from gpupolicy.webhook.settings import Mode
from tests.webhook.reviews import admission_review, gpu_deployment


def cluster_bundle() -> Bundle:
    """What the fake API server's recorded lists hold, as a complete inventory."""
    return Bundle(cluster_resources(), complete_kinds=CLUSTER_KINDS)


CLUSTER_KINDS = ["PriorityClass", "Namespace", "ConfigMap", "PodDisruptionBudget", "NetworkPolicy", "RuntimeClass",
                 "HorizontalPodAutoscaler", "AnalysisTemplate", "ClusterAnalysisTemplate", "Canary", "Deployment",
                 "StatefulSet", "Rollout", "WorkloadPriorityClass"]  # fmt: skip


def cluster_resources() -> list[Resource]:
    objects = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "gpu-serving"},
            "value": 100000,
        },
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "ai-lab", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "day29-experiment", "namespace": "ai-lab"},
            "immutable": True,
            "data": {
                "change": "placement",
                "fixed": "image, model, input",
                "metrics": "P95, error rate",
                "repeats": "3",
            },
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "llm-server", "namespace": "ai-lab"},
            "spec": {
                "maxUnavailable": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "llm-server"}},
                "unhealthyPodEvictionPolicy": "AlwaysAllow",
            },
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "deny", "namespace": "ai-lab"},
            "spec": {"podSelector": {}},
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "nvidia"},
            "handler": "nvidia",
        },
    ]
    return [Resource(obj, file=f"cluster:{obj['kind']}", doc_index=0) for obj in objects]


CLUSTER = cluster_bundle()


def engine(overrides: dict[str, Any] | None = None, *, mode: Mode | None = None) -> ReviewEngine:
    policy: Policy = policy_from_mapping(overrides) if overrides else default_policy()
    return ReviewEngine.from_policy(policy, mode=mode)


def broken_deployment(**metadata: Any) -> dict[str, Any]:
    """Three errors: request 0.5 != limit 1 (GP102), 0.5 not whole (GP103), privileged (GP601)."""
    obj = gpu_deployment()
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["requests"]["nvidia.com/gpu"] = "0.5"
    container["resources"]["limits"]["nvidia.com/gpu"] = "1"
    container["securityContext"]["privileged"] = True
    obj["metadata"].update(metadata)
    return obj


def error_ids(decision: Any) -> list[str]:
    return sorted({f.rule_id for f in decision.findings if f.severity is Severity.ERROR})


def test_a_good_gpu_deployment_is_allowed_and_recorded() -> None:
    body = admission_review(gpu_deployment(), uid="b7a1c2d3-0000-4000-8000-000000000001")
    decision = review(body, engine(), CLUSTER)
    response = decision.response
    assert response["apiVersion"] == "admission.k8s.io/v1" and response["kind"] == "AdmissionReview"
    assert response["response"]["uid"] == "b7a1c2d3-0000-4000-8000-000000000001"
    assert response["response"]["allowed"] is True
    assert "status" not in response["response"]
    # What the default policy cannot know of the cluster (node pools, GPU taints) is logged as
    # info, never shown as an admission warning.
    assert [f for f in decision.findings if "clusterFact" not in f.extra] == []
    assert all(f.severity is Severity.INFO for f in decision.findings)
    assert "warnings" not in response["response"]
    assert should_record(decision) and decision.gpu_workload
    annotations = response["response"]["auditAnnotations"]
    assert annotations["policy-hash"] == f"sha256:{default_policy().digest}"
    assert annotations["policy-version"] == default_policy().version
    assert annotations["experiment"] == "day29-experiment" and annotations["arm"] == "control"
    assert annotations["decision"] == "allowed" and annotations["mode"] == "enforce"


def _made_by_controllers(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    """The ReplicaSet the Deployment controller makes (its owner's annotations copied but kubectl's
    and the revision's) and a Pod the ReplicaSet makes (the template's metadata only), as
    validating admission sees them."""
    name, namespace = deployment["metadata"]["name"], deployment["metadata"]["namespace"]
    template = copy.deepcopy(deployment["spec"]["template"])
    labels = {**template["metadata"].get("labels", {}), "pod-template-hash": "7d4b9c6f5"}
    replica_set = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{name}-7d4b9c6f5",
            "namespace": namespace,
            "labels": labels,
            "annotations": dict(deployment["metadata"].get("annotations", {})),
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "controller": True}
            ],
        },
        "spec": {
            "replicas": deployment["spec"]["replicas"],
            "selector": {"matchLabels": labels},
            "template": {**template, "metadata": {**template["metadata"], "labels": labels}},
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **copy.deepcopy(template["metadata"]),
            "name": f"{name}-7d4b9c6f5-x2kq9",
            "generateName": f"{name}-7d4b9c6f5-",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{name}-7d4b9c6f5",
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }
    return [replica_set, pod]


def test_what_controllers_make_of_an_allowed_deployment_is_allowed() -> None:
    """The rollback criteria are the Deployment's (its annotation; a Canary that targets it): its
    ReplicaSet and its Pods, which never roll out, are not denied for lacking them."""
    deployment = gpu_deployment()
    assert ROLLBACK_ANNOTATION in deployment["metadata"]["annotations"]
    assert ROLLBACK_ANNOTATION not in deployment["spec"]["template"]["metadata"].get("annotations", {})
    assert review(admission_review(deployment), engine(), CLUSTER).allowed
    for made in _made_by_controllers(deployment):
        decision = review(admission_review(made), engine(), CLUSTER)
        assert decision.allowed and not error_ids(decision), (made["kind"], error_ids(decision))
        assert not {"GP901", "GP902", "GP903"} & {f.rule_id for f in decision.findings}


def test_a_workload_a_controller_made_is_rolled_out_by_its_owner() -> None:
    """A LeaderWorkerSet's StatefulSet carries none of the LeaderWorkerSet's annotations."""
    made = gpu_deployment(kind="StatefulSet")
    made["metadata"]["annotations"].pop(ROLLBACK_ANNOTATION)
    made["spec"]["serviceName"] = made["metadata"]["name"]
    assert error_ids(review(admission_review(made), engine(), CLUSTER)) == ["GP901"]  # applied by hand
    made["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": "llm",
            "controller": True,
        }
    ]
    decision = review(admission_review(made), engine(), CLUSTER)
    assert decision.allowed and error_ids(decision) == []


def test_a_workload_class_declared_on_the_pod_template_reaches_the_pods() -> None:
    """A Deployment declared batch on its metadata only: its ReplicaSet and Pods carry the
    template's labels, judged servers by their port, and are denied for GP401 while it is allowed
    (docs/roles.md says to declare the class on the template)."""
    deployment = gpu_deployment()
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    for probe in ("readinessProbe", "startupProbe", "livenessProbe"):
        container.pop(probe, None)
    deployment["metadata"].setdefault("labels", {})["gpupolicy.io/workload-class"] = "batch"
    assert review(admission_review(deployment), engine(), CLUSTER).allowed
    assert {
        error_ids(review(admission_review(made), engine(), CLUSTER))[0]
        for made in _made_by_controllers(deployment)
    } == {"GP401"}
    del deployment["metadata"]["labels"]["gpupolicy.io/workload-class"]  # on the template only: all three
    deployment["spec"]["template"]["metadata"]["labels"]["gpupolicy.io/workload-class"] = "batch"
    for made in (deployment, *_made_by_controllers(deployment)):
        decision = review(admission_review(made), engine(), CLUSTER)
        assert decision.allowed and error_ids(decision) == [], made["kind"]


def test_a_suppression_reaches_the_pods_when_the_pod_template_carries_it() -> None:
    """docs/suppressions.md: Pods carry their template's metadata, not their owner's; review()
    alone reads no owner (the served route does: tests/webhook/test_owners.py)."""
    daemon_set = gpu_deployment(kind="DaemonSet")
    daemon_set["spec"].pop("replicas")
    daemon_set["spec"].pop("strategy", None)
    daemon_set["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    entry = "GP601[vllm]: the driver validator needs it"
    daemon_set["metadata"]["annotations"]["gpupolicy.io/ignore"] = entry

    def pod_decision(overrides: dict[str, Any] | None = None, *, owned: bool = True) -> Any:
        template = copy.deepcopy(daemon_set["spec"]["template"])
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **template["metadata"],
                "name": "llm-x2kq9",
                "generateName": "llm-",
                "namespace": daemon_set["metadata"]["namespace"],
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "llm", "controller": True}
                ],
            },
            "spec": template["spec"],
        }
        if not owned:
            del pod["metadata"]["ownerReferences"]
        return review(admission_review(pod), engine(overrides), CLUSTER)

    assert review(admission_review(daemon_set), engine(), CLUSTER).allowed
    denied = pod_decision()  # on the metadata only, with no owner read, its Pods are denied ...
    assert error_ids(denied) == ["GP601"]
    message = denied.response["response"]["status"]["message"]
    assert message.splitlines()[-1] == (  # ... and the deny message says why
        "This Pod was made by DaemonSet llm from its pod template: a gpupolicy.io/ignore annotation or a "
        "gpupolicy.io/workload-class label on the DaemonSet (or its owner) does not reach it; write it in "
        "the pod template's metadata too"
    )
    assert "was made by" not in pod_decision(owned=False).response["response"]["status"]["message"]
    daemon_set["spec"]["template"]["metadata"].setdefault("annotations", {})["gpupolicy.io/ignore"] = entry
    assert review(admission_review(daemon_set), engine(), CLUSTER).allowed
    assert error_ids(pod_decision()) == []


def test_deny_lists_every_error_with_rule_path_and_fix() -> None:
    decision = review(admission_review(broken_deployment()), engine(), CLUSTER)
    body = decision.response["response"]
    assert body["allowed"] is False and not should_record(decision)
    assert body["status"]["code"] == 403
    message = body["status"]["message"]
    assert message.startswith("gpupolicy denied Deployment ai-lab/llm-server: 3 errors")
    assert error_ids(decision) == ["GP102", "GP103", "GP601"]
    for rule_id in ("GP102", "GP103", "GP601"):
        assert rule_id in message
    assert '$.spec.template.spec.containers[0].resources.requests["nvidia.com/gpu"]' in message
    assert "$.spec.template.spec.containers[0].securityContext.privileged" in message
    assert message.count("Fix: ") == 3
    assert "gpupolicy explain" in message
    assert body["auditAnnotations"]["decision"] == "denied"
    assert set(body["auditAnnotations"]["findings"].split(",")) >= {"GP102", "GP103", "GP601"}


def test_warn_mode_allows_with_short_warnings_that_point_at_explain() -> None:
    decision = review(admission_review(broken_deployment()), engine(mode=Mode.WARN), CLUSTER)
    body = decision.response["response"]
    assert body["allowed"] is True and decision.mode is Mode.WARN
    assert should_record(decision)  # admitted, so recorded
    warnings = body["warnings"]
    assert [w.split()[0] for w in warnings[:3]] == ["GP102", "GP103", "GP601"]
    for warning in warnings:
        assert len(warning) <= WARNING_MAX_CHARS
        assert "gpupolicy explain GP" in warning
    assert "status" not in body


def test_audit_mode_allows_silently_but_annotates() -> None:
    decision = review(admission_review(broken_deployment()), engine({"webhook": {"mode": "audit"}}), CLUSTER)
    body = decision.response["response"]
    assert body["allowed"] is True and "warnings" not in body
    assert body["auditAnnotations"]["mode"] == "audit"
    assert "GP601" in body["auditAnnotations"]["findings"]
    assert error_ids(decision) == ["GP102", "GP103", "GP601"]


def test_namespace_modes_override_the_default_and_the_flag() -> None:
    policy = {"webhook": {"namespaceModes": [{"namespaces": ["sandbox-*"], "mode": "warn"}]}}
    sandbox = broken_deployment(namespace="sandbox-7")
    assert review(admission_review(sandbox), engine(policy), CLUSTER).allowed
    assert not review(admission_review(broken_deployment()), engine(policy), CLUSTER).allowed
    # --mode replaces the default only
    strict = {"webhook": {"mode": "warn", "namespaceModes": [{"namespaces": ["ai-lab"], "mode": "enforce"}]}}
    assert not review(admission_review(broken_deployment()), engine(strict, mode=Mode.AUDIT), CLUSTER).allowed
    assert review(admission_review(sandbox), engine(strict, mode=Mode.AUDIT), CLUSTER).mode is Mode.AUDIT


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda body: body["request"].update(operation="DELETE", object=None), "delete"),
        (lambda body: body["request"].update(operation="CONNECT"), "connect"),
        (lambda body: body["request"].update(subResource="status"), "subresource"),
        (lambda body: body["request"].update(subResource="scale"), "subresource"),
        (lambda body: body["request"].update(namespace="kube-system"), "excluded-namespace"),
    ],
)
def test_allowed_at_once(change: Any, reason: str) -> None:
    body = admission_review(broken_deployment())
    if reason == "excluded-namespace":
        body["request"]["object"]["metadata"]["namespace"] = "kube-system"
    change(body)
    decision = review(body, engine(), CLUSTER)
    assert decision.allowed and decision.skipped == reason
    assert decision.report is None and not should_record(decision)
    assert decision.response["response"] == {"uid": body["request"]["uid"], "allowed": True}


def test_objects_without_gpus_are_allowed_at_once() -> None:
    obj = broken_deployment()
    container = obj["spec"]["template"]["spec"]["containers"][0]
    for section in ("requests", "limits"):
        container["resources"][section].pop("nvidia.com/gpu")
    decision = review(admission_review(obj), engine(), CLUSTER)
    assert decision.allowed and decision.skipped == "no-gpus" and decision.report is None
    plain = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "app-settings", "namespace": "ai-lab"},
        "data": {"a": "b"},
    }
    assert review(admission_review(plain), engine(), CLUSTER).skipped == "not-checked"
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llm", "namespace": "ai-lab"},
        "spec": {},
    }
    assert review(admission_review(service), engine(), CLUSTER).skipped == "not-checked"


def test_a_broken_gpu_quantity_still_counts_as_a_gpu_workload() -> None:
    obj = gpu_deployment()
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["requests"]["nvidia.com/gpu"] = "500m"
    container["resources"]["limits"]["nvidia.com/gpu"] = "500m"
    decision = review(admission_review(obj), engine(), CLUSTER)
    assert not decision.allowed and "GP103" in error_ids(decision)


def test_cross_object_kinds_are_evaluated() -> None:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "llm-server", "namespace": "ai-lab"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app.kubernetes.io/name": "llm-server"}}},
    }
    decision = review(admission_review(pdb, operation="UPDATE", old_object=pdb), engine(), CLUSTER)
    assert decision.skipped is None and decision.report is not None
    assert "GP502" in error_ids(decision) and not decision.allowed
    assert not should_record(decision)  # not a GPU workload
    experiment = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "day30-experiment", "namespace": "ai-lab"},
        "data": {"change": "priority", "fixed": "image", "metrics": "GPU hours", "repeats": "1"},
    }
    decision = review(admission_review(experiment), engine(), CLUSTER)
    assert decision.report is not None and "GP802" in error_ids(decision)
    tier = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "system-gpu"},
        "value": 10,
    }
    assert "GP304" in error_ids(review(admission_review(tier), engine(), CLUSTER))


def test_generate_name_with_empty_name() -> None:
    obj = broken_deployment()
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = "llm-server-"
    del obj["metadata"]["uid"]
    body = admission_review(obj, name="")
    assert body["request"]["name"] == ""
    decision = review(body, engine(), CLUSTER)
    assert not decision.allowed and decision.name == "llm-server-"
    assert "Deployment ai-lab/llm-server-" in decision.response["response"]["status"]["message"]


def test_update_is_judged_on_the_new_object() -> None:
    bad, good = broken_deployment(), gpu_deployment()
    fixed = review(admission_review(good, operation="UPDATE", old_object=bad), engine(), CLUSTER)
    assert fixed.allowed and fixed.operation == "UPDATE" and should_record(fixed)
    broke = review(admission_review(bad, operation="UPDATE", old_object=good), engine(), CLUSTER)
    assert not broke.allowed


def test_dry_run_gets_the_same_answer_but_is_never_recorded() -> None:
    good = review(admission_review(gpu_deployment(), dry_run=True), engine(), CLUSTER)
    assert good.allowed and good.dry_run and not should_record(good)
    bad = review(admission_review(broken_deployment(), dry_run=True), engine(), CLUSTER)
    assert not bad.allowed and bad.dry_run


def test_namespace_comes_from_the_request_when_the_object_lacks_it() -> None:
    obj = broken_deployment()
    del obj["metadata"]["namespace"]
    body = admission_review(obj, namespace="ai-lab")
    decision = review(body, engine(), CLUSTER)
    assert decision.namespace == "ai-lab"
    assert (
        "metadata" in body["request"]["object"] and "namespace" not in body["request"]["object"]["metadata"]
    )


def test_unknown_cluster_state_is_a_finding_not_a_pass_or_a_deny() -> None:
    decision = review(admission_review(gpu_deployment()), engine(), NoInventory())
    assert decision.allowed  # nothing it could not verify denies
    unknown = [f for f in decision.findings if f.severity is Severity.INFO]
    assert {f.rule_id for f in unknown} >= {"GP302", "GP804"}
    assert any("could not be verified" in f.message or "cannot" in f.message for f in unknown)
    # and it is shown, not silent
    assert any(w.startswith("GP302 info") for w in decision.response["response"]["warnings"])
    # the same object against a synced cluster has nothing to say beyond the policy's unknown facts
    synced = review(admission_review(gpu_deployment()), engine(), CLUSTER).findings
    assert [f for f in synced if "clusterFact" not in f.extra] == []


def test_enforce_mode_allows_while_the_cache_has_not_synced_whatever_the_overrides() -> None:
    """Raising the rules that can say "unknown" must not turn an unsynced cache into denials."""
    raised = {rule: {"severity": "error"} for rule in ("GP210", "GP302", "GP501", "GP614", "GP804", "GP901")}
    unsynced = ClusterInventory(None, no_client_reason="no Kubernetes configuration: test")
    assert not unsynced.synced()
    decision = review(
        admission_review(gpu_deployment()), engine({"rules": raised}, mode=Mode.ENFORCE), unsynced
    )
    assert decision.allowed and decision.response["response"]["allowed"] is True
    unknown = {f.rule_id for f in decision.findings}
    assert unknown >= {"GP302", "GP501", "GP614", "GP804"}
    assert {f.severity for f in decision.findings} == {Severity.INFO}


EXPIRED_PDB_EXEMPTION = {
    "exemptions": [{"rules": ["GP501"], "owner": "sre", "reason": "drained by hand", "expires": "2020-01-01"}]
}


@pytest.mark.parametrize(
    ("policy", "annotation"),
    [
        (EXPIRED_PDB_EXEMPTION, None),
        ({"suppressions": {"forbidden": ["GP501"]}}, "GP501: drained by hand"),
        ({**EXPIRED_PDB_EXEMPTION, "rules": {"GP010": {"severity": "error"}}}, None),
    ],
    ids=["expired-exemption", "forbidden-suppression", "expired-exemption-raised"],
)
def test_a_suppression_problem_about_an_unknown_is_no_surer_than_the_unknown(
    policy: dict[str, Any], annotation: str | None
) -> None:
    """GP010 said of a finding that could not be verified (an expired exemption or a forbidden
    suppression meeting GP501's "could not be listed") is info like that finding, whatever GP010's
    level: an unsynced cache must not deny in enforce mode what the synced cluster admits."""
    obj = gpu_deployment()
    if annotation is not None:
        obj["metadata"].setdefault("annotations", {})["gpupolicy.io/ignore"] = annotation
    unsynced = ClusterInventory(None, no_client_reason="no Kubernetes configuration: test")
    decision = review(admission_review(obj), engine(policy, mode=Mode.ENFORCE), unsynced)
    [problem] = [f for f in decision.findings if f.rule_id == "GP010"]
    assert "GP501" in problem.message and problem.severity is Severity.INFO and problem.unknown
    assert decision.allowed and decision.response["response"]["allowed"] is True
    # the synced cluster holds the PDB: nothing to say, admitted
    assert review(admission_review(obj), engine(policy, mode=Mode.ENFORCE), CLUSTER).allowed


def test_policy_exemptions_with_expiry() -> None:
    today = datetime.date.today()
    live = {
        "rules": ["GP601"],
        "namespaces": ["ai-lab"],
        "owner": "team-gpu",
        "reason": "driver validation",
        "expires": (today + datetime.timedelta(days=30)).isoformat(),
    }
    lapsed = {**live, "expires": (today - datetime.timedelta(days=1)).isoformat()}
    exempt = review(admission_review(broken_deployment()), engine({"exemptions": [live]}), CLUSTER)
    assert "GP601" not in error_ids(exempt) and error_ids(exempt) == ["GP102", "GP103"]
    assert exempt.report is not None and any(f.rule_id == "GP601" for f, _ in exempt.report.suppressed)
    expired = review(admission_review(broken_deployment()), engine({"exemptions": [lapsed]}), CLUSTER)
    assert "GP601" in error_ids(expired)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ([1, 2], "JSON object"),
        (
            {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}},
            "admission.k8s.io/v1",
        ),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "Pod", "request": {}}, "kind 'Pod'"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "no request"),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"operation": "CREATE"},
            },
            "no uid",
        ),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "", "operation": "CREATE"},
            },
            "no uid",
        ),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "u", "operation": "PATCH"},
            },
            "operation",
        ),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "u", "operation": "CREATE"},
            },
            "request.object",
        ),
        (
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "u", "operation": "CREATE", "object": {"metadata": []}},
            },
            "metadata",
        ),
    ],
)
def test_malformed_reviews_raise(body: Any, words: str) -> None:
    with pytest.raises(MalformedReview, match=words.replace("(", r"\(")):
        review(body, engine(), CLUSTER)


def _finding(index: int, message: str) -> Finding:
    return Finding(
        rule_id=f"GP{100 + index % 800:03d}",
        rule_name="some-rule",
        severity=Severity.WARNING,
        message=message,
        remediation="Do it.",
        object=ObjectRef("Deployment", "ai-lab", "x"),
    )


def test_warnings_respect_the_api_server_limits() -> None:
    # multi-byte text: the 4 KiB cap is in bytes, the 120 cap in characters
    findings = [_finding(index, "容器 'vllm' 的 GPU 請求與限制不一致，" * 5) for index in range(200)]
    warnings = format_warnings(findings)
    assert sum(len(w.encode()) for w in warnings) <= WARNINGS_MAX_BYTES
    assert all(len(w) <= WARNING_MAX_CHARS for w in warnings)
    assert warnings[-1].startswith("gpupolicy: ") and "more findings" in warnings[-1]
    shown = len(warnings) - 1
    assert warnings[-1].split()[1] == str(200 - shown)
    short = format_warnings([_finding(1, "short\nmessage")])
    assert short == ["GP101 warning: short message (gpupolicy explain GP101)"]


def test_admission_inventory_replaces_the_stored_version() -> None:
    stored = Resource(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "llm-server", "namespace": "ai-lab"},
            "spec": {"maxUnavailable": 1},
        },
        file="cluster:PodDisruptionBudget/ai-lab/llm-server",
        doc_index=0,
    )
    other = Resource(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "asr", "namespace": "ai-lab"},
        },
        file="cluster:PodDisruptionBudget/ai-lab/asr",
        doc_index=0,
    )
    admitted_obj = copy.deepcopy(stored.obj)
    admitted_obj["spec"]["maxUnavailable"] = 0
    admitted = Resource(admitted_obj, file="admission:x", doc_index=0)
    view = AdmissionInventory(Bundle([stored, other], complete_kinds=["PodDisruptionBudget"]), admitted)
    listed = view.list("PodDisruptionBudget", "ai-lab")
    assert admitted in listed and stored not in listed and other in listed
    assert view.get("PodDisruptionBudget", "llm-server", "ai-lab") is admitted
    assert not view.list("PodDisruptionBudget", "elsewhere")
    assert view.coverage("PodDisruptionBudget") is Coverage.COMPLETE
    assert NoInventory().coverage("PodDisruptionBudget") is Coverage.UNAVAILABLE


def test_the_admission_inventory_asks_each_kind_coverage_once() -> None:
    asked: list[str] = []

    class Counting(NoInventory):
        def coverage(self, kind: str) -> Coverage:
            asked.append(kind)
            return Coverage.COMPLETE

    admitted = Resource({"kind": "Deployment", "metadata": {"name": "a"}}, file="admission:x", doc_index=0)
    view = AdmissionInventory(Counting(), admitted)
    assert [view.coverage(kind) for kind in ("ConfigMap", "ConfigMap", "Service")] == [Coverage.COMPLETE] * 3
    assert asked == ["ConfigMap", "Service"]  # one answer per kind for the whole admission


@pytest.mark.parametrize(
    "changes",
    [
        {"apiVersion": "x" * 1_000_000},
        {"apiVersion": {"nested": ["y" * 100_000] * 50}},
        {"apiVersion": 10**5000},  # a number no repr may print (Python refuses past 4,300 digits)
        {"request": {"uid": "u", "operation": "z" * 1_000_000}},
    ],
)
def test_malformed_review_messages_quote_bounded_excerpts(changes: dict[str, Any]) -> None:
    body: dict[str, Any] = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
    body.update(changes)
    with pytest.raises(MalformedReview) as raised:
        review(body, engine(), CLUSTER)
    assert len(str(raised.value)) < 300
