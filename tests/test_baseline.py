"""Baselines: fingerprints that survive line shifts and reordering; only new findings fail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpupolicy.cli.main import main
from gpupolicy.core.immutable import replace
from gpupolicy.core.vocabulary import BASELINE_SCHEMA
from gpupolicy.engine import baseline
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy


def deployment(name: str, request: int = 1, limit: int = 2) -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: ai-lab
spec:
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            requests: {{nvidia.com/gpu: {request}}}
            limits: {{nvidia.com/gpu: {limit}}}
"""


def lint(text: str) -> Report:
    loaded = load_text(text, "deploy.yaml")
    return evaluate(loaded.resources, default_policy(), problems=loaded.problems)


def fingerprints(report: Report, rule_id: str = "GP102") -> list[str]:
    return sorted(baseline.fingerprint(f) for f in report.findings if f.rule_id == rule_id)


def test_fingerprint_ignores_line_shifts_comments_and_document_order() -> None:
    original = lint(deployment("a") + "---\n" + deployment("b"))
    shifted = lint("# a comment\n\n# and more\n" + deployment("a") + "---\n" + deployment("b"))
    reordered = lint(deployment("b") + "---\n" + deployment("a"))
    assert len(fingerprints(original)) == 2
    assert fingerprints(original) == fingerprints(shifted) == fingerprints(reordered)
    lines = {f.line for f in original.findings if f.rule_id == "GP102"}
    assert lines != {f.line for f in shifted.findings if f.rule_id == "GP102"}


def test_fingerprint_changes_with_object_rule_or_field() -> None:
    (a,) = [f for f in lint(deployment("a")).findings if f.rule_id == "GP102"]
    (renamed,) = [f for f in lint(deployment("a2")).findings if f.rule_id == "GP102"]
    assert baseline.fingerprint(a) != baseline.fingerprint(renamed)
    other_path = replace(a, path=(*a.path[:-1], "amd.com/gpu"))
    other_rule = replace(a, rule_id="GP101")
    assert len({baseline.fingerprint(x) for x in (a, other_path, other_rule)}) == 3


def test_apply_moves_known_findings_and_keeps_new_ones(tmp_path: Path) -> None:
    target = tmp_path / "baseline.json"
    baseline.write(target, lint(deployment("a")))
    accepted = baseline.load(target)
    report = lint("# moved down\n" + deployment("a") + "---\n" + deployment("b"))
    before = len(report.findings)
    moved = baseline.apply(report, accepted)
    assert moved == before - len(report.findings) > 0
    assert {str(f.object) for f in report.findings} == {"Deployment ai-lab/b"}
    assert all(f.extra["suppressedBy"] == "baseline" for f, _ in report.suppressed)
    assert all(reason == f"in the baseline {target}" for _, reason in report.suppressed)


def test_baseline_accepts_as_many_findings_of_a_fingerprint_as_it_lists(tmp_path: Path) -> None:
    (finding,) = [f for f in lint(deployment("a")).findings if f.rule_id == "GP102"]
    target = tmp_path / "b.json"
    target.write_text(baseline.render([finding]))
    report = Report(findings=[finding, finding])
    assert baseline.apply(report, baseline.load(target)) == 1
    assert report.findings == [finding]


def test_baseline_file_is_sorted_json_without_line_numbers(tmp_path: Path) -> None:
    target = tmp_path / "b.json"
    baseline.write(target, lint(deployment("b") + "---\n" + deployment("a")))
    data = json.loads(target.read_text())
    assert data["schema"] == BASELINE_SCHEMA
    keys = [(e["file"], e["object"], e["rule"], e["path"]) for e in data["findings"]]
    assert keys == sorted(keys)
    assert all("line" not in entry for entry in data["findings"])


@pytest.mark.parametrize(
    ("content", "message"),
    [("{", "baseline is not JSON"), ('{"schema": "other"}', "not a gpupolicy baseline")],
)
def test_unusable_baseline_is_an_error(tmp_path: Path, content: str, message: str) -> None:
    target = tmp_path / "b.json"
    target.write_text(content)
    with pytest.raises(baseline.BaselineError, match=message):
        baseline.load(target)


def test_cli_write_baseline_then_only_new_findings_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    manifest = Path("deploy.yaml")
    manifest.write_text(deployment("a"))
    assert main(["lint", "--no-repo-policy", "deploy.yaml"]) == 1
    assert main(["lint", "--no-repo-policy", "--write-baseline", "base.json", "deploy.yaml"]) == 0
    assert "wrote" in capsys.readouterr().err
    # shift every line and add a comment: still the same findings
    manifest.write_text("# owned by team-a\n\n" + deployment("a"))
    assert main(["lint", "--no-repo-policy", "--baseline", "base.json", "deploy.yaml"]) == 0
    out = capsys.readouterr().out
    assert "GP102" not in out and "suppressed" in out
    # a new object with the same problem is new
    manifest.write_text(deployment("a") + "---\n" + deployment("b"))
    assert main(["lint", "--no-repo-policy", "--baseline", "base.json", "deploy.yaml"]) == 1
    out = capsys.readouterr().out
    assert "Deployment ai-lab/b" in out and "Deployment ai-lab/a" not in out


def test_cli_rejects_a_broken_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("deploy.yaml").write_text(deployment("a"))
    Path("base.json").write_text("[]")
    assert main(["lint", "--no-repo-policy", "--baseline", "base.json", "deploy.yaml"]) == 2
    assert "not a gpupolicy baseline" in capsys.readouterr().err
