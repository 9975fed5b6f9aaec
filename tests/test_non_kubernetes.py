"""Only Kubernetes objects are linted (issue 13): the other YAML and JSON of a repository (CI
workflows, mkdocs.yml, compose files, Helm values, OpenAPI specs, renovate.json ...) is skipped and
counted, in every mode - a directory, explicit files, stdin, --context-root and the pre-commit
hook run by the real `pre-commit` - while GP003 still reports documents that try to be objects."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.formats import RenderOptions, load_formatters
from gpupolicy.lint.streaming import lint_in_memory, stream
from gpupolicy.loading.inputs import Source, iter_sources, load_text
from gpupolicy.policy.loading import default_policy
from tests.test_precommit import BAD, PRE_COMMIT, commit, git, hook_config, run

REPO = Path(__file__).resolve().parent.parent

WORKFLOW = """\
name: ci
on:
  push:
    branches: [main]
  pull_request:
permissions:
  contents: read
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install -e '.[test]' && pytest -q
      - run: echo "${{ github.ref_name }}"
"""

DEPENDABOT = """\
version: 2
updates:
  - package-ecosystem: github-actions
    directory: /
    schedule:
      interval: weekly
"""

MKDOCS = """\
site_name: ML platform manifests
repo_url: https://github.com/example/ml-platform
theme:
  name: material
nav:
  - Home: index.md
  - Serving: serving.md
markdown_extensions:
  - admonition
  - pymdownx.superfences
"""

COMPOSE = """\
services:
  vllm:
    image: vllm/vllm-openai:v0.6.3
    command: ["--model", "meta-llama/Llama-3.1-8B-Instruct"]
    ports: ["8000:8000"]
    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 1
              capabilities: [gpu]
  prometheus:
    image: prom/prometheus:v2.54.1
    volumes: ["./prometheus.yml:/etc/prometheus/prometheus.yml:ro"]
"""

# Helm values under a name the walk does not know as values (a `kind` alone is a values setting).
VALUES = """\
replicaCount: 2
kind: Deployment
image:
  repository: vllm/vllm-openai
  tag: v0.6.3
resources:
  limits:
    nvidia.com/gpu: 1
nodeSelector:
  nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
"""

OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "Inference gateway", "version": "1.2.0"},
    "paths": {
        "/v1/completions": {
            "post": {
                "summary": "Complete a prompt",
                "responses": {"200": {"description": "the completion"}},
            }
        }
    },
    "components": {"schemas": {"Prompt": {"type": "object", "properties": {"text": {"type": "string"}}}}},
}

RENOVATE = {
    "$schema": "https://docs.renovatebot.com/renovate-schema.json",
    "extends": ["config:recommended"],
    "kubernetes": {"fileMatch": ["deploy/.+\\.yaml$"]},
}

CONFIGMAP = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: gateway-settings
  namespace: ai-lab
data:
  LOG_LEVEL: info
"""

# NVIDIA DLLogger's log (GKE's gpu-recipes keep one as dllogger.json): JSON lines behind a prefix,
# neither YAML nor JSON as a whole, and naming nothing of an object.
DLLOGGER = (
    'DLLL {"timestamp": "1717000000.1", "elapsedtime": "1.2", "type": "LOG", "step": [0], '
    '"data": {"train_loss": 11.2}}\n'
) * 2

# Files beside the manifests: path -> text. `.github` is a hidden folder, which a directory walk skips.
NOT_OBJECTS = {
    "metrics/dllogger.json": DLLOGGER,
    ".github/workflows/ci.yml": WORKFLOW,
    ".github/dependabot.yml": DEPENDABOT,
    "mkdocs.yml": MKDOCS,
    "docker-compose.yml": COMPOSE,
    "deploy/llm-prod-overrides.yaml": VALUES,
    "api/openapi.json": json.dumps(OPENAPI, indent=2) + "\n",
    "renovate.json": json.dumps(RENOVATE, indent=2) + "\n",
}
WALKED = [name for name in NOT_OBJECTS if not name.startswith(".")]


