"""The nearest `.gpupolicy.yaml` above each file is its policy, in every mode: `lint .`, a folder,
one file, `--context-root`, and the real pre-commit hook give each file the same findings."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from gpupolicy.policy.repo_policies import RepoPolicies, find_repo_policy
from tests.test_precommit import PRE_COMMIT, hook_config
from tests.test_precommit import git as git_in
from tests.test_precommit import run as run_in_env

REPO = Path(__file__).resolve().parent.parent

ROOT_POLICY = """\
placement: {gpuTaints: []}
inventory: {completeKinds: [PriorityClass]}
rules: {GP102: {severity: warning}}
"""
# team-a's GPU nodes are tainted (a placement fact), and it has no use for GP102.
TEAM_POLICY = """\
placement: {gpuTaints: [{key: nvidia.com/gpu, effect: NoSchedule}]}
inventory: {completeKinds: [PriorityClass]}
rules: {GP102: {enabled: false}}
"""
PRIORITY_CLASS = """\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gpu-batch}
value: 1000
"""


def job(name: str) -> str:
    """A GPU Job with a request/limit mismatch (GP102), no toleration (GP202 where GPU nodes are
    tainted) and a PriorityClass defined in another folder (GP302 when that is not seen)."""
    return f"""\
apiVersion: batch/v1
kind: Job
metadata: {{name: {name}, namespace: ml}}
spec:
  template:
    spec:
      restartPolicy: Never
      priorityClassName: gpu-batch
      containers:
        - name: train
          image: nvcr.io/nvidia/pytorch:24.05-py3
          resources:
            requests: {{nvidia.com/gpu: 1}}
            limits: {{nvidia.com/gpu: 2}}
"""


FILES = ("jobs/train.yaml", "team-a/x.yaml", "team-a/deep/y.yaml")
LINE = re.compile(r"^(?:repo/)?(?P<file>[\w./-]+):(?P<line>\d+):(?P<col>\d+): (?P<rest>GP\d+ \w+ .*)$")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=60, check=True)


@pytest.fixture
def nested(tmp_path: Path) -> Path:
    """tmp/repo: a git repository with a policy at its top and another in team-a/."""
    if shutil.which("git") is None:
        pytest.skip("needs git")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo / ".gpupolicy.yaml", ROOT_POLICY)
    write(repo / "team-a" / ".gpupolicy.yaml", TEAM_POLICY)
    write(repo / "classes.yaml", PRIORITY_CLASS)
    for name in FILES:
        write(repo / name, job(Path(name).stem))
    return repo


def lint(cwd: Path, *args: str, fmt: str = "text") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", "--format", fmt, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"},
        timeout=300,
        check=False,
    )


def findings(output: str) -> dict[str, list[str]]:
    """Each file's findings (paths relative to the repository), without the "unknown" infos a run
    says once, on whichever file it meets first."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        match = LINE.match(line.strip())
        if match and ": unknown: " not in match["rest"]:
            found.setdefault(match["file"], []).append(f"{match['line']}:{match['col']}: {match['rest']}")
    return {file: sorted(items) for file, items in found.items()}


def without(found: dict[str, list[str]], rule: str) -> dict[str, list[str]]:
    return {file: [item for item in items if f" {rule} " not in item] for file, items in found.items()}


def only(found: dict[str, list[str]], files: Iterable[str]) -> dict[str, list[str]]:
    return {file: found.get(file, []) for file in files}


def rules_of(items: list[str]) -> set[str]:
    """`GP102 warning` of each finding."""
    return {" ".join(item.split(": ", 1)[1].split()[:2]) for item in items}


@pytest.mark.slow
def test_each_file_gets_the_findings_of_its_nearest_policy_in_every_mode(nested: Path) -> None:
    parent = nested.parent
    whole = lint(parent, "repo")
    tree = findings(whole.stdout)
    assert whole.returncode == 0, whole.stdout + whole.stderr  # warnings only, failOn error
    # The top-level policy: GP102 lowered to a warning, untainted GPU nodes (no GP202).
    assert {"GP102 warning"} <= rules_of(tree["jobs/train.yaml"])
    assert not {"GP202 warning", "GP302 error"} & rules_of(tree["jobs/train.yaml"])
    # team-a's policy, also below it (deep/): no GP102, tainted nodes (GP202).
    for name in ("team-a/x.yaml", "team-a/deep/y.yaml"):
        assert "GP202 warning" in rules_of(tree[name]), tree[name]
        assert not {"GP102 warning", "GP102 error"} & rules_of(tree[name])
        # Cross-object rules see the other folders: the PriorityClass of classes.yaml is known.
        assert "GP302 error" not in rules_of(tree[name])

    team = ("team-a/x.yaml", "team-a/deep/y.yaml")
    with_context = lint(parent, "--context-root", "repo", "repo/team-a/x.yaml")
    assert findings(with_context.stdout) == only(tree, ["team-a/x.yaml"])
    # Without the rest of the repository as context, the same policy findings; only the
    # PriorityClass of the other folder is missing (GP302).
    folder = findings(lint(parent, "repo/team-a").stdout)
    assert without(folder, "GP302") == only(tree, team)
    assert all("GP302 error" in rules_of(items) for items in folder.values())
    alone = findings(lint(parent, "repo/team-a/deep/y.yaml").stdout)
    assert without(alone, "GP302") == only(tree, ["team-a/deep/y.yaml"])
    # From inside team-a, the file is found under its own policy too.
    inside = findings(lint(nested / "team-a", "--context-root", "..", "x.yaml").stdout)
    assert inside == {"x.yaml": tree["team-a/x.yaml"]}


