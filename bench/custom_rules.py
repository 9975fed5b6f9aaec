"""The same check four ways: GPU request equals limit as the built-in rule (GP102), as a native
Rego rule, as a Gatekeeper ConstraintTemplate + Constraint and as a ValidatingAdmissionPolicy +
binding (CEL) — the three of examples/policies/ — on the benchmark corpus of
bench/lint_throughput.py, in one run.

Each variant is `evaluate()` of the loaded corpus with that one rule (so the engine's own work per
object, the same for all, is counted in each); rules are compiled once, before timing, as a policy
load does. Also timed: the Rego rule in the webhook's worker processes (gpupolicy/custom/isolation.py),
where each evaluation crosses a process boundary so that its time budget holds. Prints the
median of --runs runs, objects per second and the ratio to the built-in rule.

    python bench/custom_rules.py [--objects 2000] [--files 200] [--runs 5]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
EXAMPLES = REPO / "examples" / "policies"


def _corpus_generator() -> Callable[[Path, int, int], int]:
    spec = importlib.util.spec_from_file_location("lint_throughput", REPO / "bench" / "lint_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    generate: Callable[[Path, int, int], int] = module.generate
    return generate


def mismatch_some(folder: Path) -> None:
    """Every tenth object asks for one GPU less than its limit: each variant has findings to make."""
    for path in sorted(folder.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        documents = text.split("---\n")
        for index in range(0, len(documents), 10):
            documents[index] = documents[index].replace(
                'nvidia.com/gpu: "', 'nvidia.com/gpu: "9', 1
            )  # the request
        path.write_text("---\n".join(documents), encoding="utf-8")


def timed(run: Callable[[], int], runs: int) -> tuple[list[float], int]:
    times, findings = [], 0
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        findings = run()
        times.append(time.perf_counter() - start)
    return times, findings


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=2_000)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import gpupolicy.rules  # noqa: F401  (the built-in rules)
    from gpupolicy.custom import rules as custom_rules
    from gpupolicy.custom.isolation import IsolatedRunner
    from gpupolicy.custom.testing import load_rules
    from gpupolicy.engine.evaluation import evaluate
    from gpupolicy.engine.registry import REGISTRY, Rule
    from gpupolicy.loading.inputs import load_paths
    from gpupolicy.policy.loading import default_policy, policy_from_mapping

    started = time.perf_counter()
    custom = {rule.metadata.id: rule for rule in load_rules(EXAMPLES)}
    compile_seconds = time.perf_counter() - started
    engine_rules = {rule_id: custom_rules.engine_rule(rule) for rule_id, rule in custom.items()}
    policy = default_policy()
    budgeted = policy_from_mapping({"customRules": {"timeBudgetMs": 1000}})

    with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as tmp:
        folder = Path(tmp)
        count = _corpus_generator()(folder, args.objects, args.files)
        mismatch_some(folder)
        resources = load_paths([str(folder)]).resources

    def run_with(rule: Rule, under: object = policy) -> Callable[[], int]:
        def run() -> int:
            report = evaluate(resources, under, rules=(rule,))  # type: ignore[arg-type]
            assert not report.errors, report.errors[:1]
            return len(report.findings)

        return run

    variants = [
        ("built-in rule (GP102)", run_with(REGISTRY["GP102"])),
        ("native Rego (ACME001)", run_with(engine_rules["ACME001"])),
        ("Gatekeeper template (ACME002)", run_with(engine_rules["ACME002"])),
        ("CEL ValidatingAdmissionPolicy (ACME003)", run_with(engine_rules["ACME003"])),
    ]
    results = [(name, *timed(run, args.runs)) for name, run in variants]
    runner = IsolatedRunner(1)
    custom_rules._RUNNER = runner  # as the webhook runs them: one worker process, budget 1 s
    try:
        runner.wait_ready(60)  # the worker imports the engines
        name = "native Rego in a worker process (webhook)"
        results.append((name, *timed(run_with(engine_rules["ACME001"], budgeted), max(1, args.runs // 2))))
    finally:
        custom_rules._RUNNER = None
        runner.close()

    print(
        f"corpus: {count} GPU Deployments in {args.files} files; compiling the 3 custom rules: {compile_seconds:.2f} s"
    )
    base = statistics.median(results[0][1])
    print(f"{'variant':<44} {'median s':>9} {'objects/s':>10} {'x built-in':>11} {'findings':>9}")
    for name, times, findings in results:
        median = statistics.median(times)
        print(f"{name:<44} {median:>9.3f} {count / median:>10.0f} {median / base:>11.1f} {findings:>9}")
    print(f"runs: {args.runs} (worker process: {max(1, args.runs // 2)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
