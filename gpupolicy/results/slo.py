"""Service-level objectives: per request (what makes a request *accepted*) and per run.

Written as in the experiment ConfigMap's `slo` key or `--slo`: comma-separated `name<=number`
(`=` is read as `<=` for the per-request objectives, as vLLM's `--goodput ttft:500`):

- per request, in milliseconds — `ttft_ms`, `tpot_ms`, `e2e_ms` (also `latency_ms`, `e2el_ms`):
  a request is accepted when it succeeded and meets every one of them. This is DistServe's
  goodput, as vLLM's serving benchmark computes `request_goodput` with `--goodput`.
- per run — `p50|p90|p95|p99` of `latency`, `e2e`, `ttft` or `tpot` (`p95_latency_ms<=800`),
  and `error_rate<=0.01`: a run meets its SLO when every one holds (MLPerf Inference's server
  scenario: a run counts only if its tail latency meets the constraint).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable

from gpupolicy.core.immutable import immutable
from gpupolicy.kube.experiments import split_words

REQUEST_FIELDS = {
    "ttft_ms": "ttft",
    "tpot_ms": "tpot",
    "e2e_ms": "e2e",
    "latency_ms": "e2e",
    "e2el_ms": "e2e",
}
_RUN_PERCENTILE = re.compile(r"p(50|90|95|99)_(latency|e2e|e2el|ttft|tpot)_ms")
_ITEM = re.compile(r"\s*([A-Za-z0-9_]{1,40})\s*(<=|>=|==|<|>|=)\s*(-?[0-9]{1,15}(?:\.[0-9]{1,15})?)\s*")
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
}


class SloError(ValueError):
    """An objective that cannot be read."""


@immutable
class Objective:
    name: str  # as written, lower case: ttft_ms, p95_latency_ms, error_rate
    op: str
    threshold: float
    metric: str  # the request field (ttft, tpot, e2e) or the run metric (latency_p95_ms, error_rate)
    per_request: bool

    def holds(self, value: float) -> bool:
        return OPERATORS[self.op](value, self.threshold)

    def text(self) -> str:
        return f"{self.name}{self.op}{self.threshold:g}"


@immutable
class Slo:
    objectives: tuple[Objective, ...] = ()
    source: str = "none"  # "config", "--slo" or "none"

    @property
    def per_request(self) -> tuple[Objective, ...]:
        return tuple(item for item in self.objectives if item.per_request)

    @property
    def per_run(self) -> tuple[Objective, ...]:
        return tuple(item for item in self.objectives if not item.per_request)

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "per_request": {item.name: {"op": item.op, "value": item.threshold} for item in self.per_request},
            "per_run": {item.name: {"op": item.op, "value": item.threshold} for item in self.per_run},
        }

    def latency_line(self) -> float | None:
        """The P95 latency bound to draw on the goodput plot: a run-level `p95_latency_ms` (or
        `p95_e2e_ms`), else the per-request `e2e_ms`."""
        for item in self.per_run:
            if item.metric == "latency_p95_ms":
                return item.threshold
        for item in self.per_request:
            if item.metric == "e2e":
                return item.threshold
        return None


def _objective(name: str, op: str, number: str) -> Objective:
    key = name.lower()
    if key in REQUEST_FIELDS:
        op = "<=" if op == "=" else op
        if op not in ("<=", "<"):
            raise SloError(f"{name}{op}{number}: a per-request objective is an upper bound (<=)")
        return Objective(key, op, float(number), REQUEST_FIELDS[key], True)
    op = "==" if op == "=" else op
    match = _RUN_PERCENTILE.fullmatch(key)
    if match is not None:
        quantity = {"e2e": "latency", "e2el": "latency"}.get(match[2], match[2])
        return Objective(key, op, float(number), f"{quantity}_p{match[1]}_ms", False)
    if key == "error_rate":
        return Objective(key, op, float(number), "error_rate", False)
    raise SloError(
        f"{name}: unknown objective (per request: ttft_ms, tpot_ms, e2e_ms; per run: "
        "p50/p90/p95/p99 of latency, ttft or tpot such as p95_latency_ms, and error_rate)"
    )


def parse_slo(text: str, *, source: str) -> Slo:
    """Objectives from `ttft_ms<=500, tpot_ms<=50, p95_latency_ms<=8000, error_rate<=0.01`."""
    objectives = []
    for word in split_words(text):
        match = _ITEM.fullmatch(word) if len(word) <= 100 else None
        if match is None:
            raise SloError(f"{word[:80]!r} is not an objective (name<=number, e.g. ttft_ms<=500)")
        objectives.append(_objective(match[1], match[2], match[3]))
    return Slo(tuple(objectives), source if objectives else "none")


def slo_from(config_words: Iterable[str], override: str | None) -> Slo:
    """`--slo` when given, else the experiment ConfigMap's `slo` (its words, already split)."""
    if override is not None:
        return parse_slo(override, source="--slo")
    return parse_slo(", ".join(config_words), source="config")
