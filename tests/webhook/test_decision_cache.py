"""Decisions remembered across admissions of the same content (gpupolicy/webhook/decision_cache.py):
a hit answers exactly what an evaluation would, with the new request's uid; anything the decision
rests on — the content the rules read, the cluster caches it read, the engine — makes it evaluate
again."""

from __future__ import annotations

import copy
import datetime
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from gpupolicy.core.immutable import replace
from gpupolicy.engine.registry import REGISTRY, Rule, Scope, Violation
from gpupolicy.kube.inventory import Bundle, Coverage
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import default_policy, policy_from_mapping
from gpupolicy.webhook.cluster_inventory import ClusterInventory
from gpupolicy.webhook.decision_cache import Today, is_generated_name
from gpupolicy.webhook.records import should_record
from gpupolicy.webhook.review import ReviewEngine, review
from gpupolicy.webhook.settings import Mode
from tests.webhook.fake_apiserver import FakeApiServer
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.test_cluster_inventory import PDBS, make_inventory
from tests.webhook.test_cluster_inventory import fake as fake  # the fake API server fixture
from tests.webhook.test_review import CLUSTER_KINDS, cluster_bundle, cluster_resources


class GenerationalBundle:
    """A complete inventory that moves a kind's generation whenever its objects change, as
    ClusterInventory does on a watch event (the protocol the decision cache reads)."""

    def __init__(self, resources: list[Resource]) -> None:
        self.resources = resources
        self.bundle = Bundle(resources, complete_kinds=CLUSTER_KINDS)
        self.moved: dict[str, int] = {}

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        return self.bundle.list(kind, namespace)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
        return self.bundle.get(kind, name, namespace)

    def coverage(self, kind: str) -> Coverage:
        return self.bundle.coverage(kind)

    def generations(self, kinds: Sequence[str]) -> tuple[tuple[str, int, bool], ...]:
        return tuple((kind, self.moved.get(kind, 0), True) for kind in kinds)

    def replace(self, kind: str, objects: list[Resource]) -> None:
        self.resources = [*(item for item in self.resources if item.kind != kind), *objects]
        self.bundle = Bundle(self.resources, complete_kinds=CLUSTER_KINDS)
        self.moved[kind] = self.moved.get(kind, 0) + 1


@pytest.fixture
def cluster() -> GenerationalBundle:
    return GenerationalBundle(cluster_resources())


# k8s.io/apimachinery's rand alphabet, from which the API server makes a generated name's suffix.
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def generated_suffix(index: int) -> str:
    return "".join(SUFFIX_ALPHABET[(index * 7 + place * 11) % len(SUFFIX_ALPHABET)] for place in range(5))


