"""Peak memory and time of `gpupolicy lint` as the corpus grows.

Generates GPU Deployments (the workload of `bench/lint_throughput.py`, ten per file), a single
file of small GPU Deployments of a given size (about 330 bytes each, as in the report of 160,000
Deployments in 50 MB), and GPU Pods (a hundred per file), then runs the `gpupolicy lint` command
on each under `/usr/bin/time -v`, once with each `-j` of --jobs (interleaved, --runs times), and
prints the medians of the wall time, the CPU time (user + system, workers included: on a shared
machine a steadier measure than wall time), the peak resident set size of the whole run (the
largest process) and of each process (the parent, and the largest worker, read from /proc while
it runs: a worker's RSS counts the pages it shares with the parent), the objects per second of CPU
time and the speed-up in wall time over the first -j. --bundle-objects: corpora of Deployments with
their PDBs, PriorityClasses and experiments (bench/lint_throughput.py's generate_bundle). `--repo`
runs another checkout (e.g. an unpacked `git archive` of an older commit) to compare before and after.

    python bench/lint_memory.py [--objects 10000 50000 100000] [--single-file-mb 50]
                                [--pods 100000] [--bundle-objects 10000 100000] [--jobs 1 2]
                                [--runs 1] [--repo PATH] [--json FILE]

This is a benchmark, not a test: it prints figures and asserts nothing. Each run is one process;
on a shared machine, compare runs made in one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from cli_bytecode import bytecode_environment, bytecode_folder, write_bytecode  # noqa: E402
from lint_throughput import WORKLOAD, generate_bundle  # noqa: E402  (the throughput bench's generators)

# The CLI's runs read bytecode from here (bench/cli_bytecode.py), as an installed gpupolicy does.
PYCACHE = bytecode_folder("gpupolicy-memory-pycache-")

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
    jobs: int = 1
    parent_peak_mib: float = 0.0
    worker_peak_mib: float = 0.0  # the largest worker's (0: no worker)
    speedup: float = 1.0  # wall time of the first -j over this one's

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


class PeakSampler:
    """The peak RSS (VmHWM) of a process and of its children, read from /proc every few hundredths of a
    second while they run (the last growth before a worker ends may be missed: a lower bound)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peaks: dict[int, tuple[int, float]] = {}  # pid -> (parent pid, peak MiB)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            for pid, parent in _descendants(self.pid):
                peak = _peak_mib(pid)
                if peak is not None and peak > self.peaks.get(pid, (parent, 0.0))[1]:
                    self.peaks[pid] = (parent, peak)

    def split(self) -> tuple[float, float]:
        """(the linting parent's peak, the largest worker's): the parent is /usr/bin/time's child."""
        parents = [pid for pid, (parent, _) in self.peaks.items() if parent == self.pid]
        parent = parents[0] if parents else -1
        workers = [peak for pid, (owner, peak) in self.peaks.items() if owner == parent]
        return self.peaks.get(parent, (0, 0.0))[1], max(workers, default=0.0)


def _descendants(root: int) -> list[tuple[int, int]]:
    found, queue = [], [root]
    while queue:
        pid = queue.pop()
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found.append((child, pid))
            queue.append(child)
    return found


def _peak_mib(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    return int(found.group(1)) / 1024 if found else None


def measure(repo: Path, target: Path, corpus: str, objects: int, jobs: int = 1) -> Run:
    size = sum(p.stat().st_size for p in ([target] if target.is_file() else target.rglob("*.yaml")))
    command = [
        "/usr/bin/time",
        "-v",
        sys.executable,
        "-m",
        "gpupolicy",
        "lint",
        f"-j{jobs}",
        str(target),
        "--no-repo-policy",
    ]
    environment = bytecode_environment(PYCACHE, {**os.environ, "PYTHONPATH": str(repo)})
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=environment, cwd=repo
    )
    sampler = PeakSampler(process.pid)
    _, raw = process.communicate()
    seconds = time.perf_counter() - started
    sampler.stop()
    stderr = raw.decode("utf-8", "replace")
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    user = re.search(r"User time \(seconds\): ([\d.]+)", stderr)
    system = re.search(r"System time \(seconds\): ([\d.]+)", stderr)
    if found is None or user is None or system is None:
        raise SystemExit(f"/usr/bin/time printed no peak RSS or CPU time: {stderr[-2000:]}")
    cpu = float(user.group(1)) + float(system.group(1))
    parent, worker = sampler.split()
    peak = int(found.group(1)) / 1024
    return Run(corpus, objects, size / 1e6, seconds, cpu, peak, process.returncode, jobs, parent, worker)


