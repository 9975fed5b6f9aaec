"""Hostile YAML, wherever gpupolicy parses YAML: manifests, the rollback-criteria annotation and
policy files. Alias bombs, nesting hidden in aliases and values PyYAML cannot construct each give
one bounded finding (GP001 for a document, GP902 for the annotation, a PolicyError for a policy),
and the other objects are still linted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.loading.documents import DEFAULT_LIMITS
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import Policy, default_policy, load_policy, policy_from_mapping
from gpupolicy.policy.validation import PolicyError

# Each finding's message stays this short, whatever the input (no expanded value, no 3 MB echo).
MESSAGE_BOUND = 400

PRIVILEGED_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: ns}
spec:
  containers:
  - name: c
    image: registry.example.com/app:1.0
    securityContext: {privileged: true}
"""


def bomb(levels: int, *, fan_out: int = 10) -> str:
    """A flow list whose anchors each hold `fan_out` aliases of the previous one (10^levels values)."""
    lines = ["- &a0 [x]"]
    for level in range(1, levels + 1):
        lines.append(f"- &a{level} [" + ",".join([f"*a{level - 1}"] * fan_out) + "]")
    return "\n".join(lines)


def alias_chain(length: int) -> str:
    """Anchors each holding a list with the previous one: flat text, `length` levels deep."""
    lines = ["- &c0 [x]"] + [f"- &c{index} [*c{index - 1}]" for index in range(1, length)]
    return "\n".join(lines) + f"\n- *c{length - 1}"


def lint(text: str, policy: Policy | None = None) -> Report:
    chosen = policy or default_policy()
    loaded = load_text(text, "hostile.yaml", limits=chosen.limits)
    return evaluate(loaded.resources, chosen, problems=loaded.problems)


def serving_deployment(criteria: str) -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: ns
  annotations:
    gpupolicy.io/rollback-criteria: {json.dumps(criteria)}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: llm}}}}
  template:
    metadata: {{labels: {{app: llm}}}}
    spec:
      containers:
      - name: server
        image: vllm/vllm-openai:v0.6.3
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


def assert_bounded(report: Report) -> None:
    assert report.errors == [], report.errors  # no rule raised: GP901-903 were all decided
    for finding in report.findings:
        assert len(finding.message) <= MESSAGE_BOUND, finding.message[:200]


# -- documents ---------------------------------------------------------------------------------


def test_a_document_alias_bomb_is_one_finding_at_an_anchor_and_the_rest_is_linted() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\ndata:\n  x:\n" + "\n".join(
        "    " + line for line in bomb(30).splitlines()
    )
    report = lint(text + "\n---\n" + PRIVILEGED_POD)
    (problem,) = [finding for finding in report.findings if finding.rule_id == "GP001"]
    assert problem.line is not None and problem.line > 5  # at the anchor that tipped it, not line 1
    assert f"{DEFAULT_LIMITS.max_alias_expansion:,}" in problem.message
    assert "limits.maxAliasExpansion" in problem.message
    assert "GP601" in {finding.rule_id for finding in report.findings}  # the other document
    assert_bounded(report)


def test_depth_is_counted_through_aliases() -> None:
    """1,300 levels reached through a chain of anchors once raised inside GP005 and GP612."""
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: deep}\nspec:\n  containers:\n"
        "  - {name: c, image: 'x:1', env: [{name: A, value: v}]}\nchain:\n"
        + "\n".join("  " + line for line in alias_chain(1300).splitlines())
    )
    report = lint(text + "\n---\n" + PRIVILEGED_POD)
    (problem,) = [finding for finding in report.findings if finding.rule_id == "GP001"]
    assert "deeper than 200 levels" in problem.message and "alias" in problem.message
    assert problem.line is not None and problem.line > 7
    assert "GP601" in {finding.rule_id for finding in report.findings}
    assert_bounded(report)


def test_the_limits_are_policy_parameters() -> None:
    strict = policy_from_mapping({"limits": {"maxAliasExpansion": 50, "maxDepth": 16}})
    moderate = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\ndata:\n  x: "
        + json.dumps("unused")
        + "\nlists:\n"
        + "\n".join("  " + line for line in bomb(2).splitlines())
    )  # 100 + 10 values
    assert not [f for f in lint(moderate).findings if f.rule_id == "GP001"]
    assert [f.rule_id for f in lint(moderate, strict).findings if f.rule_id == "GP001"] == ["GP001"]
    nested = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n}\nx: " + "[" * 20 + "]" * 20 + "\n"
    assert [f.rule_id for f in lint(nested, strict).findings if f.rule_id == "GP001"] == ["GP001"]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("!!bool maybe", "'maybe' is not a valid boolean"),
        ("!!int twelve", "'twelve' is not a valid integer"),
        ("!!float fast", "'fast' is not a valid number"),
        ("1" * 5000, "an integer of 5,000 characters"),
    ],
)
def test_values_pyyaml_cannot_construct_are_a_finding_at_the_value(value: str, words: str) -> None:
    text = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata:\n  x: {value}\n---\n{PRIVILEGED_POD}"
    )
    report = lint(text)
    (problem,) = [finding for finding in report.findings if finding.rule_id == "GP001"]
    assert (problem.line, problem.column) == (5, 6)
    assert words in problem.message
    assert "GP601" in {finding.rule_id for finding in report.findings}
    assert_bounded(report)


