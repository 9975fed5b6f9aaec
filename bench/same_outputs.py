"""Whether a change keeps what gpupolicy says: the lint reports and the webhook's decisions of this
checkout and of another one, compared byte for byte.

    .venv/bin/python bench/same_outputs.py --against DIR [--objects 2000] [--decisions 600]
        [--keep FOLDER]

A change made for speed must leave every report and every decision as it was. This runs both
checkouts' code (each on PYTHONPATH, with this environment's interpreter and dependencies, from
bytecode as installed: bench/cli_bytecode.py) over the same inputs and compares what they write:

- `gpupolicy lint` in json, sarif and text, with `-j 1` and `-j 2`, without repository policies,
  on examples/, tests/data/corpus, ../shared/corpus/real (when it is there) and two generated
  trees of `--objects` objects (bench/lint_throughput.py's GPU Deployments, and its bundle of
  Deployments, PDBs, PriorityClasses and experiments); then json with the repository policies on
  examples/ and tests/data/corpus. Each report with its exit code and what went to stderr.
- `review()`'s decisions on `--decisions` admissions of each mix of bench/admission_load.py
  (realistic, distinct, reapplied), in a child process per checkout, against a cluster inventory
  synced from the test suite's fake API server (as bench/review_cpu.py builds it): each
  decision's response, allowed, mode, reason for skipping, findings (every field), whether the
  object is a GPU workload and whether the decision was remembered, one JSON line each.

It prints each output that differs, with the folder holding both sides, and a summary; it exits
1 when anything differs. `--against` an unpacked `git archive` of the commit before a change
(`git archive REV | tar -x -C DIR`) is the usual baseline. The provenance store's rows are not
compared here: a change to provenance records needs a check of its own that journals, replays and
compares them (docs/performance.md, "The cost of a recorded admission").

This is a check run by hand beside the benchmarks, not a test: the test suite asserts behaviour.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cli_bytecode import bytecode_environment, bytecode_folder  # bench/, beside this script

REPO = Path(__file__).resolve().parents[1]
MIXES = ("realistic", "distinct", "reapplied")
FORMATS = ("json", "sarif", "text")
JOBS = (1, 2)
# Request uids carry the run's id (bench/admission_load.RUN): both children use this one.
FIXED_RUN = "5a3e0075"


@dataclasses.dataclass(frozen=True)
class Comparison:
    name: str
    command: tuple[str, ...]  # the arguments after `python -m gpupolicy`


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--against", type=Path, help="the other checkout (e.g. an unpacked git archive)")
    parser.add_argument("--objects", type=int, default=2_000, help="objects of each generated tree (2,000)")
    parser.add_argument("--decisions", type=int, default=600, help="admissions of each mix (600)")
    parser.add_argument(
        "--keep", type=Path, help="write both sides' outputs here (default: a temporary folder)"
    )
    parser.add_argument("--decisions-child", nargs=2, metavar=("CHECKOUT", "OUT"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.decisions_child:
        checkout, out = options.decisions_child
        return _write_decisions(Path(checkout), Path(out), options.decisions)
    if options.against is None:
        parser.error("--against DIR is required")
    checkouts = {"this": REPO, "against": options.against.resolve()}
    folder = options.keep.resolve() if options.keep else Path(tempfile.mkdtemp(prefix="gpupolicy-same-"))
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpupolicy-same-trees-") as scratch:
        trees = _trees(Path(scratch), options.objects)
        differing = _compare_lint(checkouts, trees, folder, Path(scratch))
    differing += _compare_decisions(checkouts, folder, options.decisions)
    if not differing and not options.keep:
        shutil.rmtree(folder)
    else:
        print(f"both checkouts' outputs: {folder}")
    if differing:
        print(f"DIFFERENT: {', '.join(differing)}")
        return 1
    print("every output is the same")
    return 0


def _trees(folder: Path, objects: int) -> dict[str, Path]:
    """The inputs: the repository's examples and corpora, and two generated trees."""
    from lint_throughput import generate

    trees = {"examples": REPO / "examples", "corpus": REPO / "tests" / "data" / "corpus"}
    real = REPO.parent / "shared" / "corpus" / "real"
    if real.is_dir():
        trees["real"] = real
    for name, bundle in (("generated", False), ("generated-bundle", True)):
        tree = folder / name
        tree.mkdir(parents=True)
        generate(tree, objects, max(1, objects // 10), bundle=bundle)
        trees[name] = tree
    return trees


def _comparisons(trees: dict[str, Path]) -> Iterator[Comparison]:
    for tree_name, tree in trees.items():
        for output in FORMATS:
            for jobs in JOBS:
                yield Comparison(
                    f"{tree_name}-{output}-j{jobs}",
                    ("lint", "-f", output, f"-j{jobs}", "--no-repo-policy", "--color", "never", str(tree)),
                )
    for tree_name in ("examples", "corpus"):  # with the repository policies they hold
        yield Comparison(f"{tree_name}-json-repo-policy", ("lint", "-f", "json", str(trees[tree_name])))


def _compare_lint(
    checkouts: dict[str, Path], trees: dict[str, Path], folder: Path, scratch: Path
) -> list[str]:
    pycache = bytecode_folder("gpupolicy-same-pycache-")
    comparisons = list(_comparisons(trees))
    differing = []
    for comparison in comparisons:
        outputs = {
            side: _lint(checkout, comparison, pycache, scratch) for side, checkout in checkouts.items()
        }
        for side, output in outputs.items():
            (folder / f"{comparison.name}.{side}").write_bytes(output)
        if outputs["this"] != outputs["against"]:
            print(f"differs: {comparison.name} (gpupolicy {' '.join(comparison.command)})")
            differing.append(comparison.name)
    print(f"lint reports: {len(comparisons) - len(differing)} of {len(comparisons)} the same")
    return differing


def _lint(checkout: Path, comparison: Comparison, pycache: Path, cwd: Path) -> bytes:
    """The report, its exit code and its stderr, as one text (the cwd outside both checkouts, so
    that neither's files are found from it)."""
    environment = bytecode_environment(pycache)
    environment["PYTHONPATH"] = str(checkout)
    completed = subprocess.run(
        [sys.executable, "-m", "gpupolicy", *comparison.command],
        cwd=cwd,
        env=environment,
        capture_output=True,
        check=False,
    )
    return (
        completed.stdout
        + b"\n-- stderr --\n"
        + completed.stderr
        + f"\n-- exit {completed.returncode}\n".encode()
    )


def _compare_decisions(checkouts: dict[str, Path], folder: Path, count: int) -> list[str]:
    for side, checkout in checkouts.items():
        subprocess.run(
            [sys.executable, __file__, "--decisions-child", str(checkout), str(folder / f"decisions.{side}"),
             "--decisions", str(count)],
            check=True,
        )  # fmt: skip
    this = (folder / "decisions.this").read_bytes().splitlines()
    against = (folder / "decisions.against").read_bytes().splitlines()
    differing = sum(1 for mine, theirs in zip(this, against, strict=False) if mine != theirs)
    differing += abs(len(this) - len(against))
    print(f"review() decisions: {len(this) - differing} of {len(this)} the same")
    return [f"{differing} decisions"] if differing else []


def _write_decisions(checkout: Path, out: Path, count: int) -> int:
    """In a child: `checkout`'s review() over this checkout's admission bodies."""
    errors_only = logging.StreamHandler()  # the inventory's sync is logged at warning: not wanted here
    errors_only.setLevel(logging.ERROR)
    logging.getLogger().addHandler(errors_only)
    sys.path.insert(0, str(REPO / "bench"))
    import admission_load

    admission_load.RUN = FIXED_RUN
    sys.path.insert(0, str(checkout))  # before this checkout: its gpupolicy and tests
    import orjson

    import gpupolicy.rules  # noqa: F401  (registers the rules, as the server does)
    from gpupolicy.policy.loading import load_policy
    from gpupolicy.webhook.cluster_inventory import ClusterInventory
    from gpupolicy.webhook.review import ReviewEngine, review
    from tests.webhook.fake_apiserver import FakeApiServer
    from tests.webhook.server_process import write_kubeconfig

    fake = FakeApiServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="gpupolicy-same-") as folder:
            kubeconfig = write_kubeconfig(Path(folder) / "kubeconfig", fake.url)
            inventory = ClusterInventory.from_environment(kubeconfig=str(kubeconfig))
        inventory.start()
        if not inventory.wait_synced(30):
            raise SystemExit("the cluster inventory did not sync")
        policy = load_policy()
        lines = []
        for mix in MIXES:
            engine = ReviewEngine.from_policy(policy)  # a decision cache of its own per mix
            for number, body in enumerate(admission_load.make_bodies(count, mix)):
                decision = review(orjson.loads(admission_load.with_uid(body, number)), engine, inventory)
                lines.append(json.dumps(_decision_fields(decision), sort_keys=True, default=repr))
        inventory.stop()
    finally:
        fake.stop()
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


def _decision_fields(decision: Any) -> dict[str, Any]:
    return {
        "response": decision.response,
        "allowed": decision.allowed,
        "mode": repr(decision.mode),
        "skipped": decision.skipped,
        "findings": _plain(decision.findings),
        "gpu_workload": decision.gpu_workload,
        "remembered": decision.remembered,
    }


def _plain(value: Any) -> Any:
    """`value` as JSON can hold it: dataclasses, value classes (msgspec Structs, whichever
    checkout made them) and slotted objects by their fields."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    struct_fields = getattr(type(value), "__struct_fields__", None)
    if struct_fields is not None:
        return {name: _plain(getattr(value, name)) for name in struct_fields}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    slots = getattr(type(value), "__slots__", None)
    if slots:
        return {name: _plain(getattr(value, name, None)) for name in slots}
    return repr(value)


if __name__ == "__main__":
    sys.exit(main())
