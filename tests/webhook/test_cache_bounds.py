"""What the webhook remembers between admissions stays within its byte budgets, however many
distinct large values requests carry: GPU resource names (the policy's GpuCatalog), env names
(GP612's credential-name classifier), quantities, rollback-criteria annotations, and the
provenance redaction's key and clean-string caches."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.kube import quantities, rollback, secrets_detect
from gpupolicy.kube.gpu import CLASSIFY_CACHE_BYTES
from gpupolicy.policy.loading import default_policy
from gpupolicy.provenance import redaction
from gpupolicy.webhook.review import ReviewEngine, review
from tests.webhook.reviews import admission_review, gpu_deployment

REQUESTS = 100
LARGE = 50_000  # characters in each distinct value: 100 requests carry ~5 MB of each kind


def hostile_deployment(index: int) -> dict[str, Any]:
    """A GPU Deployment whose resource name, env name, memory quantity and rollback annotation
    are large and new in every request."""
    obj = gpu_deployment()
    filler = f"{index:04d}" + "x" * LARGE
    obj["metadata"]["annotations"]["gpupolicy.io/rollback-criteria"] = (
        f"# {filler}\n[{{metric: p95_latency_ms, max: 800, window: 10m}}]"
    )
    container = obj["spec"]["template"]["spec"]["containers"][0]
    resource = f"example.com/r{filler}"
    container["resources"]["requests"][resource] = "1"
    container["resources"]["limits"][resource] = "1"
    container["resources"]["requests"]["memory"] = f"{'0' * LARGE}{index}Gi"
    container["env"].append(
        {"name": f"E{filler}_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    )
    return obj


def caches(engine: ReviewEngine) -> dict[str, BoundedCache[Any, Any]]:
    return {
        "gpu.classify": engine.policy.gpu._classified,
        "secrets_detect.credential_name_kind": secrets_detect.credential_name_kind.cache,  # type: ignore[attr-defined]
        "quantities._parse_cached": quantities._parse_cached.cache,  # type: ignore[attr-defined]
        "rollback._parse_cached": rollback._parse_cached.cache,  # type: ignore[attr-defined]
        "redaction._KEY_IS_SECRET": redaction._KEY_IS_SECRET,
        "redaction._CLEAN": redaction._CLEAN,
    }


def test_distinct_large_values_in_many_requests_keep_every_cache_within_its_budget() -> None:
    import gpupolicy.rules  # noqa: F401

    engine = ReviewEngine.from_policy(default_policy())
    review(admission_review(gpu_deployment(), dry_run=True), engine, None)  # first-use allocations
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        halfway = 0
        for index in range(REQUESTS):
            if index == REQUESTS // 2:  # by now every cache is full
                gc.collect()
                halfway = tracemalloc.get_traced_memory()[0]
            review(admission_review(hostile_deployment(index), dry_run=True), engine, None)
            # What a provenance record goes through: keys of any length, short clean values.
            redaction.redact({f"example.com/k{index:04d}" + "x" * LARGE: f"value-{index:04d}" + "v" * 200})
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    budgets = caches(engine)
    for name, cache in budgets.items():
        assert cache.nbytes <= cache.max_bytes, name
    assert engine.policy.gpu._classified.max_bytes == CLASSIFY_CACHE_BYTES
    # Everything those requests left behind is at most what the caches may hold (plus slack for
    # the interpreter's own bookkeeping), not the ~5 MB of each kind of value they carried; and
    # the second half of them, with the caches full, left nothing more behind.
    assert after - before <= sum(cache.max_bytes for cache in budgets.values()) + (2 << 20), after - before
    assert after - halfway <= 1 << 20, after - halfway