def measured(repo: Path, target: Path, corpus: str, objects: int, jobs: list[int], runs: int) -> list[Run]:
    """Each -j `runs` times, interleaved; the median run of each (by wall time), with its speed-up."""
    rounds = [[measure(repo, target, corpus, objects, count) for count in jobs] for _ in range(runs)]
    medians = []
    for column in range(len(jobs)):
        seen = sorted((round_[column] for round_ in rounds), key=lambda run: run.seconds)
        middle = seen[len(seen) // 2]
        medians.append(
            Run(
                **{
                    **asdict(middle),
                    "seconds": statistics.median(run.seconds for run in seen),
                    "cpu_seconds": statistics.median(run.cpu_seconds for run in seen),
                }
            )
        )
    first = medians[0].seconds
    return [Run(**{**asdict(run), "speedup": first / run.seconds}) for run in medians]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, nargs="*", default=[10_000, 50_000, 100_000])
    parser.add_argument("--single-file-mb", type=float, default=50.0, help="0 to skip")
    parser.add_argument("--pods", type=int, default=100_000, help="0 to skip")
    parser.add_argument("--bundle-objects", type=int, nargs="*", default=[], help="bundles of these sizes")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="the -j of each run")
    parser.add_argument("--runs", type=int, default=1, help="runs of each -j (the median is shown)")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to run gpupolicy from")
    parser.add_argument("--json", type=Path, help="also write the runs to this file")
    options = parser.parse_args()
    repo = options.repo.resolve()
    runs: list[Run] = []
    write_bytecode(repo, bytecode_environment(PYCACHE, {**os.environ, "PYTHONPATH": str(repo)}))

    def run(target: Path, corpus: str, objects: int) -> None:
        for found in measured(repo, target, corpus, objects, options.jobs, options.runs):
            runs.append(found)
            print(_row(found), flush=True)

    with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as tmp:
        root = Path(tmp)
        for count in options.objects:
            folder = root / f"deployments-{count}"
            write_files(folder, count, 10, deployment)
            run(folder, "Deployments, 10 per file", count)
        for count in options.bundle_objects:
            folder = root / f"bundle-{count}"
            folder.mkdir()
            run(folder, "bundle, 10 per file", generate_bundle(folder, count, count // 10))
        if options.single_file_mb > 0:
            path = root / "deployments.yaml"
            count = write_single_file(path, options.single_file_mb)
            run(path, "small Deployments, 1 file", count)
        if options.pods > 0:
            folder = root / f"pods-{options.pods}"
            write_files(folder, options.pods, 100, pod)
            run(folder, "GPU Pods, 100 per file", options.pods)
    print(
        f"checkout: {repo}; python: {sys.version.split()[0]}; cores: {os.cpu_count()}; runs: {options.runs}"
    )
    if options.json is not None:
        options.json.write_text(
            json.dumps([{**asdict(run), "per_second": run.per_second} for run in runs], indent=2) + "\n",
            encoding="utf-8",
        )
    return 0


def _row(run: Run) -> str:
    return (
        f"{run.corpus:<26} {run.objects:>8,} objects {run.megabytes:>7.1f} MB -j {run.jobs}  "
        f"{run.seconds:>7.1f} s wall {run.cpu_seconds:>7.1f} s CPU {run.peak_mib:>7.0f} MiB peak "
        f"(parent {run.parent_peak_mib:>5.0f}, worker {run.worker_peak_mib:>5.0f}) "
        f"{run.per_second:>6.0f} objects/CPU s  x{run.speedup:.2f} vs -j first  exit {run.exit_code}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
