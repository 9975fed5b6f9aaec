"""What the engine's Context shares between the rules of one object (gpupolicy/engine/context.py)."""

from __future__ import annotations

from gpupolicy.engine.context import Context
from gpupolicy.kube.inventory import Bundle
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy

TWO = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: ai-lab}
spec:
  template:
    spec:
      containers: [{name: main, image: IMAGE_PLACEHOLDER, resources: {limits: {nvidia.com/gpu: 2}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: ai-lab}
"""


def test_the_subject_has_one_workload_view_until_the_next_subject() -> None:
    resources = load_text(TWO, "t.yaml").resources
    deployment, config = resources
    ctx = Context(default_policy(), Bundle(resources), resources)
    ctx.next_subject(deployment)
    view = ctx.workload_of(deployment)
    assert view is not None and ctx.workload_of(deployment) is view
    ctx.role(view)  # memoised on the view: an object rule's fact is the workload rules' too
    assert ctx.workload_of(deployment) is view and view.cache
    ctx.next_subject(config)
    assert ctx.workload_of(config) is None
    other = ctx.workload_of(deployment)  # not the subject: a view of its own, as workload_of makes
    assert other is not None and other is not view and not other.cache
    ctx.next_subject(deployment)
    assert ctx.workload_of(deployment) is not view
    ctx.next_subject()
    assert ctx.workload_of(deployment) is not ctx.workload_of(deployment)


def test_an_unknown_fact_said_once_is_not_made_again() -> None:
    from gpupolicy.engine.evaluation import evaluate
    from gpupolicy.engine.unknowns import NODE_POOLS, unknown_fact

    resources = load_text(TWO, "t.yaml").resources
    ctx = Context(default_policy(), Bundle(resources), resources)
    [first] = unknown_fact(ctx, NODE_POOLS, (), "a check")
    assert first.once in {("cluster-fact", NODE_POOLS.what)}
    ctx.said.add(first.once)
    assert list(unknown_fact(ctx, NODE_POOLS, (), "a check")) == []
    # The engine keeps the first, as it did when it dropped the others itself.
    report = evaluate(
        [*resources, *load_text(TWO.replace("name: a", "name: b"), "u.yaml").resources], default_policy()
    )
    facts = [finding.extra["clusterFact"] for finding in report.findings if "clusterFact" in finding.extra]
    assert facts and len(facts) == len(set(facts))


def test_a_rule_that_cannot_find_anything_under_the_policy_is_not_called() -> None:
    """`Rule.can_find`: under a policy without an allow list, node pools or spare GPUs, GP703,
    GP153 and GP908 are left out of the plan's calls, and are still active (what suppressions
    count); under a policy that gives them something to judge they are called, and find."""
    from gpupolicy.engine.evaluation import RulePlan, evaluate
    from gpupolicy.engine.registry import REGISTRY
    from gpupolicy.kube.roles import Role
    from gpupolicy.policy.loading import policy_from_mapping

    skipped = {"GP703", "GP153", "GP908"}
    assert {rule.id for rule in REGISTRY if rule.can_find is not None} == skipped
    plan = RulePlan(REGISTRY, default_policy())
    called = {rule.id for role in Role for rule, _ in plan.workload_rules_for(role)}
    assert skipped.isdisjoint(called) and skipped <= plan.active_ids
    # The rules' own early returns agree: called anyway, they find nothing under this policy.
    resources = load_text(TWO, "t.yaml").resources
    ctx = Context(default_policy(), Bundle(resources), resources)
    ctx.next_subject(resources[0])
    view = ctx.workload_of(resources[0])
    assert view is not None
    for rule_id in skipped:
        check = REGISTRY[rule_id].check
        assert check is not None and list(check(view, ctx)) == []
    described = policy_from_mapping(
        {
            "supplyChain": {"allowedRegistries": ["registry.example.com"]},
            "nodePools": [
                {
                    "name": "a",
                    "resource": "nvidia.com/gpu",
                    "gpuProduct": "X",
                    "gpusPerNode": 8,
                    "spareGpus": 0,
                }
            ],
        }
    )
    plan = RulePlan(REGISTRY, described)
    assert skipped <= {rule.id for role in Role for rule, _ in plan.workload_rules_for(role)}
    image = "registry.other.com/team/app:v1"
    found = evaluate(load_text(TWO.replace("IMAGE_PLACEHOLDER", image), "t.yaml").resources, described)
    assert "GP703" in {finding.rule_id for finding in found.findings}


def test_a_view_the_caller_made_is_the_subjects_view() -> None:
    from gpupolicy.engine.evaluation import evaluate, evaluate_subject
    from gpupolicy.kube.pod_spec import workload_of

    resources = load_text(TWO, "t.yaml").resources
    deployment = resources[0]
    policy = default_policy()
    view = workload_of(deployment)
    assert view is not None
    ctx = Context(policy, Bundle(resources), resources)
    ctx.next_subject(deployment, view)
    assert ctx.workload_of(deployment) is view
    # evaluate_subject is evaluate() reporting on one object of the inventory, with the view given.
    report = evaluate_subject(deployment, policy, Bundle(resources), view=view)
    assert view.cache  # the rules read (and memoised on) the view given
    alone = evaluate(resources, policy, Bundle(resources), report_on=lambda item: item is deployment)
    assert report.findings == alone.findings and report.roles == alone.roles and report.objects == 1
