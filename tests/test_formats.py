"""Output formats: SARIF (schema + Microsoft's SARIF Multitool), JUnit, GitHub, Markdown, text; --output, --fail-on."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpupolicy import __version__
from gpupolicy.cli.main import main
from gpupolicy.core.findings import Finding, Severity
from gpupolicy.engine.baseline import fingerprint
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.registry import REGISTRY
from gpupolicy.engine.report import Report
from gpupolicy.formats import RenderOptions, container_note, load_formatters
from gpupolicy.formats.github import annotation
from gpupolicy.formats.markdown import MAX_ROWS
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy

TESTS = Path(__file__).resolve().parent
# The official SARIF 2.1.0 schema, vendored from @microsoft/sarif-multitool-linux 5.7.0 (see data/README.md).
SARIF_SCHEMA = TESTS / "data" / "sarif-2.1.0.schema.json"
MULTITOOL_DIR = TESTS / "sarif" / "node_modules" / "@microsoft"

# A privileged GPU pod (GP601, security) whose GPU request differs from its limit (GP102), with a
# suppressed finding (GP113) and a '|' in a name that the Markdown table must escape.
BAD = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
spec:
  containers:
    - name: main
      image: nvcr.io/nvidia/pytorch:24.05-py3
      securityContext:
        privileged: true
      resources:
        requests: {nvidia.com/gpu: 1, cpu: "4", memory: 16Gi}
        limits: {nvidia.com/gpu: 2, memory: 16Gi}  # gpupolicy: ignore GP113 -- single-process training
"""
PRIVILEGED_LINE, PRIVILEGED_COLUMN = 11, 9


def lint_file(tmp_path: Path, text: str = BAD, name: str = "manifests/trainer.yaml") -> Report:
    target = tmp_path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    loaded = load_text(text, name)
    return evaluate(
        loaded.resources, default_policy(), problems=loaded.problems, directives=loaded.directives
    )


def render(report: Report, fmt: str, **options: Any) -> str:
    return load_formatters()[fmt](report, RenderOptions(tool_version=__version__, **options))


# -- SARIF -------------------------------------------------------------------------------------------


@pytest.fixture
def sarif_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Report, dict[str, Any], Path]:
    monkeypatch.chdir(tmp_path)
    report = lint_file(tmp_path)
    text = render(report, "sarif")
    path = tmp_path / "out.sarif"
    path.write_text(text)
    return report, json.loads(text), path


def test_sarif_is_valid_against_the_official_schema(
    sarif_report: tuple[Report, dict[str, Any], Path],
) -> None:
    _, log, _ = sarif_report
    schema = json.loads(SARIF_SCHEMA.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]
    assert errors == []


def test_schema_check_catches_a_broken_log(sarif_report: tuple[Report, dict[str, Any], Path]) -> None:
    _, log, _ = sarif_report
    log["runs"][0]["results"][0]["level"] = "fatal"
    schema = json.loads(SARIF_SCHEMA.read_text())
    assert not jsonschema.validators.validator_for(schema)(schema).is_valid(log)


