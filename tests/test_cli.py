"""`python -m gpupolicy lint` as a subprocess: output formats, exit codes, stdin, bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

REPO = Path(__file__).resolve().parent.parent
SCHEMA = REPO / "policies" / "schemas" / "lint-report.v1.schema.json"
EXAMPLES = REPO / "gpupolicy" / "rules" / "examples"
SUMMARY = re.compile(
    r"^\d+ errors?, \d+ warnings?, \d+ info(, \d+ suppressed)? in \d+ objects from \d+ files"
    r"(; skipped \d+ non-Kubernetes (files?|documents?)( and \d+ documents?)?)?$"
)

CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: ai-lab\ndata:\n  LOG_LEVEL: info\n"
# An experiment ConfigMap that is not immutable: one GP809 warning, nothing else.
EXPERIMENT = (
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: day29-experiment, namespace: ai-lab}\n"
    'data: {change: placement, fixed: "image, model, input", metrics: "P95, error rate", repeats: "3"}\n'
)


def lint(
    cwd: Path, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", *args],
        cwd=cwd,
        input=stdin.decode("utf-8", "replace") if stdin is not None else None,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
    )
    assert "Traceback" not in completed.stderr, completed.stderr
    assert "Traceback" not in completed.stdout
    return completed


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "llm.yaml").write_text(
        (EXAMPLES / "GP102" / "fires.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "configmap.yaml").write_text(CONFIGMAP, encoding="utf-8")
    (tmp_path / "experiment.yaml").write_text(EXPERIMENT, encoding="utf-8")
    (tmp_path / "empty.yaml").write_text("# nothing here yet\n", encoding="utf-8")  # skipped, counted
    return tmp_path


GP102_LINE = (
    "llm.yaml:24:15: GP102 error gpu-request-limit-mismatch: container 'vllm': nvidia.com/gpu request 1 "
    "!= limit 2 [Deployment ai-lab/llm]"
)


def test_text_format_lines_and_summary(work: Path) -> None:
    result = lint(work, "llm.yaml")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert GP102_LINE in lines
    assert SUMMARY.match(lines[-1]), lines[-1]
    assert lines[-1].endswith("in 1 objects from 1 files")
    finding_line = re.compile(r"^llm\.yaml:\d+:\d+: GP\d{3} (error|warning|info) [a-z0-9-]+: .+$")
    assert all(finding_line.match(line) for line in lines[:-1]), lines
    # sorted by position within the file
    positions = [tuple(int(part) for part in line.split(":")[1:3]) for line in lines[:-1]]
    assert positions == sorted(positions)


def test_clean_input_exits_0(work: Path) -> None:
    result = lint(work, "configmap.yaml")
    assert result.returncode == 0
    assert result.stdout == "0 errors, 0 warnings, 0 info in 1 objects from 1 files\n"
    assert result.stderr == ""


def test_warnings_fail_only_with_strict_or_fail_on(work: Path) -> None:
    default = lint(work, "experiment.yaml")
    assert default.returncode == 0
    assert "experiment.yaml:3:12: GP809 warning experiment-config-mutable:" in default.stdout
    assert lint(work, "--strict", "experiment.yaml").returncode == 1
    assert lint(work, "--fail-on", "warning", "experiment.yaml").returncode == 1
    assert lint(work, "--fail-on", "info", "experiment.yaml").returncode == 1
    assert lint(work, "--fail-on", "error", "configmap.yaml", "experiment.yaml").returncode == 0


def test_fail_on_error_ignores_warnings_but_not_errors(work: Path) -> None:
    assert lint(work, "--fail-on", "error", "llm.yaml").returncode == 1


def test_policy_severity_override_changes_exit_code(work: Path) -> None:
    (work / "strict.yaml").write_text("rules:\n  GP809:\n    severity: error\n", encoding="utf-8")
    result = lint(work, "--policy", "strict.yaml", "experiment.yaml")
    assert result.returncode == 1
    assert "GP809 error experiment-config-mutable" in result.stdout


def test_missing_path_exits_2(work: Path) -> None:
    result = lint(work, "does-not-exist.yaml")
    assert result.returncode == 2
    assert "does-not-exist.yaml: no such file or directory" in result.stderr
    assert result.stdout == ""


def test_missing_policy_file_exits_2(work: Path) -> None:
    result = lint(work, "--policy", "nope.yaml", "configmap.yaml")
    assert result.returncode == 2
    assert "nope.yaml" in result.stderr


def test_policy_with_bad_yaml_exits_2_with_position(work: Path) -> None:
    (work / "broken-policy.yaml").write_text("rules:\n  GP104: {severity: error\n", encoding="utf-8")
    result = lint(work, "--policy", "broken-policy.yaml", "configmap.yaml")
    assert result.returncode == 2
    assert re.search(r"broken-policy\.yaml:\d+:\d+: YAML syntax error", result.stderr), result.stderr


def test_policy_with_typo_names_key_file_and_line(work: Path) -> None:
    (work / "typo.yaml").write_text(
        "apiVersion: gpupolicy.io/v1alpha1\nkind: Policy\nrules:\n  GP104:\n    severty: error\n",
        encoding="utf-8",
    )
    result = lint(work, "--policy", "typo.yaml", "configmap.yaml")
    assert result.returncode == 2
    assert "typo.yaml:5:5: policy key rules.GP104.severty: unknown key 'severty'" in result.stderr
    assert "did you mean 'severity'?" in result.stderr


def test_yaml_syntax_error_is_a_finding_and_exits_1(work: Path) -> None:
    """A broken manifest is the input's fault, not a usage error: CI must tell it from a broken tool."""
    text = (EXAMPLES / "GP001" / "fires.yaml").read_text(encoding="utf-8")
    (work / "broken.yaml").write_text(text, encoding="utf-8")
    result = lint(work, "broken.yaml")
    assert result.returncode == 1
    expected_line = next(i for i, line in enumerate(text.splitlines(), 1) if "# expect: GP001" in line)
    assert re.search(
        rf"^broken\.yaml:{expected_line}:\d+: GP001 error yaml-syntax-error: ", result.stdout, re.M
    )
    # the Service after the broken document is still linted
    assert "in 1 objects from 1 files" in result.stdout.splitlines()[-1]


