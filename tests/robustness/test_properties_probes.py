"""Probe budget arithmetic: `initialDelaySeconds + failureThreshold × periodSeconds` with the API's
defaults, whatever the probe holds.

The kubelet reads the probe after defaulting (SetDefaults_Probe in k8s.io/kubernetes
pkg/apis/core/v1/defaults.go): periodSeconds 0 or unset is 10, failureThreshold 0 or unset is 3,
initialDelaySeconds unset is 0. The fields are int32 and validation refuses negative values, so
a value outside 0..2³¹-1, or of another type, is no setting at all: the default holds.
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#Probe
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpupolicy.kube.probes import (
    DEFAULT_FAILURE_THRESHOLD,
    DEFAULT_INITIAL_DELAY_SECONDS,
    DEFAULT_PERIOD_SECONDS,
    probe_budget,
)

INT32_MAX = 2**31 - 1
FIELDS = ("initialDelaySeconds", "periodSeconds", "failureThreshold")
DEFAULTS = {
    "initialDelaySeconds": DEFAULT_INITIAL_DELAY_SECONDS,
    "periodSeconds": DEFAULT_PERIOD_SECONDS,
    "failureThreshold": DEFAULT_FAILURE_THRESHOLD,
}
LARGEST_BUDGET = INT32_MAX + INT32_MAX * INT32_MAX

settings_in_range = st.integers(1, INT32_MAX)
odd_values = (
    st.none()
    | st.booleans()
    | st.integers()  # any size: 10**5000 too
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["10", "١٠", "1e3", "²"])
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
odd_probes = st.dictionaries(st.sampled_from([*FIELDS, "timeoutSeconds", "httpGet"]), odd_values, max_size=5)


def effective(probe: dict[str, Any], name: str) -> int:
    """What the kubelet uses: the value when it is a valid setting, else the default."""
    value = probe.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT32_MAX:
        return DEFAULTS[name]
    if value == 0 and name != "initialDelaySeconds":
        return DEFAULTS[name]
    return value


def test_an_empty_probe_has_the_api_defaults() -> None:
    budget = probe_budget({})
    assert (budget.initial_delay, budget.period, budget.failure_threshold) == (0, 10, 3)
    assert budget.seconds == 30 and budget.failure_window == 30


@given(st.sampled_from(["periodSeconds", "failureThreshold"]))
def test_zero_is_the_default_as_the_api_server_sets_it(name: str) -> None:
    assert probe_budget({name: 0}) == probe_budget({})


@given(odd_probes | odd_values)
def test_the_budget_is_never_negative_and_bounded(probe: Any) -> None:
    budget = probe_budget(probe)
    assert 0 <= budget.initial_delay <= INT32_MAX
    assert 1 <= budget.period <= INT32_MAX and 1 <= budget.failure_threshold <= INT32_MAX
    assert 0 <= budget.failure_window <= budget.seconds <= LARGEST_BUDGET


@given(odd_probes)
def test_each_field_is_its_value_or_its_default(probe: dict[str, Any]) -> None:
    budget = probe_budget(probe)
    assert budget.initial_delay == effective(probe, "initialDelaySeconds")
    assert budget.period == effective(probe, "periodSeconds")
    assert budget.failure_threshold == effective(probe, "failureThreshold")
    assert budget.seconds == budget.initial_delay + budget.failure_threshold * budget.period


@given(
    st.fixed_dictionaries({}, optional={name: settings_in_range for name in FIELDS}),
    st.sampled_from(FIELDS),
    st.integers(0, INT32_MAX),
)
def test_the_budget_grows_with_each_field(probe: dict[str, Any], name: str, more: int) -> None:
    """Monotonic in each field over the values the API accepts (1..2³¹-1; 0 is the default)."""
    before = probe_budget(probe)
    current = probe.get(name, DEFAULTS[name])
    after = probe_budget({**probe, name: min(max(current, 1) + more, INT32_MAX)})
    assert after.seconds >= before.seconds
    assert after.failure_window >= before.failure_window
