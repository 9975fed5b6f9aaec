"""Pod-template dimensions: named sets of JSON paths, and the diff of two pod templates by dimension.

An experiment changes one variable at a time. "Variable" is made concrete here: a *dimension* is a
named set of pod-template paths (placement = nodeSelector, affinity, tolerations, topology spread;
priority = priorityClassName, preemptionPolicy; sharing = GPU resource names and counts, runtime
class, DRA claims, fraction annotations ...). The paths are defined once, in `DIMENSIONS`; the diff
walks both templates, and every differing leaf is attributed to the dimension whose path matches it
most specifically (`spec.containers[*].resources.limits.{gpu}` is sharing even though
`spec.containers[*].resources` is resources). What no dimension claims is `other`.

Two derived leaves carry identity: the model (annotation `gpupolicy.io/model`, the serving args
`--model`, `--model-id`, `vllm serve NAME`, or model env vars) and the benchmark input (annotation
`gpupolicy.io/input`, `--dataset` ...). Those tokens are taken out of `args` before the rest of the
args is compared as the `runtime` dimension, so changing the model is one dimension, not two.
Template labels and other annotations are identity of the object, not conditions, and are ignored.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from gpupolicy.core.findings import JsonPath, format_path
from gpupolicy.core.immutable import immutable
from gpupolicy.core.packaged import policies_dir
from gpupolicy.core.vocabulary import INPUT_ANNOTATION, MODEL_ANNOTATION
from gpupolicy.kube import models
from gpupolicy.kube.gpu import GpuCatalog
from gpupolicy.kube.pod_spec import PodTemplate, Workload, as_list, as_mapping
from gpupolicy.kube.quantities import quantity_or_none

# Node labels that select a GPU-sharing configuration rather than a place
# (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html).
SHARING_NODE_LABELS = frozenset(
    {
        "nvidia.com/gpu.sharing-strategy",
        "nvidia.com/gpu.replicas",
        "nvidia.com/mig.config",
        "nvidia.com/mig.strategy",
        "cloud.google.com/gke-gpu-sharing-strategy",
        "cloud.google.com/gke-max-shared-clients-per-gpu",
    }
)
PRODUCT_LABEL = "nvidia.com/gpu.product"
# The servers' own model flags and env vars are defined once, in gpupolicy.kube.models (GP704);
# identity for an experiment diff also counts the generic spellings teams use in their images.
MODEL_ENV = frozenset(
    {
        *models.MODEL_ENV,
        *models.REVISION_ENV,
        "MODEL",
        "MODEL_NAME",
        "MODEL_PATH",
        "HF_MODEL_ID",
        "MODEL_REPO",
        "SERVED_MODEL",
    }
)
INPUT_ENV = frozenset(
    {"DATASET", "DATASET_NAME", "DATASET_PATH", "INPUT", "INPUT_PATH", "PROMPTS", "BENCHMARK_INPUT"}
)
MODEL_FLAGS = frozenset(
    {
        *models.MODEL_FLAGS, *models.REVISION_FLAGS,
        "--model_id", "--model_path", "--model-name-or-path", "--model_name_or_path", "--model-store", "--model-dir",
    }
)  # fmt: skip
INPUT_FLAGS = frozenset(
    {
        "--dataset", "--dataset-name", "--dataset_name", "--dataset-path", "--dataset_path", "--input",
        "--input-file", "--prompts", "--prompt-file", "--data-path",
    }
)  # fmt: skip
# Lists whose items have a `name`: compared item by item, by name, not by position.
KEYED_LISTS = frozenset(
    {
        "containers", "initContainers", "ephemeralContainers", "env", "volumes", "volumeMounts", "ports",
        "resourceClaims", "imagePullSecrets", "claims",
    }
)  # fmt: skip


@immutable
class Dimension:
    name: str
    description: str
    paths: tuple[str, ...]  # patterns: dotted steps, `[*]` any item, `["a.b/c"]` a key, `{set}` a named set


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(
        "placement",
        "which nodes the pods may land on",
        (
            "spec.nodeSelector",
            "spec.affinity.nodeAffinity",
            "spec.affinity.podAffinity",
            "spec.affinity.podAntiAffinity",
            "spec.tolerations",
            "spec.topologySpreadConstraints",
            "spec.nodeName",
            "spec.schedulerName",
        ),
    ),
    Dimension(
        "priority",
        "who wins when the cluster is full",
        (
            "spec.priorityClassName",
            "spec.priority",
            "spec.preemptionPolicy",
            'metadata.labels["kueue.x-k8s.io/priority-class"]',
        ),
    ),
    Dimension(
        "sharing",
        "how a GPU is shared: GPU resource names and counts, runtime class, DRA claims, MIG/MPS/time-slicing",
        (
            "spec.runtimeClassName",
            "spec.resourceClaims",
            "spec.containers[*].resources.limits.{gpu}",
            "spec.containers[*].resources.requests.{gpu}",
            "spec.containers[*].resources.claims",
            "spec.nodeSelector.{sharing-label}",
            "metadata.annotations.{fraction-annotation}",
        ),
    ),
    Dimension(
        "resources",
        "CPU, memory and other non-GPU resources",
        ("spec.containers[*].resources", "spec.initContainers[*].resources", "spec.overhead"),
    ),
    Dimension(
        "probes",
        "readiness, liveness and startup probes",
        (
            "spec.containers[*].readinessProbe",
            "spec.containers[*].livenessProbe",
            "spec.containers[*].startupProbe",
        ),
    ),
    Dimension("replicas", "how many pods", ("@workload.replicas", "spec.minReplicas", "spec.maxReplicas")),
    Dimension(
        "image",
        "container images",
        ("spec.containers[*].image", "spec.initContainers[*].image", "spec.containers[*].imagePullPolicy"),
    ),
    Dimension(
        "model",
        f"the model served ({MODEL_ANNOTATION}, --model, vllm serve NAME, MODEL_ID)",
        (
            "@model",
            f'metadata.annotations["{MODEL_ANNOTATION}"]',
            f'@workload.metadata.annotations["{MODEL_ANNOTATION}"]',
            "spec.containers[*].env.{model-env}",
        ),
    ),
    Dimension(
        "input",
        f"the benchmark input ({INPUT_ANNOTATION}, --dataset, DATASET)",
        (
            "@input",
            f'metadata.annotations["{INPUT_ANNOTATION}"]',
            f'@workload.metadata.annotations["{INPUT_ANNOTATION}"]',
            "spec.containers[*].env.{input-env}",
        ),
    ),
    Dimension(
        "runtime",
        "how the server runs: command, args, env, working directory",
        (
            "spec.containers[*].command",
            "spec.containers[*].args",
            "spec.containers[*].env",
            "spec.containers[*].envFrom",
            "spec.containers[*].workingDir",
        ),
    ),
    Dimension("other", "anything else in the pod template", ("spec",)),
)
DIMENSION_NAMES: tuple[str, ...] = tuple(dimension.name for dimension in DIMENSIONS)
IGNORED = "metadata"  # labels and annotations not claimed by a dimension: object identity


@immutable
class DimensionDiff:
    """One path where two pod templates differ, and the dimension it belongs to. `path` is where
    it sits in the second (treatment) object, `a_path` in the first; a value absent on one side is None."""

    dimension: str
    path: JsonPath
    a_value: Any
    b_value: Any
    a_path: JsonPath | None = None

    @property
    def shown_path(self) -> str:
        return format_path(self.path)[2:] if len(self.path) else "(whole object)"


# -- patterns -------------------------------------------------------------------------------

_TOKEN = re.compile(r'\[\*\]|\["([^"]+)"\]|\{([a-z-]+)\}|([^.\[\]{}"]+)')
Pattern = tuple[str, ...]


def parse_pattern(text: str) -> Pattern:
    steps: list[str] = []
    for match in _TOKEN.finditer(text):
        whole, key, named, plain = match.group(0), match.group(1), match.group(2), match.group(3)
        if whole == "[*]":
            steps.append("*")
        elif key is not None:
            steps.append(key)
        elif named is not None:
            steps.append("{" + named + "}")
        elif plain:
            steps.append(plain)
    return tuple(steps)


@functools.cache
def _compiled() -> tuple[tuple[Pattern, str], ...]:
    rules = [(parse_pattern(path), dimension.name) for dimension in DIMENSIONS for path in dimension.paths]
    rules.append((("metadata",), IGNORED))
    rules.append((("@workload",), IGNORED))
    return tuple(rules)


def _step_matches(pattern_step: str, step: str | int, gpu: GpuCatalog) -> bool:
    if pattern_step == "*":
        return True
    text = str(step)
    if pattern_step == "{gpu}":
        return gpu.classify(text) is not None
    if pattern_step == "{sharing-label}":
        return text in SHARING_NODE_LABELS
    if pattern_step == "{fraction-annotation}":
        return text in gpu.fraction_annotations
    if pattern_step == "{model-env}":
        return text in MODEL_ENV
    if pattern_step == "{input-env}":
        return text in INPUT_ENV
    return pattern_step == text


def dimension_of(
    logical: tuple[str | int, ...], gpu: GpuCatalog, a_value: Any = None, b_value: Any = None
) -> str:
    """The dimension of a logical path (containers by name): the most specific matching pattern."""
    if logical[:3] == ("spec", "nodeSelector", PRODUCT_LABEL) and _same_product(a_value, b_value):
        return "sharing"  # NVIDIA-L4 -> NVIDIA-L4-SHARED: the same GPUs, shared
    best, best_length = "other", -1
    for pattern, name in _compiled():
        if best_length < len(pattern) <= len(logical) and all(
            _step_matches(p, s, gpu) for p, s in zip(pattern, logical, strict=False)
        ):
            best, best_length = name, len(pattern)
    return best


_SHARED_SUFFIX = re.compile(r"(-SHARED|-MIG-[0-9]+g\.[0-9]+gb)$", re.IGNORECASE)


def _same_product(a_value: Any, b_value: Any) -> bool:
    if not (isinstance(a_value, str) and isinstance(b_value, str)):
        return False
    return _SHARED_SUFFIX.sub("", a_value) == _SHARED_SUFFIX.sub("", b_value)


# -- leaves -------------------------------------------------------------------------------------

Logical = tuple[str | int, ...]
Leaves = dict[Logical, tuple[JsonPath, Any]]


@immutable
class Identity:
    """Model or input named in a container's command line."""

    value: str
    path: JsonPath


