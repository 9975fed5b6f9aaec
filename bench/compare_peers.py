"""gpupolicy against its peers on the same files: PyYAML's C loader alone, `gpupolicy lint` in one
process and with `-j 2`, and Checkov's Kubernetes framework.

Corpora: generated bundles of --sizes objects (GPU Deployments with their PDBs, the PriorityClasses
they name, experiment ConfigMaps with two arms: bench/lint_throughput.py's generate_bundle, ten
objects to a file) and the real manifests of ../shared/corpus/real (or --real DIR). Each tool runs
as a process of its own, --runs times, the tools interleaved in each round (a shared machine's load
then weighs on all alike); the medians of wall time, CPU time (user + system, its child processes
included) and peak RSS (the largest of its processes: `os.wait4`'s rusage) are printed, with the
objects per second of wall time and the ratios of wall time to parse-only and to `gpupolicy lint`.

Checkov is installed with pip into a virtualenv of its own under ~/.cache/gpupolicy-bench (made on
the first run) and run as `checkov -d DIR --framework kubernetes --quiet --compact -o json`. A corpus
it would take longer than --checkov-cap seconds on (estimated from its rate on the previous one) is
skipped, with the estimate printed.

    python bench/compare_peers.py [--sizes 1000 10000 100000] [--runs 3] [--real DIR]
                                  [--checkov-cap 600] [--json FILE]

A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from cli_bytecode import bytecode_environment, bytecode_folder, write_bytecode  # noqa: E402
from lint_throughput import generate_bundle  # noqa: E402  (the generator of the throughput bench)

CACHE = Path.home() / ".cache" / "gpupolicy-bench"
CHECKOV_VENV = CACHE / "checkov-venv"
CHECKOV = CHECKOV_VENV / "bin" / "checkov"
PARSE_ONLY = """\
import sys
from pathlib import Path
import yaml
count = 0
for path in sorted(Path(sys.argv[1]).rglob("*")):
    if path.suffix in (".yaml", ".yml"):
        with path.open("rb") as stream:
            count += sum(1 for doc in yaml.load_all(stream, Loader=yaml.CSafeLoader) if doc is not None)
