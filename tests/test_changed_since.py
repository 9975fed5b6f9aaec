"""`gpupolicy lint --changed-since REF` on real git repositories: objects compared with REF's as
parsed (and as rendered, for Helm charts and kustomize overlays), the whole repository as context."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gpupolicy.cli.main import EXIT_FINDINGS, main
from tests.real_tools import helm_on_path, needs_helm, needs_kubectl

REPO = Path(__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


def server(name: str, *, replicas: int = 2, image_tag: str = "24.10-py3", namespace: str = "ai-lab") -> str:
    """A replicated GPU model server with findings of its own (no probes, GPU without memory limits)."""
    return textwrap.dedent(
        f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
          namespace: {namespace}
          labels: {{app: {name}}}
        spec:
          replicas: {replicas}
          selector:
            matchLabels: {{app: {name}}}
          template:
            metadata:
              labels: {{app: {name}}}
            spec:
              containers:
                - name: server
                  image: nvcr.io/nvidia/tritonserver:{image_tag}
                  ports:
                    - containerPort: 8000
                  resources:
                    limits:
                      nvidia.com/gpu: 1
        """
    )


def pdb(name: str, app: str) -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata:
          name: {name}
          namespace: ai-lab
        spec:
          maxUnavailable: 1
          unhealthyPodEvictionPolicy: AlwaysAllow
          selector:
            matchLabels: {{app: {app}}}
        """
    )


def commit_all(repo: Path, message: str = "base") -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    write(repo, files)
    commit_all(repo)
    return repo


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def lint(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, Any], str]:
    """Run `gpupolicy lint --changed-since main --format json ARGS` in the repository."""
    monkeypatch.chdir(repo)
    capsys.readouterr()
    code = main(["lint", "--changed-since", "main", "--format", "json", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def object_of(finding: dict[str, Any]) -> str | None:
    """`Kind namespace/name` as the text format names it."""
    obj = finding["object"]
    if obj is None:
        return None
    return (
        f"{obj['kind']} {obj['namespace']}/{obj['name']}"
        if obj["namespace"]
        else f"{obj['kind']} {obj['name']}"
    )


def objects_of(report: dict[str, Any]) -> set[str | None]:
    return {object_of(finding) for finding in report["findings"]}


def rules_on(report: dict[str, Any], obj: str) -> set[str]:
    return {finding["rule"] for finding in report["findings"] if object_of(finding) == obj}


@pytest.fixture
def two_servers(tmp_path: Path) -> Path:
    return make_repo(tmp_path, {"apps/a.yaml": server("a"), "apps/b.yaml": server("b")})


def test_a_changed_deployment_is_reported_and_an_unchanged_one_is_not(
    two_servers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(two_servers, {"apps/a.yaml": server("a", replicas=3)})  # uncommitted: a change too
    code, report, _ = lint(two_servers, monkeypatch, capsys)
    assert objects_of(report) == {"Deployment ai-lab/a"}
    assert code == 1
    assert report["summary"]["changedSince"] == "main"
    assert report["summary"]["unchanged"] == 1 and report["summary"]["objects"] == 1
    schema = json.loads(
        (REPO / "policies" / "schemas" / "lint-report.v1.schema.json").read_text(encoding="utf-8")
    )
    jsonschema.Draft202012Validator(schema).validate(report)
    # Without the option, both are reported: the option is what leaves b out.
    capsys.readouterr()
    main(["lint", "--format", "json", "."])
    assert objects_of(json.loads(capsys.readouterr().out)) == {"Deployment ai-lab/a", "Deployment ai-lab/b"}


def test_the_text_summary_counts_the_unchanged_objects(
    two_servers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(two_servers)
    capsys.readouterr()
    assert main(["lint", "--changed-since", "main", "."]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.endswith(
        "in 0 objects from 2 files; 2 unchanged objects not reported (--changed-since main)"
    )
    assert main(["lint", "--changed-since", "main", "--format", "markdown", "."]) == 0
    note = "0 objects in 2 files; 2 unchanged objects not reported (--changed-since main);"
    assert note in capsys.readouterr().out


def test_a_comment_reformatting_or_reordering_is_no_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"apps/both.yaml": server("a") + "---\n" + server("b")})
    # The same objects: documents swapped, a comment, flow style, another key order and indent.
    reformatted = server("b").replace("kind: Deployment", "kind: Deployment  # the server")
    flow = json.dumps(
        {
            "kind": "Deployment",
            "apiVersion": "apps/v1",
            "metadata": {"labels": {"app": "a"}, "namespace": "ai-lab", "name": "a"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "resources": {"limits": {"nvidia.com/gpu": 1}},
                                "ports": [{"containerPort": 8000}],
                                "image": "nvcr.io/nvidia/tritonserver:24.10-py3",
                                "name": "server",
                            }
                        ]
                    },
                    "metadata": {"labels": {"app": "a"}},
                },
                "selector": {"matchLabels": {"app": "a"}},
                "replicas": 2,
            },
        },
        indent=4,
    )
    write(repo, {"apps/both.yaml": "# two servers\n" + reformatted + "---\n" + flow + "\n"})
    code, report, _ = lint(repo, monkeypatch, capsys)
    assert report["findings"] == [] and code == 0
    assert report["summary"]["unchanged"] == 2


def test_a_value_that_reads_the_same_is_no_change_but_another_type_is(
    two_servers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(two_servers, {"apps/a.yaml": server("a").replace("replicas: 2", "replicas: 0x2")})
    assert lint(two_servers, monkeypatch, capsys)[1]["findings"] == []  # YAML 1.1: 0x2 is 2
    write(two_servers, {"apps/a.yaml": server("a").replace("replicas: 2", 'replicas: "2"')})
    assert "Deployment ai-lab/a" in objects_of(lint(two_servers, monkeypatch, capsys)[1])


def test_a_renamed_file_with_the_same_objects_is_no_change(
    two_servers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    git(two_servers, "mv", "apps/a.yaml", "apps/renamed-a.yaml")
    git(two_servers, "checkout", "-q", "-b", "feature")
    commit_all(two_servers, "rename")
    code, report, _ = lint(two_servers, monkeypatch, capsys)
    assert report["findings"] == [] and code == 0
    assert report["summary"]["unchanged"] == 2


def test_a_new_file_is_reported(
    two_servers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(two_servers, {"apps/c.yaml": server("c")})  # untracked
    _, report, _ = lint(two_servers, monkeypatch, capsys)
    assert objects_of(report) == {"Deployment ai-lab/c"}
    assert {finding["file"] for finding in report["findings"]} == {"apps/c.yaml"}
    assert report["summary"]["unchanged"] == 2


def test_paths_narrow_what_is_reported_and_the_repository_stays_context(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"apps/a.yaml": server("a"), "disruption/pdb.yaml": pdb("a", "a")})
    write(repo, {"apps/a.yaml": server("a", image_tag="24.11-py3")})
    _, report, _ = lint(repo, monkeypatch, capsys, "apps")
    assert objects_of(report) == {"Deployment ai-lab/a"}
    assert "GP501" not in rules_on(report, "Deployment ai-lab/a")  # its PDB is in disruption/


def test_a_finding_a_change_makes_on_an_unchanged_object_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_repo(tmp_path, {"apps/a.yaml": server("a"), "apps/pdb.yaml": pdb("a", "a")})
    # Changing the PDB alone: the Deployment it selects is context, its old findings not reported.
    write(repo, {"apps/pdb.yaml": pdb("a", "a").replace("maxUnavailable: 1", "maxUnavailable: 2")})
    _, report, _ = lint(repo, monkeypatch, capsys)
    assert objects_of(report) <= {"PodDisruptionBudget ai-lab/a"}
    # Deleting it: the unchanged Deployment now lacks a PDB, which this change caused (GP501).
    (repo / "apps" / "pdb.yaml").unlink()
    _, report, _ = lint(repo, monkeypatch, capsys)
    assert rules_on(report, "Deployment ai-lab/a") == {"GP501"}
    assert objects_of(report) == {"Deployment ai-lab/a"}


def test_a_syntax_error_in_a_changed_file_is_reported_and_an_old_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n"
    repo = make_repo(tmp_path, {"apps/a.yaml": server("a"), "old/broken.yaml": broken})
    code, report, _ = lint(repo, monkeypatch, capsys)
    assert report["findings"] == [] and code == 0  # the old syntax error is not this change
    write(repo, {"apps/a.yaml": server("a") + "  bad: [\n"})
    code, report, _ = lint(repo, monkeypatch, capsys)
    assert [(finding["rule"], finding["file"]) for finding in report["findings"]] == [
        ("GP001", "apps/a.yaml")
    ]
    assert code == EXIT_FINDINGS  # an input finding fails like any finding at the threshold


def test_a_bad_ref_is_a_usage_error_on_one_line(
    two_servers: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(two_servers)
    for ref in ("origin/no-such-branch", "--output=x", "HEAD~5"):
        capsys.readouterr()
        assert main(["lint", f"--changed-since={ref}", "."]) == 2
        out, err = capsys.readouterr()
        assert out == ""
        assert err.count("\n") == 1 and err.startswith(f"gpupolicy: --changed-since {ref}: ")
    assert "fetch-depth: 0" in err or "not a revision" in err


def test_outside_a_git_repository_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, {"a.yaml": server("a")})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert main(["lint", "--changed-since", "main", "."]) == 2
    assert "is not inside a git work tree" in capsys.readouterr().err


@needs_helm
def test_a_values_change_reports_the_rendered_objects_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    helm_on_path(monkeypatch)
    chart = {
        "charts/llm/Chart.yaml": "apiVersion: v2\nname: llm\nversion: 0.1.0\n",
        "charts/llm/values.yaml": "replicas: 2\nembedderTag: 24.10-py3\n",
        "charts/llm/templates/server.yaml": server("server").replace(
            "replicas: 2", "replicas: {{ .Values.replicas }}"
        ),
        "charts/llm/templates/embedder.yaml": server("embedder").replace(
            "24.10-py3", "{{ .Values.embedderTag }}"
        ),
    }
    repo = make_repo(tmp_path, chart)
    write(repo, {"charts/llm/values.yaml": "replicas: 3\nembedderTag: 24.10-py3\n"})
    code, report, _ = lint(repo, monkeypatch, capsys)
    assert objects_of(report) == {"Deployment ai-lab/server"} and code == 1
    assert {finding["file"] for finding in report["findings"]} <= {
        "charts/llm",
        "charts/llm/templates/server.yaml",
    }
    assert report["summary"]["unchanged"] == 1
    # A comment in a template renders the same objects: no change.
    write(repo, {"charts/llm/values.yaml": chart["charts/llm/values.yaml"]})
    write(
        repo,
        {
            "charts/llm/templates/embedder.yaml": "{{/* the embedder */}}\n"
            + chart["charts/llm/templates/embedder.yaml"]
        },
    )
    assert lint(repo, monkeypatch, capsys)[1]["findings"] == []


@needs_helm
def test_both_sides_render_with_the_values_files_the_policy_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`helm.valuesFiles` applies to REF's tree too: a change in values-prod.yaml is a change."""
    helm_on_path(monkeypatch)
    repo = make_repo(
        tmp_path,
        {
            ".gpupolicy.yaml": "helm:\n  valuesFiles: [values-prod.yaml]\n",
            "charts/llm/Chart.yaml": "apiVersion: v2\nname: llm\nversion: 0.1.0\n",
            "charts/llm/values.yaml": "replicas: 2\n",
            "charts/llm/values-prod.yaml": "replicas: 3\n",
            "charts/llm/templates/server.yaml": server("server").replace(
                "replicas: 2", "replicas: {{ .Values.replicas }}"
            ),
            "charts/llm/templates/embedder.yaml": server("embedder"),
        },
    )
    assert lint(repo, monkeypatch, capsys)[1]["findings"] == []  # nothing changed
    write(repo, {"charts/llm/values-prod.yaml": "replicas: 4\n"})
    _, report, _ = lint(repo, monkeypatch, capsys)
    assert objects_of(report) == {"Deployment ai-lab/server"}
    assert report["summary"]["unchanged"] == 1


