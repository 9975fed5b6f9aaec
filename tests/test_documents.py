"""Loading YAML/JSON into Resources: positions, duplicate keys, lists, broken documents, aliases."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.loading.documents import (
    DEFAULT_LIMITS,
    LoadedText,
    Resource,
    StreamReadsDifferently,
    iter_parse,
    parse_text,
)
from gpupolicy.loading.inputs import load_file, load_text
from gpupolicy.loading.positions import PLACE_BITS, LineStarts, child_of
from gpupolicy.policy.loading import default_policy

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  namespace: ai-lab
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            limits:
              nvidia.com/gpu: 1
        - name: sidecar
          image: busybox:1.36
      tolerations:
      - key: nvidia.com/gpu
        operator: Exists
"""

CONTAINERS = ("spec", "template", "spec", "containers")


def only(text: str, file: str = "test.yaml") -> Resource:
    loaded = parse_text(text, file)  # the parser alone: the loader skips what is no object
    assert not loaded.problems, loaded.problems
    assert len(loaded.resources) == 1
    return loaded.resources[0]


# -- positions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ((), (1, 1)),
        (("metadata", "name"), (4, 3)),
        (("spec", "replicas"), (7, 3)),
        ((*CONTAINERS, 0), (11, 11)),  # a list item: where its first key starts
        ((*CONTAINERS, 0, "image"), (12, 11)),
        ((*CONTAINERS, 0, "resources", "limits", "nvidia.com/gpu"), (15, 15)),
        ((*CONTAINERS, 1, "name"), (16, 11)),
        ((*CONTAINERS, 1, "image"), (17, 11)),
        (("spec", "template", "spec", "tolerations", 0, "operator"), (20, 9)),
    ],
)
def test_positions_of_nested_fields_and_list_items(
    path: tuple[str | int, ...], expected: tuple[int, int]
) -> None:
    assert only(DEPLOYMENT).position(path) == expected


def test_missing_field_points_at_nearest_existing_ancestor() -> None:
    resource = only(DEPLOYMENT)
    # containers[1] has no resources: point at the container item.
    assert resource.position((*CONTAINERS, 1, "resources", "limits")) == (16, 11)
    # an index past the end of the list: point at the list's key.
    assert resource.position((*CONTAINERS, 5, "image")) == (10, 7)
    assert resource.has_path((*CONTAINERS, 0, "image"))
    assert not resource.has_path((*CONTAINERS, 1, "resources"))


@pytest.mark.parametrize(
    ("start", "end"), [(0, 0), (2**PLACE_BITS - 1, 0), (0, 2**PLACE_BITS - 1), (7, 2 ** (PLACE_BITS - 1))]
)
def test_a_span_keeps_both_places_whole(start: int, end: int) -> None:
    """An entry packs where its key or item starts and ends in one int: neither spills into the other."""
    lines = LineStarts("a: b\n", skips_bom=True, editor=None)
    where = start << lines.bits | end
    assert (lines.span_start(where), lines.span_end(where)) == (start, end)


def test_positions_around_a_block_scalar() -> None:
    """A block scalar's entry also holds where its text starts (kube/rollback.py reads it)."""
    resource = only("a:\n  b: |\n    one\n    two\n  c: 1\n")
    assert resource.position(("a", "b")) == (2, 3)
    assert resource.last_line(("a", "b")) == 2  # the key's own line: the key is what a finding points at
    assert resource.line_span() == (1, 6)
    written = resource.positions.written(("a", "b")) if resource.positions is not None else None
    assert written is not None and resource.lines is not None
    assert resource.lines.parsed(child_of(written)) == (1, 5)  # type: ignore[arg-type]


def test_positions_around_a_block_scalar_in_a_list() -> None:
    """An item of a list that is a block scalar keeps where its text starts too; a plain or quoted
    item keeps its span alone."""
    resource = only('a:\n  - plain\n  - >\n    folded\n  - "quoted"\n')
    assert resource.positions is not None and resource.lines is not None
    items = child_of(resource.positions.written(("a",)))  # type: ignore[arg-type]
    assert isinstance(items, list) and len(items) == 3
    assert resource.lines.parsed(child_of(items[1])) == (2, 4)  # type: ignore[arg-type]
    assert child_of(items[0]) is None and child_of(items[2]) is None
    assert resource.position(("a", 2)) == (5, 5)


def test_identity_fields() -> None:
    resource = only(DEPLOYMENT)
    assert (resource.api_version, resource.group, resource.kind) == ("apps/v1", "apps", "Deployment")
    assert (resource.name, resource.namespace) == ("vllm", "ai-lab")
    assert str(resource.ref) == "Deployment ai-lab/vllm"


