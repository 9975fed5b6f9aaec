"""CPU time of `review()` alone: the webhook benchmark's AdmissionReview bodies, decided in a loop.

    .venv/bin/python bench/review_cpu.py [--runs 7] [--repo PATH]

No HTTP, no TLS, no JSON parsing in the timed part: each run parses every body (500 GPU
Deployments of about 10 KB, one in ten denied, as `bench/admission_load.py` makes them) and
then times `review()` over them, twice each, with `time.process_time()`, against a synced
cluster inventory from the test suite's fake API server, as `gpupolicy serve` runs it. Prints
the CPU microseconds per review of every run and their median. `--repo` imports gpupolicy
from another checkout (e.g. an unpacked `git archive` of an older commit) to compare.

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

    bodies = [with_uid(body, index) for index, body in enumerate(make_bodies(options.bodies))]
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
        engine = ReviewEngine.from_policy(load_policy())
        for body in bodies[:100]:  # warm-up: first evaluations, lazy imports
            review(loads(body), engine, inventory)
        gc.collect()
        gc.freeze()  # as the server does after start-up
        runs = []
        for _ in range(options.runs):
            parsed = [loads(body) for body in bodies] * 2
            started = time.process_time()
            for item in parsed:
                review(item, engine, inventory)
            runs.append((time.process_time() - started) / len(parsed) * 1e6)
            del parsed
    finally:
        if inventory is not None:
            inventory.stop()
        fake.stop()
    print(f"review() CPU per call, gpupolicy from {Path(gpupolicy.rules.__file__).parents[2]}")
    print("runs (us):", " ".join(f"{value:.0f}" for value in runs))
    print(f"median {statistics.median(runs):.1f} us, min {min(runs):.1f} us per review")


if __name__ == "__main__":
    main()
