"""Start-up: `gpupolicy lint one.yaml` (what the pre-commit hook runs per commit) against its floors.

Times, interleaved round by round so that the load of a shared machine falls on all alike:
(a) `python -c pass`, the interpreter alone; (b) a PyYAML parse of the same file (import yaml,
`load_all` with the C loader); (c) `gpupolicy lint one.yaml` with no repository policy; (d) the
same beside a `.gpupolicy.yaml`, which is validated too; (e) the pre-commit hook's command,
`gpupolicy lint --context-from-git one.yaml`, in a git repository holding that policy (git is
asked for the top of the tree; the file is the repository's only manifest); (f) the hook's command
on the same file in a repository of --repository-objects objects (bench/lint_throughput.py's
bundle: GPU Deployments, a PDB beside each, PriorityClasses, experiments), all of it context for
the cross-object rules. Prints the median wall and CPU time of
--runs runs of each and the ratios of the lint runs to (a) and (b); then, from one run of each lint
case under `python -X importtime`, the total import time and the costliest imports.

The code timed is this checkout's (PYTHONPATH). Bytecode is written to a temporary
PYTHONPYCACHEPREFIX and every command runs once before timing, as an installed package would
run: with PYTHONDONTWRITEBYTECODE set, each run would compile every module again.

With --against DIR (another checkout, such as the main branch's), its lint cases are timed
in the same rounds, for a before and after measured in one sitting.

    python bench/startup.py [--runs 7] [--top 12] [--repository-objects 10000] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

ONE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: serving
  labels: {app: llm}
spec:
  replicas: 2
  selector:
    matchLabels: {app: llm}
  template:
    metadata:
      labels: {app: llm}
    spec:
      priorityClassName: gpu-serving
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            requests: {nvidia.com/gpu: 1, cpu: "8", memory: 64Gi}
            limits: {nvidia.com/gpu: 1, memory: 64Gi}
"""
REPO_POLICY = """\
apiVersion: gpupolicy.io/v1alpha1
kind: Policy
kubernetesVersion: "1.30"
gpu:
  servingImages: ["^vllm/", "triton"]
rules:
  GP701: {enabled: false}
"""
PARSE = (
    "import sys, yaml\n"
    "with open(sys.argv[1], encoding='utf-8') as f: list(yaml.load_all(f, Loader=yaml.CSafeLoader))"
)


def timed(command: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system, of the child) seconds of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # 1: the lint found something, as it should
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_profile(command: Sequence[str], cwd: Path, env: Mapping[str, str]) -> list[tuple[int, int, str]]:
    """(self µs, cumulative µs, module) of every import of one run under `-X importtime`."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((int(own), int(cumulative), name.rstrip()))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--top", type=int, default=12, help="imports listed per lint case")
    parser.add_argument(
        "--repository-objects", type=int, default=10_000, help="objects of the large repository (0: none)"
    )
    parser.add_argument(
        "--against", type=Path, metavar="DIR", help="another checkout to time beside this one"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gpupolicy-startup-") as tmp:
        root = Path(tmp)
        bare, with_policy, hook = root / "bare", root / "with-policy", root / "hook"
        for folder in (bare, with_policy, hook):
            folder.mkdir()
            (folder / "one.yaml").write_text(ONE, encoding="utf-8")
        for folder in (with_policy, hook):
            (folder / ".gpupolicy.yaml").write_text(REPO_POLICY, encoding="utf-8")
        subprocess.run(["git", "init", "-q"], cwd=hook, check=True)
        large = root / "large"
        if args.repository_objects:
            _large_repository(large, args.repository_objects)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=str(REPO), PYTHONPYCACHEPREFIX=str(root / "pycache"), NO_COLOR="1")
        python = sys.executable
        lint = [python, "-m", "gpupolicy", "lint", "one.yaml"]
        hook_lint = [python, "-m", "gpupolicy", "lint", "--context-from-git", "one.yaml"]
        cases: dict[str, tuple[list[str], Path, dict[str, str]]] = {
            "python -c pass": ([python, "-c", "pass"], bare, env),
            "PyYAML parse of one.yaml": ([python, "-c", PARSE, "one.yaml"], bare, env),
            "gpupolicy lint one.yaml": (lint, bare, env),
            "... with a .gpupolicy.yaml": (lint, with_policy, env),
            "... --context-from-git (hook)": (hook_lint, hook, env),
        }
        in_large = f"... (hook), repository of {args.repository_objects:,}"
        if args.repository_objects:
            cases[in_large] = (hook_lint, large, env)
        if args.against is not None:
            other = {**env, "PYTHONPATH": str(args.against.resolve())}
            cases[f"lint one.yaml, {args.against.name}"] = (lint, bare, other)
            cases[f"... .gpupolicy.yaml, {args.against.name}"] = (lint, with_policy, other)
            cases[f"... (hook), {args.against.name}"] = (hook_lint, hook, other)
            if args.repository_objects:
                cases[f"{in_large}, {args.against.name}"] = (hook_lint, large, other)
        for command, cwd, case_env in cases.values():  # bytecode written, caches warm
            timed(command, cwd, case_env)
        walls: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name, (command, cwd, case_env) in cases.items():
                wall, cpu = timed(command, cwd, case_env)
                walls[name].append(wall)
                cpus[name].append(cpu)
        wall = {name: statistics.median(values) for name, values in walls.items()}
        cpu = {name: statistics.median(values) for name, values in cpus.items()}
        floor, parse = wall["python -c pass"], wall["PyYAML parse of one.yaml"]
        print(
            f"medians of {args.runs} interleaved runs ({os.cpu_count()} cores, load {os.getloadavg()[0]:.2f})"
        )
        width = max(len(name) for name in cases)
        print(f"{'command':{width}} {'wall s':>7} {'cpu s':>7} {'÷ pass':>7} {'÷ parse':>8}")
        for name in cases:
            print(
                f"{name:{width}} {wall[name]:7.3f} {cpu[name]:7.3f} {wall[name] / floor:7.1f} {wall[name] / parse:8.2f}"
            )
        for name in list(cases)[2:]:
            command, cwd, case_env = cases[name]
            rows = import_profile(command, cwd, case_env)
            total = sum(own for own, _, _ in rows) / 1000
            print(f"\n{name}: {len(rows)} modules imported, {total:.0f} ms of imports (-X importtime)")
            outermost = [row for row in rows if not row[2].startswith("  ")]
            for _own, cumulative, module in sorted(outermost, key=lambda row: -row[1])[: args.top]:
                print(f"  {cumulative / 1000:6.1f} ms  {module.strip()}")
    return 0


def _large_repository(folder: Path, objects: int) -> None:
    """A git repository of bench/lint_throughput.py's bundle beside one.yaml and the policy."""
    sys.path.insert(0, str(REPO / "bench"))
    from lint_throughput import generate  # bench/ is not a package

    folder.mkdir()
    generate(folder, objects, max(objects // 10, 1), bundle=True)
    (folder / "one.yaml").write_text(ONE, encoding="utf-8")
    (folder / ".gpupolicy.yaml").write_text(REPO_POLICY, encoding="utf-8")
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)


if __name__ == "__main__":
    raise SystemExit(main())
