"""GP8xx across objects: arms found through the inventory, as the webhook sees them (one admitted
object, the rest from the cluster), and "unknown" when the cluster cache cannot answer."""

from __future__ import annotations

from collections.abc import Sequence

import gpupolicy.rules  # noqa: F401
from gpupolicy.documents import Resource
from gpupolicy.engine import Report, evaluate
from gpupolicy.inputs import iter_manifest_files, load_file
from gpupolicy.inventory import Bundle, Coverage
from gpupolicy.policy import load_policy
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