def test_json_input_positions() -> None:
    text = (
        "{\n"
        '  "apiVersion": "v1",\n'
        '  "kind": "Pod",\n'
        '  "metadata": {"name": "cuda"},\n'
        '  "spec": {\n'
        '    "containers": [\n'
        '      {"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"}\n'
        "    ]\n"
        "  }\n"
        "}\n"
    )
    resource = only(text, "pod.json")
    assert resource.kind == "Pod"
    assert resource.position(("metadata", "name")) == (4, 16)
    assert resource.position(("spec", "containers", 0, "image")) == (7, 24)


def test_multi_document_positions_and_indices() -> None:
    text = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ai-lab\n---\n# comment\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
    loaded = load_text(text, "x.yaml")
    assert [r.kind for r in loaded.resources] == ["Namespace", "Pod"]
    assert loaded.resources[1].position(("metadata", "name")) == (11, 3)
    assert loaded.resources[0].doc_index != loaded.resources[1].doc_index


# -- duplicate keys ---------------------------------------------------------------------


def test_duplicate_keys_top_level_and_nested() -> None:
    text = (
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        "  name: a\n"
        "  name: b\n"
        "spec:\n"
        "  containers:\n"
        "    - name: cuda\n"
        "      resources:\n"
        "        limits:\n"
        "          nvidia.com/gpu: 1\n"
        "          nvidia.com/gpu: 2\n"
        "kind: Pod\n"
    )
    resource = only(text)
    assert resource.name == "b"  # the last value wins, as in kubectl
    assert resource.obj["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2
    found = sorted(
        (dup.key, dup.first_line, resource.position_of(dup.place)[0]) for dup in resource.duplicates
    )
    assert found == [("kind", 2, 13), ("name", 4, 5), ("nvidia.com/gpu", 11, 12)]
    report = evaluate([resource], default_policy())
    lines = sorted(f.line for f in report.findings if f.rule_id == "GP002")
    assert lines == [5, 12, 13]
    message = next(f.message for f in report.findings if f.rule_id == "GP002" and f.line == 12)
    assert "first at line 11" in message


def test_a_key_written_three_times_is_one_finding_naming_every_line() -> None:
    """HyperPod's mpi-operator chart writes app.kubernetes.io/name as a literal and through two
    helpers: two findings at one line, each naming another pair, for one problem."""
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: op\n  labels:\n"
        "    app.kubernetes.io/name: op\n    helm.sh/chart: op-0.1.0\n"
        "    app.kubernetes.io/name: op\n    app.kubernetes.io/name: op\n"
        "spec:\n  containers: [{name: op, image: 'example.com/op:1.0'}]\n"
    )
    report = evaluate([only(text)], default_policy())
    (finding,) = [f for f in report.findings if f.rule_id == "GP002"]
    assert finding.line == 9
    assert "is written 3 times (lines 6, 8 and 9); the value at line 9 silently replaces the others" in (
        finding.message
    )


def test_same_key_in_sibling_mappings_is_not_a_duplicate() -> None:
    text = "a:\n  name: x\nb:\n  name: x\nc:\n  - name: 1\n  - name: 2\n"
    assert only(text).duplicates == []


# -- kind: List -------------------------------------------------------------------------

LIST = """\
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Service
    metadata:
      name: vllm
  - apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: vllm
      name: vllm-2
    spec:
      replicas: 1
"""


@pytest.mark.parametrize("kind", ["List", "DeploymentList", "ServiceList"])
def test_list_items_become_resources_with_their_positions(kind: str) -> None:
    loaded = load_text(LIST.replace("kind: List", f"kind: {kind}"), "list.yaml")
    assert not loaded.problems
    service, deployment = loaded.resources
    assert (service.kind, deployment.kind) == ("Service", "Deployment")
    assert service.position(("metadata", "name")) == (7, 7)
    assert deployment.position(("spec", "replicas")) == (14, 7)
    assert deployment.position(()) == (8, 5)
    # the duplicate belongs to the item that holds it
    assert [dup.key for dup in deployment.duplicates] == ["name"]
    assert service.duplicates == []


def test_list_kind_without_items_is_one_object() -> None:
    resource = only("apiVersion: v1\nkind: List\nmetadata: {name: empty}\n")
    assert resource.kind == "List"


# -- broken documents -------------------------------------------------------------------