def write_repo(root: Path, *, manifest: str = CONFIGMAP) -> None:
    for name, text in {**NOT_OBJECTS, "deploy/settings.yaml": manifest}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def lint(cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", "--no-repo-policy", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"},
        timeout=120,
        check=False,
    )
    assert "Traceback" not in completed.stderr, completed.stderr
    return completed


def skipped_summary(files: int) -> str:
    return f"0 errors, 0 warnings, 0 info in 1 objects from 1 files; skipped {files} non-Kubernetes files\n"


# -- the CLI, mode by mode ---------------------------------------------------------------


def test_a_directory_lints_the_manifest_and_counts_the_rest(tmp_path: Path) -> None:
    write_repo(tmp_path)
    result = lint(tmp_path, ".")
    assert (result.returncode, result.stdout) == (0, skipped_summary(len(WALKED)))
    report = json.loads(lint(tmp_path, "--format", "json", ".").stdout)
    assert report["findings"] == []
    assert (report["summary"]["files"], report["summary"]["skippedFiles"]) == (1, len(WALKED))
    assert report["summary"]["skippedDocuments"] == 0
    assert sorted(item["file"] for item in report["skipped"]) == sorted(WALKED)
    assert {item["document"] for item in report["skipped"]} == {None}


def test_explicit_files_are_skipped_the_same(tmp_path: Path) -> None:
    write_repo(tmp_path)
    result = lint(tmp_path, *NOT_OBJECTS, "deploy/settings.yaml")
    assert (result.returncode, result.stdout) == (0, skipped_summary(len(NOT_OBJECTS)))
    report = json.loads(lint(tmp_path, "--format", "json", *NOT_OBJECTS, "deploy/settings.yaml").stdout)
    assert report["findings"] == [] and report["summary"]["skippedFiles"] == len(NOT_OBJECTS)


def test_only_non_kubernetes_files_pass_with_nothing_linted(tmp_path: Path) -> None:
    write_repo(tmp_path)
    result = lint(tmp_path, *NOT_OBJECTS)
    assert result.returncode == 0
    assert result.stdout == (
        f"0 errors, 0 warnings, 0 info in 0 objects from 0 files; skipped {len(NOT_OBJECTS)} non-Kubernetes files\n"
    )


@pytest.mark.parametrize("name", sorted(NOT_OBJECTS))
def test_stdin(tmp_path: Path, name: str) -> None:
    result = lint(tmp_path, "-", stdin=NOT_OBJECTS[name])
    assert result.returncode == 0
    assert (
        result.stdout
        == "0 errors, 0 warnings, 0 info in 0 objects from 0 files; skipped 1 non-Kubernetes file\n"
    )


def test_context_root_reports_the_given_files_skipped(tmp_path: Path) -> None:
    write_repo(tmp_path, manifest=BAD)
    given = ["mkdocs.yml", ".github/workflows/ci.yml", "renovate.json"]
    result = lint(tmp_path, "--context-root", ".", *given)
    assert result.returncode == 0
    assert (
        result.stdout
        == "0 errors, 0 warnings, 0 info in 0 objects from 0 files; skipped 3 non-Kubernetes files\n"
    )
    # the bad manifest, given beside them, is reported; the context's own skips are not counted
    result = lint(tmp_path, "--context-root", ".", *given, "deploy/settings.yaml")
    assert result.returncode == 1
    assert "deploy/settings.yaml:12:24: GP102 error" in result.stdout
    assert result.stdout.splitlines()[-1].endswith(
        "in 1 objects from 1 files; skipped 3 non-Kubernetes files"
    )


