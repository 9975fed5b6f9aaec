"""How `gpupolicy lint`'s cost grows with the number of objects: CPU per object at several sizes.

Issue 16 asks for time linear from 1,000 to 100,000 objects and a peak under 1 GiB at 100,000.
This runs the CLI (`-j 1 -f json`, from bytecode as installed: bench/cli_bytecode.py) on
bench/lint_throughput.py's trees of each size in --objects (a tenth as many files as objects;
`--bundle`, the default, is its tree of Deployments, a PDB beside each, PriorityClasses and
experiments), the sizes interleaved round by round, and prints for each size the median CPU (user +
system of the CLI's process), the CPU per object, its ratio to the first size's, and the peak
memory (the largest of the runs).

    python bench/lint_scaling.py [--objects 1000 10000 100000] [--runs 3] [--plain]
        [--trees DIR] [--keep-loaded-bytes BYTES] [--against DIR ...]

--trees DIR keeps the generated trees in DIR (bundle-N or plain-N), and reuses them on the next run
(156 MB at 100,000 objects). --keep-loaded-bytes sets `streaming.KEEP_LOADED_BYTES`, the text that
pass 1 keeps whole for pass 2 (16 MB): 0 reads every input twice, as the trees past it are, which
separates what that costs from how the rest grows. --against DIR (another checkout) runs in the
same rounds, for a before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cli_bytecode import bytecode_environment, bytecode_folder, write_bytecode  # bench/
from lint_throughput import generate  # bench/

REPO = Path(__file__).resolve().parent.parent
# The CLI with pass 1's budget set first (--keep-loaded-bytes).
WITH_BUDGET = (
    "import sys; import gpupolicy.lint.streaming as streaming; "
    "streaming.KEEP_LOADED_BYTES = int(sys.argv.pop(1)); "
    "from gpupolicy.cli.main import entry; sys.argv[0] = 'gpupolicy'; entry()"
)


def tree(folder: Path, objects: int, *, bundle: bool) -> tuple[Path, int]:
    """The tree of about `objects` objects in `folder` and their exact count, generated unless a
    finished one is there."""
    path = folder / f"{'bundle' if bundle else 'plain'}-{objects}"
    done = path / ".generated"  # the count, written once the tree is whole
    if not done.exists():
        path.mkdir(parents=True, exist_ok=True)
        for old in path.glob("*.yaml"):
            old.unlink()
        written = generate(path, objects, max(1, objects // 10), bundle=bundle)
        done.write_text(str(written), encoding="utf-8")
    return path, int(done.read_text(encoding="utf-8"))


def timed_cli(checkout: Path, folder: Path, env: dict[str, str], budget: int | None) -> tuple[float, int]:
    """One `gpupolicy lint -j 1 -f json` in `checkout`: its CPU seconds and peak memory in bytes."""
    command = ["-m", "gpupolicy"] if budget is None else ["-c", WITH_BUDGET, str(budget)]
    arguments = ["lint", "-j1", "-f", "json", "--no-repo-policy", str(folder)]
    with subprocess.Popen(
        [sys.executable, *command, *arguments],
        cwd=checkout,
        env={**env, "PYTHONPATH": str(checkout)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as child:
        assert child.stderr is not None
        errors = child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):
        raise SystemExit(f"gpupolicy lint in {checkout} failed: {errors.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plain", action="store_true", help="GPU Deployments only, not the bundle")
    parser.add_argument("--trees", type=Path, help="keep and reuse the generated trees here")
    parser.add_argument("--keep-loaded-bytes", type=int, help="streaming.KEEP_LOADED_BYTES for the runs")
    parser.add_argument("--against", type=Path, nargs="*", default=[], help="other checkouts, same rounds")
    args = parser.parse_args()
    checkouts = [REPO, *(path.resolve() for path in args.against)]
    env = bytecode_environment(bytecode_folder("gpupolicy-scaling-"))
    with tempfile.TemporaryDirectory(prefix="gpupolicy-scaling-") as tmp:
        trees = args.trees or Path(tmp)
        folders, counts = {}, {}
        for size in args.objects:
            folders[size], counts[size] = tree(trees, size, bundle=not args.plain)
        for checkout in checkouts:  # untimed: bytecode written, files in the page cache
            write_bytecode(checkout, {**env, "PYTHONPATH": str(checkout)})
            timed_cli(checkout, folders[args.objects[0]], env, args.keep_loaded_bytes)
        cpu: dict[tuple[Path, int], list[float]] = {}
        peak: dict[tuple[Path, int], int] = {}
        for turn in range(args.runs):
            for count in args.objects:
                shift = turn % len(checkouts)
                for checkout in [*checkouts[shift:], *checkouts[:shift]]:
                    seconds, rss = timed_cli(checkout, folders[count], env, args.keep_loaded_bytes)
                    cpu.setdefault((checkout, count), []).append(seconds)
                    peak[(checkout, count)] = max(peak.get((checkout, count), 0), rss)
    print(f"{'checkout':<24} {'objects':>8} {'CPU s':>8} {'µs/object':>10} {'× first':>8} {'peak MB':>8}")
    for checkout in checkouts:
        first = None
        for count in args.objects:
            median = statistics.median(cpu[(checkout, count)])
            per_object = median / counts[count] * 1e6
            first = first or per_object
            print(
                f"{checkout.name[:24]:<24} {counts[count]:>8} {median:>8.2f} {per_object:>10.1f} "
                f"{per_object / first:>8.3f} {peak[(checkout, count)] / 1e6:>8.0f}"
            )
    spread = ", ".join(
        f"{count}: {min(cpu[(REPO, count)]):.2f}-{max(cpu[(REPO, count)]):.2f} s" for count in args.objects
    )
    print(f"runs: {args.runs}, sizes and checkouts interleaved; this checkout's spread: {spread}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