def test_broken_document_is_reported_and_later_documents_still_load() -> None:
    text = (
        "apiVersion: v1\n"  # 1
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: before\n"
        "---\n"  # 5
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata:\n"
        "  name: broken\n"
        "spec: [unclosed\n"  # 10
        "---\n"
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: after\n"  # 15
        "data:\n"
        "  key: value\n"
    )
    loaded = load_text(text, "stream.yaml")
    assert [r.name for r in loaded.resources] == ["before", "after"]
    (problem,) = loaded.problems
    assert problem.rule_id == "GP001"
    assert problem.file == "stream.yaml"
    assert problem.line == 11 and problem.column == 1
    assert "flow sequence" in problem.message
    assert "started at line 10" in problem.message
    after = loaded.resources[1]
    assert after.position(("metadata", "name")) == (15, 3)
    assert after.position(("data", "key")) == (17, 3)
    assert [r.doc_index for r in loaded.resources] == [0, 2]
    assert problem.doc_index == 1


def test_bad_indentation_reports_line_and_column() -> None:
    (problem,) = parse_text("a: 1\n  b: 2\n", "x.yaml").problems
    assert (problem.rule_id, problem.line, problem.column) == ("GP001", 2, 4)


CONFLICTED = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: before
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: sglang
spec:
  template:
    spec:
      containers:
      - name: server
        command:
        - /bin/bash
<<<<<<< HEAD
        # --enable-ep-moe is for MoE models
=======
        # --expert-parallel-size is for MoE models
>>>>>>> origin/main
        args: [serve]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: after
