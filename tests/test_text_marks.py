"""The loader notes which placeholder characters an object's text holds (`Resource.text_marks`), so
that GP004 skips serialising objects whose text holds none: that note must never say "none" of an
object whose values hold one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpupolicy.loading.documents import TEXT_MARKS, text_marks
from gpupolicy.loading.inputs import load_paths, load_text
from tests.conftest import LintText

REPO = Path(__file__).resolve().parent.parent
FOLDERS = [REPO / "examples", REPO / "tests" / "data" / "corpus", REPO / "gpupolicy" / "rules" / "examples"]
PLACEHOLDER_STARTS = ("$", "<", "{{", "__")


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda folder: folder.name)
def test_an_object_said_to_hold_no_mark_holds_none_in_its_values(folder: Path) -> None:
    loaded = load_paths([str(folder)])
    clean = [resource for resource in loaded.resources if resource.text_marks == frozenset()]
    assert clean and len(clean) < len(loaded.resources)  # both kinds are there
    for resource in clean:
        text = json.dumps(resource.obj, ensure_ascii=False)
        assert not any(mark in text for mark in PLACEHOLDER_STARTS), resource


def test_marks_are_those_of_the_document_alone() -> None:
    head = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\n"
    text = "---\n".join([head % "a", head % "b" + "data:\n  b: ${X}\n", head % "c" + "data: {c: '<x>'}\n"])
    assert [resource.text_marks for resource in load_text(text, "t.yaml").resources] == [
        frozenset(),
        frozenset({"$"}),
        frozenset({"<"}),
    ]
    assert text_marks("x: {{ y }} __z__ \\n", 0, 20) == frozenset({"{{", "__", "\\"})
    assert set(TEXT_MARKS) >= set(PLACEHOLDER_STARTS)


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: llm, namespace: ai-lab}}
spec:
  selector: {{matchLabels: {{app: llm}}}}
  template:
    metadata: {{labels: {{app: llm}}}}
    spec:
      serviceAccountName: {account}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
"""


@pytest.mark.parametrize(
    "account",
    ['"\\x24{SERVICE_ACCOUNT}"', '"\\u0024{SERVICE_ACCOUNT}"', '"\\U00000024{SERVICE_ACCOUNT}"'],
    ids=["x", "u", "U"],
)
def test_a_placeholder_written_with_an_escape_is_still_found(lint_text: LintText, account: str) -> None:
    text = DEPLOYMENT.format(account=account)
    [resource] = load_text(text, "t.yaml").resources
    assert resource.text_marks == frozenset({"\\"})
    [finding] = [finding for finding in lint_text(text).findings if finding.rule_id == "GP004"]
    assert finding.path == ("spec", "template", "spec", "serviceAccountName")


def test_a_list_item_merging_text_written_elsewhere_in_its_document_is_still_checked(
    lint_text: LintText,
) -> None:
    text = """\
apiVersion: v1
kind: List
base: &base {serviceAccountName: "${SERVICE_ACCOUNT}", containers: [{name: vllm, image: vllm/vllm-openai:v0.8.5}]}
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: llm, namespace: ai-lab}
    spec:
      <<: *base
"""
    [resource] = load_text(text, "t.yaml").resources
    assert "$" in (resource.text_marks or ())
    assert [finding.path for finding in lint_text(text).findings if finding.rule_id == "GP004"] == [
        ("spec", "serviceAccountName")
    ]
