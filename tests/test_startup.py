"""What `gpupolicy lint one.yaml` (the pre-commit hook's run) imports: only what linting needs.

Each case runs the command in a fresh interpreter and lists `sys.modules` when it is done, so a
module imported by any means (an `import` statement, `importlib.import_module`, a dependency's
own imports) counts. No timing here: the start-up time is measured by `bench/startup.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpupolicy.cli.main import COMMAND_OWNERS, build_parser, main

REPO = Path(__file__).resolve().parent.parent

# The webhook's server, store and cluster client, the engines of other policy languages, the
# provenance, results and experiment-diff commands: none is needed to lint a manifest.
UNNEEDED_PACKAGES = frozenset(
    {
        "fastapi",
        "starlette",
        "uvicorn",
        "sqlalchemy",
        "psycopg",
        "kubernetes",
        "regopy",
        "regorus",
        "cel",
        "celpy",
        # Python jsonschema words the errors of a policy file the jsonschema-rs precheck refuses
        # (gpupolicy.core.schema_precheck); a valid policy never loads it. kubernetes_validate would
        # load it too: only its schema folder is read.
        "jsonschema",
        "kubernetes_validate",
        # The JUnit format's: a run that prints text imports no other format.
        "xml",
        # `git archive`'s reader, for --changed-since REF only.
        "tarfile",
        # The shipped policies folder is found from the package's path (gpupolicy/core/packaged.py).
        "zipfile",
        # For a rule that raised: the run's report says which (gpupolicy/engine/evaluation.py).
        "traceback",
    }
)
# Modules for charts and overlays (renderers run in a temporary folder): a lint of plain files
# imports neither. The pre-commit hook's run asks git for the top of the tree: subprocess.
RENDERING_MODULES = ("subprocess", "tempfile")
UNNEEDED_MODULES = (
    "gpupolicy.provenance",
    "gpupolicy.webhook",
    "gpupolicy.results",
    "gpupolicy.cli.commands",
    "gpupolicy.formats.json_report",
    "gpupolicy.formats.sarif",
    "gpupolicy.formats.junit",
    # The custom-rule languages: only finding that no rule is configured or defined in the tree.
    "gpupolicy.custom.definitions",
    "gpupolicy.custom.gatekeeper",
    "gpupolicy.custom.native_rego",
    "gpupolicy.custom.rego",
    "gpupolicy.custom.cel",
    "gpupolicy.custom.cel_rules",
    "gpupolicy.custom.matching",
    "gpupolicy.custom.rules",
    # `lint -j N` (a tree large enough, or -j given): one file is linted in one process.
    "gpupolicy.lint.parallel",
    # --changed-since REF (--context-from-git needs only gpupolicy.lint.git_tree), and a baseline
    # file (--baseline, --write-baseline).
    "gpupolicy.lint.changes",
    "gpupolicy.engine.baseline",
    # The fields that differ between the arms of an experiment: no experiment here.
    "gpupolicy.kube.dimensions",
    # The rule pages and examples of `gpupolicy rules` and `explain`.
    "gpupolicy.rules.docs",
    "gpupolicy.rules.example_files",
    "multiprocessing",
    "concurrent.futures",
)

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  containers:
    - name: train
      image: nvcr.io/nvidia/pytorch:24.05-py3
      resources:
        requests: {nvidia.com/gpu: 1}
        limits: {nvidia.com/gpu: 2}
"""
# A repository policy that uses the checks the precheck must agree on: `format: regex` items,
# a `pattern` (kubernetesVersion), enums, rule settings.
REPO_POLICY = """\
apiVersion: gpupolicy.io/v1alpha1
kind: Policy
kubernetesVersion: "1.30"
failOn: warning
gpu:
  servingImages: ["^registry\\\\.example\\\\.com/serving/"]
rules:
  GP701: {enabled: false}
"""
LIST_MODULES = """\
import json, sys
from gpupolicy.cli.main import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


def run_listing_modules(folder: Path, *args: str) -> tuple[int, str, list[str]]:
    listing = folder.parent / f"{folder.name}-modules.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-c", LIST_MODULES, str(listing), "lint", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(listing.read_text(encoding="utf-8"))
    return result["code"], done.stdout, result["modules"]


def unneeded(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if name.split(".")[0] in UNNEEDED_PACKAGES
        or any(name == prefix or name.startswith(prefix + ".") for prefix in UNNEEDED_MODULES)
    ]


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


@pytest.mark.slow
def test_lint_one_file_without_a_repository_policy_imports_only_the_linter(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "one.yaml").write_text(POD, encoding="utf-8")
    code, out, modules = run_listing_modules(work, "one.yaml")
    assert code == 1 and "GP102" in out  # it did lint
    assert "gpupolicy.rules" in modules
    assert unneeded(modules) == []
    assert [name for name in RENDERING_MODULES if name in modules] == []


@pytest.mark.slow
def test_lint_one_file_with_a_repository_policy_imports_only_the_linter(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "one.yaml").write_text(POD, encoding="utf-8")
    (work / ".gpupolicy.yaml").write_text(REPO_POLICY, encoding="utf-8")
    code, out, modules = run_listing_modules(work, "one.yaml")
    assert code == 1 and "GP102" in out and "GP701" not in out  # the repository policy applied
    assert unneeded(modules) == []
    assert [name for name in RENDERING_MODULES if name in modules] == []


@pytest.mark.slow
def test_the_pre_commit_hooks_run_imports_only_the_linter(tmp_path: Path) -> None:
    """The hook's entry (`lint --context-from-git`, .pre-commit-hooks.yaml) in a repository with
    its own policy and other manifests as context."""
    work = tmp_path / "work"
    (work / "apps").mkdir(parents=True)
    (work / "apps" / "one.yaml").write_text(POD, encoding="utf-8")
    (work / "apps" / "other.yaml").write_text(POD.replace("name: train,", "name: other,"), encoding="utf-8")
    (work / ".gpupolicy.yaml").write_text(REPO_POLICY, encoding="utf-8")
    git(work, "init", "-q")
    code, out, modules = run_listing_modules(work, "--context-from-git", "apps/one.yaml")
    assert code == 1 and "one.yaml" in out and "other.yaml" not in out
    assert unneeded(modules) == []


@pytest.mark.slow
def test_an_invalid_repository_policy_still_gets_jsonschemas_messages(tmp_path: Path) -> None:
    """The precheck only says yes: a policy it refuses goes to jsonschema for the error."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "one.yaml").write_text(POD, encoding="utf-8")
    (work / ".gpupolicy.yaml").write_text(REPO_POLICY.replace("failOn: warning", "failOn: sometimes"))
    code, _, modules = run_listing_modules(work, "one.yaml")
    assert code == 2
    assert "jsonschema" in modules