def test_sarif_describes_every_rule(sarif_report: tuple[Report, dict[str, Any], Path]) -> None:
    _, log, _ = sarif_report
    driver = log["runs"][0]["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("gpupolicy", __version__)
    rules = {rule["id"]: rule for rule in driver["rules"]}
    assert list(rules) == [rule.id for rule in REGISTRY]
    gp102 = rules["GP102"]
    assert gp102["name"] == "GpuRequestLimitMismatch"
    assert gp102["defaultConfiguration"] == {"level": "error"}
    assert gp102["helpUri"].endswith("/docs/rules/GP102-gpu-request-limit-mismatch.md")
    assert gp102["help"]["text"].startswith(REGISTRY["GP102"].remediation)
    assert "security-severity" not in gp102["properties"]
    for rule_id, rule in rules.items():
        if rule_id.startswith("GP6"):
            assert float(rule["properties"]["security-severity"]) > 0, rule_id
            assert "security" in rule["properties"]["tags"]
    assert rules["GP601"]["properties"]["security-severity"] == "8.0"


def test_sarif_results_point_at_the_field(sarif_report: tuple[Report, dict[str, Any], Path]) -> None:
    report, log, _ = sarif_report
    run = log["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == Path.cwd().as_uri() + "/"
    results = [r for r in run["results"] if "suppressions" not in r]
    assert len(results) == len(report.findings)
    (privileged,) = [r for r in results if r["ruleId"] == "GP601"]
    location = privileged["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "manifests/trainer.yaml", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": PRIVILEGED_LINE, "startColumn": PRIVILEGED_COLUMN}
    assert privileged["level"] == "error"
    assert run["tool"]["driver"]["rules"][privileged["ruleIndex"]]["id"] == "GP601"
    (finding,) = [f for f in report.findings if f.rule_id == "GP601"]
    assert privileged["partialFingerprints"] == {"gpupolicy/v1": fingerprint(finding)}
    assert privileged["locations"][0]["logicalLocations"][0]["fullyQualifiedName"].startswith(
        "Pod/ml/trainer:$"
    )


def test_sarif_keeps_suppressed_findings_with_their_justification(
    sarif_report: tuple[Report, dict[str, Any], Path],
) -> None:
    _, log, _ = sarif_report
    (hidden,) = [r for r in log["runs"][0]["results"] if "suppressions" in r]
    assert hidden["ruleId"] == "GP113"
    assert hidden["suppressions"] == [
        {
            "kind": "inSource",
            "status": "accepted",
            "justification": "comment at manifests/trainer.yaml:14: single-process training",
        }
    ]


def _multitool() -> Path:
    system = {"Linux": "linux", "Darwin": "darwin"}.get(platform.system())
    binary = MULTITOOL_DIR / f"sarif-multitool-{system}" / "Sarif.Multitool"
    if system is None or not binary.is_file():
        pytest.skip("SARIF Multitool not installed: run `npm ci --prefix tests/sarif` (.ci/run does)")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | 0o100)  # npm may skip the package's chmod postinstall
    return binary


def _validate(binary: Path, sarif: Path, out: Path) -> list[dict[str, Any]]:
    completed = subprocess.run(
        [str(binary), "validate", str(sarif), "--output", str(out), "--level", "Error;Warning"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        # SARIF2006 (a note) fetches every helpUri; a closed proxy keeps the run offline and quick.
        env={
            **os.environ,
            "DOTNET_CLI_TELEMETRY_OPTOUT": "1",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "HTTPS_PROXY": "http://127.0.0.1:9",
        },
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "1 files scanned" in completed.stdout
    results: list[dict[str, Any]] = json.loads(out.read_text(encoding="utf-8-sig"))["runs"][0]["results"]
    return results


@pytest.mark.slow
def test_sarif_passes_microsofts_sarif_multitool(
    sarif_report: tuple[Report, dict[str, Any], Path], tmp_path: Path
) -> None:
    binary = _multitool()
    _, _, path = sarif_report
    problems = _validate(binary, path, tmp_path / "validation.sarif")
    assert [(r["ruleId"], r["message"]) for r in problems] == []


@pytest.mark.slow
def test_the_multitool_does_report_a_broken_log(
    sarif_report: tuple[Report, dict[str, Any], Path], tmp_path: Path
) -> None:
    """The control: the same validation flags a log with a property SARIF does not define."""
    binary = _multitool()
    _, log, _ = sarif_report
    log["runs"][0]["results"][0]["lineNumber"] = 3
    broken = tmp_path / "broken.sarif"
    broken.write_text(json.dumps(log))
    problems = _validate(binary, broken, tmp_path / "validation.sarif")
    assert [r["ruleId"] for r in problems] == ["JSON1005"]


# -- JUnit -------------------------------------------------------------------------------------------


def test_junit_has_one_case_per_rule_and_object(tmp_path: Path) -> None:
    report = lint_file(tmp_path)
    root = ET.fromstring(render(report, "junit"))
    cases = root.findall("./testsuite/testcase")
    keys = {(f.rule_id, str(f.object)) for f in report.findings} | {
        (f.rule_id, str(f.object)) for f, _ in report.suppressed
    }
    assert len(cases) == len(keys) == int(root.get("tests", "0"))
    names = {case.get("name") for case in cases}
    assert "GP601 privileged-container: Pod ml/trainer" in names
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "manifests/trainer.yaml"
    failing = {f.rule_id for f in report.findings if f.severity >= Severity.ERROR}
    failed = {case.get("name", "").split()[0] for case in cases if case.find("failure") is not None}
    assert failed == failing and root.get("failures") == str(len(failing))
    (privileged,) = [c for c in cases if c.get("name", "").startswith("GP601")]
    failure = privileged.find("failure")
    assert failure is not None and failure.get("type") == "error"
    assert f"manifests/trainer.yaml:{PRIVILEGED_LINE}:{PRIVILEGED_COLUMN}" in (failure.text or "")
    (skipped,) = [c for c in cases if c.find("skipped") is not None]
    assert skipped.get("name", "").startswith("GP113")
    warnings = [c for c in cases if c.find("system-out") is not None]
    assert warnings and all(c.find("failure") is None for c in warnings)


def test_junit_fail_on_warning_fails_warning_cases_too(tmp_path: Path) -> None:
    report = lint_file(tmp_path)
    root = ET.fromstring(render(report, "junit", fail_on=Severity.WARNING))
    expected = {(f.rule_id, str(f.object)) for f in report.findings if f.severity >= Severity.WARNING}
    assert root.get("failures") == str(len(expected))


def test_junit_without_findings_has_one_passing_case() -> None:
    root = ET.fromstring(render(Report(objects=3), "junit"))
    assert (root.get("tests"), root.get("failures")) == ("1", "0")


# -- GitHub ------------------------------------------------------------------------------------------


def test_github_annotations(tmp_path: Path) -> None:
    report = lint_file(tmp_path)
    lines = render(report, "github").splitlines()
    assert len(lines) == len(report.findings) + 1
    (privileged,) = [line for line in lines if "GP601" in line]
    assert privileged.startswith(
        f"::error file=manifests/trainer.yaml,line={PRIVILEGED_LINE},col={PRIVILEGED_COLUMN},"
        "title=GP601 privileged-container::"
    )
    assert "%0A" + REGISTRY["GP601"].remediation in privileged
    levels = {"error": "::error ", "warning": "::warning ", "info": "::notice "}
    for severity, prefix in levels.items():
        expected = sum(1 for finding in report.findings if finding.severity.label == severity)
        assert sum(1 for line in lines if line.startswith(prefix)) == expected, severity
    assert lines[-1].startswith("gpupolicy: ")


def test_github_escapes_properties_and_data(tmp_path: Path) -> None:
    report = lint_file(tmp_path, name="a,b:c%.yaml")
    line = annotation(report.findings[0])
    assert line.startswith("::") and "file=a%2Cb%3Ac%25.yaml," in line
    message = line.split("::", 2)[2]
    assert "\n" not in message and "%0A" in message


# -- Markdown ----------------------------------------------------------------------------------------


def test_markdown_summary_table(tmp_path: Path) -> None:
    report = lint_file(tmp_path, BAD.replace("name: main", "name: main|x"))
    text = render(report, "markdown")
    counts = report.counts()
    assert text.startswith("### gpupolicy: ❌ failed\n")
    assert f"| {counts[Severity.ERROR]} | {counts[Severity.WARNING]} | {counts[Severity.INFO]} | 1 |" in text
    rows = [line for line in text.splitlines() if line.startswith("| 🔴") or line.startswith("| 🟡")]
    assert len(rows) == len([f for f in report.findings if f.severity >= Severity.WARNING])
    assert rows[0].startswith("| 🔴 error |")  # worst first
    assert all(row.count(" | ") == 4 for row in rows)  # the '|' in main|x is escaped
    assert "main\\|x" in text
    assert "Suppressed findings" not in text
    assert "single-process training" in render(report, "markdown", show_suppressed=True)


def test_markdown_passes_and_truncates(tmp_path: Path) -> None:
    assert render(Report(), "markdown").startswith("### gpupolicy: ✅ passed")
    report = lint_file(tmp_path)
    many = Report(findings=report.findings * (MAX_ROWS // len(report.findings) + 2))
    text = render(many, "markdown")
    assert f"… and {len(many.findings) - MAX_ROWS} more" in text


# -- the command line: several formats, --output, --fail-on, text ------------------------------------


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_COLOR", raising=False)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "trainer.yaml").write_text(BAD)
    return tmp_path


def test_several_formats_in_one_run(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "lint",
            "--no-repo-policy",
            "--format",
            "text,sarif,junit,github,markdown,json",
            "--output",
            "sarif=out/report.sarif",
            "--output",
            "junit=out/junit.xml",
            "--output",
            "markdown=out/comment.md",
            "--output",
            "json=out/report.json",
            "manifests",
        ]
    )
    assert code == 1
    out = capsys.readouterr().out
    assert "manifests/trainer.yaml:11:9: GP601 error privileged-container" in out  # text
    assert "::error file=manifests/trainer.yaml,line=11,col=9" in out  # github
    assert json.loads((workdir / "out" / "report.sarif").read_text())["version"] == "2.1.0"
    assert ET.parse(workdir / "out" / "junit.xml").getroot().tag == "testsuites"
    assert (workdir / "out" / "comment.md").read_text().startswith("### gpupolicy")
    assert json.loads((workdir / "out" / "report.json").read_text())["summary"]["suppressed"] == 1


def test_output_for_a_format_not_chosen_is_a_usage_error(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", "-f", "text", "-o", "sarif=x.sarif", "manifests"]) == 2
    assert "not among --format" in capsys.readouterr().err
    assert main(["lint", "-f", "yaml", "manifests"]) == 2
    assert "choose from github, json, junit, markdown, sarif, text" in capsys.readouterr().err


WARNING_ONLY = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: main
          image: nvcr.io/nvidia/pytorch:24.05-py3
          resources:
            limits: {nvidia.com/gpu: 1}
"""


@pytest.mark.parametrize(("fail_on", "code"), [("error", 0), ("warning", 1), ("info", 1)])
def test_fail_on(workdir: Path, fail_on: str, code: int, capsys: pytest.CaptureFixture[str]) -> None:
    Path("job.yaml").write_text(WARNING_ONLY)
    main(["lint", "--no-repo-policy", "-f", "json", "job.yaml"])
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["errors"] == 0 and summary["warnings"] > 0
    assert main(["lint", "--no-repo-policy", "--fail-on", fail_on, "job.yaml"]) == code


def test_fail_on_info_counts_info_findings(workdir: Path) -> None:
    Path("job.yaml").write_text(WARNING_ONLY)
    everything_info = "rules:\n" + "".join(f"  {rule.id}: {{severity: info}}\n" for rule in REGISTRY)
    Path("policy.yaml").write_text(everything_info)
    report_args = ["lint", "--no-repo-policy", "-p", "policy.yaml", "job.yaml"]
    assert main([*report_args, "--fail-on", "warning"]) == 0
    assert main([*report_args, "--fail-on", "info"]) == 1


def test_text_is_grouped_by_file_sorted_by_line_with_relative_paths(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "a.yaml").write_text(BAD)
    main(["lint", "--no-repo-policy", str(workdir / "manifests"), str(workdir / "a.yaml")])
    lines = capsys.readouterr().out.splitlines()[:-1]
    files = [line.split(":")[0] for line in lines]
    assert set(files) == {"a.yaml", "manifests/trainer.yaml"}
    assert files == sorted(files)  # grouped: each file's findings together
    for name in set(files):
        numbers = [int(line.split(":")[1]) for line in lines if line.startswith(name + ":")]
        assert numbers == sorted(numbers)


def test_colour_only_on_a_terminal_and_never_with_no_color(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    main(["lint", "--no-repo-policy", "manifests"])
    assert "\033[" not in capsys.readouterr().out  # captured output is not a terminal
    main(["lint", "--no-repo-policy", "--color", "always", "manifests"])
    assert "\033[31merror\033[0m" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdout.isatty", lambda: True, raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    main(["lint", "--no-repo-policy", "manifests"])
    assert "\033[" not in capsys.readouterr().out


@pytest.mark.slow
def test_colour_on_a_real_terminal(workdir: Path) -> None:
    """Run the CLI under a pseudo-terminal: colour on; with NO_COLOR set: off."""
    import pty

    gpupolicy = shutil.which("gpupolicy", path=str(Path(sys.executable).parent))
    assert gpupolicy is not None

    def run(env: dict[str, str]) -> bytes:
        primary, secondary = pty.openpty()
        process = subprocess.Popen(
            [gpupolicy, "lint", "--no-repo-policy", "manifests"],
            stdout=secondary,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=workdir,
        )
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=120)
        os.close(primary)
        return b"".join(chunks)

    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    assert b"\033[31merror" in run(env)
    assert b"\033[" not in run({**env, "NO_COLOR": "1"})


def test_container_note_only_when_the_message_does_not_name_the_container() -> None:
    def finding(message: str, container: str | None) -> Finding:
        return Finding(
            "GP601", "privileged-container", Severity.ERROR, message, "Fix.", None, container=container
        )

    assert container_note(finding("container 'vllm' is privileged", "vllm")) == ""
    assert container_note(finding("is privileged", "vllm")) == " (container vllm)"
    # an image named after the container is not the container's name
    assert container_note(finding("image vllm/vllm-openai is unpinned", "vllm")) == " (container vllm)"
    assert container_note(finding("pod template sets hostPID", None)) == ""
