"""`gpupolicy experiment diff` through the real command line: text and JSON, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

CLEAN = REPO / "examples" / "experiments"
BROKEN = REPO / "examples" / "experiments-broken"


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpupolicy", "experiment", "diff", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )


def test_text_report_of_a_single_variable_arm() -> None:
    result = _run(CLEAN / "control.yaml", CLEAN / "treatment-priority.yaml")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert (
        "experiment: llm-sched-experiment (fixed: image, model, input; variables: priority, sharing)" in out
    )
    assert "treatment: Rollout ai-lab/llm-high-priority" in out
    assert "priority: 1 path\n  spec.template.spec.priorityClassName\n" in out
    assert "    control:   gpu-serving\n    treatment: gpu-serving-critical\n" in out
    assert out.rstrip().endswith("verdict: one dimension differs (priority): a valid single-variable arm")


def test_text_report_of_two_dimensions_fails() -> None:
    result = _run(
        CLEAN / "control.yaml", BROKEN / "GP807-experiment-multiple-variables" / "treatment-priority.yaml"
    )
    assert result.returncode == 1
    assert "resources: 1 path\n  spec.template.spec.containers[0].resources.requests.cpu\n" in result.stdout
    assert "    control:   4\n    treatment: 8\n" in result.stdout
    assert "verdict: 2 dimensions differ (priority, resources): change one variable per arm" in result.stdout


def test_fixed_drift_is_marked_and_fails() -> None:
    result = _run(CLEAN / "control.yaml", BROKEN / "GP806-experiment-fixed-drift" / "treatment-priority.yaml")
    assert result.returncode == 1
    assert "image (fixed): 1 path" in result.stdout
    assert "verdict: fixed factor(s) differ: image; one dimension differs (priority)" in result.stdout


def test_json_report_has_paths_values_and_verdict() -> None:
    result = _run(CLEAN / "control.yaml", CLEAN / "treatment-sharing.yaml", "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["experiment"]["variables"] == ["priority", "sharing"]
    [comparison] = document["comparisons"]
    assert comparison["treatment"]["arm"] == "time-sliced"
    assert comparison["dimensions"] == ["sharing"]
    assert comparison["ok"] is True
    by_path = {diff["path"]: (diff["control"], diff["treatment"]) for diff in comparison["diffs"]}
    assert by_path['$.spec.template.spec.nodeSelector["nvidia.com/gpu.product"]'] == (
        "NVIDIA-L4",
        "NVIDIA-L4-SHARED",
    )
    assert by_path['$.spec.template.spec.containers[0].resources.limits["nvidia.com/gpu.shared"]'] == (
        None,
        1,
    )


def test_experiment_mode_compares_every_treatment_with_control() -> None:
    result = _run("--experiment", "llm-sched-experiment", CLEAN, "-f", "json")
    assert result.returncode == 0, result.stderr
    comparisons = json.loads(result.stdout)["comparisons"]
    assert sorted((c["treatment"]["arm"], c["dimensions"], c["ok"]) for c in comparisons) == [
        ("high-priority", ["priority"], True),
        ("time-sliced", ["sharing"], True),
    ]
    assert {c["control"]["name"] for c in comparisons} == {"llm-control"}


def test_directories_with_one_workload_each(tmp_path: Path) -> None:
    for name, source in (("a", "control.yaml"), ("b", "treatment-priority.yaml")):
        (tmp_path / name).mkdir()
        (tmp_path / name / source).write_text((CLEAN / source).read_text(encoding="utf-8"), encoding="utf-8")
    result = _run(tmp_path / "a", tmp_path / "b")
    assert result.returncode == 0, result.stderr
    assert "experiment:" not in result.stdout  # no ConfigMap beside them: default fixed factors
    assert "verdict: one dimension differs (priority)" in result.stdout


def test_usage_errors_exit_2() -> None:
    assert _run(CLEAN / "control.yaml").returncode == 2
    ambiguous = _run(CLEAN, CLEAN / "control.yaml")
    assert ambiguous.returncode == 2 and "expected one workload, found 3" in ambiguous.stderr
    missing = _run("--experiment", "nope-experiment", CLEAN)
    assert missing.returncode == 2 and "no experiment ConfigMap named nope-experiment" in missing.stderr
    assert _run(CLEAN / "missing.yaml", CLEAN / "control.yaml").returncode == 2
