"""How a function's time grows with its input, as a sanity property for tests (no absolute times):
run it on an input of size n and of size 8n; linear code takes about 8 times as long, quadratic
code about 64 times. `LINEAR_BOUND` leaves a generous margin for a busy machine."""

from __future__ import annotations

import timeit
from collections.abc import Callable
from typing import Any

FACTOR = 8
LINEAR_BOUND = 24.0  # 3x the linear ratio; quadratic code is at 64


def seconds_per_call(func: Callable[[Any], object], argument: Any) -> float:
    """The best of three timings, each of enough calls to take ≥ 20 ms (timer noise)."""
    number = 1
    while True:
        elapsed = min(timeit.repeat(lambda: func(argument), number=number, repeat=3))
        if elapsed >= 0.02 or number >= 4096:
            return elapsed / number
        number *= 4


ATTEMPTS = 3


def growth(func: Callable[[Any], object], make: Callable[[int], Any], n: int) -> float:
    """Time on `make(FACTOR * n)` over time on `make(n)`: the lowest of up to ATTEMPTS measurements,
    stopping at the first under LINEAR_BOUND. Another process taking the core during one timing
    can only inflate a ratio; quadratic code stays near 64 however often it is measured."""
    small, large = make(n), make(FACTOR * n)
    best = float("inf")
    for _ in range(ATTEMPTS):
        best = min(best, seconds_per_call(func, large) / seconds_per_call(func, small))
        if best < LINEAR_BOUND:
            break
    return best
