"""`review()` on random AdmissionReviews: pod specs of GPU workloads (and of the kinds beside them)
with odd types, numbers of any size, unicode, missing fields and hostile annotations.

What must hold, for every body:
- no exception but `MalformedReview` (which the server answers with HTTP 400), and that one only
  for bodies that are not an AdmissionReview request;
- no rule fails with an internal error (a rule that raises decides nothing: webhook.onRuleError);
- the same body reviewed twice gets the same answer and the same findings;
- a stated work budget, counted, never timed: each rule is called at most once per review, the
  Python function calls of a review grow at most linearly with the size of the body
  (`CALLS_BASE + CALLS_PER_VALUE` per JSON value), and the answer stays within the API server's
  limits (warnings ≤ 4 KiB, the deny message ≤ 32 KiB).
"""

from __future__ import annotations

import copy
import json
import sys
from collections import Counter
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpupolicy.rules  # noqa: F401  (registers the built-in rules)
from gpupolicy.core.immutable import replace
from gpupolicy.engine.registry import Rule
from gpupolicy.policy.loading import default_policy
from gpupolicy.webhook.answers import DENY_MESSAGE_MAX_CHARS, WARNINGS_MAX_BYTES
from gpupolicy.webhook.records import should_record
from gpupolicy.webhook.review import MalformedReview, ReviewEngine, webhook_rules
from gpupolicy.webhook.settings import Mode
from tests.webhook.reviews import admission_review, gpu_deployment

# The budget of Python function calls per review: a fixed part and a part per JSON value of the
# body. Measured on this suite's bodies: about 5 calls per value on Deployments of 60 containers
# (14,000 values), at most a few thousand for a small object, and 28,000 for the first review of
# a process (caches filled). A rule that walked the body once per container, per value or per
# finding would break it on the wide bodies.
CALLS_BASE = 100_000
CALLS_PER_VALUE = 50

# -- strategies -----------------------------------------------------------------------------------

ODD_TEXT = [
    "", " ", "١", "²", "ü", "😀", "\u202e", "\x00", "a" * 300, "nvidia.com/gpu", "1e1000000", "-1", "0.5",
    "9" * 40, "true", "null", "~", "${GPU}", "{{ .Values.gpu }}", "*a", "&a [x]", "!!bool maybe", "\n- x",
]  # fmt: skip
texts = st.sampled_from(ODD_TEXT) | st.text(max_size=12)
numbers = (
    st.integers(-(2**63), 2**64 - 1)  # what JSON from the API server can carry (orjson's range)
    | st.sampled_from([0, 1, -1, 2**31, 2**53 + 1, 10**30])
    | st.floats(allow_nan=False, allow_infinity=False)
)
scalars = st.none() | st.booleans() | numbers | texts
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(texts, children, max_size=3),
    max_leaves=10,
)
quantities = (
    st.sampled_from(["1", "2", "8", "0", "0.5", "1e1000000", "١", "1Gi", "-1", "9" * 30, "1000m"]) | numbers
)
GPU_RESOURCES = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "amd.com/gpu", "nvidia.com/gpu.shared"]
ROLLBACK = [
    "[{metric: p95_latency_ms, max: 800, window: 10m}]",
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b]",
    "- {metric: " + "9" * 5000 + "}",
    "!!bool maybe",
    "[" * 300,
    "# token=hf_abcdefghijklmnopqrstuvwxyz\n- {metric: x}",
]


def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A field's value: usually of its type, sometimes anything."""
    return st.integers(0, 9).flatmap(lambda roll: json_values if roll == 0 else value)


