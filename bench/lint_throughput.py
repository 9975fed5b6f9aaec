"""Lint throughput against its baseline: PyYAML's C loader alone on the same files.

Generates N GPU workload objects across F files (default 10,000 across 1,000), then, in one run,
times (a) parse-only: `yaml.load_all(..., Loader=CSafeLoader)` over every file, (b) `gpupolicy
lint` in-process (load with positions + every rule + text rendering), and (c) the `gpupolicy
lint` command end to end (a subprocess: interpreter start-up and imports included). Prints the
median of --runs runs of each and the ratios to parse-only.

    python bench/lint_throughput.py [--objects 10000] [--files 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import gc
import io
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

WORKLOAD = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-{index}
  namespace: team-{team}
  labels:
    app: llm-{index}
    gpupolicy.io/workload-class: online
  annotations:
    gpupolicy.io/model: meta-llama/Llama-3.1-8B-Instruct@0e9e39f
    gpupolicy.io/model-load-seconds: "420"
    gpupolicy.io/rollback-criteria: '[{{metric: p95_latency_ms, max: 800, window: 10m}}, {{metric: error_rate, max: 0.01, window: 10m}}]'
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: llm-{index}
  template:
    metadata:
      labels:
        app: llm-{index}
    spec:
      priorityClassName: gpu-serving
      automountServiceAccountToken: false
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: DoNotSchedule
          labelSelector:
            matchLabels:
              app: llm-{index}
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
          effect: NoSchedule
      securityContext:
        runAsNonRoot: true
        runAsUser: 1000
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3@sha256:{digest}
          args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--revision", "0e9e39f", "--tensor-parallel-size", "{gpus}"]
          ports:
            - name: http
              containerPort: 8000
          env:
            - name: HF_TOKEN
              valueFrom:
                secretKeyRef:
                  name: hf-token
                  key: token
          resources:
            requests:
              cpu: "8"
              memory: 64Gi
              nvidia.com/gpu: "{gpus}"
            limits:
              memory: 64Gi
              nvidia.com/gpu: "{gpus}"
          readinessProbe:
            httpGet:
              path: /health
              port: http
            periodSeconds: 5
          startupProbe:
            httpGet:
              path: /health
              port: http
            periodSeconds: 10
            failureThreshold: 60
          livenessProbe:
            httpGet:
              path: /health
              port: http
            periodSeconds: 15
            failureThreshold: 4
          securityContext:
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: shm
              mountPath: /dev/shm
      volumes:
        - name: shm
          emptyDir:
            medium: Memory
            sizeLimit: 16Gi
"""


def generate(folder: Path, objects: int, files: int) -> int:
    per_file = max(1, objects // files)
    written = 0
    for file_index in range(files):
        docs = []
        for offset in range(per_file):
            index = file_index * per_file + offset
            docs.append(
                WORKLOAD.format(
                    index=index,
                    team=index % 7,
                    replicas=1 + index % 3,
                    gpus=1 + index % 2 * 1,
                    digest=f"{index:064x}",
                )
            )
        (folder / f"workloads-{file_index:04d}.yaml").write_text("---\n".join(docs), encoding="utf-8")
        written += len(docs)
    return written


def parse_only(folder: Path) -> int:
    count = 0
    for path in sorted(folder.glob("*.yaml")):
        with path.open("rb") as stream:
            count += sum(1 for doc in yaml.load_all(stream, Loader=yaml.CSafeLoader) if doc is not None)
    return count


def lint_in_process(folder: Path) -> int:
    import gpupolicy.rules  # noqa: F401
    from gpupolicy.cli.runtime import paused_cyclic_gc
    from gpupolicy.engine.evaluation import evaluate
    from gpupolicy.formats import RenderOptions, load_formatters
    from gpupolicy.loading.inputs import load_paths
    from gpupolicy.policy.loading import default_policy

    with paused_cyclic_gc():  # as `gpupolicy lint` does
        loaded = load_paths([str(folder)])
        report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
        io.StringIO().write(load_formatters()["text"](report, RenderOptions()))
    return len(loaded.resources)


def lint_cli(folder: Path) -> int:
    completed = subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", str(folder), "--no-repo-policy"],
        capture_output=True,
        check=False,
    )
    if completed.returncode not in (0, 1):
        raise SystemExit(
            f"gpupolicy lint failed ({completed.returncode}): {completed.stderr.decode()[-2000:]}"
        )
    return 0


def timed(function: Callable[[Path], int], folder: Path, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        gc.collect()  # untimed: each run starts from a clean heap, as a CLI process does
        start = time.perf_counter()
        function(folder)
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as tmp:
        folder = Path(tmp)
        count = generate(folder, args.objects, args.files)
        size = sum(path.stat().st_size for path in folder.glob("*.yaml"))
        print(f"corpus: {count} GPU Deployments in {args.files} files, {size / 1e6:.1f} MB")
        lint_in_process(folder)  # warm-up: imports, schema compilation
        baseline = timed(parse_only, folder, args.runs)
        in_process = timed(lint_in_process, folder, args.runs)
        cli = timed(lint_cli, folder, max(1, args.runs // 2 + 1))
    base = statistics.median(baseline)
    rows = [
        ("parse-only (PyYAML CSafeLoader)", baseline),
        ("gpupolicy lint (in-process)", in_process),
        ("gpupolicy lint (CLI, end to end)", cli),
    ]
    print(f"{'what':<36} {'median s':>9} {'min s':>8} {'objects/s':>10} {'x parse-only':>13}")
    for name, times in rows:
        median = statistics.median(times)
        print(f"{name:<36} {median:>9.3f} {min(times):>8.3f} {count / median:>10.0f} {median / base:>13.2f}")
    print(f"runs: {args.runs} (CLI: {len(cli)}); target: lint <= 2.5x parse-only")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