def replica_pod(index: int, **changes: Any) -> dict[str, Any]:
    """A Pod of the ReplicaSet of tests.webhook.reviews' Deployment, as validating admission sees
    it: its name generated from generateName (the API server names it before validating
    admission), its own uid, resourceVersion, creation time and managedFields."""
    template = gpu_deployment()["spec"]["template"]
    metadata = copy.deepcopy(template["metadata"])
    metadata.update(
        name=f"llm-server-7d4b9c-{generated_suffix(index)}",
        generateName="llm-server-7d4b9c-",
        namespace="ai-lab",
        uid=f"0c1d2e3f-0000-4000-8000-{index:012d}",
        resourceVersion=str(5000 + index),
        creationTimestamp=f"2026-11-20T08:{index % 60:02d}:00Z",
        managedFields=[{"manager": "kube-controller-manager", "operation": "Update", "time": f"t{index}"}],
    )
    metadata["labels"] = {**metadata["labels"], "pod-template-hash": "7d4b9c"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": copy.deepcopy(template["spec"])}
    pod.update(changes)
    return pod


def answer(decision: Any) -> dict[str, Any]:
    """The response without its uid, and what the decision rests on."""
    body = {key: value for key, value in decision.response["response"].items() if key != "uid"}
    return {"response": body, "findings": [(f.rule_id, f.message, f.json_path) for f in decision.findings]}


def test_the_pods_of_one_replicaset_are_evaluated_once(cluster: GenerationalBundle) -> None:
    engine = ReviewEngine.from_policy(default_policy())
    first = review(admission_review(replica_pod(1), uid="one"), engine, cluster)
    second = review(admission_review(replica_pod(2), uid="two"), engine, cluster)
    assert engine.decisions is not None
    assert (engine.decisions.hits, engine.decisions.misses) == (1, 1)
    assert second.response["response"]["uid"] == "two" and second.uid == "two"
    assert first.findings  # not an empty answer
    fresh = ReviewEngine(engine.policy, replace(engine.settings, decision_cache_bytes=0), rules=engine.rules)
    assert answer(second) == answer(review(admission_review(replica_pod(2), uid="two"), fresh, cluster))
    assert second.admission.object is not None and second.admission.object["metadata"]["uid"].endswith("2")
    assert second.admission.name == f"llm-server-7d4b9c-{generated_suffix(2)}" != first.admission.name


def test_a_denied_pods_remembered_answer_names_the_pod_it_answers(cluster: GenerationalBundle) -> None:
    """The deny message quotes the object; another Pod of the template has its own generated name."""
    remembered = ReviewEngine.from_policy(default_policy())
    fresh = ReviewEngine(
        remembered.policy, replace(remembered.settings, decision_cache_bytes=0), rules=remembered.rules
    )
    pods = [replica_pod(index) for index in (1, 2)]
    for pod in pods:
        pod["spec"]["containers"][0]["securityContext"]["privileged"] = True
    first = review(admission_review(pods[0], uid="one"), remembered, cluster)
    second = review(admission_review(pods[1], uid="two"), remembered, cluster)
    assert remembered.decisions is not None and remembered.decisions.hits == 1 and second.remembered
    message = second.response["response"]["status"]["message"]
    assert not second.allowed and pods[1]["metadata"]["name"] in message
    assert pods[0]["metadata"]["name"] not in message
    assert answer(second) == answer(review(admission_review(pods[1], uid="two"), fresh, cluster))
    assert first.response["response"]["status"]["message"] != message


def _test_rule(rule_id: str, name: str, check: Callable[[Any, Any], Iterator[Violation]]) -> Rule:
    """A workload rule at GP601's severity (an error), for the engine of one test."""
    return Rule(
        id=rule_id,
        name=name,
        severity=REGISTRY["GP601"].severity,
        scope=Scope.WORKLOAD,
        summary="A test's rule.",
        rationale="A test.",
        remediation="None.",
        check=check,
    )


def _quoting_rule(quote: Callable[[Any], str]) -> Rule:
    def quoting(workload: Any, ctx: Any) -> Iterator[Violation]:
        yield Violation(("metadata", "name"), f"{quote(workload)} is quoted")

    return _test_rule("GP997", "quotes-the-object", quoting)


@pytest.mark.parametrize(
    ("quote", "hits"),
    [
        (lambda workload: workload.name, 2),  # the name, whole: replaced in the remembered answer
        (lambda workload: workload.name[:-2], 1),  # cut short: only that name
        (lambda workload: "generated from llm-server-7d4b9c-", 1),  # the prefix alone: only that name
    ],
    ids=["whole", "cut", "prefix"],
)
def test_a_remembered_answer_that_quotes_the_name_is_exact_or_not_given(
    cluster: GenerationalBundle, quote: Callable[[Any], str], hits: int
) -> None:
    rules = (*REGISTRY, _quoting_rule(quote))
    engine = ReviewEngine.from_policy(default_policy(), rules=rules)
    fresh = ReviewEngine(engine.policy, replace(engine.settings, decision_cache_bytes=0), rules=rules)
    for index, uid in ((1, "a"), (2, "b"), (2, "c")):
        body = admission_review(replica_pod(index), uid=uid)
        remembered = review(body, engine, cluster)
        assert answer(remembered) == answer(review(body, fresh, cluster))
        assert any(f.rule_id == "GP997" for f in remembered.findings)
    assert engine.decisions is not None and engine.decisions.hits == hits


def test_a_warning_cut_inside_the_name_is_cut_as_an_evaluation_cuts_it(cluster: GenerationalBundle) -> None:
    """Warnings are cut to 120 characters: with the name at every place around the cut, the
    remembered answer's warnings are the evaluation's, word for word."""
    for pad in range(40, 110, 3):
        rules = (*REGISTRY, _quoting_rule(lambda workload, pad=pad: "w" * pad + " " + workload.name))
        settings = replace(ReviewEngine.from_policy(default_policy()).settings, default_mode=Mode.WARN)
        engine = ReviewEngine(default_policy(), settings, rules=rules)
        fresh = ReviewEngine(engine.policy, replace(settings, decision_cache_bytes=0), rules=rules)
        for index in (1, 2):
            body = admission_review(replica_pod(index), uid=str(index))
            remembered = review(body, engine, cluster)
            assert answer(remembered) == answer(review(body, fresh, cluster)), pad
            assert any("GP997" in warning for warning in remembered.response["response"]["warnings"])
        assert engine.decisions is not None and engine.decisions.hits == 1


def test_a_name_the_content_holds_is_not_replaced(cluster: GenerationalBundle) -> None:
    """A label holding the first Pod's name is the same in the second Pod: a message quoting it
    must not become the second's name."""
    rules = (*REGISTRY, _quoting_rule(lambda workload: workload.labels.get("first", "")))
    engine = ReviewEngine.from_policy(default_policy(), rules=rules)
    fresh = ReviewEngine(engine.policy, replace(engine.settings, decision_cache_bytes=0), rules=rules)
    first_name = replica_pod(1)["metadata"]["name"]
    for index in (1, 2):
        pod = replica_pod(index)
        pod["metadata"]["labels"]["first"] = first_name
        body = admission_review(pod, uid=str(index))
        assert answer(review(body, engine, cluster)) == answer(review(body, fresh, cluster))
    assert engine.decisions is not None and engine.decisions.hits == 0


@pytest.mark.parametrize(
    ("name", "prefix", "generated"),
    [
        ("llm-server-7d4b9c-x2x9z", "llm-server-7d4b9c-", True),
        ("llm-server-7d4b9c-x2x9", "llm-server-7d4b9c-", False),  # four characters
        ("llm-server-7d4b9c-canar", "llm-server-7d4b9c-", False),  # vowels: not the server's alphabet
        ("llm-server-7d4b9c-X2X9Z", "llm-server-7d4b9c-", False),
        ("other-7d4b9c-x2x9z", "llm-server-7d4b9c-", False),
        ("x2x9z", "", False),
        ("a" * 58 + "bcdfg", "a" * 70, True),  # the prefix cut to 58 characters
        ("a" * 70 + "bcdfg", "a" * 70, False),
        (None, "llm-", False),
    ],
)
def test_a_generated_name_is_the_prefix_and_the_servers_five_characters(
    name: str | None, prefix: str, generated: bool
) -> None:
    assert is_generated_name(name, prefix) is generated


def test_a_hit_answers_what_an_evaluation_would(cluster: GenerationalBundle) -> None:
    """Every shape of answer: allowed, denied with its message, warnings, audit annotations."""
    remembered = ReviewEngine.from_policy(default_policy())
    settings = replace(remembered.settings, decision_cache_bytes=0)
    fresh = ReviewEngine(remembered.policy, settings, rules=remembered.rules)
    broken = gpu_deployment()
    broken["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    for obj in (gpu_deployment(), broken, replica_pod(3)):
        for uid in ("a", "b", "c"):
            body = admission_review(obj, uid=uid)
            assert answer(review(body, remembered, cluster)) == answer(review(body, fresh, cluster))
    assert fresh.decisions is None
    assert remembered.decisions is not None and remembered.decisions.hits == 6


def test_a_change_to_a_cluster_cache_the_decision_read_is_evaluated_again(
    cluster: GenerationalBundle,
) -> None:
    engine = ReviewEngine.from_policy(default_policy())
    before = review(admission_review(gpu_deployment(), uid="1"), engine, cluster)
    assert "GP501" not in {f.rule_id for f in before.findings}  # the cluster's PDB selects it
    cluster.replace("PodDisruptionBudget", [])
    after = review(admission_review(gpu_deployment(), uid="2"), engine, cluster)
    assert "GP501" in {f.rule_id for f in after.findings}
    assert engine.decisions is not None and engine.decisions.hits == 0
    again = review(admission_review(gpu_deployment(), uid="3"), engine, cluster)  # remembered anew
    assert again.remembered and answer(again) == answer(after) and engine.decisions.hits == 1


def test_a_change_to_a_cache_it_did_not_read_keeps_the_decision(cluster: GenerationalBundle) -> None:
    engine = ReviewEngine.from_policy(default_policy())
    review(admission_review(gpu_deployment(), uid="1"), engine, cluster)
    cluster.moved["Node"] = 7  # no rule of this evaluation read Nodes
    review(admission_review(gpu_deployment(), uid="2"), engine, cluster)
    assert engine.decisions is not None and engine.decisions.hits == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda pod: pod["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": "4"}),
        lambda pod: pod["metadata"]["labels"].update({"gpupolicy.io/arm": "treatment"}),
        lambda pod: pod["metadata"].setdefault("annotations", {}).update({"gpupolicy.io/ignore": "GP613: x"}),
        lambda pod: pod["metadata"].update({"name": "llm-server-7d4b9c-canary"}),  # not generated
        lambda pod: pod["metadata"].update({"namespace": "ai-lab-2"}),
    ],
    ids=["spec", "label", "suppression", "name", "namespace"],
)
def test_content_the_rules_read_is_part_of_the_key(
    cluster: GenerationalBundle, change: Callable[[dict[str, Any]], None]
) -> None:
    engine = ReviewEngine.from_policy(default_policy())
    review(admission_review(replica_pod(1), uid="1"), engine, cluster)
    changed = replica_pod(2)
    change(changed)
    review(admission_review(changed, uid="2"), engine, cluster)
    assert engine.decisions is not None and engine.decisions.hits == 0


