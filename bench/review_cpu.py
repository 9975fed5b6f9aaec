"""CPU time of `review()` alone, on two admission mixes, decided in a loop.

    .venv/bin/python bench/review_cpu.py [--runs 7] [--bodies 500] [--repo PATH]

No HTTP, no TLS, no JSON parsing in the timed part: each run parses the bodies of a mix
(bench/admission_load.py) and then times `review()` over them once each, in order, with
`time.process_time()`, against a synced cluster inventory from the test suite's fake API server,
as `gpupolicy serve` runs it (start-up objects frozen out of the cyclic collector, and its
collection thresholds, webhook/collector.py, where the checkout has them), with a new
`ReviewEngine` per run (an empty decision cache):

- all-distinct: GPU Deployments of about 10 KB, each of its own content, one in ten denied: no
  two decisions alike, so remembered decisions never answer (the cost of evaluating);
- realistic: what a cluster sends while teams roll out GPU workloads — Deployments with their
  ReplicaSets and Pods, scales and re-applies, Jobs and their Pods.

Prints the CPU microseconds per review of every run, their median, the share answered from the
decision cache, and the realistic mix's median as a ratio to the all-distinct one. `--repo`
imports gpupolicy from another checkout (e.g. an unpacked `git archive` of an older commit) to
compare.

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs (default 7)")
    parser.add_argument("--bodies", type=int, default=500, help="distinct review bodies (default 500)")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to import gpupolicy from")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "bench"))
    from admission_load import make_bodies, with_uid  # this checkout's bodies

    sys.path.insert(0, str(options.repo.resolve()))  # so --repo goes before it

    import gpupolicy.rules  # registers the rules, as the server does at start-up
    from gpupolicy.policy.loading import load_policy
    from gpupolicy.webhook.cluster_inventory import ClusterInventory
    from gpupolicy.webhook.review import ReviewEngine, review
    from tests.webhook.fake_apiserver import FakeApiServer
    from tests.webhook.server_process import write_kubeconfig

    try:
        import orjson

        loads: Any = orjson.loads
    except ImportError:  # pragma: no cover - depends on the install
        loads = json.loads

    mixes = {
        "all-distinct": [
            with_uid(body, index) for index, body in enumerate(make_bodies(options.bodies, "distinct"))
        ],
        "realistic": [
            with_uid(body, index) for index, body in enumerate(make_bodies(options.bodies, "realistic"))
        ],
    }
    fake = FakeApiServer().start()
    inventory = None
    try:
        with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as folder:
            inventory = ClusterInventory.from_environment(
                kubeconfig=str(write_kubeconfig(Path(folder) / "kubeconfig", fake.url))
            )
            inventory.start()
            if not inventory.wait_synced(30):
                raise SystemExit("the cluster inventory did not sync")
        policy = load_policy()
        warm = ReviewEngine.from_policy(policy)
        for body in mixes["all-distinct"][:100]:  # warm-up: first evaluations, lazy imports
            review(loads(body), warm, inventory)
        gc.collect()
        gc.freeze()  # as the server does after start-up
        _server_collections()
        results: dict[str, tuple[list[float], float | None]] = {name: ([], None) for name in mixes}
        for _ in range(options.runs):
            for name, bodies in mixes.items():  # interleaved: a slower moment costs both mixes
                engine = ReviewEngine.from_policy(policy)
                parsed = [loads(body) for body in bodies]
                started = time.process_time()
                for item in parsed:
                    review(item, engine, inventory)
                results[name][0].append((time.process_time() - started) / len(parsed) * 1e6)
                results[name] = (results[name][0], _hit_share(engine))
                del parsed
    finally:
        if inventory is not None:
            inventory.stop()
        fake.stop()
    print(f"review() CPU per call, gpupolicy from {Path(gpupolicy.rules.__file__).parents[2]}")
    medians = {}
    for name, (runs, hits) in results.items():
        medians[name] = statistics.median(runs)
        shown = f", {hits:.0%} answered from remembered decisions" if hits is not None else ""
        print(f"{name:>12}: runs (us) " + " ".join(f"{value:.0f}" for value in runs))
        print(f"{'':>12}  median {medians[name]:.1f} us, min {min(runs):.1f} us per review{shown}")
    print(f"realistic / all-distinct: {medians['realistic'] / medians['all-distinct']:.2f}")


def _server_collections() -> None:
    """The cyclic collector's thresholds of `gpupolicy serve` (webhook/collector.py), where the
    checkout has them: a young pass every 2,000 objects rather than CPython's 700. The cyclic
    garbage and the collector's passes a review causes are part of its cost, counted as served."""
    try:
        from gpupolicy.webhook.collector import fewer_collections
    except ImportError:  # an older checkout: CPython's defaults, as its server ran
        return
    fewer_collections()


def _hit_share(engine: Any) -> float | None:
    cache = getattr(engine, "decisions", None)
    if cache is None or not cache.hits + cache.misses:
        return None
    return float(cache.hits / (cache.hits + cache.misses))


if __name__ == "__main__":
    main()
