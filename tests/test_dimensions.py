"""Pod-template dimensions: every differing path lands in exactly one dimension, with both values."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpupolicy.kube.dimensions import (
    DIMENSION_NAMES,
    DIMENSIONS,
    diff_templates,
    diff_workloads,
    parse_pattern,
    strip_identity,
)
from gpupolicy.kube.pod_spec import Workload, workload_of
from gpupolicy.loading.inputs import load_text


def _template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "llm-control"}, "annotations": {"prometheus.io/scrape": "true"}},
        "spec": {
            "priorityClassName": "gpu-serving",
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L4"},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "llm-control"}},
                }
            ],
            "containers": [
                {
                    "name": "vllm",
                    "image": "vllm/vllm-openai:v0.6.3",
                    "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"],
                    "env": [{"name": "HF_HOME", "value": "/cache"}],
                    "resources": {
                        "requests": {"cpu": "4", "memory": "24Gi"},
                        "limits": {"memory": "24Gi", "nvidia.com/gpu": 1},
                    },
                    "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}},
                }
            ],
        },
    }


def _changed(**edits: Any) -> dict[str, Any]:
    template = copy.deepcopy(_template())
    for dotted, value in edits.items():
        node: Any = template
        steps = dotted.split("__")
        for step in steps[:-1]:
            node = node[int(step)] if step.isdigit() else node[step]
        node[steps[-1]] = value
    return template


def _dims(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(diff.dimension for diff in diff_templates(a, b)))


def test_identical_templates_have_no_diff() -> None:
    assert diff_templates(_template(), _template()) == []


def test_dimension_names_are_the_design_vocabulary_plus_other() -> None:
    assert DIMENSION_NAMES == (
        "placement", "priority", "sharing", "resources", "probes", "replicas", "image", "model", "input",
        "runtime", "other",
    )  # fmt: skip
    assert all(dimension.paths for dimension in DIMENSIONS)


def test_patterns_parse_keys_with_dots_and_wildcards() -> None:
    assert parse_pattern('spec.containers[*].resources.limits.{gpu}') == (
        "spec", "containers", "*", "resources", "limits", "{gpu}",
    )  # fmt: skip
    assert parse_pattern('metadata.annotations["gpupolicy.io/model"]') == (
        "metadata",
        "annotations",
        "gpupolicy.io/model",
    )


@pytest.mark.parametrize(
    ("edits", "dimension"),
    [
        ({"spec__priorityClassName": "gpu-serving-critical"}, "priority"),
        ({"spec__preemptionPolicy": "Never"}, "priority"),
        ({"spec__nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}, "placement"),
        ({"spec__tolerations": []}, "placement"),
        (
            {
                "spec__affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 50, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
                        ]
                    }
                }
            },
            "placement",
        ),
        ({"spec__runtimeClassName": "nvidia"}, "sharing"),
        ({"spec__containers__0__image": "vllm/vllm-openai:v0.6.4"}, "image"),
        ({"spec__containers__0__resources__requests__cpu": "8"}, "resources"),
        ({"spec__containers__0__readinessProbe": {"httpGet": {"path": "/ready", "port": 8000}}}, "probes"),
        (
            {"spec__containers__0__args": ["--model", "meta-llama/Llama-3.1-70B-Instruct", "--port", "8000"]},
            "model",
        ),
        (
            {"spec__containers__0__args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--port", "9000"]},
            "runtime",
        ),
        ({"spec__containers__0__env": [{"name": "HF_HOME", "value": "/data"}]}, "runtime"),
        (
            {
                "spec__containers__0__env": [
                    {"name": "MODEL_ID", "value": "org/m"},
                    {"name": "HF_HOME", "value": "/cache"},
                ]
            },
            "model",
        ),
        ({"metadata__annotations": {"gpupolicy.io/input": "sharegpt@v4"}}, "input"),
        ({"spec__hostIPC": True}, "other"),
    ],
)
def test_each_change_is_one_dimension(edits: dict[str, Any], dimension: str) -> None:
    assert _dims(_template(), _changed(**edits)) == [dimension]


def test_empty_preferred_affinity_is_the_same_as_none() -> None:
    # An empty mapping or list is no condition at all: absent and empty compare equal.
    assert _dims(_template(), _changed(spec__affinity={})) == []


def test_gpu_resource_and_shared_product_are_one_sharing_change() -> None:
    treatment = _changed(spec__nodeSelector={"nvidia.com/gpu.product": "NVIDIA-L4-SHARED"})
    treatment["spec"]["containers"][0]["resources"]["limits"] = {"memory": "24Gi", "nvidia.com/gpu.shared": 1}
    diffs = diff_templates(_template(), treatment)
    assert {diff.dimension for diff in diffs} == {"sharing"}
    paths = {diff.shown_path: (diff.a_value, diff.b_value) for diff in diffs}
    assert paths == {
        'spec.containers[0].resources.limits["nvidia.com/gpu"]': (1, None),
        'spec.containers[0].resources.limits["nvidia.com/gpu.shared"]': (None, 1),
        'spec.nodeSelector["nvidia.com/gpu.product"]': ("NVIDIA-L4", "NVIDIA-L4-SHARED"),
    }


def test_labels_and_self_selecting_spread_are_identity_not_a_difference() -> None:
    treatment = _changed(metadata={"labels": {"app": "llm-treatment"}, "annotations": {}})
    treatment["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] = {
        "app": "llm-treatment"
    }
    assert diff_templates(_template(), treatment) == []
    treatment["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] = {
        "app": "someone-else"
    }
    assert _dims(_template(), treatment) == ["placement"]


def test_containers_compare_by_name_not_position() -> None:
    control = _template()
    sidecar = {"name": "metrics", "image": "prom/exporter:v1"}
    control["spec"]["containers"].append(sidecar)
    treatment = copy.deepcopy(control)
    treatment["spec"]["containers"].reverse()
    assert diff_templates(control, treatment) == []
    treatment["spec"]["containers"][1]["image"] = "vllm/vllm-openai:v0.7.0"  # vllm is now second
    [diff] = diff_templates(control, treatment)
    assert (diff.dimension, diff.path, diff.a_path) == (
        "image",
        ("spec", "containers", 1, "image"),
        ("spec", "containers", 0, "image"),
    )


def test_quantities_compare_by_value() -> None:
    assert diff_templates(_template(), _changed(spec__containers__0__resources__requests__cpu="4000m")) == []


def test_multiple_dimensions_are_all_reported_with_exact_paths_and_values() -> None:
    treatment = _changed(spec__priorityClassName="gpu-serving-critical")
    treatment["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "8"
    diffs = diff_templates(_template(), treatment)
    assert [(d.dimension, d.shown_path, d.a_value, d.b_value) for d in diffs] == [
        ("priority", "spec.priorityClassName", "gpu-serving", "gpu-serving-critical"),
        ("resources", "spec.containers[0].resources.requests.cpu", "4", "8"),
    ]


@pytest.mark.parametrize(
    ("items", "rest", "identity"),
    [
        (["--model", "org/m", "--port", "8000"], ["--port", "8000"], {("model", "--model"): "org/m"}),
        (
            ["--model=org/m", "--revision", "abc"],
            [],
            {("model", "--model"): "org/m", ("model", "--revision"): "abc"},
        ),
        (
            ["vllm", "serve", "org/m", "--tp", "2"],
            ["vllm", "serve", "--tp", "2"],
            {("model", "serve"): "org/m"},
        ),
        (
            ["--model-id", "org/m", "--dataset", "sharegpt"],
            [],
            {("model", "--model-id"): "org/m", ("input", "--dataset"): "sharegpt"},
        ),
        (
            ["-c", "vllm serve org/m --port 8000"],
            ["-c", "vllm serve --port 8000"],
            {("model", "serve"): "org/m"},
        ),
    ],
)
def test_model_and_input_are_taken_out_of_the_args(
    items: list[str], rest: list[str], identity: dict[tuple[str, str], str]
) -> None:
    kept, found = strip_identity(items, ("args",))
    assert kept == rest
    assert {key: value.value for key, value in found.items()} == identity


def _workload(text: str) -> Workload:
    loaded = load_text(text, "arms.yaml")
    workload = workload_of(loaded.resources[0])
    assert workload is not None
    return workload


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  annotations: {{gpupolicy.io/model: "org/m@{revision}"}}
spec:
  replicas: {replicas}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


def test_workload_diff_covers_replicas_and_identity_annotations() -> None:
    control = _workload(DEPLOYMENT.format(name="a", replicas=2, revision="r1"))
    assert diff_workloads(control, _workload(DEPLOYMENT.format(name="b", replicas=2, revision="r1"))) == []
    diffs = diff_workloads(control, _workload(DEPLOYMENT.format(name="b", replicas=3, revision="r2")))
    assert [(d.dimension, d.path, d.a_value, d.b_value) for d in diffs] == [
        ("replicas", ("spec", "replicas"), 2, 3),
        ("model", ("metadata", "annotations", "gpupolicy.io/model"), "org/m@r1", "org/m@r2"),
    ]


def test_workload_diff_of_different_kinds_compares_the_pod_templates() -> None:
    rollout = DEPLOYMENT.format(name="b", replicas=2, revision="r1").replace(
        "apiVersion: apps/v1\nkind: Deployment", "apiVersion: argoproj.io/v1alpha1\nkind: Rollout"
    )
    rollout = rollout.replace(
        "spec:\n  replicas: 2\n", "spec:\n  replicas: 2\n  strategy: {canary: {steps: [{setWeight: 20}]}}\n"
    )
    control = _workload(DEPLOYMENT.format(name="a", replicas=2, revision="r1"))
    assert diff_workloads(control, _workload(rollout)) == []
