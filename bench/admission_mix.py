"""AdmissionReview bodies for the webhook benchmarks, in two mixes.

- `distinct_mix(n)`: n GPU Deployments of about 10 KB, each of its own content (name, replicas,
  image), one in ten denied — no two admissions share a decision, so a decision cache never hits.
- `realistic_mix(n)`: about n admissions as a cluster sends them while teams roll out GPU
  workloads: for each Deployment, its CREATE, the CREATE of its ReplicaSet and of the ReplicaSet's
  Pods (a generated name, their own uid, resourceVersion, creation time and managedFields each),
  then UPDATEs that change only `replicas` (a scale) or only annotations tools write (a re-apply
  by kubectl, a revision bump), and later the Pods the scale adds; for each Job, its CREATE and
  the CREATE of its Pods (indexed: each its completion index). The proportions follow what the
  API server sends: one Deployment of four replicas is about eight admissions, most of them Pods.

Every body carries the uid mark `UID_MARK` (replaced per request by `with_uid`). Bodies are
deterministic: the same arguments give the same bytes.
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from tests.webhook.reviews import admission_review, gpu_deployment

UID_MARK = "00000000-0000-4000-8000-000000000000"


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _deployment(index: int) -> dict[str, Any]:
    obj = gpu_deployment()
    obj["metadata"]["name"] = f"llm-{index:04d}"
    obj["metadata"]["uid"] = str(uuid.UUID(int=index + 1))
    obj["spec"]["replicas"] = 2 + index % 3
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["image"] = f"vllm/vllm-openai:v0.6.{index % 7}@sha256:{index:064x}"
    if index % 10 == 9:  # denied: privileged
        container["securityContext"]["privileged"] = True
    return obj


def distinct_mix(count: int) -> list[bytes]:
    return [_encode(admission_review(_deployment(index), uid=UID_MARK)) for index in range(count)]


def _server_metadata(metadata: dict[str, Any], serial: int) -> None:
    """What the API server writes on every object it stores."""
    metadata["uid"] = str(uuid.UUID(int=(1 << 64) + serial))
    metadata["resourceVersion"] = str(100_000 + serial)
    metadata["creationTimestamp"] = (
        f"2026-11-20T{serial // 3600 % 24:02d}:{serial // 60 % 60:02d}:{serial % 60:02d}Z"
    )
    metadata["managedFields"] = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": metadata["creationTimestamp"],
        }
    ]


def _owned(owner: dict[str, Any], kind: str, api_version: str, suffix: str, serial: int) -> dict[str, Any]:
    """A ReplicaSet or Pod made by `owner` from its pod template."""
    template = owner["spec"]["template"]
    metadata = copy.deepcopy(template["metadata"])
    metadata["namespace"] = owner["metadata"]["namespace"]
    metadata["ownerReferences"] = [
        {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
         "uid": owner["metadata"].get("uid", ""), "controller": True}
    ]  # fmt: skip
    metadata["labels"] = {**metadata.get("labels", {}), "pod-template-hash": suffix}
    _server_metadata(metadata, serial)
    if kind == "Pod":
        metadata["generateName"] = f"{owner['metadata']['name']}-{suffix}-"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": copy.deepcopy(template["spec"]),
        }
    metadata["name"] = f"{owner['metadata']['name']}-{suffix}"
    spec = {
        "replicas": owner["spec"]["replicas"],
        "selector": owner["spec"]["selector"],
        "template": template,
    }
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def _rollout(index: int, serial: int) -> list[dict[str, Any]]:
    """The admissions of one Deployment's life: create, ReplicaSet, Pods, a scale, re-applies."""
    deployment = _deployment(index)
    suffix = f"{index:05x}b7d"
    replica_set = _owned(deployment, "ReplicaSet", "apps/v1", suffix, serial)
    reviews = [admission_review(deployment, uid=UID_MARK), admission_review(replica_set, uid=UID_MARK)]
    replicas = deployment["spec"]["replicas"]
    reviews += [
        admission_review(_owned(deployment, "Pod", "v1", suffix, serial + 1 + n), uid=UID_MARK)
        for n in range(replicas)
    ]
    scaled = copy.deepcopy(deployment)
    scaled["spec"]["replicas"] = replicas + 1
    scaled["metadata"]["generation"] = 4
    reviews.append(admission_review(scaled, operation="UPDATE", old_object=deployment, uid=UID_MARK))
    reviews.append(admission_review(_owned(scaled, "Pod", "v1", suffix, serial + 20), uid=UID_MARK))
    reapplied = copy.deepcopy(scaled)
    annotations = reapplied["metadata"]["annotations"]
    annotations["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(deployment["spec"])[:2000]
    annotations["deployment.kubernetes.io/revision"] = "2"
    reapplied["metadata"]["resourceVersion"] = str(200_000 + serial)
    reviews.append(admission_review(reapplied, operation="UPDATE", old_object=scaled, uid=UID_MARK))
    return reviews


def _job(index: int, serial: int) -> list[dict[str, Any]]:
    """A training Job of four Pods: every other one Indexed (each Pod its completion index)."""
    deployment = _deployment(index)
    template = copy.deepcopy(deployment["spec"]["template"])
    template["spec"]["restartPolicy"] = "Never"
    container = template["spec"]["containers"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        container.pop(probe, None)
    container.pop("ports", None)
    container["args"] = ["--train", f"--seed={index}"]
    template["metadata"]["labels"] = {
        "app.kubernetes.io/name": f"train-{index}",
        "gpupolicy.io/workload-class": "training",
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"train-{index:04d}",
            "namespace": "ai-lab",
            "uid": str(uuid.UUID(int=(2 << 64) + index)),
        },
        "spec": {"completions": 4, "parallelism": 4, "template": template},
    }
    indexed = index % 8 == 3
    if indexed:
        job["spec"]["completionMode"] = "Indexed"
    reviews = [admission_review(job, uid=UID_MARK)]
    for completion in range(4):
        pod = _owned(
            {**job, "spec": {**job["spec"], "replicas": 4, "selector": {}}},
            "Pod",
            "v1",
            f"j{index:04d}",
            serial + completion,
        )
        pod["metadata"]["labels"].pop("pod-template-hash", None)
        pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] = job["metadata"]["name"]
        if indexed:
            pod["metadata"]["generateName"] = f"{job['metadata']['name']}-{completion}-"
            pod["metadata"].setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = str(
                completion
            )
        else:
            pod["metadata"]["generateName"] = f"{job['metadata']['name']}-"
        reviews.append(admission_review(pod, uid=UID_MARK))
    return reviews


def realistic_mix(count: int) -> list[bytes]:
    """About `count` admissions: Deployments' lives and Jobs, three to one."""
    bodies: list[bytes] = []
    index = 0
    while len(bodies) < count:
        maker = _job if index % 4 == 3 else _rollout
        bodies.extend(_encode(review) for review in maker(index, index * 100))
        index += 1
    return bodies[:count]