def strip_identity(items: list[Any], path: JsonPath) -> tuple[list[Any], dict[tuple[str, str], Identity]]:
    """`args`/`command` without the model and input tokens, and those tokens' values keyed by
    (model|input, flag): `--model` and `--revision` are both part of the model's identity."""
    rest: list[Any] = []
    found: dict[tuple[str, str], Identity] = {}
    pending: tuple[str, str] | None = None
    for index, item in enumerate(items):
        if not isinstance(item, str):
            rest.append(item)
            continue
        words = item.split()
        if len(words) > 1:  # `sh -c "vllm serve org/model --port 8000"`
            kept, inner = strip_identity(words, (*path, index))
            found.update({key: Identity(value.value, (*path, index)) for key, value in inner.items()})
            rest.append(" ".join(str(word) for word in kept))
            continue
        if pending is not None:
            found[pending] = Identity(item, (*path, index))
            pending = None
            continue
        flag, sep, value = item.partition("=")
        kind = "model" if flag in MODEL_FLAGS else "input" if flag in INPUT_FLAGS else None
        if kind is not None:
            if sep:
                found[(kind, flag)] = Identity(value, (*path, index))
            else:
                pending = (kind, flag)
            continue
        if rest and rest[-1] == "serve" and not item.startswith("-"):
            found[("model", "serve")] = Identity(item, (*path, index))  # vllm serve NAME / sglang serve NAME
            continue
        rest.append(item)
    return rest, found