def test_stdin(work: Path) -> None:
    text = (work / "llm.yaml").read_bytes()
    result = lint(work, "-", stdin=text)
    assert result.returncode == 1
    assert GP102_LINE.replace("llm.yaml", "<stdin>") in result.stdout.splitlines()
    clean = lint(work, "-", stdin=CONFIGMAP.encode())
    assert clean.returncode == 0


def test_directory_and_several_paths(work: Path) -> None:
    result = lint(work, ".")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].endswith("from 3 files; skipped 1 non-Kubernetes file")


BAD_INPUTS = {
    "binary.yaml": bytes(range(256)),
    "latin1.yaml": b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: caf\xe9\n",
    "array.json": b"[1, 2, 3]",
    "scalar.yaml": b"just some words\n",
    "tabs.yaml": b"apiVersion: v1\nkind: Pod\nmetadata:\n\tname: p\n",
    "nested.yaml": b"a: " + b"[" * 3000 + b"]" * 3000 + b"\n",
    "deep.yaml": b"a: " + b"[" * 900 + b"]" * 900 + b"\n",
    "control.yaml": b'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: "b\x07"}\n',
    "lol.yaml": (
        b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\n"
        + b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + b"".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n".encode()
            for i in range(8)
        )
    ),
    "recursive.yaml": b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: r}\ndata: &a {k: *a}\n",
    "wrong-types.yaml": (
        b"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: 7}\n"
        b"spec: {replicas: many, template: {spec: {containers: {name: x}, volumes: 3}}}\n"
    ),
    "crd-wrong-types.yaml": (
        b"apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata: {name: l}\n"
        b"spec: {replicas: [1], leaderWorkerTemplate: {size: x, workerTemplate: {spec: {containers: [1, {resources: 5}]}}}}\n"
    ),
    "null-doc.yaml": b"---\nnull\n---\n~\n",
    "weird-keys.yaml": b"? [a, b]\n: 1\n1: 2\nnull: 3\n",
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_never_a_traceback(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(BAD_INPUTS[name])
    result = lint(tmp_path, name)
    assert result.returncode in (0, 1, 2), result.stderr
    assert "internal error" not in result.stderr
    lines = result.stdout.splitlines()
    assert lines and SUMMARY.match(lines[-1])
    assert all(line.startswith(f"{name}:") for line in lines[:-1]), lines


def test_bad_inputs_as_json_validate(tmp_path: Path) -> None:
    for name, data in BAD_INPUTS.items():
        (tmp_path / name).write_bytes(data)
    result = lint(tmp_path, "--format", "json", ".")
    assert result.returncode == 1  # GP001 in some of them: findings, not a usage error
    report = json.loads(result.stdout)
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8"))).validate(report)
    assert report["internalErrors"] == []
    assert {f["file"] for f in report["findings"]} >= {
        "binary.yaml",
        "lol.yaml",
        "recursive.yaml",
        "tabs.yaml",
    }
    unplaced = [f for f in report["findings"] if not f["file"] or not f["line"] or not f["column"]]
    assert unplaced == []  # every problem is a finding with a position


def test_json_format_matches_the_schema(work: Path) -> None:
    result = lint(work, "--format", "json", ".")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(report)
    assert report["schema"] == "gpupolicy.io/lint-report/v1"
    assert report["summary"]["files"] == 3
    gp102 = next(f for f in report["findings"] if f["rule"] == "GP102")
    assert gp102 == {
        "rule": "GP102",
        "name": "gpu-request-limit-mismatch",
        "severity": "error",
        "message": "container 'vllm': nvidia.com/gpu request 1 != limit 2",
        "remediation": gp102["remediation"],
        "object": {"kind": "Deployment", "namespace": "ai-lab", "name": "llm"},
        "path": '$.spec.template.spec.containers[0].resources.requests["nvidia.com/gpu"]',
        "file": "llm.yaml",
        "line": 24,
        "column": 15,
        "document": 0,
        "container": "vllm",
    }
    mutable = next(f for f in report["findings"] if f["file"] == "experiment.yaml")
    assert (mutable["rule"], mutable["severity"]) == ("GP809", "warning")
    assert (report["summary"]["skippedFiles"], report["summary"]["skippedDocuments"]) == (1, 0)
    assert report["skipped"] == [{"file": "empty.yaml", "document": None, "reason": "empty"}]
    counts = report["summary"]
    assert counts["errors"] == sum(1 for f in report["findings"] if f["severity"] == "error")
    assert counts["warnings"] == sum(1 for f in report["findings"] if f["severity"] == "warning")


def test_schema_rejects_what_the_report_never_holds() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))
    report = {
        "schema": "gpupolicy.io/lint-report/v1",
        "tool": {"name": "gpupolicy", "version": "0.1.0"},
        "policy": {"digest": "0" * 64},
        "summary": {"objects": 0, "files": 0, "errors": 0, "warnings": 0, "info": 0, "suppressed": 0},
        "findings": [],
        "suppressed": [],
        "internalErrors": [],
    }
    assert validator.is_valid(report)
    finding = {
        "rule": "GP102", "name": "gpu-request-limit-mismatch", "severity": "error", "message": "m",
        "remediation": "r.", "object": None, "path": "$", "file": "a.yaml", "line": 1, "column": 1,
        "document": 0, "container": None,
    }  # fmt: skip
    assert validator.is_valid({**report, "findings": [finding]})
    assert not validator.is_valid({**report, "findings": [{**finding, "severity": "fatal"}]})
    assert not validator.is_valid({**report, "findings": [{**finding, "line": 0}]})
    assert not validator.is_valid({**report, "findings": [{**finding, "extra": 1}]})
    assert validator.is_valid({**report, "suppressed": [{**finding, "reason": "accepted"}]})
    assert not validator.is_valid({**report, "suppressed": [finding]})
    assert not validator.is_valid({**report, "schema": "gpupolicy.io/lint-report/v2"})
    assert not validator.is_valid({key: value for key, value in report.items() if key != "summary"})