@pytest.mark.slow
def test_the_pre_commit_hook_agrees_with_lint_of_the_tree(nested: Path) -> None:
    if not PRE_COMMIT.is_file():
        pytest.skip("needs pre-commit (in the test extra)")
    write(nested / ".pre-commit-config.yaml", yaml.safe_dump(hook_config(), sort_keys=False))
    git_in(nested, "add", ".")
    tree = findings(lint(nested.parent, "repo").stdout)
    everything = run_in_env([str(PRE_COMMIT), "run", "--verbose", "--all-files"], nested, nested.parent)
    assert "gpupolicy" in everything.stdout, everything.stdout + everything.stderr
    assert findings(everything.stdout) == only(tree, FILES)
    changed = run_in_env(
        [str(PRE_COMMIT), "run", "--verbose", "--files", "team-a/x.yaml"], nested, nested.parent
    )
    assert findings(changed.stdout) == only(tree, ["team-a/x.yaml"]), changed.stdout


def test_a_rendered_directory_gets_the_policy_of_its_folder(nested: Path) -> None:
    """An overlay is linted as rendered, under the policy of its folder; its findings are traced to
    the file that holds the object, in every mode."""
    if shutil.which("kubectl") is None:
        pytest.skip("needs kubectl (kustomize)")
    overlay = nested / "team-a" / "overlay"
    write(overlay / "kustomization.yaml", "resources: [job.yaml]\n")
    write(overlay / "job.yaml", job("rendered"))
    tree = findings(lint(nested.parent, "repo").stdout)
    assert "GP202 warning" in rules_of(tree["team-a/overlay/job.yaml"])
    assert not {"GP102 warning", "GP102 error"} & rules_of(tree["team-a/overlay/job.yaml"])
    for given in ("repo/team-a/overlay", "repo/team-a/overlay/job.yaml"):
        alone = findings(lint(nested.parent, given, "--context-root", "repo").stdout)
        assert alone == only(tree, ["team-a/overlay/job.yaml"]), given


def test_examples_and_examples_experiments_agree() -> None:
    """examples/experiments has its own .gpupolicy.yaml (its node pools): linting examples/ judges
    those files by it, as linting examples/experiments does."""
    assert (REPO / "examples" / "experiments" / ".gpupolicy.yaml").is_file()
    everything = findings(lint(REPO, "examples").stdout)
    experiments = findings(lint(REPO, "examples/experiments").stdout)
    below = {file: items for file, items in everything.items() if file.startswith("examples/experiments/")}
    assert below == experiments
    assert experiments  # the comparison compares something


def test_unknown_facts_are_said_once_across_policies(nested: Path) -> None:
    write(nested / "team-a" / "notes.yaml", "owner: team-a\n")  # not Kubernetes objects: skipped
    write(nested / "mkdocs.yml", "site_name: x\n")
    result = lint(nested.parent, "repo", fmt="json")
    report = json.loads(result.stdout)
    said = [f for f in report["findings"] if f["message"].startswith("unknown: the cluster's GPU node pools")]
    assert len(said) == 1, said  # neither policy declares nodePools: one info for the run
    assert report["summary"]["files"] == 4 and report["summary"]["objects"] == 4
    assert report["summary"]["skippedFiles"] == 2
    assert [item["file"] for item in report["skipped"]] == ["repo/mkdocs.yml", "repo/team-a/notes.yaml"]
    assert report["policy"]["sources"] == ["<default>", "repo/.gpupolicy.yaml", "repo/team-a/.gpupolicy.yaml"]
    assert [workload["file"] for workload in report["workloads"]] == [
        "repo/jobs/train.yaml",
        "repo/team-a/deep/y.yaml",
        "repo/team-a/x.yaml",
    ]


