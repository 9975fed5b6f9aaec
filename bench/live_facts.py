"""What the webhook's live cluster facts cost on a large cluster.

    .venv/bin/python bench/live_facts.py [--nodes 500] [--runs 5]

Makes `--nodes` Nodes from the recorded GPU cluster (tests/data/cluster/onprem-gfd.yaml, each
node copied under new names, status heartbeats and images included), and times, median of
`--runs`:

- caching one Node: the kubernetes client's model turned back into JSON and projected, as the
  inventory does for every listed Node and watch event;
- comparing a heartbeat's projection with the cached one (what an ignored MODIFIED costs);
- one recomputation: `read_cluster` over the projected Nodes (the fragment), the effective
  policy (`with_facts`, schema validation included), the `ReviewEngine` and its trial review.

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def nodes(count: int) -> list[dict[str, Any]]:
    recorded = yaml.safe_load((REPO / "tests" / "data" / "cluster" / "onprem-gfd.yaml").read_text())
    templates = [item for item in recorded["items"] if item["kind"] == "Node"]
    made = []
    for index in range(count):
        node = copy.deepcopy(templates[index % len(templates)])
        name = f"{node['metadata']['name']}-{index:04d}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        node["status"]["images"] = [
            {"names": [f"registry.example.com/team/image-{item}:v{index}"], "sizeBytes": 1_000_000 + item}
            for item in range(40)
        ]
        made.append(node)
    return made


def median_ms(action: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from kubernetes import client as k8s

    import gpupolicy.rules  # noqa: F401
    from gpupolicy.policy.cluster_facts import node_projection, read_cluster
    from gpupolicy.policy.loading import default_policy
    from gpupolicy.webhook.review import ReviewEngine
    from gpupolicy.webhook.server import warm_up
    from tests.webhook.test_review import CLUSTER

    raw = nodes(args.nodes)
    texts = [json.dumps(node) for node in raw]  # what the API server sends, one node each
    api = k8s.ApiClient()

    def cache_all() -> list[dict[str, Any]]:
        return [node_projection(json.loads(text)) for text in texts]

    def through_models() -> list[dict[str, Any]]:
        models = [api.deserialize(text, "V1Node", "application/json") for text in texts]
        return [node_projection(api.sanitize_for_serialization(model)) for model in models]

    projected = cache_all()
    heartbeat = cache_all()
    policy = default_policy()

    def recompute() -> None:
        facts = read_cluster(
            projected, complete_kinds=["Node", "DeviceClass", "ResourceQuota"], policy=policy
        )
        engine = ReviewEngine.from_policy(policy.with_facts(facts.fragment))
        warm_up(engine, CLUSTER)  # type: ignore[arg-type]

    read_ms = median_ms(lambda: read_cluster(projected, complete_kinds=["Node"], policy=policy), args.runs)
    fragment = read_cluster(projected, complete_kinds=["Node"], policy=policy).fragment
    compose_ms = median_ms(lambda: policy.with_facts(fragment), args.runs)
    print(f"{args.nodes} Nodes, median of {args.runs} runs")
    print(f"  cache one Node (JSON -> projection): {median_ms(cache_all, args.runs) / args.nodes:.3f} ms")
    models_ms = median_ms(through_models, args.runs) / args.nodes
    print(f"  the same through the client's V1Node model: {models_ms:.3f} ms")
    same = median_ms(lambda: [a == b for a, b in zip(projected, heartbeat, strict=True)], args.runs)
    print(f"  compare a heartbeat's projection with the cached one: {same / args.nodes * 1000:.1f} µs")
    print(f"  read_cluster (the fragment): {read_ms:.1f} ms; {len(fragment.get('nodePools', []))} pools")
    print(f"  with_facts (merge + schema validation): {compose_ms:.1f} ms")
    print(
        f"  one recomputation (fragment, policy, engine, trial review): {median_ms(recompute, args.runs):.1f} ms"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
