"""The pre-commit hook, run by the real `pre-commit` against a throwaway git repository.

The repository's `.pre-commit-config.yaml` uses this checkout's hook definition
(`.pre-commit-hooks.yaml`: entry, file types, excludes) as a `repo: local` hook with
`language: system`, so the test needs no network and runs this working tree's code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PRE_COMMIT = BIN / "pre-commit"
GPUPOLICY = BIN / "gpupolicy"

BAD = """\
apiVersion: batch/v1
kind: Job
metadata: {name: bad, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: train
          image: nvcr.io/nvidia/pytorch:24.05-py3
          resources:
            requests: {nvidia.com/gpu: 1}
            limits: {nvidia.com/gpu: 2}
"""

GOOD = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: finetune
  namespace: ml
spec:
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 1000
        seccompProfile: {type: RuntimeDefault}
      nodeSelector:
        nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
      tolerations:
        - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      containers:
        - name: train
          image: nvcr.io/nvidia/pytorch:24.05-py3@sha256:0000000000000000000000000000000000000000000000000000000000000000
          securityContext:
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
          resources:
            requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: 1}
            limits: {memory: 64Gi, nvidia.com/gpu: 1}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: ai-lab}
spec:
  replicas: 3
  selector:
    matchLabels: {app: llm}
  template:
    metadata:
      labels: {app: llm}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            requests: {cpu: "8", memory: 48Gi, nvidia.com/gpu: 1}
            limits: {memory: 48Gi, nvidia.com/gpu: 1}
"""

PDB = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: llm, namespace: ai-lab}
spec:
  maxUnavailable: 0
  selector:
    matchLabels: {app: llm}
"""


def hook_config() -> dict[str, Any]:
    """This checkout's hook, as a local hook running this virtualenv's gpupolicy."""
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gpupolicy" and hook["entry"].startswith("gpupolicy lint")
    local = {**hook, "language": "system", "entry": hook["entry"].replace("gpupolicy", str(GPUPOLICY), 1)}
    local.pop("description", None)
    return {"repos": [{"repo": "local", "hooks": [local]}]}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if not PRE_COMMIT.is_file() or shutil.which("git") is None:
        pytest.skip("needs git and pre-commit (in the test extra)")
    root = tmp_path / "manifests"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "test@example.com")
    git(root, "config", "user.name", "test")
    git(root, "config", "commit.gpgsign", "false")
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(hook_config(), sort_keys=False))
    (root / "README.md").write_text("manifests\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "initial")
    result = run([str(PRE_COMMIT), "install"], root, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return root


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env["PRE_COMMIT_HOME"] = str(tmp_path / "pre-commit-home")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["NO_COLOR"] = "1"
    return env


def run(argv: list[str], cwd: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=cwd, env=env_for(tmp_path), capture_output=True, text=True, timeout=300, check=False
    )


def git(cwd: Path, *args: str) -> str:
    completed = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=True
    )
    return completed.stdout


def commit(repo: Path, message: str) -> subprocess.CompletedProcess[str]:
    return run(["git", "commit", "-m", message], repo, repo.parent)


def commits(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD"))


@pytest.mark.slow
def test_commit_of_a_bad_gpu_manifest_fails_with_the_finding(repo: Path) -> None:
    (repo / "jobs").mkdir()
    (repo / "jobs" / "bad.yaml").write_text(BAD)
    git(repo, "add", ".")
    result = commit(repo, "add a bad job")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "gpupolicy" in output and "Failed" in output
    assert "jobs/bad.yaml:12:24: GP102 error gpu-request-limit-mismatch" in output
    assert commits(repo) == 1  # nothing was committed


@pytest.mark.slow
def test_commit_of_a_good_gpu_manifest_passes(repo: Path) -> None:
    (repo / "jobs").mkdir()
    (repo / "jobs" / "finetune.yaml").write_text(GOOD)
    git(repo, "add", ".")
    result = commit(repo, "add a good job")
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert re.search(r"^gpupolicy\.+Passed$", output, re.MULTILINE), output
    assert commits(repo) == 2


@pytest.mark.slow
def test_a_deployment_change_is_judged_with_the_pdb_in_another_file(repo: Path) -> None:
    (repo / "apps").mkdir()
    (repo / "apps" / "llm.yaml").write_text(DEPLOYMENT)
    (repo / "policy").mkdir()
    (repo / "policy" / "pdb.yaml").write_text(PDB)
    git(repo, "add", ".")
    git(repo, "commit", "-q", "--no-verify", "-m", "deployment and its PDB")

    (repo / "apps" / "llm.yaml").write_text(DEPLOYMENT.replace("replicas: 3", "replicas: 4"))
    git(repo, "add", ".")
    result = run([str(PRE_COMMIT), "run", "--verbose", "--files", "apps/llm.yaml"], repo, repo.parent)
    output = result.stdout + result.stderr
    assert "apps/llm.yaml" in output
    # The PDB in policy/pdb.yaml selects the pods: no "no PDB" finding for the Deployment...
    assert "GP501" not in output, output
    # ...and the PDB's own problem (maxUnavailable: 0) is not reported: that file did not change.
    assert "policy/pdb.yaml" not in output and "GP502" not in output

    # Without the PDB in the repository, the same change gets GP501.
    git(repo, "rm", "-q", "policy/pdb.yaml")
    git(repo, "commit", "-q", "--no-verify", "-m", "drop the PDB")
    (repo / "apps" / "llm.yaml").write_text(DEPLOYMENT.replace("replicas: 3", "replicas: 5"))
    git(repo, "add", ".")
    result = run([str(PRE_COMMIT), "run", "--verbose", "--files", "apps/llm.yaml"], repo, repo.parent)
    assert re.search(r"apps/llm.yaml:\d+:\d+: GP501 warning gpu-server-without-pdb", result.stdout), (
        result.stdout
    )


@pytest.mark.slow
def test_files_that_are_not_manifests_are_not_linted(repo: Path) -> None:
    (repo / "chart").mkdir()
    (repo / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: x\nversion: 0.1.0\n")
    (repo / "chart" / "values.yaml").write_text("replicas: 2\n")
    (repo / "jobs").mkdir()
    (repo / "jobs" / "finetune.yaml").write_text(GOOD)
    git(repo, "add", ".")
    result = commit(repo, "chart values and a job")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "GP003" not in result.stdout


def test_context_root_judges_given_files_with_the_rest_but_reports_only_on_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpupolicy.cli.main import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "apps").mkdir()
    (tmp_path / "apps" / "llm.yaml").write_text(DEPLOYMENT)
    (tmp_path / "pdb.yaml").write_text(PDB)
    (tmp_path / "broken.yaml").write_text("a: [\n")  # problems in context files are not reported
    main(["lint", "--no-repo-policy", "apps/llm.yaml"])
    alone = capsys.readouterr().out
    assert "GP501" in alone
    main(["lint", "--no-repo-policy", "--context-root", ".", "apps/llm.yaml"])
    out = capsys.readouterr().out
    assert "GP501" not in out
    assert all(line.startswith("apps/llm.yaml:") for line in out.splitlines()[:-1]), out
    assert out.splitlines()[-1].endswith("in 1 objects from 1 files")


def test_context_from_git_outside_a_repository_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpupolicy.cli.main import main

    if shutil.which("git") is None:
        pytest.skip("needs git")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    (tmp_path / "llm.yaml").write_text(DEPLOYMENT)
    assert main(["lint", "--context-from-git", "llm.yaml"]) == 2
    assert "not inside a git work tree" in capsys.readouterr().err
