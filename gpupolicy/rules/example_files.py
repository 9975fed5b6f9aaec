"""Every rule's examples: `rules/examples/<ID>/fires.yaml` and `passes.yaml` (+ optional `policy.yaml`).

A line of `fires.yaml` that ends in `# expect: GP102` must get a GP102 finding, and no other line
may. `passes.yaml` must get none. The docs show these same files as Example / Use instead, so
every example in the docs is run by the tests.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from gpupolicy.core.immutable import immutable
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.registry import Rule
from gpupolicy.engine.report import Report
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import Policy, default_policy, policy_from_mapping

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
_EXPECT = re.compile(r"#\s*expect:\s*(GP\d{3}(?:\s*,\s*GP\d{3})*)")


@immutable
class RuleExamples:
    rule_id: str
    fires: Path
    passes: Path
    policy: Path | None

    def policy_for(self) -> Policy:
        if self.policy is None:
            return default_policy()
        overrides: Any = yaml.safe_load(self.policy.read_text(encoding="utf-8")) or {}
        return policy_from_mapping(overrides)


def examples_for(rule_id: str) -> RuleExamples | None:
    folder = EXAMPLES_DIR / rule_id
    fires, passes = folder / "fires.yaml", folder / "passes.yaml"
    if not (fires.is_file() and passes.is_file()):
        return None
    policy = folder / "policy.yaml"
    return RuleExamples(rule_id, fires, passes, policy if policy.is_file() else None)


def expected_lines(text: str, rule_id: str) -> set[int]:
    lines = set()
    for number, line in enumerate(text.splitlines(), start=1):
        match = _EXPECT.search(line)
        if match and rule_id in re.split(r"\s*,\s*", match.group(1)):
            lines.add(number)
    return lines


def run_example(path: Path, policy: Policy, rule: Rule | None = None) -> Report:
    text = path.read_text(encoding="utf-8")
    loaded = load_text(text, path.name, hint_path=path)
    return evaluate(loaded.resources, policy, problems=loaded.problems, directives=loaded.directives)


def strip_markers(text: str) -> str:
    """The example as the docs show it: without the `# expect:` test markers."""
    return "\n".join(_EXPECT.sub("", line).rstrip() for line in text.splitlines()) + "\n"