def test_mixed_file_lints_its_objects_and_counts_the_other_documents(tmp_path: Path) -> None:
    (tmp_path / "mixed.yaml").write_text(f"{CONFIGMAP}---\n{MKDOCS}---\n{BAD}", encoding="utf-8")
    result = lint(tmp_path, "mixed.yaml")
    assert result.returncode == 1
    assert re.search(r"^mixed\.yaml:\d+:\d+: GP102 error", result.stdout, re.MULTILINE)
    assert "GP003" not in result.stdout
    assert result.stdout.splitlines()[-1].endswith(
        "in 2 objects from 1 files; skipped 1 non-Kubernetes document"
    )
    report = json.loads(lint(tmp_path, "--format", "json", "mixed.yaml").stdout)
    assert report["skipped"] == [
        {
            "file": "mixed.yaml",
            "document": 1,
            "reason": "not a Kubernetes object (no apiVersion, kind or metadata)",
        }
    ]
    assert (report["summary"]["skippedFiles"], report["summary"]["skippedDocuments"]) == (0, 1)


def test_every_format_keeps_skipped_files_out_of_the_findings(tmp_path: Path) -> None:
    write_repo(tmp_path)
    sarif = json.loads(lint(tmp_path, "--format", "sarif", ".").stdout)
    assert sarif["runs"][0]["results"] == []  # a skipped file is no result
    markdown = lint(tmp_path, "--format", "markdown", ".").stdout
    assert f"1 objects in 1 files (skipped {len(WALKED)} non-Kubernetes files);" in markdown
    github = lint(tmp_path, "--format", "github", ".").stdout
    assert github == f"gpupolicy: {skipped_summary(len(WALKED))}"
    junit = lint(tmp_path, "--format", "junit", ".").stdout
    assert 'failures="0"' in junit and "GP003" not in junit


def test_the_stream_skips_what_the_in_memory_path_skips(tmp_path: Path) -> None:
    write_repo(tmp_path, manifest=f"{BAD}---\n- stray\n---\n{MKDOCS}")
    (tmp_path / "empty.yaml").write_text("# a placeholder\n", encoding="utf-8")
    sources = [
        *iter_sources([str(tmp_path)]),
        *(Source(n, path=tmp_path / n) for n in NOT_OBJECTS if n[0] == "."),
    ]
    formatters = load_formatters()
    options = RenderOptions(show_suppressed=True, tool_version="test")
    streamed, in_memory = stream(sources, default_policy()), lint_in_memory(sources, default_policy())
    for name in ("text", "json", "sarif", "markdown"):
        assert formatters[name](streamed, options) == formatters[name](in_memory, options)
    assert (streamed.skipped_files, streamed.skipped_documents) == (len(NOT_OBJECTS) + 1, 1)
    assert [f.rule_id for f in streamed.findings if f.rule_id == "GP003"] == ["GP003"]  # `- stray`


# -- the pre-commit hook, by the real pre-commit ---------------------------------------------


