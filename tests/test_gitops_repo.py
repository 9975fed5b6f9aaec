"""Issue 13's "done when": a small GitOps repository as platform teams keep one — a GitHub
workflow, an mkdocs site, a Helm chart and a kustomize base with two overlays (tests/data/gitops)
— passes the real `pre-commit run --all-files` with only the findings its manifests deserve, and
the hook (file by file) and CI (`gpupolicy lint .`) say the same. Then deserved defects, made in
the files a person edits (a chart's values file, a kustomize base), are reported there, once.

Needs helm (tests/conftest.py provisions it at .tools/helm), kubectl with kustomize, git and the
pre-commit tool (test extra)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.real_tools import helm_on_path, needs_helm, needs_kubectl
from tests.test_precommit import GPUPOLICY, PRE_COMMIT, git, hook_config, run

TREE = Path(__file__).resolve().parent / "data" / "gitops"
FINDING = re.compile(r"^(\S+?):(\d+):(\d+): (GP\d{3}) (error|warning|info) ", re.M)
# What a repository without cluster facts deserves: one "unknown" per fact, and the PriorityClasses
# it names but does not hold. Nothing else: the manifests are correct GPU workloads.
DESERVED = {
    ("charts/llm/templates/deployment.yaml", "GP614"),
    ("charts/llm/templates/deployment.yaml", "GP108"),
    ("charts/llm/templates/deployment.yaml", "GP302"),
    ("charts/llm/templates/deployment.yaml", "GP202"),
    ("training/base/finetune-job.yaml", "GP302"),
}

pytestmark = [
    pytest.mark.slow,
    needs_helm,
    needs_kubectl,
    pytest.mark.skipif(not PRE_COMMIT.is_file(), reason="needs pre-commit (in the test extra)"),
]


@pytest.fixture
def gitops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    helm_on_path(monkeypatch)
    root = tmp_path / "gitops"
    shutil.copytree(TREE, root)
    (root / "README.md").unlink()  # ours, about the test
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(hook_config(), sort_keys=False))
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "test@example.com")
    git(root, "config", "user.name", "test")
    git(root, "add", ".")
    git(root, "commit", "-q", "--no-verify", "-m", "initial")
    return root


def findings(output: str) -> list[tuple[str, str, str]]:
    """(file, rule, severity) of each finding line, in order."""
    return [(file, rule, severity) for file, _, _, rule, severity in FINDING.findall(output)]


def pre_commit_all(root: Path) -> subprocess.CompletedProcess[str]:
    return run([str(PRE_COMMIT), "run", "--all-files", "--verbose"], root, root.parent)


def lint_dot(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GPUPOLICY), "lint", "--color", "never", "."],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_the_repository_passes_with_only_what_it_deserves(gitops: Path) -> None:
    hook = pre_commit_all(gitops)
    output = hook.stdout + hook.stderr
    assert hook.returncode == 0, output
    said = findings(output)
    assert {(file, rule) for file, rule, _ in said} == DESERVED, output
    assert all(severity == "info" for _, _, severity in said), output
    assert len(said) == len(DESERVED), output  # one finding each: a shared base is reported once
    for not_a_manifest in ("ci.yml", "dependabot.yml", "mkdocs.yml", "values.yaml", "Chart.yaml"):
        assert not re.search(rf"^\S*{re.escape(not_a_manifest)}:\d+", output, re.M), output
    assert "skipped 3 non-Kubernetes files" in output, output  # the workflow, dependabot, mkdocs
    # The PriorityClass both overlays name is unverified once, about the cluster: no overlay named.
    (unverified,) = [line for line in output.splitlines() if "'gpu-training' could not be verified" in line]
    assert "as rendered by" not in unverified, unverified

    ci = lint_dot(gitops)
    assert ci.returncode == 0, ci.stdout + ci.stderr
    assert sorted(findings(ci.stdout)) == sorted(said)  # the hook and CI agree


def test_deserved_defects_are_reported_where_they_are_made_once(gitops: Path) -> None:
    values = gitops / "charts" / "llm" / "values.yaml"
    values.write_text(re.sub(r"image: .*", "image: docker.io/vllm/vllm-openai:latest", values.read_text()))
    base = gitops / "training" / "base" / "finetune-job.yaml"
    base.write_text(
        base.read_text().replace(
            "              drop: [ALL]\n", "              drop: [ALL]\n              add: [SYS_ADMIN]\n"
        )
    )
    hook = pre_commit_all(gitops)
    output = hook.stdout + hook.stderr
    assert hook.returncode == 1, output
    new = [item for item in findings(output) if (item[0], item[1]) not in DESERVED]
    image_line = next(
        number
        for number, line in enumerate(
            (gitops / "charts/llm/templates/deployment.yaml").read_text().splitlines(), 1
        )
        if "image:" in line
    )
    assert re.search(rf"^charts/llm/templates/deployment\.yaml:{image_line}:\d+: GP702 ", output, re.M), (
        output
    )
    capability = [item for item in new if item[0] == "training/base/finetune-job.yaml"]
    assert capability and len(capability) == len({rule for _, rule, _ in capability}), output  # once each
    assert re.search(
        r"^training/base/finetune-job\.yaml:\d+:\d+: GP6\d\d .*as rendered by training/overlays/dev, training/overlays/prod",
        output,
        re.M,
    ), output
    assert {file for file, _, _ in new} == {
        "charts/llm/templates/deployment.yaml",
        "training/base/finetune-job.yaml",
    }, output

    ci = lint_dot(gitops)
    assert ci.returncode == 1
    assert sorted(findings(ci.stdout)) == sorted(findings(output))
