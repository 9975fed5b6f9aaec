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
