"""Where an in-process lint's CPU goes, stage by stage, beside PyYAML's parse of the same files.

Generates N GPU Deployments across F files (bench/lint_throughput.py's generator; --bundle for its
bundle of Deployments, PDBs, PriorityClasses and experiments), then times, in one process with the
cyclic collector paused as `gpupolicy lint` runs: (a) parse-only, PyYAML's `load_all` with
`CSafeLoader`; (b) `load_paths` (values and position tables); (c) `evaluate` of every rule over the
objects just loaded, whose views and memos are therefore made from nothing, as in a lint; (d) the
text report; (e) the release of the objects and the report (what reference counting frees: an
in-process lint pays it when its caller drops them, a streaming one object by object; before
6 December 2026 it was left out, and bench/lint_throughput.py's in-process lint was 0.05 x parse
above the stages' sum for it). Each stage's CPU time (user + system) is printed with its ratio to
(a), the medians of --runs rounds.

With --against DIR (another checkout), each checkout runs in a child process of its own, round by
round in turn (each round starting with the next checkout), on the same files: a before and after
from one sitting.

    python bench/lint_stages.py [--objects 2000] [--files 200] [--runs 5] [--bundle] [--against DIR ...]

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
STAGES = ("parse", "load", "evaluate", "render", "release")


def measure(folder: Path, runs: int) -> dict[str, list[float]]:
    """CPU seconds of each stage, `runs` times (after an untimed lint: imports, schemas)."""
    import gpupolicy.rules  # noqa: F401  (registers the rules)
    from gpupolicy.engine.evaluation import evaluate
    from gpupolicy.formats import RenderOptions, load_formatters
    from gpupolicy.loading.inputs import load_paths
    from gpupolicy.policy.loading import default_policy

    policy, render = default_policy(), load_formatters(["text"])["text"]
    files = sorted(folder.glob("*.yaml"))

    def parse() -> None:
        for path in files:
            with path.open("rb") as stream:
                for _ in yaml.load_all(stream, Loader=yaml.CSafeLoader):
                    pass

    evaluate(load_paths([str(folder)]).resources, policy)
    times: dict[str, list[float]] = {stage: [] for stage in STAGES}
    gc.collect()
    gc.disable()
    for _ in range(runs):
        started = time.process_time()
        parse()
        loaded_at = time.process_time()
        loaded = load_paths([str(folder)])
        evaluated_at = time.process_time()
        report = evaluate(loaded.resources, policy, problems=loaded.problems)
        rendered_at = time.process_time()
        io.StringIO().write(render(report, RenderOptions()))
        done = time.process_time()
        del loaded, report  # what reference counting frees (the cycles wait for the collection below)
        released = time.process_time()
        for stage, seconds in zip(
            STAGES,
            (
                loaded_at - started,
                evaluated_at - loaded_at,
                rendered_at - evaluated_at,
                done - rendered_at,
                released - done,
            ),
            strict=True,
        ):
            times[stage].append(seconds)
        gc.collect()  # untimed: the next round starts from a clean heap
    return times


def _child(folder: Path, runs: int) -> int:
    times = measure(folder, runs)
    for stage in STAGES:
        print(stage, *(f"{seconds:.6f}" for seconds in times[stage]))
    return 0


def _in_checkout(checkout: Path, folder: Path) -> dict[str, list[float]]:
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(folder), "--runs", "1"],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout.resolve())},
        capture_output=True,
        text=True,
        check=True,
    )
    times: dict[str, list[float]] = {}
    for line in completed.stdout.splitlines():
        stage, *values = line.split()
        times[stage] = [float(value) for value in values]
    return times


def _print(name: str, times: dict[str, list[float]]) -> None:
    base = statistics.median(times["parse"])
    cells = []
    for stage in STAGES:
        median = statistics.median(times[stage])
        cells.append(f"{stage} {median:.3f} s ({median / base:.2f})")
    lint = statistics.median(
        [sum(times[stage][index] for stage in STAGES[1:]) for index in range(len(times["parse"]))]
    )
    print(f"{name}: " + ", ".join(cells) + f"; lint {lint:.3f} s ({lint / base:.2f} x parse)")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=2_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--bundle", action="store_true", help="Deployments with PDBs and experiments")
    parser.add_argument("--against", type=Path, nargs="*", default=[], help="other checkouts")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child is not None:
        return _child(options.child, options.runs)
    sys.path.insert(0, str(REPO / "bench"))
    from lint_throughput import generate

    with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as tmp:
        folder = Path(tmp)
        count = generate(folder, options.objects, options.files, bundle=options.bundle)
        print(
            f"corpus: {count} objects in {len(list(folder.glob('*.yaml')))} files; CPU medians, ratio to parse"
        )
        if not options.against:
            _print(str(REPO), measure(folder, options.runs))
            return 0
        checkouts = [REPO, *options.against]
        rounds: dict[Path, dict[str, list[float]]] = {checkout: {} for checkout in checkouts}
        for index in range(options.runs):
            # Each round starts with another checkout: the first child of a round ran slower on
            # this machine, which a fixed order charged to the same checkout every time.
            turn = index % len(checkouts)
            for checkout in [*checkouts[turn:], *checkouts[:turn]]:
                for stage, values in _in_checkout(checkout, folder).items():
                    rounds[checkout].setdefault(stage, []).extend(values)
        for checkout in checkouts:
            _print(str(checkout), rounds[checkout])
        print(
            f"{options.runs} rounds, the checkouts in turn (a different one first each round), "
            "each in a child process of its own"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
