"""What the streaming lint spends in the cyclic collector, beside the whole lint's CPU time.

    .venv/bin/python bench/stream_collections.py [--objects 10000] [--files 1000] [--runs 3] [--bundle]
        [--repo PATH]

`gpupolicy lint` pauses the cyclic collector (batch runs) and the stream collects the youngest
generation every `streaming.COLLECT_EVERY` objects (gpupolicy/lint/streaming.py). A collection
costs what it finds to walk and free: cycles that objects leave behind make it expensive. Each run
generates bench/lint_throughput.py's GPU Deployments (`--bundle`: its bundle of Deployments, PDBs,
PriorityClasses and experiments, inputs that pass 1 keeps whole for pass 2), lints them in this process as the CLI does
(`-j 1`, the cyclic collector paused), and times every `gc.collect` the stream makes. Prints, per
run and as medians: the seconds in those collections, how many, and the lint's CPU time. `--repo`
imports gpupolicy from another checkout to compare before and after in one sitting.

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


class _TimedCollector:
    """The `gc` module as the stream sees it, with `collect` timed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)

    def collect(self, *generation: int) -> int:
        started = time.perf_counter()
        try:
            return gc.collect(*generation)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1


def one_run(folder: Path) -> tuple[float, int, float]:
    from gpupolicy.cli.runtime import paused_cyclic_gc
    from gpupolicy.lint import streaming
    from gpupolicy.loading.inputs import iter_sources
    from gpupolicy.policy.loading import default_policy

    timed = _TimedCollector()
    streaming.gc = timed  # type: ignore[assignment]
    try:
        sources = list(iter_sources([str(folder)]))
        started = time.process_time()
        with paused_cyclic_gc():
            streaming.lint(sources, default_policy())
        return timed.seconds, timed.calls, time.process_time() - started
    finally:
        streaming.gc = gc  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--bundle", action="store_true", help="Deployments with PDBs and experiments")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to import gpupolicy from")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO / "bench"))
    sys.path.insert(0, str(options.repo.resolve()))
    from lint_throughput import generate

    import gpupolicy.rules  # noqa: F401  # registered before the first run is timed

    with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as tmp:
        folder = Path(tmp)
        generate(folder, options.objects, options.files, bundle=options.bundle)
        one_run(folder)  # warm-up: the policy's and the rules' caches
        runs = [one_run(folder) for _ in range(options.runs)]
    for seconds, calls, cpu in runs:
        print(f"collections {seconds:6.3f} s in {calls:3d} calls; lint CPU {cpu:6.2f} s")
    seconds, calls, cpu = (statistics.median(column) for column in zip(*runs, strict=True))
    print(
        f"median: collections {seconds:.3f} s ({seconds / cpu:.1%} of the lint's CPU, {cpu:.2f} s), "
        f"{calls:.0f} calls; {options.objects:,} {'objects (bundle)' if options.bundle else 'Deployments'} "
        f"in {options.files:,} files; "
        f"gpupolicy from {options.repo}"
    )


if __name__ == "__main__":
    main()