def test_an_update_is_not_answered_by_the_create(cluster: GenerationalBundle) -> None:
    engine = ReviewEngine.from_policy(default_policy())
    review(admission_review(gpu_deployment(), uid="1"), engine, cluster)
    review(
        admission_review(gpu_deployment(), uid="2", operation="UPDATE", old_object=gpu_deployment()),
        engine,
        cluster,
    )
    assert engine.decisions is not None and engine.decisions.hits == 0


def test_kubectls_last_applied_copy_is_not_part_of_the_key(cluster: GenerationalBundle) -> None:
    engine = ReviewEngine.from_policy(default_policy())
    for revision in ("1", "2"):
        obj = gpu_deployment()
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = (
            f'{{"r": {revision}}}'
        )
        obj["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = revision
        review(admission_review(obj, uid=revision), engine, cluster)
    assert engine.decisions is not None and engine.decisions.hits == 1


def test_a_dry_run_hit_is_still_not_recorded(cluster: GenerationalBundle) -> None:
    engine = ReviewEngine.from_policy(default_policy())
    assert should_record(review(admission_review(gpu_deployment(), uid="1"), engine, cluster))
    dry = review(admission_review(gpu_deployment(), uid="2", dry_run=True), engine, cluster)
    assert engine.decisions is not None and engine.decisions.hits == 1
    assert dry.dry_run and not should_record(dry)


def test_a_decision_in_which_a_rule_raised_is_not_remembered(cluster: GenerationalBundle) -> None:
    calls = []

    def flaky(workload: Any, ctx: Any) -> Iterator[Violation]:
        calls.append(1)
        raise RuntimeError("a bug")
        yield  # pragma: no cover

    rule = _test_rule("GP998", "flaky-rule", flaky)
    engine = ReviewEngine.from_policy(default_policy(), rules=(*REGISTRY, rule))
    for uid in ("1", "2"):
        decision = review(admission_review(gpu_deployment(), uid=uid), engine, cluster)
        assert not decision.allowed  # enforce mode denies what was not fully checked
    assert len(calls) == 2
    assert engine.decisions is not None and engine.decisions.hits == 0


def test_an_exemption_that_expires_overnight_is_evaluated_again(
    cluster: GenerationalBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = ReviewEngine.from_policy(default_policy())
    review(admission_review(gpu_deployment(), uid="1"), engine, cluster)

    tomorrow = time.time() + 86_400
    monkeypatch.setattr("gpupolicy.webhook.decision_cache.time.time", lambda: tomorrow)
    review(admission_review(gpu_deployment(), uid="2"), engine, cluster)
    assert engine.decisions is not None and engine.decisions.hits == 0


def test_the_date_of_the_key_follows_the_clock_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    today = Today()
    noon = datetime.datetime(2026, 12, 6, 12, 0).timestamp()
    clock = [noon]
    monkeypatch.setattr("gpupolicy.webhook.decision_cache.time.time", lambda: clock[0])
    assert today.text() == "2026-12-06"
    clock[0] = datetime.datetime(2026, 12, 6, 23, 59, 59).timestamp()
    assert today.text() == "2026-12-06"
    clock[0] = datetime.datetime(2026, 12, 7, 0, 0, 0).timestamp()
    assert today.text() == "2026-12-07"
    clock[0] = noon  # set back past midnight
    assert today.text() == "2026-12-06"


def test_an_inventory_without_generations_is_never_answered_from_memory() -> None:
    engine = ReviewEngine.from_policy(default_policy())
    bundle = cluster_bundle()
    for uid in ("1", "2"):
        review(admission_review(gpu_deployment(), uid=uid), engine, bundle)
    assert engine.decisions is not None and (engine.decisions.hits, engine.decisions.misses) == (0, 0)


def test_the_cache_holds_no_more_than_its_bytes(cluster: GenerationalBundle) -> None:
    engine = ReviewEngine.from_policy(policy_from_mapping({"webhook": {"decisionCacheBytes": 64 * 1024}}))
    for index in range(200):
        obj = gpu_deployment()
        obj["metadata"]["name"] = f"llm-{index}"
        review(admission_review(obj, uid=str(index)), engine, cluster)
    assert engine.decisions is not None
    assert 0 < engine.decisions.nbytes <= 64 * 1024


def test_a_watch_event_on_the_real_cluster_inventory_invalidates(fake: FakeApiServer) -> None:
    """Through the kubernetes client: a PDB added by a watch event moves the PDB cache's
    generation, and the next admission of the same Deployment is judged with it."""
    inventory: ClusterInventory = make_inventory(fake.url)
    inventory.start()
    try:
        assert inventory.wait_synced(15), inventory.status()
        engine = ReviewEngine.from_policy(default_policy())
        obj = gpu_deployment()
        obj["metadata"]["name"] = obj["metadata"]["labels"]["app.kubernetes.io/name"] = "fresh-server"
        obj["spec"]["selector"]["matchLabels"] = {"app.kubernetes.io/name": "fresh-server"}
        obj["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] = "fresh-server"
        before = review(admission_review(obj, uid="1"), engine, inventory)
        assert "GP501" in {f.rule_id for f in before.findings}
        review(admission_review(obj, uid="2"), engine, inventory)
        assert engine.decisions is not None and engine.decisions.hits == 1
        pdb = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "fresh-server", "namespace": "ai-lab", "resourceVersion": "90001"},
            "spec": {
                "maxUnavailable": 1,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "fresh-server"}},
            },
        }
        fake.emit(PDBS, "ADDED", pdb)
        deadline = time.monotonic() + 10
        while inventory.get("PodDisruptionBudget", "fresh-server", "ai-lab") is None:
            assert time.monotonic() < deadline, "the watch event did not arrive"
            time.sleep(0.02)
        after = review(admission_review(obj, uid="3"), engine, inventory)
        assert "GP501" not in {f.rule_id for f in after.findings}
        assert engine.decisions.hits == 1
    finally:
        inventory.stop()