probes = st.fixed_dictionaries(
    {},
    optional={
        "httpGet": maybe(
            st.fixed_dictionaries(
                {"path": maybe(texts), "port": maybe(st.sampled_from([8000, "http", "²", "", 0, 70000]))}
            )
        ),
        "tcpSocket": maybe(st.fixed_dictionaries({"port": maybe(numbers | texts)})),
        "initialDelaySeconds": maybe(numbers),
        "periodSeconds": maybe(numbers),
        "failureThreshold": maybe(numbers),
    },
)
gpu_resources = st.fixed_dictionaries(
    {
        "limits": maybe(
            st.dictionaries(
                st.sampled_from([*GPU_RESOURCES, "cpu", "memory"]) | texts, maybe(quantities), max_size=3
            ).map(lambda found: {"nvidia.com/gpu": 1, **found})
        )
    },
    optional={
        "requests": maybe(
            st.dictionaries(
                st.sampled_from([*GPU_RESOURCES, "cpu", "memory"]) | texts, maybe(quantities), max_size=3
            )
        )
    },
)
containers = st.fixed_dictionaries(
    {
        "name": maybe(st.sampled_from(["vllm", "triton", "sidecar", "ü"]) | texts),
        "resources": maybe(gpu_resources),
    },
    optional={
        "image": maybe(
            st.sampled_from(
                [
                    "vllm/vllm-openai:v0.6.3",
                    "nvcr.io/nvidia/tritonserver:24.08-py3",
                    "nginx:latest",
                    "x" * 500,
                ]
            )
            | texts
        ),
        "args": maybe(
            st.lists(
                maybe(
                    st.sampled_from(
                        [
                            "--model",
                            "org/m",
                            "--tensor-parallel-size=2",
                            "--port=8000",
                            "--gpu-memory-utilization=1.5",
                        ]
                    )
                    | texts
                ),
                max_size=6,
            )
        ),
        "command": maybe(st.lists(texts, max_size=3)),
        "env": maybe(
            st.lists(
                maybe(st.fixed_dictionaries({"name": maybe(texts)}, optional={"value": maybe(texts)})),
                max_size=3,
            )
        ),
        "securityContext": maybe(
            st.fixed_dictionaries(
                {},
                optional={
                    "privileged": maybe(st.booleans()),
                    "runAsUser": maybe(numbers),
                    "capabilities": json_values,
                },
            )
        ),
        "ports": maybe(
            st.lists(
                maybe(
                    st.fixed_dictionaries({"containerPort": maybe(numbers)}, optional={"name": maybe(texts)})
                ),
                max_size=2,
            )
        ),
        "startupProbe": maybe(probes),
        "livenessProbe": maybe(probes),
        "readinessProbe": maybe(probes),
    },
)
pod_specs = st.fixed_dictionaries(
    {"containers": maybe(st.lists(maybe(containers), min_size=1, max_size=3))},
    optional={
        "initContainers": maybe(st.lists(maybe(containers), max_size=2)),
        "nodeSelector": maybe(st.dictionaries(texts, maybe(texts), max_size=3)),
        "tolerations": maybe(
            st.lists(
                maybe(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "key": maybe(texts),
                            "operator": maybe(st.sampled_from(["Exists", "Equal", "Gt"])),
                            "value": maybe(texts),
                            "effect": maybe(texts),
                        },
                    )
                ),
                max_size=3,
            )
        ),
        "affinity": json_values,
        "runtimeClassName": maybe(texts),
        "priorityClassName": maybe(texts),
        "hostNetwork": maybe(st.booleans()),
        "volumes": maybe(st.lists(json_values, max_size=2)),
        "resourceClaims": maybe(st.lists(json_values, max_size=2)),
        "terminationGracePeriodSeconds": maybe(numbers),
    },
)
metadatas = st.fixed_dictionaries(
    {},
    optional={
        "name": maybe(texts),
        "namespace": maybe(st.sampled_from(["ai-lab", "kube-system", ""]) | texts),
        "labels": maybe(
            st.dictionaries(
                st.sampled_from(["app", "gpupolicy.io/experiment", "gpupolicy.io/arm"]) | texts,
                maybe(texts),
                max_size=3,
            )
        ),
        "annotations": maybe(
            st.dictionaries(
                st.sampled_from(
                    [
                        "gpupolicy.io/rollback-criteria",
                        "gpupolicy.io/model",
                        "gpupolicy.io/model-load-seconds",
                        "gpupolicy.io/gpu-fraction",
                    ]
                )
                | texts,
                maybe(st.sampled_from(ROLLBACK) | texts),
                max_size=3,
            )
        ),
        "generateName": maybe(texts),
    },
)
WORKLOADS = {
    "Pod": ("v1", lambda spec: spec),
    "Deployment": (
        "apps/v1",
        lambda spec: {"replicas": 2, "template": {"metadata": {"labels": {"app": "x"}}, "spec": spec}},
    ),
    "StatefulSet": ("apps/v1", lambda spec: {"template": {"spec": spec}}),
    "Job": ("batch/v1", lambda spec: {"parallelism": 2, "template": {"spec": spec}}),
    "CronJob": ("batch/v1", lambda spec: {"jobTemplate": {"spec": {"template": {"spec": spec}}}}),
    "Rollout": ("argoproj.io/v1alpha1", lambda spec: {"template": {"spec": spec}}),
    "RayCluster": ("ray.io/v1", lambda spec: {"headGroupSpec": {"template": {"spec": spec}}}),
}