@pytest.fixture
def hooked_repo(tmp_path: Path) -> Path:
    if not PRE_COMMIT.is_file():
        pytest.skip("needs pre-commit (in the test extra)")
    root = tmp_path / "platform"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "test@example.com")
    git(root, "config", "user.name", "test")
    git(root, "config", "commit.gpgsign", "false")
    config = hook_config()
    # Without the hook's exclude list: the skipping alone keeps the other files quiet.
    config["repos"][0]["hooks"][0].pop("exclude")
    (root / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    write_repo(root, manifest=BAD)
    git(root, "add", ".")
    return root


@pytest.mark.slow
def test_pre_commit_reports_only_the_bad_manifest(hooked_repo: Path) -> None:
    result = run([str(PRE_COMMIT), "run", "--all-files", "--verbose"], hooked_repo, hooked_repo.parent)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    findings = re.findall(r"^(\S+?):\d+:\d+: (GP\d{3}) ", result.stdout, re.MULTILINE)
    assert findings and {file for file, _ in findings} == {"deploy/settings.yaml"}, output
    assert "GP003" not in output and "GP001" not in output
    # every file pre-commit passed but the manifest (its own .pre-commit-config.yaml is never read)
    assert re.search(
        r"in 1 objects from 1 files; skipped 8 non-Kubernetes files$", result.stdout, re.MULTILINE
    ), output


@pytest.mark.slow
def test_pre_commit_passes_once_the_manifest_is_fixed(hooked_repo: Path) -> None:
    (hooked_repo / "deploy" / "settings.yaml").write_text(CONFIGMAP, encoding="utf-8")
    git(hooked_repo, "add", ".")
    result = commit(hooked_repo, "platform repository")
    assert result.returncode == 0, result.stdout + result.stderr


# -- what tries to be an object, and what does not ---------------------------------------------


NEAR_OBJECTS = {
    "kind without apiVersion": (
        "kind: Deployment\nmetadata: {name: llm}\nspec: {replicas: 1}\n",
        "no apiVersion",
    ),
    "apiVersion without kind": ("apiVersion: apps/v1\nmetadata: {name: llm}\n", "no kind"),
    "apiVersion and spec": ("apiVersion: apps/v1\nspec: {replicas: 2}\n", "no kind"),
    "apiVersion and kind alone": ("apiVersion: v1\nkind: Namespace\n", "no metadata"),
    "a mis-cased apiVersion": (
        "apiversion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n",
        "no apiVersion ('apiversion': keys are case-sensitive)",
    ),
    # A kind named for configuration with an object's body is an object that lacks its metadata.
    "a Config kind with a spec": (
        "apiVersion: networking.example.com/v1\nkind: RouterConfig\nspec: {replicas: 2}\n",
        "no metadata",
    ),
    "no metadata.name": ("apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\n", "no metadata mapping"),
    "nameless metadata": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: ai-lab}\n",
        "metadata.name",
    ),
    "metadata and spec": ("metadata: {name: llm, namespace: ai-lab}\nspec: {replicas: 2}\n", "no apiVersion"),
    "kind and spec": ("kind: Job\nspec: {template: {}}\n", "no apiVersion"),
    "text after an object": (f"{CONFIGMAP}---\njust words\n", "plain text"),
    "list before an object": (f"- a\n- b\n---\n{CONFIGMAP}", "a list"),
    "item of a List": ("apiVersion: v1\nkind: List\nitems:\n  - metadata: {name: x}\n", "no apiVersion"),
}


@pytest.mark.parametrize("name", NEAR_OBJECTS)
def test_gp003_still_fires_on_documents_that_try_to_be_objects(name: str) -> None:
    text, words = NEAR_OBJECTS[name]
    loaded = load_text(text, "near.yaml")
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    gp003 = [finding for finding in report.findings if finding.rule_id == "GP003"]
    assert gp003 and any(words in finding.message for finding in gp003), report.findings
    assert all(item.doc_index is not None for item in loaded.skipped)  # never skipped whole