SERVER_WITH_CRITERIA = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: ml
  annotations:
    gpupolicy.io/rollback-criteria: '{criteria}'
spec:
  replicas: 2
  selector: {{matchLabels: {{app: llm}}}}
  template:
    metadata: {{labels: {{app: llm}}}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.8.5
          ports: [{{containerPort: 8000}}]
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("criteria", "needs_jsonschema"),
    [
        (
            "[{metric: p95_latency_ms, max: 800, window: 10m}, {metric: error_rate, max: 0.01, window: 10m}]",
            False,
        ),
        ("[{metric: p95_latency_ms, max: 800, window: ten minutes}]", True),
    ],
    ids=["valid", "invalid"],
)
def test_rollback_criteria_get_jsonschema_only_for_their_errors(
    tmp_path: Path, criteria: str, needs_jsonschema: bool
) -> None:
    """The annotation's criteria pass the jsonschema-rs precheck; only criteria it refuses go to
    jsonschema for the messages (gpupolicy.kube.rollback)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "one.yaml").write_text(SERVER_WITH_CRITERIA.format(criteria=criteria), encoding="utf-8")
    _, out, modules = run_listing_modules(work, "one.yaml")
    assert ("GP902" in out and "window" in out) is needs_jsonschema  # the schema error is a finding
    assert ("jsonschema" in modules) is needs_jsonschema


def command_names(parser: argparse.ArgumentParser) -> list[str]:
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return list(commands.choices)


def test_every_command_is_registered_by_the_module_it_is_listed_with() -> None:
    everything = command_names(build_parser())
    assert everything == ["lint", "rules", "explain", *COMMAND_OWNERS]
    for name in COMMAND_OWNERS:
        assert name in command_names(build_parser([name, "--help"]))


def test_a_run_registers_its_command_alone_and_help_lists_them_all() -> None:
    assert command_names(build_parser(["lint", "one.yaml"])) == ["lint", "rules", "explain"]
    assert command_names(build_parser(["results", "report"])) == ["lint", "rules", "explain", "results"]
    for argv in ([], ["--help"], ["-h", "lint"], ["--version"], ["lnt"]):
        assert command_names(build_parser(argv)) == command_names(build_parser())


def test_a_commands_parser_is_the_same_registered_alone(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["lint", "--help"], ["init", "--help"], ["results", "report", "--help"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)
        full = capsys.readouterr().out
        with pytest.raises(SystemExit):
            build_parser(argv).parse_args(argv)
        assert capsys.readouterr().out == full


def test_an_unknown_command_is_refused_with_every_command_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["lnt"])
    assert exited.value.code == 2
    assert "choose from 'lint', 'rules', 'explain', 'provenance', 'serve'" in capsys.readouterr().err
