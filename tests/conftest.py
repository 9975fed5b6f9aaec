from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import gpupolicy.rules  # noqa: F401  (registers the built-in rules)
from gpupolicy.engine import Report, evaluate
from gpupolicy.inputs import load_text
from gpupolicy.policy import Policy, default_policy, policy_from_mapping

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus" / "real"
SEEDS = SHARED / "seeds"


@pytest.fixture
def policy() -> Policy:
    return default_policy()


LintText = Callable[..., Report]


@pytest.fixture
def lint_text() -> LintText:
    """Lint YAML text with the default policy (or the default merged with `overrides`)."""

    def run(text: str, overrides: dict[str, object] | None = None, file: str = "test.yaml") -> Report:
        chosen = policy_from_mapping(overrides) if overrides else default_policy()
        loaded = load_text(text, file)
        return evaluate(loaded.resources, chosen, problems=loaded.problems)

    return run


def rule_ids(report: Report) -> list[str]:
    return [finding.rule_id for finding in report.findings]