"""


def test_a_merge_conflict_left_in_a_file_is_named_at_its_first_marker() -> None:
    loaded = load_text(CONFLICTED, "sts.yaml")
    (problem,) = loaded.problems
    assert (problem.rule_id, problem.line, problem.column) == ("GP001", 17, 1)
    assert problem.message == "YAML syntax error: merge conflict marker '<<<<<<< HEAD' left in the file"
    assert [r.name for r in loaded.resources] == ["before", "after"]


@pytest.mark.parametrize(
    "text",
    [
        "data:\n  note: |\n    <<<<<<< HEAD\n",  # inside a block scalar: a string, not an error
        "a: 1\n  b: 2\n<<<<<<< HEAD\n",  # a marker after the error is not its cause
        "a: 1\n  b: 2\n<<<<<<<<\n=======x\n",  # not git's markers
    ],
)
def test_text_that_only_looks_like_a_conflict(text: str) -> None:
    problems = parse_text(text, "x.yaml").problems
    assert all("merge conflict" not in problem.message for problem in problems)


def test_value_that_cannot_be_constructed_is_gp001() -> None:
    loaded = load_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: !!int abc\n", "x.yaml")
    assert [p.rule_id for p in loaded.problems] == ["GP001"]
    assert loaded.resources == []


# -- aliases, anchors, merge keys ---------------------------------------------------------


def test_anchors_and_aliases_share_values() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n"
        "spec:\n  containers:\n"
        "    - name: a\n      resources: &res\n        limits: {nvidia.com/gpu: 1}\n"
        "    - name: b\n      resources: *res\n"
    )
    resource = only(text)
    first, second = resource.obj["spec"]["containers"]
    assert first["resources"] == second["resources"] == {"limits": {"nvidia.com/gpu": 1}}


def test_merge_keys() -> None:
    text = (
        "defaults: &defaults\n"  # 1
        "  cpu: '4'\n"
        "  memory: 16Gi\n"
        "apiVersion: v1\n"
        "kind: Pod\n"  # 5
        "metadata: {name: p}\n"
        "spec:\n"
        "  containers:\n"
        "    - name: c\n"
        "      resources:\n"  # 10
        "        requests:\n"
        "          <<: *defaults\n"
        "          memory: 32Gi\n"
    )
    resource = only(text)
    requests_path = ("spec", "containers", 0, "resources", "requests")
    assert resource.obj["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "4", "memory": "32Gi"}
    assert resource.duplicates == []
    assert resource.position((*requests_path, "memory")) == (13, 11)  # written here: wins over the merge
    assert resource.position((*requests_path, "cpu")) == (2, 3)  # merged: where the anchor wrote it


def test_merge_key_list_first_source_wins() -> None:
    text = "a: &a {x: 1}\nb: &b {x: 2, y: 3}\nc:\n  <<: [*a, *b]\n"
    assert only(text).obj["c"] == {"x": 1, "y": 3}


def test_billion_laughs_is_a_finding_not_a_hang() -> None:
    levels = ["a: &a [" + ", ".join(['"lol"'] * 9) + "]"]
    for index in range(1, 9):
        prev, name = chr(ord("a") + index - 1), chr(ord("a") + index)
        levels.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\n" + "\n".join(levels) + "\n"
    loaded = load_text(text, "lol.yaml")
    assert loaded.resources == []
    (problem,) = loaded.problems
    assert problem.rule_id == "GP001" and problem.line is not None and problem.line > 3  # at an anchor
    assert f"{DEFAULT_LIMITS.max_alias_expansion:,}" in problem.message


def test_moderate_aliasing_is_fine() -> None:
    text = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
    assert only(text).obj["b"] == [[1, 2, 3]] * 3


def test_recursive_alias_is_a_finding() -> None:
    loaded = load_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: &a {k: *a}\n", "x.yaml")
    assert [p.rule_id for p in loaded.problems] == ["GP001"]
    assert "itself" in loaded.problems[0].message


# -- scalars ------------------------------------------------------------------------------


def test_scalar_types() -> None:
    resource = only("a: 1\nb: 1.5\nc: true\nd: null\ne: '1'\nf: 2024-01-01\ng: !Ref x\nh: 0x1F\n")
    assert resource.obj == {
        "a": 1,
        "b": 1.5,
        "c": True,
        "d": None,
        "e": "1",
        "f": "2024-01-01",
        "g": "x",
        "h": 31,
    }


# -- files that are not manifests ---------------------------------------------------------


def test_non_utf8_bytes_are_gp001_with_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caf\xe9\n")
    loaded = load_file(path)
    (problem,) = loaded.problems
    assert (problem.rule_id, problem.line, problem.column) == ("GP001", 4, 12)
    assert "0xe9" in problem.message


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes("\ufeffapiVersion: v1\nkind: Namespace\nmetadata:\n  name: ai-lab\n".encode())
    loaded = load_file(path)
    assert not loaded.problems
    assert loaded.resources[0].position(("metadata", "name")) == (4, 3)


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 900 + "]" * 900 + "\n",
        "a:\n" + "".join("  " * level + "k:\n" for level in range(1, 600)),
    ],
    ids=["flow", "block"],
)
def test_deep_nesting_is_a_finding_not_a_recursion_error(text: str) -> None:
    loaded = load_text("apiVersion: v1\nkind: ConfigMap\n" + text, "deep.yaml")
    assert loaded.resources == []
    (problem,) = loaded.problems
    assert problem.rule_id == "GP001"
    assert "nests deeper than 200 levels" in problem.message


def test_real_depth_is_fine() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  a: " + "[" * 150 + "]" * 150 + "\n"
    assert only(text).kind == "ConfigMap"


def test_control_character_is_gp001_with_position() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: café\x07}\n"
    loaded = load_text(text, "ctl.yaml")
    assert [r.name for r in loaded.resources] == ["ok"]
    (problem,) = loaded.problems
    assert (problem.rule_id, problem.line, problem.column, problem.doc_index) == ("GP001", 7, 22, 1)
    assert "#x0007" in problem.message and "position" not in problem.message


def test_lone_surrogate_from_an_api_caller_is_gp001() -> None:
    loaded = parse_text("a: 1\n---\nb: \ud800\n", "api")
    (problem,) = loaded.problems
    assert (problem.rule_id, problem.line, problem.column) == ("GP001", 3, 4)
    assert [r.obj for r in loaded.resources] == [{"a": 1}]


_KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-./", min_size=1, max_size=8).filter(
    lambda key: key[0].isalpha()
)
_VALUES = st.recursive(
    st.one_of(st.integers(-5, 5), st.text(alphabet="xyz", max_size=3), st.booleans()),
    lambda children: st.one_of(
        st.lists(children, min_size=1, max_size=3), st.dictionaries(_KEYS, children, min_size=1, max_size=3)
    ),
    max_leaves=12,
)


def _key_paths(value: object, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found: list[tuple[str | int, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*path, key))
            found.extend(_key_paths(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_key_paths(item, (*path, index)))
    return found


@settings(max_examples=60, deadline=None)
@given(body=st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=4), flow=st.booleans())
def test_every_key_position_points_at_that_key(body: dict[str, object], flow: bool) -> None:
    text = yaml.safe_dump(body, default_flow_style=flow, sort_keys=False)
    resource = only("---\n" + text)  # a leading separator shifts every line by one
    assert resource.obj == body
    lines = ("---\n" + text).splitlines()
    for path in _key_paths(body):
        position = resource.position(path)
        assert position is not None
        line, column = position
        written = lines[line - 1][column - 1 :]
        assert written.lstrip("'\"").startswith(str(path[-1])), (path, position, text)  # quoted keys too


# -- memory ------------------------------------------------------------------------------


def _cyclic_garbage_of_parsing(text: str) -> int:
    """Objects that only the cyclic collector frees after `text` is parsed and its result dropped."""
    gc.collect()
    gc.disable()  # as in batch runs (cli.runtime.paused_cyclic_gc)
    try:
        parse_text(text, "x.yaml")
        return gc.collect()
    finally:
        gc.enable()


def test_a_documents_values_and_positions_are_freed_by_reference_counting() -> None:
    """The builders' cycle (nested functions that call one another) holds nothing of the document
    once it is built: what waits for the paused collector does not grow with the document."""
    small = "a: &x {b: [1, 2]}\nc: *x\n"
    large = "".join(
        f"key{index}: {{b: [1, {{c: d}}], e: &x{index} [f]}}\nref{index}: *x{index}\n" for index in range(500)
    )
    assert _cyclic_garbage_of_parsing(large) == _cyclic_garbage_of_parsing(small)


def _released(documents: Iterator[LoadedText]) -> Iterator[LoadedText]:
    """Each document, its objects' positions dropped once the next is asked for (the streaming lint
    releases each object once checked)."""
    for document in documents:
        yield document
        for resource in document.resources:
            resource.positions = None
            resource.duplicates = []


def test_iter_parse_after_a_syntax_error_gives_what_parse_text_reads() -> None:
    """The documents before the error are given as read (their reader may release them), the rest
    come from the slow path: together they are parse_text's documents, none given twice."""
    text = DEPLOYMENT + "---\nkind: Pod\nmetadata: {name: [\n---\n" + DEPLOYMENT.replace("vllm", "other")
    spans = []
    objects = []
    problems = []
    for document in _released(iter_parse(text, "x.yaml")):
        spans.extend(resource.line_span() for resource in document.resources)
        objects.extend(resource.obj for resource in document.resources)
        problems.extend(document.problems)
    whole = parse_text(text, "x.yaml")
    assert objects == [resource.obj for resource in whole.resources]
    assert spans == [resource.line_span() for resource in whole.resources]
    assert problems == whole.problems and problems[0].rule_id == "GP001"


