"""The experiment diff (gpupolicy/kube/dimensions.py) on generated pod templates: a template diffed with
itself (a copy) has no dimension, and a change of one field of one dimension is that dimension
and no other.

Templates are generated with the fields experiments vary (placement, priority, GPU sharing,
resources, probes, images, model and input in args, env and annotations, runtime flags) plus
arbitrary extra fields. Floats exclude NaN: neither JSON nor the API server carries one, and
NaN is unequal to itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from gpupolicy.kube.dimensions import DIMENSION_NAMES, diff_templates, diff_workloads
from gpupolicy.kube.pod_spec import workload_of
from gpupolicy.loading.documents import Resource

words = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(words, children, max_size=3),
    max_leaves=12,
)


@st.composite
def containers(draw: st.DrawFn, name: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": f"vllm/vllm-openai:v0.{draw(st.integers(0, 99))}"}
    args: list[str] = []
    if draw(st.booleans()):
        args += ["--model", f"org/{draw(words)}"]
    if draw(st.booleans()):
        args += ["--dataset", f"data/{draw(words)}"]
    if draw(st.booleans()):
        args += ["--port", str(draw(st.integers(1024, 65535)))]
    if args:
        container["args"] = args
    env = [
        {"name": name, "value": draw(words)}
        for name in draw(st.sets(st.sampled_from(["HF_HOME", "MODEL_ID", "DATASET", "LOG_LEVEL"])))
    ]
    if env:
        container["env"] = env
    resources: dict[str, Any] = {}
    if draw(st.booleans()):
        resources["requests"] = {
            "cpu": str(draw(st.integers(1, 64))),
            "memory": f"{draw(st.integers(1, 512))}Gi",
        }
    if draw(st.booleans()):
        resources["limits"] = {"nvidia.com/gpu": draw(st.integers(1, 8))}
    if resources:
        container["resources"] = resources
    if draw(st.booleans()):
        container["readinessProbe"] = {
            "httpGet": {"path": "/health", "port": 8000},
            "periodSeconds": draw(st.integers(1, 60)),
        }
    if draw(st.booleans()):
        container["workingDir"] = f"/{draw(words)}"
    return container


@st.composite
def templates(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(words, min_size=1, max_size=3, unique=True))
    spec: dict[str, Any] = {"containers": [draw(containers(name)) for name in names]}
    if draw(st.booleans()):
        spec["nodeSelector"] = {
            "nvidia.com/gpu.product": draw(st.sampled_from(["NVIDIA-L4", "NVIDIA-H100-80GB-HBM3"]))
        }
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    for key, value in (("priorityClassName", words), ("runtimeClassName", words), ("schedulerName", words)):
        if draw(st.booleans()):
            spec[key] = draw(value)
    spec.update(draw(st.dictionaries(words.map("x-".__add__), json_values, max_size=2)))
    metadata: dict[str, Any] = {"labels": {"app": draw(words)}}
    if draw(st.booleans()):
        metadata["annotations"] = {"gpupolicy.io/input": draw(words), "note": draw(words)}
    return {"metadata": metadata, "spec": spec}


Change = Callable[[dict[str, Any], Any], None]


def _container(template: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = template["spec"]["containers"][0]
    return found


def _set_arg(flag: str) -> Change:
    def change(template: dict[str, Any], fresh: Any) -> None:
        container = _container(template)
        args = container.setdefault("args", [])
        if flag in args:
            args[args.index(flag) + 1] = f"{args[args.index(flag) + 1]}-{fresh}"
        else:
            args += [flag, f"new-{fresh}"]

    return change


def _set_env(name: str) -> Change:
    def change(template: dict[str, Any], fresh: Any) -> None:
        env = _container(template).setdefault("env", [])
        for entry in env:
            if entry["name"] == name:
                entry["value"] = f"{entry['value']}-{fresh}"
                return
        env.append({"name": name, "value": f"new-{fresh}"})

    return change


def _set(path: tuple[str, ...], value: Callable[[Any, Any], Any]) -> Change:
    """Set `path` (under the first container when it starts with "container") to a new value
    computed from the old one (None when absent) and a fresh word."""

    def change(template: dict[str, Any], fresh: Any) -> None:
        node = _container(template) if path[0] == "container" else template
        for step in path[1 if path[0] == "container" else 0 : -1]:
            node = node.setdefault(step, {})
        node[path[-1]] = value(node.get(path[-1]), fresh)

    return change


def _other_word(old: Any, fresh: Any) -> str:
    return f"{old}-{fresh}" if isinstance(old, str) else f"new-{fresh}"


def _bigger(old: Any, fresh: Any) -> int:
    return (old if isinstance(old, int) else int(str(old or 0))) + 1


# (dimension, change) pairs: each changes one field that dimension owns, and only it.
CHANGES: list[tuple[str, Change]] = [
    ("placement", _set(("spec", "nodeSelector", "topology.kubernetes.io/zone"), _other_word)),
    ("placement", _set(("spec", "schedulerName"), _other_word)),
    (
        "placement",
        _set(
            ("spec", "tolerations"),
            lambda old, fresh: [*(old or []), {"key": f"k-{fresh}", "operator": "Exists"}],
        ),
    ),
    ("priority", _set(("spec", "priorityClassName"), _other_word)),
    ("sharing", _set(("spec", "runtimeClassName"), _other_word)),
    ("sharing", _set(("container", "resources", "limits", "nvidia.com/gpu"), _bigger)),
    ("sharing", _set(("spec", "nodeSelector", "nvidia.com/gpu.sharing-strategy"), _other_word)),
    (
        "resources",
        _set(("container", "resources", "requests", "cpu"), lambda old, fresh: str(_bigger(old, fresh))),
    ),
    ("probes", _set(("container", "readinessProbe", "periodSeconds"), _bigger)),
    ("image", _set(("container", "image"), lambda old, fresh: f"{old}-{fresh}")),
    ("model", _set_arg("--model")),
    ("model", _set_env("MODEL_ID")),
    ("input", _set_arg("--dataset")),
    ("input", _set(("metadata", "annotations", "gpupolicy.io/input"), _other_word)),
    ("runtime", _set_env("HF_HOME")),
    ("runtime", _set(("container", "workingDir"), _other_word)),
    ("other", _set(("spec", "dnsPolicy"), _other_word)),
    ("other", _set(("spec", "hostIPC"), lambda old, fresh: old is not True)),
]


def dimensions(a: dict[str, Any], b: dict[str, Any]) -> set[str]:
    return {diff.dimension for diff in diff_templates(a, b)}


@given(templates())
def test_a_template_diffed_with_itself_has_no_dimension(template: dict[str, Any]) -> None:
    assert diff_templates(template, copy.deepcopy(template)) == []


# Command lines of any shape: flags with and without values, `sh -c "vllm serve NAME"`, odd types.
arg_words = st.sampled_from(
    ["--model", "--dataset", "--revision", "serve", "vllm", "--port", "8000", "=", "--model=x"]
)
arg_items = st.lists(arg_words, max_size=4).map(" ".join) | arg_words | json_values
odd_containers = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "name": words | json_values,
            "image": words | json_values,
            "args": st.lists(arg_items, max_size=6) | json_values,
            "command": st.lists(arg_items, max_size=4),
            "env": st.lists(
                st.dictionaries(st.sampled_from(["name", "value"]), words | json_values), max_size=3
            ),
        },
    )
    | json_values,
    max_size=3,
)


@given(
    st.dictionaries(words, json_values, max_size=4),
    st.dictionaries(words, json_values, max_size=4),
    st.none() | odd_containers,
)
def test_any_template_diffed_with_itself_has_no_dimension(
    metadata: dict[str, Any], spec: dict[str, Any], containers: Any
) -> None:
    if containers is not None:
        spec = {**spec, "containers": containers}
    template = {"metadata": metadata, "spec": spec}
    assert diff_templates(template, copy.deepcopy(template)) == []


@given(templates(), st.sampled_from(CHANGES), words)
def test_changing_one_field_of_one_dimension_is_that_dimension(
    template: dict[str, Any], case: tuple[str, Change], fresh: str
) -> None:
    dimension, change = case
    changed = copy.deepcopy(template)
    change(changed, fresh)
    assert dimensions(template, changed) == {dimension}
    assert dimensions(changed, template) == {dimension}


@given(templates(), st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1))
def test_replicas_alone_is_the_replicas_dimension(template: dict[str, Any], before: int, after: int) -> None:
    def deployment(replicas: int) -> Any:
        obj = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "llm", "namespace": "ai"},
            "spec": {"replicas": replicas, "template": copy.deepcopy(template)},
        }
        return workload_of(Resource(obj, file="test.yaml", doc_index=0))

    found = {diff.dimension for diff in diff_workloads(deployment(before), deployment(after))}
    assert found == (set() if before == after else {"replicas"})


def test_every_dimension_but_replicas_has_a_generated_change() -> None:
    assert {dimension for dimension, _ in CHANGES} == set(DIMENSION_NAMES) - {"replicas"}