@needs_kubectl
def test_a_kustomize_patch_change_reports_the_patched_object_of_the_overlay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\nspec: {replicas: 4}\n"
    files = {
        "base/kustomization.yaml": "resources: [a.yaml, b.yaml]\n",
        "base/a.yaml": server("a").replace("  namespace: ai-lab\n", ""),
        "base/b.yaml": server("b").replace("  namespace: ai-lab\n", ""),
        "overlays/prod/kustomization.yaml": "namespace: prod\nresources: [../../base]\npatches: [{path: replicas.yaml}]\n",
        "overlays/prod/replicas.yaml": patch,
    }
    repo = make_repo(tmp_path, files)
    write(repo, {"overlays/prod/replicas.yaml": patch.replace("replicas: 4", "replicas: 6")})
    _, report, _ = lint(repo, monkeypatch, capsys)
    assert objects_of(report) == {"Deployment prod/a"}
    # A change in the base reaches every overlay that renders it.
    write(repo, {"overlays/prod/replicas.yaml": patch})
    write(repo, {"base/b.yaml": server("b", image_tag="24.11-py3").replace("  namespace: ai-lab\n", "")})
    _, report, _ = lint(repo, monkeypatch, capsys)
    # (the base on its own, "Deployment b", only while bases are also linted apart from their overlays)
    assert "Deployment prod/b" in objects_of(report)
    assert objects_of(report) <= {"Deployment b", "Deployment prod/b"}