@pytest.mark.parametrize(
    ("image", "placeholder"),
    [("vllm/vllm-openai:v0.6.3", False), ("$REGISTRY/vllm-openai:v0.6.3", True),
     ("<your-registry>/vllm-openai:v0.6.3", True), ("registry.example.com/__IMAGE__:1", True)],
)  # fmt: skip
def test_the_keys_text_tells_gp004_whether_any_field_may_hold_a_placeholder(
    cluster: GenerationalBundle, image: str, placeholder: bool
) -> None:
    """GP004 looks for placeholders only in an object whose text holds a mark of one: the decision
    cache's key already serialised every field, so the review reads its marks from that text."""
    deployment = gpu_deployment()
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = image
    decision = review(admission_review(deployment), ReviewEngine.from_policy(default_policy()), cluster)
    resource = decision.admission.resource
    assert resource is not None and resource.text_marks is not None
    assert bool(resource.text_marks) is placeholder
    assert ("GP004" in {finding.rule_id for finding in decision.findings}) is placeholder


def test_json_text_marks_are_the_marks_the_values_hold() -> None:
    import orjson

    from gpupolicy.loading.documents import json_text_marks

    assert json_text_marks(orjson.dumps({"a": 'plain\nline \\ quoted "'})) == frozenset()
    assert json_text_marks(orjson.dumps({"key_{{x}}": "$HOME <a> __b__"})) == {"$", "<", "{{", "__"}