def test_iter_parse_compares_the_documents_given_when_an_error_follows() -> None:
    """A %TAG directive after `...` belongs to the next document of the stream, but to the previous
    chunk of the slow path: a document given reads differently there, and iter_parse says so."""
    text = "kind: Pod\nmetadata: {name: a}\n...\n%TAG !e! tag:e.com,2000:\n---\nkind: Pod\nmetadata: {name: c}\n---\nkind: [\n"
    with pytest.raises(StreamReadsDifferently):
        list(_released(iter_parse(text, "x.yaml")))


OPENSHIFT_TEMPLATE = """\
apiVersion: template.openshift.io/v1
kind: Template
metadata:
  name: vllm-rt-template
objects:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: vllm
    namespace: ${NAMESPACE}
  spec:
    replicas: ${{REPLICAS}}
    selector: {matchLabels: {app: vllm}}
    template:
      metadata: {labels: {app: vllm}}
      spec:
        containers:
        - name: vllm
          image: ${IMAGE}:${TAG}
          env:
          - {name: HF_TOKEN, value: '${HF_TOKEN}'}
parameters:
- {name: NAMESPACE, value: ai}
- {name: REPLICAS, value: '2'}
- {name: IMAGE, value: vllm/vllm-openai}
- {name: TAG, value: latest}
- {name: HF_TOKEN, required: true}
"""


def test_an_openshift_templates_objects_are_objects_made_with_its_parameters() -> None:
    """ODH wraps its vLLM ServingRuntimes in OpenShift Templates: the objects were judged as pod
    templates of a `Template` (GP901 and GP401 on a runtime, a Deployment's PDB and annotations
    unseen). Each object is one of its own kind, as `oc process` makes it from the parameters'
    values; a parameter without one stays a reference."""
    (resource,) = load_text(OPENSHIFT_TEMPLATE, "t.yaml").resources
    assert (resource.kind, resource.name, resource.namespace) == ("Deployment", "vllm", "ai")
    assert resource.obj["spec"]["replicas"] == 2
    container = resource.obj["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "vllm/vllm-openai:latest"
    assert container["env"][0]["value"] == "${HF_TOKEN}"
    assert resource.position(("spec", "replicas")) == (12, 5)  # where the Template writes it