# -- the recipes of docs/ci.md, run as written -------------------------------------------------

CI_DOC = REPO / "docs" / "ci.md"
# The GitHub expressions the workflow may use, as Actions evaluates them for a pull request
# (https://docs.github.com/en/actions/reference/workflows-and-actions/expressions).
GITHUB_EXPRESSIONS = {
    "github.base_ref": lambda fork: "main",
    "github.event.pull_request.head.repo.fork && '--no-remote' || ''": lambda fork: (
        "--no-remote" if fork else ""
    ),
}


def recipe(first_line: str) -> dict[str, Any]:
    """The YAML block of docs/ci.md that starts with `first_line`."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", CI_DOC.read_text(encoding="utf-8"), re.M | re.S)
    (block,) = [block for block in blocks if block.startswith(first_line)]
    loaded = yaml.safe_load(block)
    assert isinstance(loaded, dict)
    return loaded


def output_of(command: str, fmt: str) -> str:
    (name,) = re.findall(rf"--output {fmt}=(\S+)", command)
    return name


def pull_request(tmp_path: Path) -> tuple[Path, str]:
    """A CI clone of a repository with two servers on main and a branch `feature` that changes one of
    them; main moved on after the branch (b changed there), as it does. Returns the clone and the
    merge base."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = make_repo(tmp_path, {"apps/a.yaml": server("a"), "apps/b.yaml": server("b")})
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "origin", "main")
    base = git(work, "rev-parse", "HEAD")
    git(work, "checkout", "-q", "-b", "feature")
    write(work, {"apps/a.yaml": server("a", replicas=3)})
    commit_all(work, "a: three replicas")
    git(work, "push", "-q", "origin", "feature")
    git(work, "checkout", "-q", "main")
    write(work, {"apps/b.yaml": server("b", image_tag="24.11-py3")})
    commit_all(work, "b: newer image")
    git(work, "push", "-q", "origin", "main")
    clone = tmp_path / "ci"
    git(tmp_path, "clone", "-q", str(origin), str(clone))  # full history (fetch-depth: 0, GIT_DEPTH: 0)
    git(clone, "checkout", "-q", "feature")
    return clone, base


