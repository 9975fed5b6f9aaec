"""Statistics without numpy: percentiles, means and a seeded bootstrap confidence interval.

Percentiles use linear interpolation between the closest ranks — numpy's default `linear`
method (Hyndman & Fan definition 7): the p-th percentile of n sorted values sits at rank
p/100 × (n − 1). The confidence interval of a mean is the percentile bootstrap (Efron &
Tibshirani, An Introduction to the Bootstrap, ch. 13): resample the values with replacement,
take each resample's mean, and read the interval's ends as percentiles of those means. The
resampling uses `random.Random(seed)`, so one report is the same every time it is made.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from gpupolicy.core.immutable import immutable

DEFAULT_SEED = 20261129
DEFAULT_RESAMPLES = 2000
DEFAULT_LEVEL = 0.95


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (0-100) by linear interpolation; None for no values."""
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is not between 0 and 100")
    if not values:
        return None
    ordered = sorted(values)
    rank = p / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


@immutable
class Interval:
    low: float
    high: float

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


def bootstrap_mean_interval(
    values: Sequence[float],
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
) -> Interval | None:
    """The percentile-bootstrap interval of the mean of `values` (None for no values). One value
    gives a zero-width interval: there is nothing to resample."""
    if not values:
        return None
    if len(values) == 1:
        return Interval(values[0], values[0])
    rng = random.Random(seed)
    size = len(values)
    means = [math.fsum(rng.choices(values, k=size)) / size for _ in range(resamples)]
    tail = (1 - level) / 2 * 100
    low, high = percentile(means, tail), percentile(means, 100 - tail)
    assert low is not None and high is not None
    return Interval(low, high)