print(count)
"""
TOOLS = ("parse-only", "gpupolicy lint", "gpupolicy lint -j 2", "checkov")


@dataclass(frozen=True, slots=True)
class Measure:
    corpus: str
    objects: int
    tool: str
    seconds: float
    cpu_seconds: float
    peak_mib: float
    exit_code: int


def command(tool: str, folder: Path) -> list[str]:
    if tool == "parse-only":
        return [sys.executable, "-c", PARSE_ONLY, str(folder)]
    if tool == "checkov":
        return [
            str(CHECKOV),
            "-d",
            str(folder),
            "--framework",
            "kubernetes",
            "--quiet",
            "--compact",
            "-o",
            "json",
        ]
    jobs = "-j2" if tool.endswith("-j 2") else "-j1"
    return [sys.executable, "-m", "gpupolicy", "lint", jobs, str(folder), "--no-repo-policy"]


# gpupolicy's runs read bytecode from here (bench/cli_bytecode.py), as Checkov reads what pip wrote.
PYCACHE = bytecode_folder("gpupolicy-peers-pycache-")


def environment_of(tool: str) -> dict[str, str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    return bytecode_environment(PYCACHE, environment) if tool.startswith("gpupolicy") else environment


def run_once(corpus: str, objects: int, tool: str, folder: Path) -> Measure:
    """One run as a child process; its rusage (and its own children's) from os.wait4."""
    environment = environment_of(tool)
    started = time.perf_counter()
    process = subprocess.Popen(
        command(tool, folder), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment, cwd=REPO
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    cpu = usage.ru_utime + usage.ru_stime
    return Measure(corpus, objects, tool, seconds, cpu, usage.ru_maxrss / 1024, process.returncode)


def medians(runs: list[Measure]) -> Measure:
    first = runs[0]
    return Measure(
        first.corpus,
        first.objects,
        first.tool,
        statistics.median(run.seconds for run in runs),
        statistics.median(run.cpu_seconds for run in runs),
        statistics.median(run.peak_mib for run in runs),
        max(run.exit_code for run in runs),
    )


def ensure_checkov() -> None:
    """Checkov in a virtualenv of its own (its dependencies are not gpupolicy's)."""
    if CHECKOV.is_file():
        return
    print(f"installing checkov into {CHECKOV_VENV} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(CHECKOV_VENV)], check=True)
    subprocess.run([str(CHECKOV_VENV / "bin" / "pip"), "install", "-q", "checkov"], check=True)


def checkov_version() -> str:
    done = subprocess.run([str(CHECKOV), "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def count_objects(folder: Path) -> int:
    done = subprocess.run(command("parse-only", folder), capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def measure_corpus(corpus: str, folder: Path, runs: int, tools: list[str]) -> list[Measure]:
    objects = count_objects(folder)
    print(f"{corpus}: {objects:,} objects in {sum(1 for _ in folder.rglob('*.y*ml')):,} files", flush=True)
    seen: dict[str, list[Measure]] = {tool: [] for tool in tools}
    for _ in range(runs):
        for tool in tools:
            seen[tool].append(run_once(corpus, objects, tool, folder))
    return [medians(seen[tool]) for tool in tools]


def checkov_skip_reason(objects: int, previous: list[Measure], cap: float) -> str | None:
    """Why Checkov is not run on a corpus of `objects`: its rate on the last corpus says it would take
    longer than `cap` seconds."""
    done = [measure for measure in previous if measure.tool == "checkov" and measure.seconds > 0]
    if not done:
        return None
    rate = done[-1].objects / done[-1].seconds
    estimate = objects / rate
    if estimate <= cap:
        return None
    return (
        f"checkov skipped: about {estimate:,.0f} s at the {rate:,.0f} objects/s it ran on "
        f"{done[-1].corpus}, over the cap of {cap:,.0f} s"
    )


def table(measures: list[Measure]) -> str:
    header = (
        f"{'corpus':<24} {'tool':<20} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} {'objects/s':>10} "
        f"{'x parse-only':>12} {'x gpupolicy':>11}"
    )
    lines = [header, "-" * len(header)]
    for measure in measures:
        same = [m for m in measures if m.corpus == measure.corpus]
        parse = next(m for m in same if m.tool == "parse-only")
        lint = next(m for m in same if m.tool == "gpupolicy lint")
        lines.append(
            f"{measure.corpus:<24} {measure.tool:<20} {measure.seconds:>8.2f} {measure.cpu_seconds:>8.2f} "
            f"{measure.peak_mib:>9.0f} {measure.objects / measure.seconds:>10,.0f} "
            f"{measure.seconds / parse.seconds:>12.2f} {measure.seconds / lint.seconds:>11.2f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--real", type=Path, default=REPO.parent / "shared" / "corpus" / "real")
    parser.add_argument("--checkov-cap", type=float, default=600.0, help="seconds one Checkov run may take")
    parser.add_argument("--json", type=Path, help="also write the medians to this file")
    options = parser.parse_args()
    ensure_checkov()
    print(
        f"checkov {checkov_version()}; python {sys.version.split()[0]}; cores: {os.cpu_count()}", flush=True
    )
    measures: list[Measure] = []
    skipped: list[str] = []
    write_bytecode(REPO, environment_of("gpupolicy lint"))
    with tempfile.TemporaryDirectory(prefix="gpupolicy-peers-") as tmp:
        corpora: list[tuple[str, Path]] = []
        if options.real.is_dir():
            corpora.append(("real (shared/corpus)", options.real))
        else:
            print(f"no real corpus at {options.real}: skipped", flush=True)
        for size in options.sizes:
            folder = Path(tmp) / f"bundle-{size}"
            folder.mkdir()
            generate_bundle(folder, size, max(1, size // 10))
            corpora.append((f"generated {size:,}", folder))
        for corpus, folder in corpora:
            tools = list(TOOLS)
            reason = checkov_skip_reason(count_objects(folder), measures, options.checkov_cap)
            if reason is not None:
                tools.remove("checkov")
                skipped.append(f"{corpus}: {reason}")
                print(skipped[-1], flush=True)
            measures.extend(measure_corpus(corpus, folder, options.runs, tools))
            print(table(measures), flush=True)
    print(f"\nmedians of {options.runs} runs each, interleaved")
    if options.json is not None:
        result = {"runs": options.runs, "measures": [asdict(m) for m in measures], "skipped": skipped}
        options.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
