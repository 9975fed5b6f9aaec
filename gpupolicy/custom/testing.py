"""`gpupolicy test DIR`: each custom rule of DIR against its own examples, as `opa test`,
`gator verify` and `kyverno test` give their users.

A rule's examples are `examples/<RULE-ID>/fires.yaml` and `passes.yaml` (and an optional
`policy.yaml`, merged over the default policy) in any folder under DIR, the convention of the
built-in rules (gpupolicy/rules/examples/): a line of `fires.yaml` ending in `# expect: ACME001`
must get an ACME001 finding and no other line may; `passes.yaml` must get none. The rule runs
alone, with the example file's objects as its inventory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from gpupolicy.core.immutable import immutable
from gpupolicy.custom.definitions import CustomRule
from gpupolicy.custom.loading import EXAMPLES_FOLDER, compile_rules, definitions_in, rule_files
from gpupolicy.custom.rules import installed
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.registry import Rule
from gpupolicy.engine.report import Report
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import Policy, default_policy, policy_from_mapping

EXPECT_MARKER = "# expect:"


@immutable
class RuleOutcome:
    rule_id: str
    name: str
    examples: int
    problems: tuple[str, ...]  # empty: passed

    @property
    def passed(self) -> bool:
        return self.examples > 0 and not self.problems


def expected_lines(text: str, rule_id: str) -> set[int]:
    """The lines that end in `# expect: <ids>` naming `rule_id`."""
    lines = set()
    for number, line in enumerate(text.splitlines(), start=1):
        _, marker, ids = line.partition(EXPECT_MARKER)
        if marker and rule_id in {item.strip() for item in ids.split(",")}:
            lines.add(number)
    return lines


def load_rules(folder: Path) -> list[CustomRule]:
    rego, yaml_files = rule_files([folder])
    return compile_rules(rego, definitions_in(yaml_files))


def example_folders(folder: Path, rule_id: str) -> Iterator[Path]:
    for candidate in sorted(folder.rglob(f"{EXAMPLES_FOLDER}/{rule_id}")):
        if candidate.is_dir():
            yield candidate


def run_tests(folder: Path) -> list[RuleOutcome]:
    """Every rule of `folder`, tested (raises CustomRuleError for a rule that cannot be loaded)."""
    rules = load_rules(folder)
    with installed(rules) as engine_rules:
        return [
            _test(rule, engine_rule, folder) for rule, engine_rule in zip(rules, engine_rules, strict=True)
        ]


def _test(rule: CustomRule, engine_rule: Rule, folder: Path) -> RuleOutcome:
    rule_id = rule.metadata.id
    problems: list[str] = []
    examples = 0
    for examples_folder in example_folders(folder, rule_id):
        policy = _policy_of(examples_folder / "policy.yaml")
        for name, firing in (("fires.yaml", True), ("passes.yaml", False)):
            path = examples_folder / name
            if not path.is_file():
                continue
            examples += 1
            problems.extend(_check_example(path, policy, engine_rule, firing))
    if not examples:
        problems.append(f"no examples: add {EXAMPLES_FOLDER}/{rule_id}/fires.yaml and passes.yaml")
    return RuleOutcome(rule_id, rule.metadata.name, examples, tuple(problems))


def _policy_of(path: Path) -> Policy:
    if not path.is_file():
        return default_policy()
    overrides: Any = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return policy_from_mapping(overrides)


def _check_example(path: Path, policy: Policy, rule: Rule, firing: bool) -> list[str]:
    text = path.read_text(encoding="utf-8")
    report = _run(text, str(path), policy, rule)
    problems = [f"{path}: {error.message}" for error in report.errors]
    found = {finding.line for finding in report.findings if finding.rule_id == rule.id}
    expected = expected_lines(text, rule.id) if firing else set()
    if firing and not expected:
        problems.append(f"{path}: no line is marked `{EXPECT_MARKER} {rule.id}`")
    for line in sorted(expected - found):
        problems.append(f"{path}:{line}: expected {rule.id} here, got none")
    for line in sorted(line for line in found - expected if line is not None):
        problems.append(f"{path}:{line}: unexpected {rule.id}")
    return problems


def _run(text: str, file: str, policy: Policy, rule: Rule) -> Report:
    loaded = load_text(text, file, hint_path=Path(file))
    return evaluate(loaded.resources, policy, problems=(), directives=loaded.directives, rules=(rule,))


def render(outcomes: Sequence[RuleOutcome]) -> str:
    lines = []
    for outcome in outcomes:
        status = "PASS" if outcome.passed else "FAIL"
        lines.append(f"{status} {outcome.rule_id} {outcome.name} ({outcome.examples} examples)")
        lines.extend(f"  {problem}" for problem in outcome.problems)
    failed = sum(1 for outcome in outcomes if not outcome.passed)
    lines.append(f"{len(outcomes) - failed} passed, {failed} failed")
    return "\n".join(lines) + "\n"
