"""GP005's schema lookup never builds a path from the object: `kind: ../../…` once compiled any
`*-<version>.json` on disk as a schema, and its values leaked into findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.kube.kube_schemas import (
    compiled_validator,
    has_schema,
    schema_errors,
    schema_name,
    shipped_schemas,
)
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy

LEAK = "planted-secret-value"


@pytest.fixture
def planted(tmp_path: Path) -> str:
    """A `kind` that walks from the bundled schema folder to a schema planted in tmp_path."""
    folder = tmp_path / "planted"
    folder.mkdir()
    (folder / "evil-v1.json").write_text(json.dumps({"type": "object", "required": [LEAK]}))
    target = str(folder / "evil")
    if target != target.lower():
        pytest.skip("the planted path must read the same lower-cased")
    return "../" * 40 + target.lstrip("/")


def test_a_traversing_kind_finds_no_schema(planted: str) -> None:
    version = "1.34"
    assert not has_schema("v1", planted, version)
    assert compiled_validator(version, "v1", planted) is None
    assert list(schema_errors({"apiVersion": "v1", "kind": planted}, version)) == []


def test_a_traversing_kind_leaks_nothing_into_findings(planted: str) -> None:
    text = f"apiVersion: v1\nkind: {json.dumps(planted)}\nmetadata: {{name: t}}\nspec: {{}}\n"
    loaded = load_text(text, "traversal.yaml")
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    assert report.errors == []
    assert not [finding for finding in report.findings if LEAK in finding.message]
    assert "GP005" not in {finding.rule_id for finding in report.findings}


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [
        ("v1", "../pod"),
        ("v1", "Pod/../../x"),
        ("v1", "Pod\x00"),
        ("v1", "pod.json#"),
        ("v1/../../../../etc", "Pod"),
        ("apps/../../v1", "Deployment"),
        ("a/b/c/v1", "Pod"),
        ("v1", "_definitions"),
        ("v1", "P" * 100),
        ("x" * 300 + ".k8s.io/v1", "Pod"),
        ("v1beta", "Pod"),
        ("V1", "Pod"),
    ],
)
def test_kind_and_api_version_must_be_of_the_kubernetes_grammar(api_version: str, kind: str) -> None:
    assert schema_name(api_version, kind) is None


@pytest.mark.parametrize(
    ("api_version", "kind", "name"),
    [
        ("v1", "Pod", "pod-v1.json"),
        ("apps/v1", "Deployment", "deployment-apps-v1.json"),
        ("batch/v1", "CronJob", "cronjob-batch-v1.json"),
        ("policy/v1", "PodDisruptionBudget", "poddisruptionbudget-policy-v1.json"),
        ("scheduling.k8s.io/v1", "PriorityClass", "priorityclass-scheduling-v1.json"),
        ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicy-networking-v1.json"),
    ],
)
def test_built_in_kinds_are_found_in_the_shipped_index(api_version: str, kind: str, name: str) -> None:
    assert schema_name(api_version, kind) == name
    assert name in shipped_schemas("1.34")
    assert has_schema(api_version, kind, "1.34")


def test_crd_groups_name_no_built_in_schema() -> None:
    assert schema_name("serving.kserve.io/v1beta1", "InferenceService") is None
    assert schema_name("argoproj.io/v1alpha1", "Rollout") is None


def test_keys_that_are_not_strings_are_checked_as_kubectl_sends_them() -> None:
    """YAML lets a key be an integer or null (`1:`, `~:`, an empty `?`); JSON does not, and the
    schema validator raised on one (an internal error of GP005, found by the loader's property
    test). They are checked as the text sigs.k8s.io/yaml sends: unknown fields."""
    text = "?\napiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  1: x\n  containers: []\n"
    loaded = load_text(text, "keys.yaml")
    report = evaluate(loaded.resources, default_policy())
    assert report.errors == []
    unknown = sorted(f.message for f in report.findings if f.rule_id == "GP005")
    assert any("unknown field 'null' at the top level" in message for message in unknown), unknown
    assert any("unknown field '1' in 'spec'" in message for message in unknown), unknown
    assert list(schema_errors({"apiVersion": "v1", "kind": "Pod", None: 1}, "1.34"))
