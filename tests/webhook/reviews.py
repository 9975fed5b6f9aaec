"""AdmissionReview bodies shaped as the API server sends them (admission.k8s.io/v1)."""

from __future__ import annotations

import copy
import uuid
from typing import Any

GPU_DEPLOYMENT_OBJECT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "llm-server",
        "namespace": "ai-lab",
        "uid": "7c9a1d5e-3f0b-4c1e-9a57-2f4a6c8e1b90",
        "generation": 3,
        "resourceVersion": "48213",
        "creationTimestamp": "2026-11-20T08:15:02Z",
        "labels": {
            "app.kubernetes.io/name": "llm-server",
            "app.kubernetes.io/part-of": "inference",
            "gpupolicy.io/experiment": "day29-experiment",
            "gpupolicy.io/arm": "control",
            "gpupolicy.io/workload-class": "online",
        },
        "annotations": {
            "argocd.argoproj.io/tracking-id": "inference:apps/Deployment:ai-lab/llm-server",
            "gpupolicy.io/model": "meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a16976918f6564b8830bc894c89659",
            "gpupolicy.io/input": "sharegpt-v3@2024-05",
            "gpupolicy.io/model-load-seconds": "420",
            "gpupolicy.io/rollback-criteria": (
                "[{metric: p95_latency_ms, max: 800, window: 10m}, {metric: error_rate, max: 0.01, window: 10m}]"
            ),
        },
    },
    "spec": {
        "replicas": 2,
        "progressDeadlineSeconds": 1200,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "llm-server"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        "template": {
            "metadata": {
                "labels": {
                    "app.kubernetes.io/name": "llm-server",
                    "gpupolicy.io/experiment": "day29-experiment",
                    "gpupolicy.io/arm": "control",
                },
                "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "8000"},
            },
            "spec": {
                "priorityClassName": "gpu-serving",
                "runtimeClassName": "nvidia",
                "serviceAccountName": "llm-server",
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 60,
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 1000,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "podAffinityTerm": {
                                    "topologyKey": "kubernetes.io/hostname",
                                    "labelSelector": {
                                        "matchLabels": {"app.kubernetes.io/name": "llm-server"}
                                    },
                                },
                            }
                        ]
                    }
                },
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.6.3@sha256:" + "4f1e" * 16,
                        "args": [
                            "--model=meta-llama/Llama-3.1-8B-Instruct",
                            "--revision=0e9e39f249a16976918f6564b8830bc894c89659",
                            "--tensor-parallel-size=2",
                            "--max-model-len=8192",
                            "--gpu-memory-utilization=0.90",
                            "--port=8000",
                        ],
                        "ports": [{"name": "http", "containerPort": 8000, "protocol": "TCP"}],
                        "env": [
                            {"name": "HF_HOME", "value": "/models/hf"},
                            {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
                            {
                                "name": "HF_TOKEN",
                                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
                            },
                        ],
                        "resources": {
                            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"},
                            "limits": {"memory": "64Gi", "nvidia.com/gpu": "2"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "startupProbe": {
                            "httpGet": {"path": "/health", "port": "http"},
                            "periodSeconds": 10,
                            "failureThreshold": 60,
                        },
                        "readinessProbe": {
                            "httpGet": {"path": "/v1/models", "port": "http"},
                            "periodSeconds": 5,
                            "failureThreshold": 3,
                        },
                        "livenessProbe": {
                            "httpGet": {"path": "/health", "port": "http"},
                            "periodSeconds": 15,
                            "failureThreshold": 4,
                        },
                        "volumeMounts": [
                            {"name": "models", "mountPath": "/models"},
                            {"name": "dshm", "mountPath": "/dev/shm"},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "models", "persistentVolumeClaim": {"claimName": "model-cache"}},
                    {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                ],
            },
        },
    },
}


def _managed_fields(size: int) -> list[dict[str, Any]]:
    """managedFields as server-side apply writes them: most of a real object's bytes."""
    fields: dict[str, Any] = {}
    for index in range(size):
        fields[f"f:field-{index:03d}"] = {}
    return [
        {
            "manager": "argocd-controller",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": "2026-11-20T08:15:02Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": fields}},
        }
    ]


def gpu_deployment(*, managed_fields: int = 340, **changes: Any) -> dict[str, Any]:
    """A GPU Deployment of about 10 KB as JSON (managedFields included, as admission sends it)."""
    obj = copy.deepcopy(GPU_DEPLOYMENT_OBJECT)
    if managed_fields:
        obj["metadata"]["managedFields"] = _managed_fields(managed_fields)
    obj.update(changes)
    return obj


def admission_review(
    obj: dict[str, Any] | None,
    *,
    operation: str = "CREATE",
    old_object: dict[str, Any] | None = None,
    dry_run: bool = False,
    uid: str | None = None,
    sub_resource: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    subject = obj if obj is not None else old_object or {}
    metadata = subject.get("metadata", {})
    api_version = str(subject.get("apiVersion", "v1"))
    group, _, version = api_version.rpartition("/")
    kind = str(subject.get("kind", ""))
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    request: dict[str, Any] = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": plural},
        "name": name if name is not None else metadata.get("name", ""),
        "namespace": namespace if namespace is not None else metadata.get("namespace", ""),
        "operation": operation,
        "userInfo": {
            "username": "system:serviceaccount:argocd:argocd-application-controller",
            "uid": "0f6c5d1a-8a4e-4b8e-9a3f-1c2d3e4f5a6b",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:argocd", "system:authenticated"],
        },
        "object": obj,
        "oldObject": old_object,
        "dryRun": dry_run,
        "options": {
            "apiVersion": "meta.k8s.io/v1",
            "kind": {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(
                operation, "CreateOptions"
            ),
            "fieldManager": "argocd-controller",
        },
    }
    if sub_resource:
        request["subResource"] = sub_resource
        request["resource"]["resource"] = plural
        request["requestSubResource"] = sub_resource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