def test_no_arguments_lints_the_current_directory(work: Path) -> None:
    result = lint(work)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].endswith("from 3 files; skipped 1 non-Kubernetes file")


def test_unknown_format_is_a_usage_error(work: Path) -> None:
    result = lint(work, "--format", "yaml", "configmap.yaml")
    assert result.returncode == 2
    assert "unknown format yaml" in result.stderr


def test_exclude_flag_and_policy_exclude(work: Path) -> None:
    excluded = lint(work, "--exclude", "llm.yaml", ".")
    assert excluded.returncode == 0
    assert "llm.yaml" not in excluded.stdout
    assert excluded.stdout.splitlines()[-1].endswith("from 2 files; skipped 1 non-Kubernetes file")
    (work / "exclude-policy.yaml").write_text("exclude: ['*.yaml']\n", encoding="utf-8")
    nothing = lint(work, "--policy", "exclude-policy.yaml", ".")
    assert nothing.returncode == 0
    assert nothing.stdout.splitlines()[-1].endswith("in 0 objects from 0 files")


def test_a_missing_dependency_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    script = (
        "import sys; sys.modules['jsonschema_rs'] = None\n"
        "from gpupolicy.cli.main import main\n"
        f"raise SystemExit(main(['lint', {str(manifest)!r}]))\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    assert completed.stderr.strip() == (
        "gpupolicy: the package 'jsonschema_rs' is not installed; reinstall: pip install 'gpupolicy'"
    )