def gpupolicy_on_path(tmp_path: Path) -> dict[str, str]:
    """The environment of a CI job where `gpupolicy` is this checkout's."""
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "gpupolicy"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gpupolicy "$@"\n', encoding="utf-8")
    program.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("NO_COLOR", None)
    return env


@pytest.mark.parametrize("fork", [False, True], ids=["branch", "fork"])
def test_the_github_actions_recipe(tmp_path: Path, fork: bool) -> None:
    workflow = recipe("# .github/workflows/")
    steps = workflow["jobs"]["lint"]["steps"]
    (checkout,) = [step for step in steps if str(step.get("uses", "")).startswith("actions/checkout@")]
    assert checkout["with"]["fetch-depth"] == 0
    (lint_step,) = [step for step in steps if "gpupolicy lint" in step.get("run", "")]
    (upload,) = [
        step for step in steps if str(step.get("uses", "")).startswith("github/codeql-action/upload-sarif@")
    ]
    script = re.sub(
        r"\$\{\{\s*(.*?)\s*\}\}", lambda m: GITHUB_EXPRESSIONS[m.group(1)](fork), lint_step["run"]
    )
    sarif_file = output_of(script, "sarif")
    assert upload["with"]["sarif_file"] == sarif_file and "always()" in upload["if"]
    assert workflow["permissions"]["security-events"] == "write"

    clone, _ = pull_request(tmp_path)
    # actions/checkout checks out the pull request's merge commit, detached.
    git(clone, "checkout", "-q", "--detach", "origin/main")
    git(clone, "merge", "-q", "--no-ff", "-m", "merge", "origin/feature")
    done = subprocess.run(
        ["bash", "-e", "-c", script],  # the runner's shell for `run:` (bash -e {0})
        cwd=clone,
        env=gpupolicy_on_path(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # findings on the changed Deployment fail the step
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    assert annotations and all("file=apps/a.yaml," in line for line in annotations)
    sarif = json.loads((clone / sarif_file).read_text(encoding="utf-8"))
    uris = {
        location["physicalLocation"]["artifactLocation"]["uri"]
        for result in sarif["runs"][0]["results"]
        for location in result["locations"]
    }
    assert uris == {"apps/a.yaml"}


def test_the_gitlab_ci_recipe(tmp_path: Path) -> None:
    pipeline = recipe("# .gitlab-ci.yml")
    job = pipeline["gpupolicy"]
    assert job["variables"]["GIT_DEPTH"] == "0"
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    (script,) = [line for line in job["script"] if "gpupolicy lint" in line]
    junit_file = output_of(script, "junit")
    assert job["artifacts"] == {"when": "always", "reports": {"junit": junit_file}}

    clone, base = pull_request(tmp_path)
    env = {**gpupolicy_on_path(tmp_path), "CI_MERGE_REQUEST_DIFF_BASE_SHA": base}
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert "1 unchanged objects not reported (--changed-since " + base in done.stdout
    suites = ET.parse(clone / junit_file).getroot()
    cases = [case.get("name", "") for case in suites.iter("testcase")]
    assert cases and all("Deployment ai-lab/a" in case for case in cases)


def test_a_link_in_the_tree_of_ref_that_leads_out_of_it_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(server("outside"), encoding="utf-8")
    repo = make_repo(tmp_path, {"apps/a.yaml": server("a")})
    (repo / "apps" / "linked.yaml").symlink_to(outside)
    commit_all(repo, "a link out of the repository")
    code, report, err = lint(repo, monkeypatch, capsys)
    # REF's tree (git archive, unpacked with tarfile's "data" filter) skips the link, so the
    # object it leads to is new there; the working tree is read as it is.
    assert objects_of(report) == {"Deployment ai-lab/outside"} and err == ""
    assert code == 1
