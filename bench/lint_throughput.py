"""Lint throughput against its baseline: PyYAML's C loader alone on the same files.

Generates N GPU workload objects across F files (default 10,000 across 1,000), then, in one run,
times (a) parse-only: `yaml.load_all(..., Loader=CSafeLoader)` over every file, with the cyclic
collector paused as the lints pause it (before 6 December 2026 it ran with the collector on, which
cost PyYAML about 1 % more and made every ratio that much lower), (b) `gpupolicy
lint` in-process (load with positions + every rule + text rendering, and the release of what it
loaded when it returns, which bench/lint_stages.py leaves out), and (c) the `gpupolicy
lint` command end to end (a subprocess: interpreter start-up and imports included), with each
`-j` of --jobs, the runs interleaved. Prints the median of --runs runs of each, the ratios to
parse-only and the speed-up of each -j over the first. --bundle: a PDB beside every Deployment,
the PriorityClasses they name and experiments with two arms (generate_bundle).

The CLI runs as an installed package runs, from bytecode: it is written to a temporary
PYTHONPYCACHEPREFIX by an untimed run of each command (bench/startup.py does the same). Before 6
December 2026 it ran as the environment said, and where PYTHONDONTWRITEBYTECODE is set (this
machine) each run compiled every module it imports from source again: about 0.15 s of CPU, 0.03 x
parse-only, that neither the in-process lint nor an installed CLI spends. --compile-each-run runs it
that way again, for figures comparable with those.

    python bench/lint_throughput.py [--objects 10000] [--files 1000] [--runs 5] [--jobs 1 2] [--bundle]
        [--against DIR ...] [--compile-each-run]

--against DIR (another checkout, e.g. `git worktree add /tmp/base COMMIT`): its in-process lint and
its CLI are timed in the same rounds as this checkout's, for a before and after from one sitting.
Then every in-process lint runs in a child process of its checkout (a warm-up lint, then the timed
one), and CPU time (user + system) is printed beside the wall time: on a shared machine it is the
steadier figure.
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from cli_bytecode import bytecode_environment  # bench/, beside this script

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


# The objects cross-object rules read beside the workloads (bundle=True): a PDB per Deployment,
# the PriorityClasses they name, and an experiment ConfigMap with two arms every EXPERIMENT_EVERY apps.
PDB = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: llm-{index}
  namespace: team-{team}
spec:
  maxUnavailable: 1
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      app: llm-{index}
"""
PRIORITY_CLASSES = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: gpu-serving
value: 100000
preemptionPolicy: PreemptLowerPriority
description: Online GPU inference.
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: gpu-batch
value: 1000
preemptionPolicy: Never
description: Batch and training jobs.
"""
EXPERIMENT = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: llm-{index}-experiment
  namespace: team-{team}
immutable: true
data:
  change: "replicas of the server"
  variable: replicas
  arms: "more-replicas"
  fixed: "image, model, input"
  metrics: "P95, error rate, accepted throughput, GPU hours"
  repeats: "3"
"""
EXPERIMENT_EVERY = 50
ARM_OFFSET = 10_000_000  # the treatment arm of app i is Deployment llm-(i + ARM_OFFSET)
# Namespaces of a realistic size: cross-object rules compare the objects of one namespace.
APPS_PER_NAMESPACE = 20
CLASS_LABEL = "    gpupolicy.io/workload-class: online\n"


def deployment(index: int, *, team: int | None = None, replicas: int | None = None, arm: str = "") -> str:
    """The GPU Deployment of `index`; `arm` ("experiment/arm") labels it an arm of an experiment,
    whose arms share the image of `index` modulo ARM_OFFSET (only the variable may differ)."""
    text = WORKLOAD.format(
        index=index,
        team=index % 7 if team is None else team,
        replicas=1 + index % 3 if replicas is None else replicas,
        gpus=1 + index % 2 * 1,
        digest=f"{index % ARM_OFFSET:064x}",
    )
    if not arm:
        return text
    experiment, name = arm.split("/")
    labels = f"    gpupolicy.io/experiment: {experiment}\n    gpupolicy.io/arm: {name}\n"
    return text.replace(CLASS_LABEL, CLASS_LABEL + labels, 1)


