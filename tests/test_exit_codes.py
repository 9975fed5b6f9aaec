"""The exit codes CI relies on, each from a real `python -m gpupolicy` process: 0 clean, 1 findings
(input findings such as a YAML syntax error included), 2 usage or configuration errors only,
3 an internal error. A broken manifest must not look like a broken tool, nor the reverse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLEAN = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: ai}\ndata: {a: b}\n"

# A rule that raises on every object, registered before the command runs: what a bug in a rule does.
RAISING_RULE = """
import sys
import gpupolicy.rules
from gpupolicy.engine.registry import Scope, rule

@rule(id="GP990", name="always-raises", severity="error", scope=Scope.OBJECT,
      summary="Raises.", rationale="A test of the exit code.", remediation="None.")
def always_raises(resource, ctx):
    raise RuntimeError("rule bug")
    yield

from gpupolicy.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""

# A crash outside any rule: the formatter registry itself fails.
CRASH = """
import sys
import gpupolicy.formats

def broken(*names):
    raise RuntimeError("formatter registry bug")

gpupolicy.formats.load_formatters = broken
from gpupolicy.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def run(
    cwd: Path, *args: str, script: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", script, *args] if script else [sys.executable, "-m", "gpupolicy", *args]
    return subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "clean.yaml").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "broken.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: [\n", encoding="utf-8"
    )
    return tmp_path


def test_clean_is_0(work: Path) -> None:
    assert run(work, "lint", "--no-repo-policy", "clean.yaml").returncode == 0


def test_a_yaml_syntax_error_is_a_finding_exit_1_and_the_rest_is_linted(work: Path) -> None:
    result = run(work, "lint", "--no-repo-policy", "clean.yaml", "broken.yaml")
    assert result.returncode == 1, result.stderr
    assert (
        "broken.yaml:4:1: GP001" in result.stdout
    )  # where libyaml meets the unclosed flow and "GP001" in result.stdout
    assert result.stderr == ""


def test_a_syntax_error_below_the_failing_severity_does_not_fail(work: Path) -> None:
    """GP001 is a finding like any other: a policy that lowers it lowers the exit code too."""
    (work / "lenient.yaml").write_text("rules:\n  GP001: {severity: warning}\n", encoding="utf-8")
    result = run(work, "lint", "--no-repo-policy", "--policy", "lenient.yaml", "broken.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        run(
            work, "lint", "--no-repo-policy", "--strict", "--policy", "lenient.yaml", "broken.yaml"
        ).returncode
        == 1
    )


@pytest.mark.parametrize(
    "args",
    [
        ["lint", "no-such-dir"],
        ["lint", "--format", "yaml", "clean.yaml"],
        ["lint", "--policy", "no-such-policy.yaml", "clean.yaml"],
        ["lint", "--baseline", "clean.yaml", "clean.yaml"],  # not a baseline
        ["lint", "--no-such-flag"],
        ["explain", "GP000"],
        [],
    ],
)
def test_usage_and_configuration_errors_are_2(work: Path, args: list[str]) -> None:
    result = run(work, *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_a_rule_that_raises_is_3_with_the_findings_still_printed(work: Path) -> None:
    (work / "privileged.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ai}\nspec:\n  containers:\n"
        "  - name: c\n    image: registry.example.com/app:1.0\n    securityContext: {privileged: true}\n",
        encoding="utf-8",
    )
    result = run(work, "lint", "--no-repo-policy", "privileged.yaml", script=RAISING_RULE)
    assert result.returncode == 3, result.stdout + result.stderr
    assert (
        "gpupolicy: internal error in GP990 on privileged.yaml#0 (Pod ai/p): RuntimeError: rule bug"
        in result.stderr
    )
    assert "GP601" in result.stdout  # the other rules' findings are reported


def test_a_rule_that_raises_is_3_when_writing_a_baseline_too(work: Path) -> None:
    result = run(
        work, "lint", "--no-repo-policy", "--write-baseline", "b.json", "clean.yaml", script=RAISING_RULE
    )
    assert result.returncode == 3, result.stdout + result.stderr


def test_a_crash_is_3_and_one_line(work: Path) -> None:
    result = run(work, "lint", "clean.yaml", script=CRASH)
    assert result.returncode == 3
    assert result.stderr.strip().splitlines() == [
        "gpupolicy: internal error: RuntimeError: formatter registry bug "
        "(set GPUPOLICY_DEBUG=1 for the traceback; please report it)"
    ]


def test_a_crash_shows_its_traceback_on_request(work: Path) -> None:
    result = run(work, "lint", "clean.yaml", script=CRASH, env={"GPUPOLICY_DEBUG": "1"})
    assert result.returncode == 3
    assert "Traceback (most recent call last)" in result.stderr and "formatter registry bug" in result.stderr


def test_help_documents_the_exit_codes(work: Path) -> None:
    lint_help = run(work, "lint", "--help").stdout
    assert "3 an internal error" in " ".join(lint_help.split())
    assert "2 usage or configuration errors" in " ".join(lint_help.split())
    serve_help = " ".join(run(work, "serve", "--help").stdout.split())
    assert "exit codes: 0 stopped by SIGTERM" in serve_help