SKIPPED_WHOLE = {
    "empty": ("", "empty"),
    "blank lines": ("\n\n", "empty"),
    "a comment": ("# filled in by the release job\n", "empty"),
    "separators only": ("---\n---\n", "empty"),
    "plain text": ("This folder holds the GPU manifests of the ai-lab team.\n", "plain text"),
    "a list": ("- a\n- b\n", "a list"),
    "a JSON array": ("[1, 2, 3]\n", "a list"),
    "a values kind alone": ("kind: DaemonSet\nimage: {repository: fluent/fluent-bit}\n", "no apiVersion"),
    "a kind cluster": (
        "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n  - role: control-plane\n",
        "a kind.x-k8s.io Cluster configuration file",
    ),
    "a kubeconfig": (
        "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\ncurrent-context: ''\n",
        "a kubeconfig",
    ),
    # gpushare-scheduler-extender's scheduler-policy-config.json: kube-scheduler's legacy policy file
    "a kube-scheduler policy file": (
        '{"kind": "Policy", "apiVersion": "v1", "extenders": [{"urlPrefix": "http://127.0.0.1:32766/gpushare-scheduler", '
        '"filterVerb": "filter", "bindVerb": "bind", "enableHttps": false, "nodeCacheCapable": true}]}\n',
        "a kube-scheduler policy file",
    ),
    "a kubeadm config": (
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.34.0\n",
        "kubeadm.k8s.io ClusterConfiguration",
    ),
    "a controller-runtime manager config": (
        "apiVersion: controller-runtime.sigs.k8s.io/v1alpha1\nkind: ControllerManagerConfig\n"
        "health: {healthProbeBindAddress: ':8081'}\nleaderElection: {leaderElect: true}\n",
        "controller-runtime.sigs.k8s.io ControllerManagerConfig configuration file",
    ),
    # By the convention of Kubernetes' own components: a controller's manager config (Kueue's,
    # config/components/manager/controller_manager_config.yaml) and llm-d's router config, which
    # its docs say "looks like a Kubernetes Custom Resource, it is not".
    "a controller's manager Configuration": (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nhealth:\n"
        "  healthProbeBindAddress: :8081\nleaderElection: {leaderElect: true}\n",
        "a config.kueue.x-k8s.io Configuration configuration file (no metadata)",
    ),
    "a router's EndpointPickerConfig": (
        "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: prefix-cache-scorer\n"
        "schedulingProfiles:\n- name: default\n  plugins: [{pluginRef: prefix-cache-scorer}]\n",
        "a llm-d.ai EndpointPickerConfig configuration file (no metadata)",
    ),
    # operator-sdk writes its scorecard configuration with a lowercase `apiversion` key.
    "an operator-sdk scorecard config": (
        "kind: Configuration\napiversion: scorecard.operatorframework.io/v1alpha3\nmetadata: {name: config}\n"
        "stages: [{parallel: true, tests: [{image: 'quay.io/operator-framework/scorecard-test:v1.32.0'}]}]\n",
        "scorecard.operatorframework.io Configuration configuration file",
    ),
    "an istioctl input": (
        "apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  profile: default\n",
        "istioctl IstioOperator input",
    ),
    "a Helm chart repository's index": (
        "apiVersion: v1\nentries:\n  ollama:\n    - apiVersion: v2\n      name: ollama\n      version: 1.2.0\n"
        'generated: "2025-04-23T00:00:31Z"\n',
        "an apiVersion without kind or metadata",
    ),
    "a log that parses as neither YAML nor JSON": (DLLOGGER, "does not parse: line 1: YAML syntax error"),
    # Kubeflow Pipelines' design notes: JSON with comments, whose keys hold the words as parts
    # a Kubeflow Pipelines v1 component spec (backend/src/v2/test/components/build_go.yaml)
    "a component spec with annotations": (
        "name: build_go\nmetadata:\n  annotations: {author: kfp}\ninputs: [{name: source}]\n"
        "implementation:\n  container: {image: golang:1.21, command: [go, build]}\n",
        "no apiVersion",
    ),
    "commented JSON": (
        '{\n  // the run\'s status\n  "status_metadata": {"kind_of_run": 1},\n  "name": "run"\n}\n',
        "does not parse",
    ),
    # A tokenizer's vocabulary: object words among its keys, each a number (evidence is a shape).
    "a tokenizer vocabulary": (
        '{"the": 1, "kind": 11031, "metadata": 38993, "name": 3672, "apiVersion": 7, "spec": 99}\n',
        "not a Kubernetes object",
    ),
    # Valid JSON with a key longer than the 1,024 characters YAML 1.1 allows an implicit key.
    "a tokenizer YAML cannot read": (
        '{"model": {"vocab": {"' + "x" * 1100 + '": 1, "kind": 2}}}\n',
        "JSON that holds no Kubernetes object (YAML 1.1 cannot read it: line 1:",
    ),
    "a GoReleaser config": (
        'project_name: gpupolicy\nbuilds:\n  - ldflags: ["-X main.version={{.Version}}"]\n'
        'archives:\n  - name_template: "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}"\n',
        "no apiVersion",
    ),
}


