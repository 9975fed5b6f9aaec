"""Shared test data for the provenance tests: admission requests for GPU workloads, backends."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy
from gpupolicy.provenance import ProvenanceRecord

POSTGRES_URL_ENV = "GPUPOLICY_TEST_POSTGRES_URL"
DEFAULTPOSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
RUN_ID = uuid.uuid4().hex[:8]
REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET_TOKEN = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
SECRET_ENV_VALUE = "s3cr3t-env-value-never-stored"
T0 = datetime(2026, 11, 30, 2, 0, 0, tzinfo=UTC)

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "vllm-llama",
        "namespace": "ai-lab",
        "uid": "0d6c3f8e-0000-4000-8000-000000000001",
        "generation": 3,
        "labels": {
            "gpupolicy.io/experiment": "day29-experiment",
            "gpupolicy.io/arm": "control",
            "app.kubernetes.io/instance": "llm-serving",
        },
        "annotations": {
            "gpupolicy.io/model": "meta-llama/Llama-3.1-8B-Instruct@0e9e39f",
            "gpupolicy.io/input": "sharegpt-v3@2024-05",
            "gpupolicy.io/rollback-criteria": "[{metric: p95_latency_ms, max: 800, window: 10m}]",
            "argocd.argoproj.io/tracking-id": "llm-serving:apps/Deployment:ai-lab/vllm-llama",
        },
    },
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "vllm"}},
        "template": {
            "metadata": {"labels": {"app": "vllm"}},
            "spec": {
                "priorityClassName": "online-inference",
                "preemptionPolicy": "Never",
                "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 10,
                                "preference": {
                                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]
                                },
                            }
                        ]
                    }
                },
                "topologySpreadConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule",
                    }
                ],
                "containers": [
                    {
                        "name": "vllm",
                        "image": "vllm/vllm-openai:v0.6.3@sha256:" + "a" * 64,
                        "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", f"--hf-token={SECRET_TOKEN}"],
                        "env": [
                            {"name": "MAX_BATCH", "value": SECRET_ENV_VALUE},
                            {
                                "name": "HF_TOKEN",
                                "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}},
                            },
                        ],
                        "resources": {
                            "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
                            "limits": {"memory": "16Gi", "nvidia.com/gpu": "1"},
                        },
                    }
                ],
            },
        },
    },
}


def deployment(**metadata: Any) -> dict[str, Any]:
    obj = copy.deepcopy(DEPLOYMENT)
    obj["metadata"].update(metadata)
    return obj


def admission_request(obj: dict[str, Any], *, uid: str | None = None, **fields: Any) -> dict[str, Any]:
    request = {
        "uid": uid or str(uuid.uuid4()),
        "kind": {"group": "apps", "version": "v1", "kind": obj.get("kind")},
        "operation": "CREATE",
        "userInfo": {"username": "alice@example.com", "uid": "u-1", "groups": ["ml-engineers"]},
        "namespace": obj["metadata"].get("namespace"),
        "name": obj["metadata"].get("name"),
        "dryRun": False,
        "object": obj,
    }
    request.update(fields)
    return request


def report_for(obj: dict[str, Any], policy: Policy) -> Report:
    return evaluate([Resource(obj, file="<admission>", doc_index=0)], policy)


MakeRecord = Callable[..., ProvenanceRecord]


def postgres_url() -> str | None:
    """The test server's URL when it answers (else None: the PostgreSQL tests skip)."""
    url = os.environ.get(POSTGRES_URL_ENV, DEFAULTPOSTGRES_URL)
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception:
        return None
    return url


POSTGRES = postgres_url()
POSTGRES_SKIP = f"PostgreSQL not reachable at {os.environ.get(POSTGRES_URL_ENV, DEFAULTPOSTGRES_URL)} (set {POSTGRES_URL_ENV})"


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class Backend:
    """Where a test's database lives: `url`, `schema`, and a fresh spool directory."""

    def __init__(self, name: str, url: str, schema: str | None, spool_dir: Path) -> None:
        self.name = name
        self.url = url
        self.schema = schema
        self.spool_dir = spool_dir

    def open(self, **options: Any) -> Any:
        from gpupolicy.provenance import open_store

        options.setdefault("start_replayer", False)
        return open_store(self.url, spool_dir=self.spool_dir, schema=self.schema, **options)


def kill_after_first_line(script: str, arguments: list[str]) -> tuple[str, int]:
    """Run `script` in a Python of its own (in the repository), wait for the first line it
    prints (it then waits on its stdin), kill it with SIGKILL there: (that line, its status)."""
    child = subprocess.Popen(
        [sys.executable, "-c", script, *arguments],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    return line, child.returncode
