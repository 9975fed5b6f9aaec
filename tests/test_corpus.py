"""Real public GPU manifests (../shared/corpus/real): nothing crashes, every problem is a finding
with a position, and no schema violation is reported on manifests that were really applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.loading.inputs import MANIFEST_SUFFIXES, load_file
from gpupolicy.policy.loading import default_policy

REPO = Path(__file__).resolve().parent.parent
# The labelled copies of ../shared/corpus/real (their labels are comments): in the repository, so
# these tests never skip.
CORPUS = REPO / "tests" / "data" / "corpus"
FILES = (
    sorted(path for path in CORPUS.glob("*") if path.suffix in MANIFEST_SUFFIXES) if CORPUS.is_dir() else []
)

pytestmark = pytest.mark.skipif(not FILES, reason=f"the corpus of real manifests is not at {CORPUS}")


@cache
def cli_report() -> tuple[int, dict[str, Any], str]:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpupolicy",
            "lint",
            "--no-repo-policy",
            "--format",
            "json",
            os.path.relpath(CORPUS, REPO),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=600,
        check=False,
    )
    return completed.returncode, json.loads(completed.stdout or "{}"), completed.stderr


def test_cli_lints_the_whole_corpus_in_one_run() -> None:
    code, report, stderr = cli_report()
    assert "Traceback" not in stderr, stderr
    assert code in (0, 1), f"exit {code}: {stderr}"
    assert report["internalErrors"] == []
    assert report["summary"]["files"] == len(FILES)
    assert report["summary"]["objects"] >= len(FILES) - 1  # a file may hold no object only if reported


def test_cli_findings_all_have_file_and_line() -> None:
    _, report, _ = cli_report()
    corpus = os.path.relpath(CORPUS, REPO)
    for finding in report["findings"]:
        assert finding["file"] and finding["file"].startswith(corpus), finding
        assert isinstance(finding["line"], int) and finding["line"] >= 1, finding
        assert isinstance(finding["column"], int) and finding["column"] >= 1, finding


def test_cli_reports_no_schema_violation_or_syntax_error() -> None:
    _, report, _ = cli_report()
    wrong = [
        f"{f['file']}:{f['line']}: {f['rule']} {f['message']}"
        for f in report["findings"]
        if f["rule"] in ("GP001", "GP005")
    ]
    assert wrong == []


@cache
def api_report(path: Path) -> Report:
    loaded = load_file(path)
    return evaluate(loaded.resources, default_policy(), problems=loaded.problems)


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name[:90])
def test_api_per_file(path: Path) -> None:
    report = api_report(path)
    assert report.errors == [], report.errors
    for finding in report.findings:
        assert finding.file is not None and finding.file.endswith(path.name), finding
        assert finding.line is not None and finding.line >= 1, finding
    # Real, applied manifests: valid YAML and valid against the Kubernetes schema.
    assert [f.message for f in report.findings if f.rule_id in ("GP001", "GP005")] == []


def test_api_and_cli_agree_on_single_object_rules() -> None:
    # GP0xx/GP1xx judge one object at a time, so the CLI's run over the whole corpus and the
    # per-file API runs must agree (cross-object families may see more in the bigger bundle).
    def own(rule: str) -> bool:
        return rule.startswith(("GP0", "GP1"))

    def same(message: str) -> str:  # a GP004 hint names the file as the run was given it
        return message.replace(str(CORPUS), "<corpus>").replace(os.path.relpath(CORPUS, REPO), "<corpus>")

    # A missing cluster fact is said once per run, at the first object that needs it: the whole
    # corpus and each file say it at different places.
    def fact(message: str) -> bool:
        return message.startswith("unknown: ")

    _, report, _ = cli_report()
    from_cli = sorted(
        (Path(f["file"]).name, f["line"], f["column"], f["rule"], same(f["message"]))
        for f in report["findings"]
        if own(f["rule"]) and not fact(f["message"])
    )
    from_api = sorted(
        (Path(f.file or "").name, f.line, f.column, f.rule_id, same(f.message))
        for path in FILES
        for f in api_report(path).findings
        if own(f.rule_id) and not fact(f.message)
    )
    assert from_cli == from_api
    assert from_cli, "the corpus holds GPU workloads: some GP1xx finding is expected"