def _walk(value: Any, logical: Logical, concrete: JsonPath, out: Leaves) -> None:
    if isinstance(value, dict):
        if not value:
            return
        if "image" in value and isinstance(value.get("name"), str):  # a container
            _container(value, logical, concrete, out)
            return
        for key, item in value.items():
            _walk(item, (*logical, str(key)), (*concrete, str(key)), out)
    elif isinstance(value, list):
        if not value:
            return
        step = logical[-1] if logical else ""
        if step in KEYED_LISTS and all(isinstance(item, dict) and "name" in item for item in value):
            for index, item in enumerate(value):
                _walk(item, (*logical, str(item["name"])), (*concrete, index), out)
        else:
            out[logical] = (concrete, value)
    elif value is not None:
        out[logical] = (concrete, value)


def _container(spec: dict[str, Any], logical: Logical, concrete: JsonPath, out: Leaves) -> None:
    for key, item in spec.items():
        if key in ("args", "command") and isinstance(item, list):
            rest, identity = strip_identity(item, (*concrete, key))
            if rest:
                out[(*logical, key)] = ((*concrete, key), rest)
            for (kind, flag), found in identity.items():
                out[(f"@{kind}", *logical[1:], flag)] = (found.path, found.value)
        else:
            _walk(item, (*logical, str(key)), (*concrete, str(key)), out)