@st.composite
def objects(draw: st.DrawFn) -> Any:
    shape = draw(st.sampled_from(["workload"] * 6 + ["real"] * 2 + ["wide", "other", "anything"]))
    if shape == "wide":  # many containers, env entries and args: what grows with the body
        obj = gpu_deployment(managed_fields=draw(st.integers(0, 400)))
        pod = obj["spec"]["template"]["spec"]
        base = pod["containers"][0]
        count = draw(st.integers(1, 60))
        pod["containers"] = [
            {
                **copy.deepcopy(base),
                "name": f"c{index}",
                "env": [{"name": f"E{item}", "value": "x"} for item in range(index % 20)],
                "args": [*base["args"], *(["--x"] * (index % 30))],
            }
            for index in range(count)
        ]
        pod["initContainers"] = copy.deepcopy(pod["containers"][: draw(st.integers(0, count))])
        return obj
    if shape == "real":  # the benchmark's Deployment with one part replaced by anything
        obj = gpu_deployment(managed_fields=draw(st.integers(0, 20)))
        node: Any = obj
        path = draw(
            st.lists(
                st.sampled_from(["spec", "template", "metadata", "containers", 0, "resources", "limits"]),
                max_size=6,
            )
        )
        for step in path[:-1]:
            child = (
                node.get(step)
                if isinstance(node, dict) and isinstance(step, str)
                else (
                    node[step]
                    if isinstance(node, list) and isinstance(step, int) and step < len(node)
                    else None
                )
            )
            if not isinstance(child, dict | list):
                break
            node = child
        if path and isinstance(node, dict) and isinstance(path[-1], str):
            node[path[-1]] = draw(json_values)
        return obj
    if shape == "other":
        kind = draw(
            st.sampled_from(
                ["ConfigMap", "PodDisruptionBudget", "PriorityClass", "AnalysisTemplate", "Canary", "Service"]
            )
        )
        return {
            "apiVersion": "v1",
            "kind": kind,
            "metadata": draw(metadatas),
            "spec": draw(json_values),
            "data": draw(
                st.dictionaries(st.sampled_from(["change", "repeats", "x"]), json_values, max_size=3)
            ),
            "value": draw(numbers),
        }
    if shape == "anything":
        return draw(json_values)
    kind = draw(st.sampled_from(sorted(WORKLOADS)))
    api_version, wrap = WORKLOADS[kind]
    obj: dict[str, Any] = {
        "apiVersion": maybe_value(draw, api_version),
        "kind": kind,
        "spec": wrap(draw(pod_specs)),
    }
    if draw(st.booleans()):
        obj["metadata"] = draw(maybe(metadatas))
    return obj


def maybe_value(draw: st.DrawFn, value: Any) -> Any:
    return draw(st.just(value) | st.just(value) | json_values)


@st.composite
def admission_reviews(draw: st.DrawFn) -> Any:
    obj = draw(objects())
    operation = draw(st.sampled_from(["CREATE"] * 6 + ["UPDATE"] * 2 + ["DELETE", "CONNECT"]))
    body = admission_review(
        {"kind": obj.get("kind")} if isinstance(obj, dict) else {"kind": "Pod"},
        operation=operation,
        name=draw(st.sampled_from(["llm", ""]) | texts),
        namespace=draw(st.sampled_from(["ai-lab", ""]) | texts),
        old_object=draw(st.none() | objects().filter(lambda item: isinstance(item, dict))),
        dry_run=draw(st.booleans()),
        uid=draw(st.sampled_from(["u-1", "7c9a1d5e-3f0b-4c1e-9a57-2f4a6c8e1b90"]) | texts),
        sub_resource=draw(st.sampled_from([None] * 9 + ["status"])),
    )
    request = body["request"]
    request["object"] = obj
    for key in draw(
        st.lists(st.sampled_from(["namespace", "name", "kind", "dryRun", "userInfo", "options"]), max_size=2)
    ):
        request[key] = draw(json_values)
    return body


