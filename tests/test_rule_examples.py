"""Every rule's fires/passes examples (gpupolicy/rules/examples/<ID>/), and the meta-tests that
keep rules documented and exemplified."""

from __future__ import annotations

import pytest

from gpupolicy.engine.registry import REGISTRY, Rule
from gpupolicy.rules.docs import SECTIONS, render_rule_page
from gpupolicy.rules.example_files import examples_for, expected_lines, run_example

RULES = list(REGISTRY)


def _id(rule: Rule) -> str:
    return rule.id


@pytest.mark.parametrize("rule", RULES, ids=_id)
def test_rule_has_both_examples(rule: Rule) -> None:
    examples = examples_for(rule.id)
    assert examples is not None, f"{rule.id}: add rules/examples/{rule.id}/fires.yaml and passes.yaml"
    assert expected_lines(examples.fires.read_text(encoding="utf-8"), rule.id), (
        f"{rule.id}: fires.yaml marks no line with '# expect: {rule.id}'"
    )


@pytest.mark.parametrize("rule", RULES, ids=_id)
def test_fires_example_fires_on_marked_lines(rule: Rule) -> None:
    examples = examples_for(rule.id)
    if examples is None:
        pytest.fail(f"{rule.id} has no examples")
    report = run_example(examples.fires, examples.policy_for())
    assert not report.errors, report.errors
    got = sorted({f.line for f in report.findings if f.rule_id == rule.id and f.line is not None})
    want = sorted(expected_lines(examples.fires.read_text(encoding="utf-8"), rule.id))
    assert got == want, f"{rule.id}: findings on lines {got}, expected on {want}"


@pytest.mark.parametrize("rule", RULES, ids=_id)
def test_passes_example_does_not_fire(rule: Rule) -> None:
    examples = examples_for(rule.id)
    if examples is None:
        pytest.fail(f"{rule.id} has no examples")
    report = run_example(examples.passes, examples.policy_for())
    assert not report.errors, report.errors
    fired = [f"{f.location()}: {f.message}" for f in report.findings if f.rule_id == rule.id]
    assert not fired, f"{rule.id} fired on passes.yaml: {fired}"


@pytest.mark.parametrize("rule", RULES, ids=_id)
def test_rule_metadata_is_complete(rule: Rule) -> None:
    assert rule.summary and rule.rationale and rule.remediation.endswith(".")
    assert rule.references, f"{rule.id} cites no reference"
    page = render_rule_page(rule)
    for section in SECTIONS:
        assert f"## {section}" in page