def template_leaves(template: PodTemplate | Mapping[str, Any]) -> Leaves:
    """Every leaf of a pod template under logical paths (`spec.containers.<name>...`)."""
    if isinstance(template, PodTemplate):
        metadata, spec = template.metadata, template.spec
        meta_path: JsonPath = template.metadata_path or (*template.path[:-1], "metadata")
        spec_path: JsonPath = template.path
    else:
        metadata, spec = as_mapping(template.get("metadata")), as_mapping(template.get("spec"))
        meta_path, spec_path = ("metadata",), ("spec",)
    out: Leaves = {}
    _walk(_own_pods_neutral(spec, as_mapping(metadata.get("labels"))), ("spec",), spec_path, out)
    _walk(metadata, ("metadata",), meta_path, out)
    return out


OWN_PODS = "(this workload's own pods)"


def _own_pods_neutral(spec: dict[str, Any], labels: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with label selectors that pick the template's own pods (spread and anti-affinity on
    `app: <this arm>`) made equal across arms: each arm must select itself, which is no difference."""
    if not labels:
        return spec

    def neutral(value: Any, in_selector: bool = False) -> Any:
        if isinstance(value, dict):
            result: dict[str, Any] = {}
            for key, item in value.items():
                if in_selector and key == "matchLabels" and isinstance(item, dict):
                    result[key] = {k: OWN_PODS if labels.get(k) == v else v for k, v in item.items()}
                elif in_selector and key == "matchExpressions" and isinstance(item, list):
                    result[key] = [_neutral_expression(expr, labels) for expr in item]
                else:
                    result[key] = neutral(item, in_selector or key == "labelSelector")
            return result
        if isinstance(value, list):
            return [neutral(item, in_selector) for item in value]
        return value

    scheduling: dict[str, Any] = {
        key: neutral(spec[key]) for key in ("topologySpreadConstraints", "affinity") if key in spec
    }
    return {**spec, **scheduling} if scheduling else spec


def _neutral_expression(expression: Any, labels: Mapping[str, Any]) -> Any:
    if not isinstance(expression, dict) or expression.get("key") not in labels:
        return expression
    own = labels[expression["key"]]
    values = [OWN_PODS if item == own else item for item in as_list(expression.get("values"))]
    return {**expression, "values": values}


def workload_leaves(workload: Workload) -> Leaves:
    """Leaves outside the pod template that are experiment conditions: replicas, model and input."""
    out: Leaves = {}
    spec = as_mapping(workload.resource.obj.get("spec"))
    for key in ("replicas", "parallelism"):
        if key in spec:
            out[("@workload", "replicas")] = (("spec", key), spec[key])
            break
    for key in (MODEL_ANNOTATION, INPUT_ANNOTATION):
        if key in workload.annotations:
            out[("@workload", "metadata", "annotations", key)] = (
                ("metadata", "annotations", key),
                workload.annotations[key],
            )
    return out


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if isinstance(a, str | int | float) and isinstance(b, str | int | float) and not isinstance(a, bool):
        qa, qb = quantity_or_none(a), quantity_or_none(b)
        return qa is not None and qa == qb
    return False


def diff_leaves(a: Leaves, b: Leaves, *, gpu: GpuCatalog | None = None) -> list[DimensionDiff]:
    catalog = gpu or default_gpu_catalog()
    diffs = []
    for logical in dict.fromkeys([*b, *a]):
        a_item, b_item = a.get(logical), b.get(logical)
        a_value = a_item[1] if a_item else None
        b_value = b_item[1] if b_item else None
        if _same(a_value, b_value):
            continue
        dimension = dimension_of(logical, catalog, a_value, b_value)
        if dimension == IGNORED:
            continue
        path = b_item[0] if b_item else a_item[0] if a_item else ()
        diffs.append(DimensionDiff(dimension, path, a_value, b_value, a_item[0] if a_item else None))
    order = {name: index for index, name in enumerate(DIMENSION_NAMES)}
    return sorted(diffs, key=lambda diff: (order[diff.dimension], [str(step) for step in diff.path]))


def diff_templates(
    a: PodTemplate | Mapping[str, Any], b: PodTemplate | Mapping[str, Any], *, gpu: GpuCatalog | None = None
) -> list[DimensionDiff]:
    """Where two pod templates differ, by dimension, path by path (paths as in `b`)."""
    return diff_leaves(template_leaves(a), template_leaves(b), gpu=gpu)


def diff_workloads(a: Workload, b: Workload, *, gpu: GpuCatalog | None = None) -> list[DimensionDiff]:
    """Two workloads: replicas and identity annotations, then their pod templates matched by role
    (a template only one side has is an `other` difference at that template's path)."""
    diffs = diff_leaves(workload_leaves(a), workload_leaves(b), gpu=gpu)
    a_roles = {template.role: template for template in a.templates}
    b_roles = {template.role: template for template in b.templates}
    for role in dict.fromkeys([*b_roles, *a_roles]):
        a_template, b_template = a_roles.get(role), b_roles.get(role)
        if a_template is not None and b_template is not None:
            diffs.extend(diff_templates(a_template, b_template, gpu=gpu))
        else:
            shown = b_template or a_template
            assert shown is not None
            diffs.append(
                DimensionDiff(
                    "other",
                    shown.path,
                    shown.describe() if a_template else None,
                    shown.describe() if b_template else None,
                    a_template.path if a_template else None,
                )
            )
    order = {name: index for index, name in enumerate(DIMENSION_NAMES)}
    return sorted(diffs, key=lambda diff: order[diff.dimension])


@functools.cache
def default_gpu_catalog() -> GpuCatalog:
    """The shipped policy's GPU catalogue, for callers that compare workloads without a policy."""
    text = (policies_dir() / "default.yaml").read_text(encoding="utf-8")
    return GpuCatalog(as_mapping(as_mapping(yaml.safe_load(text)).get("gpu")))


def dimension_paths() -> Iterator[tuple[str, str]]:
    """(dimension, pattern) pairs, for the docs."""
    for dimension in DIMENSIONS:
        for path in dimension.paths:
            yield dimension.name, path