def app(index: int) -> list[str]:
    """A Deployment and its PDB, APPS_PER_NAMESPACE apps to a namespace; every EXPERIMENT_EVERY-th
    app an experiment instead: its ConfigMap and two arms, with their PDBs, that differ in replicas."""
    team = index // APPS_PER_NAMESPACE
    if index % EXPERIMENT_EVERY:
        return [deployment(index, team=team), PDB.format(index=index, team=team)]
    treatment = index + ARM_OFFSET
    experiment = f"llm-{index}-experiment"
    return [
        EXPERIMENT.format(index=index, team=team),
        deployment(index, team=team, replicas=2, arm=f"{experiment}/control"),
        PDB.format(index=index, team=team),
        deployment(treatment, team=team, replicas=3, arm=f"{experiment}/more-replicas"),
        PDB.format(index=treatment, team=team),
    ]


def generate_bundle(folder: Path, objects: int, files: int) -> int:
    """About `objects` objects of apps (`app`), whole apps to a file, across about `files` files,
    and a file of the PriorityClasses they name."""
    (folder / "priority-classes.yaml").write_text(PRIORITY_CLASSES, encoding="utf-8")
    per_file = max(1, objects // files)
    written, index, file_index = 2, 0, 0
    while written < objects:
        docs: list[str] = []
        while len(docs) < per_file and written + len(docs) < objects:
            docs.extend(app(index))
            index += 1
        (folder / f"apps-{file_index:05d}.yaml").write_text("---\n".join(docs), encoding="utf-8")
        written += len(docs)
        file_index += 1
    return written


def generate(folder: Path, objects: int, files: int, *, bundle: bool = False) -> int:
    """`objects` GPU Deployments across `files` files; with `bundle`, about `objects` objects of
    apps (a Deployment and its PDB, some experiments) and a file of PriorityClasses."""
    if bundle:
        return generate_bundle(folder, objects, files)
    per_file = max(1, objects // files)
    written = 0
    for file_index in range(files):
        docs = [deployment(file_index * per_file + offset) for offset in range(per_file)]
        (folder / f"workloads-{file_index:04d}.yaml").write_text("---\n".join(docs), encoding="utf-8")
        written += len(docs)
    return written


def parse_only(folder: Path) -> int:
    """PyYAML's C loader over every file, with the cyclic collector paused as both lints run it
    (`paused_cyclic_gc`): the ratio then compares the work done, not the collector's."""
    count = 0
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for path in sorted(folder.glob("*.yaml")):
            with path.open("rb") as stream:
                count += sum(1 for doc in yaml.load_all(stream, Loader=yaml.CSafeLoader) if doc is not None)
    finally:
        if was_enabled:
            gc.enable()
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


def lint_cli(folder: Path, jobs: int = 1, env: dict[str, str] | None = None) -> int:
    completed = subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", f"-j{jobs}", str(folder), "--no-repo-policy"],
        env=env,
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


def timed_cli(
    folder: Path, jobs: list[int], runs: int, env: dict[str, str] | None = None
) -> dict[int, list[float]]:
    """The CLI with each -j, the runs interleaved (a shared machine's load then weighs on all alike)."""
    times: dict[int, list[float]] = {count: [] for count in jobs}
    for count in jobs:
        lint_cli(folder, count, env)  # untimed: bytecode written
    for _ in range(runs):
        for count in jobs:
            start = time.perf_counter()
            lint_cli(folder, count, env)
            times[count].append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="-j of the CLI rows")
    parser.add_argument(
        "--bundle", action="store_true", help="Deployments with PDBs, PriorityClasses and experiments"
    )
    parser.add_argument(
        "--against", type=Path, nargs="*", default=[], help="other checkouts, timed in the same rounds"
    )
    parser.add_argument(
        "--compile-each-run",
        action="store_true",
        help="no bytecode cache for the CLI: with PYTHONDONTWRITEBYTECODE set, each run compiles its modules",
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # a timed in-process lint
    args = parser.parse_args()
    if args.child is not None:
        return _child(args.child)
    with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as tmp:
        folder = Path(tmp) / "manifests"
        folder.mkdir()
        args.pycache = None if args.compile_each_run else Path(tmp) / "pycache"
        count = generate(folder, args.objects, args.files, bundle=args.bundle)
        size = sum(path.stat().st_size for path in folder.glob("*.yaml"))
        what = "objects (GPU Deployments, PDBs, experiments)" if args.bundle else "GPU Deployments"
        print(f"corpus: {count} {what} in {len(list(folder.glob('*.yaml')))} files, {size / 1e6:.1f} MB")
        if args.against:
            return _compare([REPO, *args.against], folder, count, args)
        lint_in_process(folder)  # warm-up: imports, schema compilation
        baseline = timed(parse_only, folder, args.runs)
        in_process = timed(lint_in_process, folder, args.runs)
        cli = timed_cli(folder, args.jobs, max(1, args.runs // 2 + 1), _environment(None, args.pycache))
    base = statistics.median(baseline)
    first = statistics.median(cli[args.jobs[0]])
    rows = [
        ("parse-only (PyYAML CSafeLoader)", baseline, None),
        ("gpupolicy lint (in-process)", in_process, None),
        *((f"gpupolicy lint -j {jobs} (CLI, end to end)", cli[jobs], first) for jobs in args.jobs),
    ]
    header = f"{'what':<36} {'median s':>9} {'min s':>8} {'objects/s':>10} {'x parse-only':>13}"
    print(f"{header} {'speed-up vs -j ' + str(args.jobs[0]):>18}")
    for name, times, reference in rows:
        median = statistics.median(times)
        speedup = f"{reference / median:>18.2f}" if reference else ""
        print(
            f"{name:<36} {median:>9.3f} {min(times):>8.3f} {count / median:>10.0f} {median / base:>13.2f} {speedup}"
        )
    print(f"runs: {args.runs} (CLI: {len(cli[args.jobs[0]])}, interleaved); target: lint <= 2.5x parse-only")
    return 0


REPO = Path(__file__).resolve().parent.parent


def _child(folder: Path) -> int:
    """Run in a checkout's environment: a warm-up lint, then one timed; prints `wall cpu`."""
    lint_in_process(folder)
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    lint_in_process(folder)
    print(f"{time.perf_counter() - wall:.6f} {time.process_time() - cpu:.6f}")
    return 0


def _environment(checkout: Path | None, pycache: Path | None) -> dict[str, str]:
    """The environment of a run of `checkout`'s code (None: this process's), with bytecode written to
    and read from `pycache` when given (PYTHONDONTWRITEBYTECODE dropped), as an installed package has it."""
    env = dict(os.environ) if pycache is None else bytecode_environment(pycache)
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout.resolve())
    return env


def _timed_child(checkout: Path, folder: Path, pycache: Path | None) -> tuple[float, float]:
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(folder)],
        cwd=checkout,
        env=_environment(checkout, pycache),
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu = completed.stdout.split()[-2:]
    return float(wall), float(cpu)


def _timed_cli_in(checkout: Path, folder: Path, jobs: int, pycache: Path | None) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", f"-j{jobs}", str(folder), "--no-repo-policy"],
        cwd=checkout,
        env=_environment(checkout, pycache),
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - start
    if completed.returncode not in (0, 1):
        raise SystemExit(f"gpupolicy lint in {checkout} failed: {completed.stderr.decode()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _compare(checkouts: list[Path], folder: Path, count: int, args: argparse.Namespace) -> int:
    """Each checkout's in-process lint and CLI, round by round beside parse-only (wall, CPU)."""
    parse_wall: list[float] = []
    parse_cpu: list[float] = []
    times: dict[tuple[Path, str], list[tuple[float, float]]] = {}
    for checkout in checkouts:  # untimed: bytecode written
        for jobs in args.jobs:
            _timed_cli_in(checkout, folder, jobs, args.pycache)
    for index in range(args.runs):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        parse_only(folder)
        parse_wall.append(time.perf_counter() - wall)
        parse_cpu.append(time.process_time() - cpu)
        turn = index % len(checkouts)  # each round starts with another checkout (bench/lint_stages.py)
        for checkout in [*checkouts[turn:], *checkouts[:turn]]:
            times.setdefault((checkout, "in-process"), []).append(
                _timed_child(checkout, folder, args.pycache)
            )
            for jobs in args.jobs:
                times.setdefault((checkout, f"CLI -j {jobs}"), []).append(
                    _timed_cli_in(checkout, folder, jobs, args.pycache)
                )
    base_wall, base_cpu = statistics.median(parse_wall), statistics.median(parse_cpu)
    print(f"{'checkout':<28} {'what':<12} {'wall s':>8} {'x parse':>8} {'CPU s':>8} {'x parse CPU':>12}")
    print(f"{'':<28} {'parse-only':<12} {base_wall:>8.3f} {1:>8.2f} {base_cpu:>8.3f} {1:>12.2f}")
    for (checkout, what), pairs in times.items():
        wall = statistics.median(pair[0] for pair in pairs)
        cpu = statistics.median(pair[1] for pair in pairs)
        name = str(checkout)[-28:]
        print(
            f"{name:<28} {what:<12} {wall:>8.3f} {wall / base_wall:>8.2f} {cpu:>8.3f} {cpu / base_cpu:>12.2f}"
        )
    bytecode = "compiled from source each run" if args.pycache is None else "from bytecode"
    print(
        f"medians of {args.runs} interleaved rounds (a different checkout first each round); {count} objects;"
        f" the CLI {bytecode}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