# -- the engine, counted ------------------------------------------------------------------------


class RuleCalls:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def wrap(self, rule: Rule) -> Rule:
        check = rule.check
        if check is None:  # load problems (GP001 ...): the engine never calls them
            return rule
        calls = self.calls

        def counted(*args: Any) -> Iterator[Any]:
            calls[rule.id] += 1
            yield from check(*args)

        return replace(rule, check=counted)


@cache
def engine(mode: Mode) -> tuple[ReviewEngine, RuleCalls]:
    calls = RuleCalls()
    rules = tuple(calls.wrap(rule) for rule in webhook_rules())
    return ReviewEngine.from_policy(default_policy(), mode=mode, rules=rules), calls


def values_in(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(values_in(key) + values_in(item) for key, item in value.items())
    if isinstance(value, list):
        return 1 + sum(values_in(item) for item in value)
    return 1


def python_calls(action: Any) -> tuple[Any, int]:
    """What `action()` returns (or raises) and how many Python function calls it made."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result: Any = action()
    except Exception as exc:  # compared and checked by the caller
        result = exc
    finally:
        sys.setprofile(previous)
    return result, count


def malformed(body: Any) -> bool:
    """Whether the body is no AdmissionReview request the webhook can decide (HTTP 400): no
    admission.k8s.io/v1 AdmissionReview, no request, no uid, an unknown operation, or, for a
    CREATE or UPDATE of the object itself, an object or metadata that is not a mapping."""
    if not isinstance(body, dict) or (body.get("apiVersion"), body.get("kind")) != (
        "admission.k8s.io/v1",
        "AdmissionReview",
    ):
        return True
    request = body.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        return True
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        return True
    if operation in ("DELETE", "CONNECT") or request.get("subResource"):
        return False
    obj = request.get("object")
    return not isinstance(obj, dict) or (
        obj.get("metadata") is not None and not isinstance(obj["metadata"], dict)
    )


def summary(decision: Any) -> Any:
    if isinstance(decision, Exception):
        return (type(decision), str(decision))
    return (
        decision.response,
        decision.findings,
        decision.allowed,
        should_record(decision),
        decision.skipped,
    )


@pytest.mark.parametrize("mode", [Mode.ENFORCE, Mode.WARN], ids=["enforce", "warn"])
@given(body=admission_reviews())
def test_review_answers_every_body_the_same_way_within_its_budget(mode: Mode, body: Any) -> None:
    from gpupolicy.webhook.review import review

    review_engine, counted = engine(mode)
    counted.calls.clear()
    size = values_in(body)
    first, calls = python_calls(lambda: review(copy.deepcopy(body), review_engine))
    rule_calls = dict(counted.calls)
    second = review(copy.deepcopy(body), review_engine) if not isinstance(first, Exception) else None

    assert isinstance(first, MalformedReview) is malformed(body), repr(first)
    if isinstance(first, MalformedReview):
        return
    assert not isinstance(first, Exception), repr(first)
    assert summary(second) == summary(first)
    assert first.report is None or first.report.errors == [], first.report.errors[:3]
    assert all(count <= 1 for count in rule_calls.values()), rule_calls
    assert calls <= CALLS_BASE + CALLS_PER_VALUE * size, (calls, size)
    response = first.response["response"]
    warnings = response.get("warnings", [])
    assert sum(len(text.encode()) for text in warnings) <= WARNINGS_MAX_BYTES + 64
    message = response.get("status", {}).get("message", "")
    assert len(message) <= DENY_MESSAGE_MAX_CHARS + 1024
    json.dumps(first.response)  # the server can send it
