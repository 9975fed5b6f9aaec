"""Where an admission's wait for the journal goes, from `append()` to its future settling:

- `queue`: queued until the writer thread takes it (behind the batch being written and synced);
- `write`: the batch's frames joined and written (and a new segment started, when one is due);
- `fsync`: the batch's `fdatasync`;
- `handback`: from the fsync's return until the future is settled in the event loop (the writer
  thread's call into the loop, and the loop reaching it: GIL hand-offs and the loop's other work);
- `total`: the four together.

Counted per admission in fixed buckets (cumulative, like a Prometheus histogram), so a reader
takes two snapshots and subtracts them: the benchmark prints each phase's percentiles over one
measurement. A snapshot is cheap; an observation is a `bisect` per phase, under a lock taken once
per batch (a batch may be settled on the writer thread or on an event loop).
"""

from __future__ import annotations

import bisect
import threading
from typing import Any

from gpupolicy.core.immutable import immutable

PHASES = ("queue", "write", "fsync", "handback", "total")

# Upper bounds in milliseconds; one more bucket past the last. Finer where the 5 ms p99 target
# is decided, coarse out where the disk's rare stalls land.
BOUNDS_MS = (
    0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 10.0, 12.5, 15.0,
    20.0, 30.0, 50.0, 75.0, 100.0, 150.0, 250.0, 500.0, 1000.0,
)  # fmt: skip
_BOUNDS_S = tuple(bound / 1000 for bound in BOUNDS_MS)


@immutable
class BatchTimes:
    """`time.perf_counter()` readings of one batch on the writer thread."""

    taken: float
    written: float
    synced: float


class AckTimings:
    def __init__(self) -> None:
        self._counts = {phase: [0] * (len(BOUNDS_MS) + 1) for phase in PHASES}
        self._lock = threading.Lock()

    def observe(self, queued: list[float], batch: BatchTimes, settled: float) -> None:
        """One batch: each admission's `append()` time, the batch's times, and when its futures
        were settled."""
        write, fsync = batch.written - batch.taken, batch.synced - batch.written
        handback = settled - batch.synced
        with self._lock:
            self._add("write", write, len(queued))
            self._add("fsync", fsync, len(queued))
            self._add("handback", handback, len(queued))
            for at in queued:
                self._add("queue", batch.taken - at, 1)
                self._add("total", settled - at, 1)

    def _add(self, phase: str, seconds: float, count: int) -> None:
        self._counts[phase][bisect.bisect_left(_BOUNDS_S, seconds)] += count

    def snapshot(self) -> dict[str, Any]:
        """The bucket bounds (ms) and each phase's counts so far (one past the last bound)."""
        with self._lock:
            return {
                "bounds_ms": list(BOUNDS_MS),
                **{phase: list(counts) for phase, counts in self._counts.items()},
            }


def percentile(counts: list[int], fraction: float) -> float:
    """The upper bound (ms) of the bucket the `fraction` quantile falls in; inf past the last
    bound, nan when nothing was counted."""
    total = sum(counts)
    if not total:
        return float("nan")
    rank = fraction * total
    seen = 0
    for index, count in enumerate(counts):
        seen += count
        if seen >= rank:
            return BOUNDS_MS[index] if index < len(BOUNDS_MS) else float("inf")
    return float("inf")
