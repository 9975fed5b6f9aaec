"""examples/experiments is a complete, clean experiment; each folder of examples/experiments-broken
overlays it (files of the same name replace the clean ones) and fires exactly its own rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.loading.documents import LoadProblem, Resource
from gpupolicy.loading.inputs import iter_manifest_files, load_file
from gpupolicy.policy.loading import load_policy
from tests.conftest import REPO

CLEAN = REPO / "examples" / "experiments"
BROKEN = REPO / "examples" / "experiments-broken"
VARIANTS = sorted(path for path in BROKEN.iterdir() if path.is_dir())


def _lint(files: list[Path]) -> Report:
    policy = load_policy(repo_policy=CLEAN / ".gpupolicy.yaml")
    resources: list[Resource] = []
    problems: list[LoadProblem] = []
    for file in files:
        loaded = load_file(file)
        resources += loaded.resources
        problems += loaded.problems
    return evaluate(resources, policy, problems=problems)


def _overlay(variant: Path) -> list[Path]:
    files = {path.name: path for path in iter_manifest_files(CLEAN)}
    replaced = {path.name: path for path in iter_manifest_files(variant)}
    assert set(replaced) <= set(files), f"{variant.name} replaces files the clean example does not have"
    return list({**files, **replaced}.values())


def _families(report: Report) -> list[str]:
    return [finding.rule_id for finding in report.findings if finding.rule_id[:3] in ("GP8", "GP9")]


def test_clean_experiment_has_every_part() -> None:
    report = _lint(list(iter_manifest_files(CLEAN)))
    kinds = sorted({(f.kind, f.group) for f in _resources(CLEAN)})
    assert ("ConfigMap", "") in kinds and ("Rollout", "argoproj.io") in kinds
    assert ("AnalysisTemplate", "argoproj.io") in kinds and ("Canary", "flagger.app") in kinds
    assert not report.errors
    assert _families(report) == []


def _resources(folder: Path) -> list[Resource]:
    found: list[Resource] = []
    for file in iter_manifest_files(folder):
        found += load_file(file).resources
    return found


def test_clean_experiment_shows_all_three_rollback_forms() -> None:
    texts = {path.name: path.read_text(encoding="utf-8") for path in iter_manifest_files(CLEAN)}
    assert "gpupolicy.io/rollback-criteria" in texts["control.yaml"]
    assert "templateName: llm-slo" in texts["treatment-priority.yaml"]
    assert "name: llm-time-sliced" in texts["canary.yaml"]


def test_every_rule_of_both_families_has_a_broken_variant() -> None:
    import gpupolicy.rules  # noqa: F401
    from gpupolicy.engine.registry import REGISTRY

    ids = {rule.id for rule in REGISTRY if rule.id[:3] in ("GP8", "GP9")}
    assert {variant.name[:5] for variant in VARIANTS} == ids


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda path: path.name)
def test_broken_variant_fires_exactly_its_rule(variant: Path) -> None:
    report = _lint(_overlay(variant))
    assert not report.errors
    fired = _families(report)
    assert fired, f"{variant.name} fires nothing"
    assert set(fired) == {variant.name[:5]}, [
        f"{f.rule_id} {f.location()} {f.message}" for f in report.findings
    ]
