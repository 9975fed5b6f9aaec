"""The policy `bench/webhook_latency.py --floor` serves: it must load as `gpupolicy serve --policy`
loads it and leave no rule enabled, or the floor it measures would run some rules. No timing
here: the floor itself is measured by the bench."""

from __future__ import annotations

import sys
from pathlib import Path

from gpupolicy.engine.evaluation import RulePlan
from gpupolicy.engine.registry import REGISTRY
from gpupolicy.policy.loading import load_policy

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_the_floor_policy_enables_no_rule(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))  # bench/ is not a package
    try:
        from webhook_latency import write_no_rule_policy
    finally:
        sys.path.remove(str(BENCH))

    policy = load_policy(extra=[write_no_rule_policy(tmp_path / "no-rules.yaml")])

    assert len(REGISTRY) > 90  # every rule registered, so every one is named in the file
    assert [rule.id for rule in REGISTRY if policy.rule(rule.id).enabled] == []
    plan = RulePlan(REGISTRY, policy)
    assert (plan.object_rules, plan.workload_rules, plan.bundle_rules) == ((), (), ())
