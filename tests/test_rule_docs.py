"""Rule documentation: `gpupolicy rules`, `gpupolicy explain`, docs/rules/ up to date, README's rules table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpupolicy.cli.main import main
from gpupolicy.core.immutable import replace
from gpupolicy.engine.registry import REGISTRY, Rule
from gpupolicy.rules.docs import (
    README_HEADING,
    SECTIONS,
    doc_problems,
    readme_section,
    rendered_docs,
    stale_docs,
    with_readme_section,
    write_docs,
)
from gpupolicy.rules.example_files import examples_for, strip_markers

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "rules"
RULES = list(REGISTRY)
REGENERATE = "regenerate with: .venv/bin/python -m gpupolicy.rules.docs docs/rules"


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.id)
def test_every_rule_is_fully_documented(rule: Rule) -> None:
    assert doc_problems(rule) == []


def test_the_meta_test_catches_an_undocumented_rule() -> None:
    bare = replace(
        REGISTRY["GP102"], id="GP999", summary="", rationale=" ", remediation="Fix it", references=()
    )
    problems = doc_problems(bare)
    assert problems == [
        "no What it does text",
        "no Why is this bad? text",
        "no remediation (one sentence ending with a period)",
        "no references",
        "no examples: add rules/examples/GP999/fires.yaml and passes.yaml",
    ]


def test_committed_docs_match_a_fresh_generation(tmp_path: Path) -> None:
    """What CI checks: regenerate docs/rules into a temporary folder and compare."""
    write_docs(tmp_path)
    fresh = {path.name: path.read_text() for path in tmp_path.iterdir()}
    committed = {path.name: path.read_text() for path in DOCS.glob("*.md")}
    assert sorted(committed) == sorted(fresh), REGENERATE
    changed = [name for name in fresh if committed[name] != fresh[name]]
    assert changed == [], REGENERATE


def test_stale_docs_reports_what_is_out_of_date(tmp_path: Path) -> None:
    write_docs(tmp_path)
    (tmp_path / "README.md").unlink()
    (tmp_path / "GP102-gpu-request-limit-mismatch.md").write_text("old\n")
    (tmp_path / "GP998-retired.md").write_text("old\n")
    readme = tmp_path / "README-top.md"
    readme.write_text("# project\n")
    assert stale_docs(tmp_path, readme) == [
        f"{tmp_path / 'GP102-gpu-request-limit-mismatch.md'}: out of date",
        f"{tmp_path / 'README.md'}: missing",
        f"{tmp_path / 'GP998-retired.md'}: no such rule",
        f"{readme}: the {README_HEADING} section is out of date",
    ]


def test_rule_docs_check_mode_exit_codes(tmp_path: Path) -> None:
    from gpupolicy.rules.docs import main as docs_main

    folder = tmp_path / "docs" / "rules"
    assert docs_main([str(folder)]) == 0  # writes pages and the README section
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith(README_HEADING)
    assert docs_main(["--check", str(folder)]) == 0
    (folder / "README.md").write_text("edited by hand\n")
    assert docs_main(["--check", str(folder)]) == 1


def test_every_example_in_the_docs_is_a_fixture_the_tests_run() -> None:
    pages = rendered_docs()
    for rule in RULES:
        examples = examples_for(rule.id)
        assert examples is not None
        blocks = re.findall(r"```yaml\n(.*?)```", pages[f"{rule.slug}.md"], re.DOTALL)
        fixtures = [strip_markers(examples.fires.read_text()), strip_markers(examples.passes.read_text())]
        if examples.policy is not None:
            fixtures.insert(0, examples.policy.read_text())
        assert blocks == fixtures, rule.id


def test_readme_lists_every_rule_in_its_rules_section() -> None:
    readme = (REPO / "README.md").read_text()
    assert README_HEADING in readme.splitlines(), f"README.md has no {README_HEADING} section; {REGENERATE}"
    assert with_readme_section(readme) == readme, REGENERATE
    section = readme_section()
    for rule in RULES:
        assert f"| [{rule.id}](docs/rules/{rule.slug}.md) | {rule.name} |" in section


def test_readme_section_is_replaced_in_place_or_appended() -> None:
    section = readme_section()
    assert with_readme_section("# x\n\nintro\n") == "# x\n\nintro\n\n" + section
    middle = f"# x\n\n{README_HEADING}\n\nold table\n\n## Licence\n\nApache\n"
    assert with_readme_section(middle) == f"# x\n\n{section}\n## Licence\n\nApache\n"


def test_explain_shows_every_section(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "GP102"]) == 0
    page = capsys.readouterr().out
    rule = REGISTRY["GP102"]
    assert page.startswith("# GP102 gpu-request-limit-mismatch\n")
    for section in SECTIONS:
        assert f"\n## {section}\n" in page
    examples = examples_for("GP102")
    assert examples is not None
    assert strip_markers(examples.fires.read_text()) in page
    assert strip_markers(examples.passes.read_text()) in page
    assert "# expect:" not in page
    assert rule.remediation in page and rule.rationale in page and rule.references[0] in page


def test_explain_by_name_and_unknown_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "suppression-invalid"]) == 0
    assert capsys.readouterr().out.startswith("# GP010 suppression-invalid")
    assert main(["explain", "GP999"]) == 2
    assert "no rule 'GP999'" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["table", "json", "markdown"])
def test_rules_lists_every_rule(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        listed = [item["id"] for item in json.loads(out)]
        assert listed == [rule.id for rule in RULES]
        assert all(item["helpUri"].endswith(".md") for item in json.loads(out))
    else:
        for rule in RULES:
            assert re.search(rf"\b{rule.id}\b.*\b{rule.name}\b", out), rule.id
    if fmt == "table":
        assert len(out.splitlines()) == len(RULES)


def test_suppression_rules_are_listed_outside_the_catalogue_families() -> None:
    assert REGISTRY["GP010"].name == "suppression-invalid" and REGISTRY["GP010"].severity.label == "error"
    assert REGISTRY["GP011"].name == "suppression-unused" and REGISTRY["GP011"].severity.label == "warning"
