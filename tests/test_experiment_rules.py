"""GP8xx across objects: arms found through the inventory, as the webhook sees them (one admitted
object, the rest from the cluster), and "unknown" when the cluster cache cannot answer."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import pytest

import gpupolicy.rules  # noqa: F401
import gpupolicy.rules.experiments as experiment_rules
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.kube.inventory import Bundle, Coverage
from gpupolicy.loading.documents import Resource
from gpupolicy.loading.inputs import iter_manifest_files, load_file
from gpupolicy.policy.loading import load_policy
from tests.conftest import REPO

CLEAN = REPO / "examples" / "experiments"
BROKEN = REPO / "examples" / "experiments-broken"


class Unavailable(Bundle):
    def __init__(self, resources: Sequence[Resource], kinds: set[str]) -> None:
        super().__init__(resources)
        self._down = kinds

    def coverage(self, kind: str) -> Coverage:
        return Coverage.UNAVAILABLE if kind in self._down else super().coverage(kind)


def _load(*files: str) -> list[Resource]:
    resources: list[Resource] = []
    for path in iter_manifest_files(CLEAN):
        if not files or path.name in files:
            resources += load_file(path).resources
    return resources


def _admit(admitted: Resource, inventory: Bundle) -> Report:
    """The webhook's view: evaluate the one admitted object against the cluster's inventory."""
    policy = load_policy(repo_policy=CLEAN / ".gpupolicy.yaml")
    return evaluate([admitted], policy, inventory)


def _gp8(report: Report) -> list[tuple[str, str]]:
    return [(f.rule_id, f.severity.label) for f in report.findings if f.rule_id[:3] in ("GP8", "GP9")]


def _named(resources: list[Resource], name: str, kind: str = "Deployment") -> Resource:
    return next(resource for resource in resources if (resource.kind, resource.name) == (kind, name))


def test_admitted_arm_is_compared_with_the_control_in_the_cluster() -> None:
    cluster = _load()
    admitted = _named(
        load_file(BROKEN / "GP807-experiment-multiple-variables" / "treatment-priority.yaml").resources,
        "llm-high-priority",
        "Rollout",
    )
    others = [
        resource for resource in cluster if resource.name != "llm-high-priority" or resource.kind != "Rollout"
    ]
    report = _admit(admitted, Bundle(others))
    assert _gp8(report) == [("GP807", "error")]
    clean = _named(cluster, "llm-high-priority", "Rollout")
    assert _gp8(_admit(clean, Bundle(others))) == []


def test_missing_configmap_in_an_unsynced_cache_is_info() -> None:
    cluster = [resource for resource in _load() if resource.kind != "ConfigMap"]
    admitted = _named(cluster, "llm-time-sliced")
    assert _gp8(_admit(admitted, Unavailable(cluster, {"ConfigMap"}))) == [("GP804", "info")]
    assert _gp8(_admit(admitted, Bundle(cluster))) == [("GP804", "error")]


def test_control_unknown_when_workload_kinds_cannot_be_listed() -> None:
    cluster = [resource for resource in _load() if resource.name != "llm-control"]
    admitted = _named(cluster, "llm-time-sliced")
    assert _gp8(_admit(admitted, Unavailable(cluster, {"StatefulSet"}))) == [("GP808", "info")]
    assert _gp8(_admit(admitted, Bundle(cluster))) == [("GP808", "warning")]


def test_experiment_configs_are_parsed_once_per_version_and_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The webhook keeps inventory objects across admissions: the experiment ConfigMap an arm
    names is parsed once per version of it (and per policy), not once per admission."""
    parsed: list[str] = []
    real_parse = experiment_rules.parse_experiment

    def counting_parse(resource: Resource, vocabulary: Any) -> Any:
        parsed.append(resource.name)
        return real_parse(resource, vocabulary)

    monkeypatch.setattr(experiment_rules, "parse_experiment", counting_parse)
    cluster = _load()
    admitted = _named(cluster, "llm-time-sliced")
    policy = load_policy(repo_policy=CLEAN / ".gpupolicy.yaml")
    first = evaluate([admitted], policy, Bundle(cluster))
    assert parsed, "the admitted arm's experiment was read"
    count = len(parsed)
    again = evaluate([admitted], policy, Bundle(cluster))
    assert len(parsed) == count  # same ConfigMap objects, same policy: nothing parsed again
    assert [f.rule_id for f in again.findings] == [f.rule_id for f in first.findings]
    evaluate([admitted], load_policy(repo_policy=CLEAN / ".gpupolicy.yaml"), Bundle(cluster))
    assert len(parsed) == 2 * count  # another policy (its metric words may differ): parsed again
    new_versions = [
        Resource(copy.deepcopy(item.obj), file=item.file, doc_index=item.doc_index)
        if item.kind == "ConfigMap"
        else item
        for item in cluster
    ]
    evaluate([admitted], policy, Bundle(new_versions))
    assert len(parsed) == 3 * count  # a watch event replaced the ConfigMap: the new version is parsed