def test_a_deep_file_naming_no_object_is_skipped_saying_why() -> None:
    """Bounded all the same: the nesting limit stops the reading, and the reason says so."""
    (skipped,) = load_text("a: " + "[" * 5000 + "]" * 5000 + "\n", "deep.json").skipped
    assert "does not parse: line 1: " in skipped.reason and "nesting depth" in skipped.reason


@pytest.mark.parametrize("name", SKIPPED_WHOLE)
def test_files_without_objects_are_skipped_whole_with_a_reason(name: str) -> None:
    text, reason = SKIPPED_WHOLE[name]
    loaded = load_text(text, "other.json" if name.startswith("a tokenizer") else "other.yaml")
    assert (loaded.resources, loaded.problems) == ([], [])
    (skipped,) = loaded.skipped
    assert (skipped.file.rpartition(".")[0], skipped.doc_index) == ("other", None)
    assert reason in skipped.reason


def test_helm_templates_are_still_gp004() -> None:
    """Actions that make the structure (a flow mapping of their own), or in an object, are Helm's."""
    for text in (
        '{{ include "llm.deployment" . }}\n',
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: '{{ .Release.Name }}-settings'\n",
        "{{- if .Values.enabled }}\nreplicas: 1\n{{- end }}\n",
    ):
        loaded = load_text(text, "templates/x.yaml")
        assert [problem.rule_id for problem in loaded.problems] == ["GP004"], text
        assert loaded.skipped == []


NVKIND_TEMPLATE = """\
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
- role: control-plane
  kubeadmConfigPatches:
  - |
    kind: InitConfiguration
{{- range $gpu := until numGPUs }}
- role: worker
  extraMounts:
  - hostPath: /dev/null
    containerPath: /var/run/nvidia-container-devices/{{ $gpu }}
{{- end }}
"""


def test_a_template_of_a_configuration_file_is_skipped_not_a_gp004(tmp_path: Path) -> None:
    """NVIDIA's nvkind renders its kind cluster config from a Go template: what it makes is read by
    kind, not sent to an API server, so it is skipped as the rendered file is (GP004 said to render
    it with helm template)."""
    loaded = load_text(NVKIND_TEMPLATE, "kind-cluster-config.yaml")
    assert loaded.problems == [] and loaded.resources == []
    assert [item.reason for item in loaded.skipped] == [
        "a template of a kind.x-k8s.io Cluster configuration file, not an API object"
    ]
    manifest = NVKIND_TEMPLATE + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
    assert [problem.rule_id for problem in load_text(manifest, "mixed.yaml").problems] == ["GP004"]


def test_what_an_attempt_lacks_is_one_finding() -> None:
    """A document that lost its apiVersion, kind and name is one problem, said once."""
    text = "metadata: {namespace: ai-lab}\nspec: {replicas: 2}\n"
    loaded = load_text(text, "near.yaml")
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    assert [f.message for f in report.findings if f.rule_id == "GP003"] == [
        "object has no apiVersion, kind or metadata.name (or generateName)"
    ]


def test_another_tools_typed_file_is_no_object() -> None:
    """kubeflow/examples' ksonnet apps: `apiVersion: 0.3.0`, `kind: ksonnet.io/app` (44 GP003
    errors). A path for a kind and a version no API group writes is another tool's file; either
    alone is an object's own mistake."""
    app = "apiVersion: 0.3.0\nkind: ksonnet.io/app\nname: ks_app\nenvironments: {default: {}}\n"
    loaded = load_text(app, "app.yaml")
    assert loaded.resources == [] and loaded.problems == [] and loaded.skipped
    typo = "apiVersion: apps/v1\nkind: apps/Deployment\nmetadata: {name: x}\nspec: {}\n"
    assert [resource.kind for resource in load_text(typo, "d.yaml").resources] == ["apps/Deployment"]