# -- the rollback-criteria annotation ---------------------------------------------------------


def test_an_annotation_alias_bomb_is_one_bounded_gp902() -> None:
    """336 bytes that once took 3 s, 450 MB and 80 MB of findings (each error printed the expansion)."""
    criteria = bomb(7)
    assert len(criteria) < 400
    report = lint(serving_deployment(criteria))
    gp902 = [finding for finding in report.findings if finding.rule_id == "GP902"]
    assert len(gp902) == 1
    assert "limits.maxAliasExpansion" in gp902[0].message
    assert sum(len(finding.message) for finding in report.findings) < 20_000
    assert_bounded(report)


@pytest.mark.parametrize(
    ("criteria", "words"),
    [
        ("[{metric: p95_latency_ms, max: !!bool maybe, window: 10m}]", "'maybe' is not a valid boolean"),
        (
            "[{metric: p95_latency_ms, max: " + "9" * 5000 + ", window: 10m}]",
            "an integer of 5,000 characters",
        ),
        (alias_chain(300), "deeper than 200 levels"),
        ("[" + ", ".join(["1"] * 50_000) + "]", "50,000 criteria; at most 64"),
        ("[" + ", ".join(["1"] * 60) + "]", "more errors"),
        ("[{metric: " + "m" * 3_000_000 + "}]", "is a required property"),
        ("[{metric: e, max: 1, window: " + "9" * 100_000 + "x}]", "does not match"),
    ],
)
def test_annotation_values_that_cannot_be_read_are_a_bounded_gp902(criteria: str, words: str) -> None:
    """They once raised inside the rule (KeyError, ValueError), which switched GP901-903 off."""
    report = lint(serving_deployment(criteria))
    messages = [finding.message for finding in report.findings if finding.rule_id == "GP902"]
    assert messages and any(words in message for message in messages), messages
    assert_bounded(report)


def test_annotation_limits_follow_the_policy() -> None:
    strict = policy_from_mapping({"limits": {"maxAliasExpansion": 50}})
    text = serving_deployment(bomb(2))  # 110 values through aliases: fine by default
    assert "limits.maxAliasExpansion" not in " ".join(f.message for f in lint(text).findings)
    assert "limits.maxAliasExpansion" in " ".join(f.message for f in lint(text, strict).findings)


# -- huge values --------------------------------------------------------------------------------


def test_huge_experiment_values_give_few_bounded_findings() -> None:
    """GP801 once quoted each bad value whole and gave one finding per unknown word."""
    words = ", ".join(f"word{index}" for index in range(20_000))
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x-experiment, namespace: ns}\ndata:\n"
        "  change: a\n  fixed: image\n  metrics: P95\n  repeats: '3'\n"
        f"  slo: {json.dumps('a' * 100_000)}\n  arms: {json.dumps('A' * 100_000)}\n"
        f"  variable: {json.dumps(words)}\n  ? {json.dumps('k' * 50_000)}\n  : v\n"
    )
    report = lint(text)
    gp801 = [finding for finding in report.findings if finding.rule_id == "GP801"]
    assert 3 <= len(gp801) <= 5
    assert any("and 19995 more are not a dimension" in finding.message for finding in gp801)
    assert_bounded(report)


def test_a_huge_value_in_a_policy_is_an_excerpt_in_the_error(tmp_path: Path) -> None:
    policy_file = tmp_path / "big.gpupolicy.yaml"
    policy_file.write_text(f"failOn: {json.dumps('x' * 1_000_000)}\n")
    with pytest.raises(PolicyError) as caught:
        load_policy(extra=[policy_file])
    assert len(str(caught.value)) < len(str(policy_file)) + MESSAGE_BOUND


# -- policy files ------------------------------------------------------------------------------


def test_an_alias_bomb_in_a_policy_file_is_a_policy_error_naming_file_and_line(tmp_path: Path) -> None:
    policy_file = tmp_path / "bomb.gpupolicy.yaml"
    policy_file.write_text("exclude:\n" + "\n".join("  " + line for line in bomb(30).splitlines()) + "\n")
    with pytest.raises(PolicyError) as caught:
        load_policy(extra=[policy_file])
    message = str(caught.value)
    assert message.startswith(f"{policy_file}:") and "maxAliasExpansion" in message
    assert "\n" not in message and len(message) < MESSAGE_BOUND
