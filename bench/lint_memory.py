"""Peak memory and time of `gpupolicy lint` as the corpus grows.

Generates GPU Deployments (the workload of `bench/lint_throughput.py`, ten per file), a single
file of small GPU Deployments of a given size (about 330 bytes each, as in the report of 160,000
Deployments in 50 MB), and GPU Pods (a hundred per file), then runs the `gpupolicy lint` command
on each under `/usr/bin/time -v` and prints the wall time, the CPU time (user + system: on a
shared machine a steadier measure than wall time), the peak resident set size and the objects
per second of CPU time. `--repo` runs another checkout (e.g. an unpacked
`git archive` of an older commit) to compare before and after.

    python bench/lint_memory.py [--objects 10000 50000 100000] [--single-file-mb 50]
                                [--pods 100000] [--repo PATH] [--json FILE]

This is a benchmark, not a test: it prints figures and asserts nothing. Each run is one process;
on a shared machine, compare runs made in one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from lint_throughput import WORKLOAD  # noqa: E402  (the generator shared with the throughput bench)

SMALL_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d-{index}
  namespace: team-{team}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: d-{index}}}
  template:
    metadata:
      labels: {{app: d-{index}}}
    spec:
      containers:
        - name: c
          image: nvcr.io/nvidia/pytorch:24.05-py3
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""

# A GPU Pod with the usual gaps (no probes, no securityContext, no PriorityClass): several findings each.
POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: train-{index}
  namespace: team-{team}
  labels:
    app: train-{index}
spec:
  restartPolicy: Never
  tolerations:
    - key: nvidia.com/gpu
      operator: Exists
      effect: NoSchedule
  containers:
    - name: trainer
      image: nvcr.io/nvidia/pytorch:24.05-py3
      command: ["torchrun", "--nproc-per-node", "{gpus}", "train.py"]
      resources:
        requests:
          cpu: "4"
          memory: 32Gi
          nvidia.com/gpu: "{gpus}"
        limits:
          nvidia.com/gpu: "{gpus}"
"""


@dataclass(frozen=True, slots=True)
class Run:
    corpus: str
    objects: int
    megabytes: float
    seconds: float
    cpu_seconds: float
    peak_mib: float
    exit_code: int

    @property
    def per_second(self) -> float:
        return self.objects / self.cpu_seconds if self.cpu_seconds else 0.0


def deployment(index: int) -> str:
    return WORKLOAD.format(
        index=index, team=index % 7, replicas=1 + index % 3, gpus=1 + index % 2, digest=f"{index:064x}"
    )


def small_deployment(index: int) -> str:
    return SMALL_DEPLOYMENT.format(index=index, team=index % 7)


def pod(index: int) -> str:
    return POD.format(index=index, team=index % 7, gpus=1 + index % 4)


def write_files(folder: Path, objects: int, per_file: int, render: Callable[[int], str]) -> None:
    folder.mkdir(parents=True)
    for start in range(0, objects, per_file):
        docs = [render(index) for index in range(start, min(objects, start + per_file))]
        (folder / f"objects-{start // per_file:06d}.yaml").write_text("---\n".join(docs), encoding="utf-8")


def write_single_file(path: Path, megabytes: float) -> int:
    """Small Deployments into one file until it holds `megabytes` MB; returns how many."""
    budget = int(megabytes * 1e6)
    written, count = 0, 0
    with path.open("w", encoding="utf-8") as stream:
        while written < budget:
            text = ("---\n" if count else "") + small_deployment(count)
            stream.write(text)
            written += len(text.encode())
            count += 1
    return count


def measure(repo: Path, target: Path, corpus: str, objects: int) -> Run:
    size = sum(p.stat().st_size for p in ([target] if target.is_file() else target.rglob("*.yaml")))
    command = [
        "/usr/bin/time",
        "-v",
        sys.executable,
        "-m",
        "gpupolicy",
        "lint",
        str(target),
        "--no-repo-policy",
    ]
    environment = {**os.environ, "PYTHONPATH": str(repo)}
    started = time.perf_counter()
    completed = subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment, check=False, cwd=repo
    )
    seconds = time.perf_counter() - started
    stderr = completed.stderr.decode("utf-8", "replace")
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    user = re.search(r"User time \(seconds\): ([\d.]+)", stderr)
    system = re.search(r"System time \(seconds\): ([\d.]+)", stderr)
    if found is None or user is None or system is None:
        raise SystemExit(f"/usr/bin/time printed no peak RSS or CPU time: {stderr[-2000:]}")
    cpu = float(user.group(1)) + float(system.group(1))
    return Run(corpus, objects, size / 1e6, seconds, cpu, int(found.group(1)) / 1024, completed.returncode)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, nargs="*", default=[10_000, 50_000, 100_000])
    parser.add_argument("--single-file-mb", type=float, default=50.0, help="0 to skip")
    parser.add_argument("--pods", type=int, default=100_000, help="0 to skip")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to run gpupolicy from")
    parser.add_argument("--json", type=Path, help="also write the runs to this file")
    options = parser.parse_args()
    repo = options.repo.resolve()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as tmp:
        root = Path(tmp)
        for count in options.objects:
            folder = root / f"deployments-{count}"
            write_files(folder, count, 10, deployment)
            runs.append(measure(repo, folder, "Deployments, 10 per file", count))
            print(_row(runs[-1]), flush=True)
        if options.single_file_mb > 0:
            path = root / "deployments.yaml"
            count = write_single_file(path, options.single_file_mb)
            runs.append(measure(repo, path, "small Deployments, 1 file", count))
            print(_row(runs[-1]), flush=True)
        if options.pods > 0:
            folder = root / f"pods-{options.pods}"
            write_files(folder, options.pods, 100, pod)
            runs.append(measure(repo, folder, "GPU Pods, 100 per file", options.pods))
            print(_row(runs[-1]), flush=True)
    print(f"checkout: {repo}; python: {sys.version.split()[0]}; cores: {os.cpu_count()}")
    if options.json is not None:
        options.json.write_text(
            json.dumps([{**asdict(run), "per_second": run.per_second} for run in runs], indent=2) + "\n",
            encoding="utf-8",
        )
    return 0


def _row(run: Run) -> str:
    return (
        f"{run.corpus:<26} {run.objects:>8,} objects {run.megabytes:>7.1f} MB  "
        f"{run.seconds:>7.1f} s wall {run.cpu_seconds:>7.1f} s CPU {run.peak_mib:>7.0f} MiB peak "
        f"{run.per_second:>6.0f} objects/CPU s  "
        f"exit {run.exit_code}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