def test_no_repo_policy_ignores_every_policy_file(nested: Path) -> None:
    result = lint(nested.parent, "--no-repo-policy", "repo", fmt="json")
    report = json.loads(result.stdout)
    assert report["policy"]["sources"] == ["<default>"]
    errors = {(f["file"], f["rule"]) for f in report["findings"] if f["severity"] == "error"}
    assert {("repo/jobs/train.yaml", "GP102"), ("repo/team-a/x.yaml", "GP102")} <= errors
    extra = write(nested.parent / "extra.yaml", "rules: {GP102: {severity: info}}\n")
    merged = json.loads(lint(nested.parent, "--policy", str(extra), "repo", fmt="json").stdout)
    # --policy merges over each nearest policy; each file is listed once.
    assert merged["policy"]["sources"] == [
        "<default>",
        "repo/.gpupolicy.yaml",
        "extra.yaml",
        "repo/team-a/.gpupolicy.yaml",
    ]
    gp102 = {(f["file"], f["severity"]) for f in merged["findings"] if f["rule"] == "GP102"}
    # team-a disabled GP102; --policy sets only its severity, so it stays disabled there.
    assert gp102 == {("repo/jobs/train.yaml", "info")}


def test_a_broken_nested_policy_is_a_configuration_error(nested: Path) -> None:
    write(nested / "team-a" / ".gpupolicy.yaml", "rulez: {}\n")
    result = lint(nested.parent, "repo")
    assert result.returncode == 2
    assert "team-a/.gpupolicy.yaml:1:1: policy key rulez: unknown key 'rulez'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_nearest_policy_file_wins_and_the_walk_stops_at_the_git_top_level(tmp_path: Path) -> None:
    outer = write(tmp_path / ".gpupolicy.yaml", "failOn: warning\n")
    repo = tmp_path / "repo"
    manifest = write(repo / "apps" / "llm.yaml", "kind: ConfigMap\n")
    assert find_repo_policy(manifest) == outer  # no repository: the walk goes up
    (repo / ".git").mkdir()
    assert find_repo_policy(manifest) is None  # a policy above the repository is not its own
    (repo / ".git").rmdir()
    write(repo / ".git", "gitdir: /elsewhere/.git/worktrees/repo\n")  # a linked worktree, a submodule
    assert find_repo_policy(manifest) is None
    top = write(repo / ".gpupolicy.yml", "failOn: info\n")
    assert find_repo_policy(manifest) == top
    assert find_repo_policy(repo) == top  # a directory: its own folder first
    nearer = write(repo / "apps" / ".gpupolicy.yaml", "failOn: error\n")
    policies = RepoPolicies()
    assert policies.file_for(manifest) == nearer
    assert policies.file_for(repo / "other.yaml") == top
    # The nearest file alone, with no implicit merge of the one above (`extends:` says so).
    assert policies.policy_for(manifest).sources[-1] == str(nearer)
    assert str(top) not in policies.policy_for(manifest).sources
    assert policies.policy_for(manifest) is policies.policy_for(repo / "apps" / "other.yaml")  # loaded once
    assert RepoPolicies(use_repo_policies=False).file_for(manifest) is None


def test_a_nested_policy_excludes_below_its_folder_in_every_mode(nested: Path) -> None:
    write(nested / "team-a" / ".gpupolicy.yaml", TEAM_POLICY + "exclude: [generated/**]\n")
    write(nested / "team-a" / "generated" / "z.yaml", job("generated"))
    write(nested / "generated" / "w.yaml", job("outside"))  # not below team-a: linted
    tree = json.loads(lint(nested.parent, "repo", fmt="json").stdout)
    files = {finding["file"] for finding in tree["findings"]}
    assert "repo/generated/w.yaml" in files and "repo/team-a/x.yaml" in files
    assert "repo/team-a/generated/z.yaml" not in files
    assert tree["summary"]["files"] == 5
    # As pre-commit names it, with the repository as context: skipped too.
    named = lint(nested.parent, "--context-root", "repo", "repo/team-a/generated/z.yaml")
    assert named.stdout.splitlines()[-1].endswith("in 0 objects from 0 files"), named.stdout
    # Named on its own, from its folder: its policy's globs still hold.
    assert lint(nested / "team-a", "generated/z.yaml").stdout.splitlines()[-1].endswith("from 0 files")


def test_a_path_through_a_symlink_loop_gets_the_policy_above_it(tmp_path: Path) -> None:
    """The folder of a walked manifest-named link that leads nowhere (inputs yields it, for GP001)."""
    (tmp_path / ".git").mkdir()
    top = write(tmp_path / ".gpupolicy.yaml", "failOn: info\n")
    (tmp_path / "loop").symlink_to("loop")
    assert RepoPolicies().file_for(tmp_path / "loop" / "x.yaml") == top


@pytest.mark.slow
def test_changed_since_judges_both_sides_under_each_files_nearest_policy(nested: Path) -> None:
    git(nested, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".")
    git(nested, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "base")
    write(nested / "team-a" / "x.yaml", job("x").replace("name: train", "name: trainer"))
    result = lint(nested, "--changed-since", "HEAD", ".")
    found = findings(result.stdout)
    # Only the changed file; y.yaml (unchanged, under team-a's policy on both sides) is not reported.
    assert set(found) == {"team-a/x.yaml"}, result.stdout + result.stderr
    assert "GP202 warning" in rules_of(found["team-a/x.yaml"])
