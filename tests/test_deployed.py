"""Linted as deployed: a Helm chart through `helm template`, a kustomize base or patch through the
overlays that use it, with findings on the template, base or patch file a person edits.

A small GitOps repository (a chart with two templates and a values file; a kustomize base with a
dev and a prod overlay, prod patching the base) is linted with the real helm, the real `kubectl
kustomize` and, for the hook, the real `pre-commit`. Needs helm (on PATH, or at .tools/helm:
charts/install-helm.sh) and kubectl; skipped otherwise.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpupolicy.cli.main import main
from gpupolicy.loading.inputs import RenderSession, iter_sources, sources_with_context
from gpupolicy.loading.rendering import Origin, SourceText, helm_template_file
from gpupolicy.policy.loading import default_policy
from tests.real_tools import helm_on_path, needs_helm, needs_kubectl
from tests.test_precommit import PRE_COMMIT, git, hook_config, run
from tests.test_streaming import assert_streams_the_same

REPO = Path(__file__).resolve().parent.parent
pytestmark = [needs_helm, needs_kubectl]

CHART_YAML = "apiVersion: v2\nname: trainer-chart\nversion: 0.1.0\n"
VALUES = "image: nvcr.io/nvidia/pytorch:24.01-py3\ngpus: 1\n"
# The deployment's GPU request and limit disagree (GP102) only when a values file says so.
DEPLOYMENT_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-trainer
spec:
  replicas: 1
  selector:
    matchLabels: {app: trainer}
  template:
    metadata:
      labels: {app: trainer}
    spec:
      containers:
        - name: main
          image: {{ .Values.image }}
          resources:
            requests:
              nvidia.com/gpu: 1
            limits:
              nvidia.com/gpu: {{ .Values.gpus }}
"""
SERVICE_TEMPLATE = """\
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}-svc
spec:
  selector: {app: trainer}
  ports:
    - port: 80
"""
BASE_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: worker
spec:
  replicas: 1
  selector:
    matchLabels: {app: worker}
  template:
    metadata:
      labels: {app: worker}
    spec:
      containers:
        - name: main
          image: nvcr.io/nvidia/pytorch:24.01-py3
          resources:
            requests:
              nvidia.com/gpu: 1
            limits:
              nvidia.com/gpu: 1
"""
# prod asks for a second GPU in the limit only: a GP102 of prod alone.
PROD_PATCH = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: worker
spec:
  template:
    spec:
      containers:
        - name: main
          resources:
            limits:
              nvidia.com/gpu: 2
"""


def line_of(text: str, needle: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if needle in line)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_repo(root: Path) -> Path:
    chart = root / "charts" / "trainer"
    write(chart / "Chart.yaml", CHART_YAML)
    write(chart / "values.yaml", VALUES)
    write(chart / "values-prod.yaml", "gpus: 2\n")
    write(chart / "templates" / "deployment.yaml", DEPLOYMENT_TEMPLATE)
    write(chart / "templates" / "service.yaml", SERVICE_TEMPLATE)
    write(chart / "templates" / "_helpers.tpl", '{{- define "trainer.name" -}}trainer{{- end }}\n')
    apps = root / "apps"
    write(apps / "base" / "kustomization.yaml", "resources:\n  - deployment.yaml\n")
    write(apps / "base" / "deployment.yaml", BASE_DEPLOYMENT)
    write(apps / "overlays" / "dev" / "kustomization.yaml", "resources:\n  - ../../base\nnamespace: dev\n")
    write(
        apps / "overlays" / "prod" / "kustomization.yaml",
        "resources:\n  - ../../base\nnamespace: prod\npatches:\n  - path: gpus.yaml\n",
    )
    write(apps / "overlays" / "prod" / "gpus.yaml", PROD_PATCH)
    return root


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    helm_on_path(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return make_repo(tmp_path)


def lint(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    main(["lint", "--no-repo-policy", "--format", "json", *args])
    findings: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["findings"]
    return findings


def where(findings: list[dict[str, Any]], rule: str) -> list[tuple[str, int]]:
    return sorted((finding["file"], finding["line"]) for finding in findings if finding["rule"] == rule)


# -- Helm ------------------------------------------------------------------------------------------


def test_a_chart_is_reported_on_its_template_files(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    findings = lint(capsys, ".")
    files = {finding["file"] for finding in findings}
    assert "charts/trainer" not in files and "charts/trainer/templates/deployment.yaml" in files
    image_line = line_of(DEPLOYMENT_TEMPLATE, "image:")
    assert ("charts/trainer/templates/deployment.yaml", image_line) in where(findings, "GP701")
    assert not where(findings, "GP004") and not where(findings, "GP003")
    # values.yaml: 1 GPU requested, 1 in the limit
    assert not [found for found in where(findings, "GP102") if found[0].startswith("charts/")]


def test_the_policy_names_values_files_the_chart_is_rendered_with(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(repo / "policy.yaml", "helm:\n  valuesFiles: [values-prod.yaml]\n")
    findings = lint(capsys, "--policy", "policy.yaml", "charts")
    # values-prod.yaml sets 2 GPUs in the limit: the mismatch is on the template, at its field.
    assert where(findings, "GP102") == [
        ("charts/trainer/templates/deployment.yaml", line_of(DEPLOYMENT_TEMPLATE, "nvidia.com/gpu: 1"))
    ]


def test_the_policy_names_the_namespace_the_chart_is_rendered_in(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A chart that refuses Helm's `default` namespace, as NVIDIA's device plugin does, and puts its
    # objects in the release's: rendered in the namespace the policy names.
    chart = repo / "charts" / "trainer"
    write(
        chart / "templates" / "guard.yaml",
        '{{- if eq .Release.Namespace "default" }}{{ fail "not in the default namespace" }}{{- end }}\n',
    )
    template = DEPLOYMENT_TEMPLATE.replace(
        "-trainer\n", "-trainer\n  namespace: {{ .Release.Namespace }}\n", 1
    )
    write(chart / "templates" / "deployment.yaml", template)
    [refused] = [finding for finding in lint(capsys, "charts") if finding["rule"] == "GP004"]
    assert refused["message"].startswith(
        "helm template gpupolicy-lint-trainer-chart charts/trainer failed: Error: execution"
    )
    assert refused["message"].endswith(
        "/templates/guard.yaml:1:44): not in the default namespace"
        " (gpupolicy renders a chart with the policy's helm.valuesFiles and helm.namespace)"
    )
    write(repo / "policy.yaml", "helm:\n  namespace: gpu-system\n")
    findings = lint(capsys, "--policy", "policy.yaml", "charts")
    assert not where(findings, "GP004")
    assert {
        finding["object"]["namespace"] for finding in findings if finding["object"]["kind"] == "Deployment"
    } == {"gpu-system"}
    # Not a DNS label: the policy is refused before anything is rendered.
    write(repo / "policy.yaml", "helm:\n  namespace: --post-renderer=x\n")
    assert main(["lint", "--no-repo-policy", "--policy", "policy.yaml", "charts"]) == 2
    assert "policy key helm.namespace" in capsys.readouterr().err


def test_one_template_given_renders_its_chart_and_reports_only_that_template(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    findings = lint(capsys, "charts/trainer/templates/service.yaml")
    assert {finding["file"] for finding in findings} <= {"charts/trainer/templates/service.yaml"}
    assert not where(findings, "GP004")
    main(["lint", "--no-repo-policy", "charts/trainer/templates/service.yaml"])
    assert capsys.readouterr().out.splitlines()[-1].endswith("in 1 objects from 1 files")
    findings = lint(
        capsys, "charts/trainer/templates/deployment.yaml", "charts/trainer/templates/service.yaml"
    )
    assert ("charts/trainer/templates/deployment.yaml", line_of(DEPLOYMENT_TEMPLATE, "image:")) in where(
        findings, "GP701"
    )
    assert not where(findings, "GP004")


def test_a_values_file_given_renders_its_whole_chart(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    findings = lint(capsys, "--context-root", ".", "charts/trainer/values.yaml")
    assert "charts/trainer/templates/deployment.yaml" in {finding["file"] for finding in findings}
    assert not where(findings, "GP003")


def test_a_subchart_template_is_traced_through_its_parent(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sub = repo / "charts" / "trainer" / "charts" / "sidecar"
    write(sub / "Chart.yaml", "apiVersion: v2\nname: sidecar\nversion: 0.1.0\n")
    write(sub / "templates" / "job.yaml", BASE_DEPLOYMENT.replace("name: worker", "name: sidecar"))
    findings = lint(capsys, "charts/trainer/charts/sidecar/templates/job.yaml")
    assert {finding["file"] for finding in findings} == {"charts/trainer/charts/sidecar/templates/job.yaml"}
    assert ("charts/trainer/charts/sidecar/templates/job.yaml", line_of(BASE_DEPLOYMENT, "image:")) in where(
        findings, "GP701"
    )


def test_a_library_chart_is_skipped_not_a_failed_render(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Helm refuses to render a library chart by design ("library charts are not installable"): the
    charts that depend on it render its templates. A repository's own `common` library is no error."""
    library = repo / "library"
    write(library / "Chart.yaml", "apiVersion: v2\nname: common\nversion: 0.1.0\ntype: library\n")
    write(library / "templates" / "_labels.yaml", '{{- define "common.labels" -}}app: x{{- end }}\n')
    assert main(["lint", "--no-repo-policy", "--format", "json", "library"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["findings"] == []
    assert [(item["file"], item["reason"].split(" (")[0]) for item in report["skipped"]] == [
        ("library", "a Helm library chart")
    ]


# -- kustomize -------------------------------------------------------------------------------------


def test_a_base_is_reported_once_through_its_overlays(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    findings = lint(capsys, "apps")
    image_line = line_of(BASE_DEPLOYMENT, "image:")
    (gp701,) = [finding for finding in findings if finding["rule"] == "GP701"]
    assert (gp701["file"], gp701["line"]) == ("apps/base/deployment.yaml", image_line)
    assert gp701["message"].endswith("(as rendered by apps/overlays/dev, apps/overlays/prod)")
    # prod's patch makes a mismatch only prod has: shown once, naming prod.
    (gp102,) = [finding for finding in findings if finding["rule"] == "GP102"]
    assert gp102["file"] == "apps/base/deployment.yaml"
    assert gp102["message"].endswith("(as rendered by apps/overlays/prod)")
    assert "apps/base" not in {finding["file"] for finding in findings}


def test_a_base_file_given_is_linted_through_the_overlays(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    findings = lint(capsys, "apps/base/deployment.yaml")
    assert {finding["file"] for finding in findings} == {"apps/base/deployment.yaml"}
    assert where(findings, "GP701") == [("apps/base/deployment.yaml", line_of(BASE_DEPLOYMENT, "image:"))]
    assert [finding["object"]["namespace"] for finding in findings if finding["rule"] == "GP102"] == ["prod"]


def test_a_patch_file_given_reports_the_objects_it_patches(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    findings = lint(capsys, "apps/overlays/prod/gpus.yaml")
    assert {finding["file"] for finding in findings} == {"apps/overlays/prod/gpus.yaml"}
    (gp102,) = [finding for finding in findings if finding["rule"] == "GP102"]
    assert gp102["object"]["namespace"] == "prod"
    assert gp102["line"] == line_of(PROD_PATCH, "resources:")  # requests are not in the patch


def test_build_annotations_are_removed_before_the_rules(repo: Path) -> None:
    (source,) = iter_sources(["apps/overlays/prod"])
    (deployment,) = source.load().resources
    assert "annotations" not in deployment.obj["metadata"]
    assert deployment.file == "apps/base/deployment.yaml"


def test_no_remote_still_refuses_a_remote_base(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(
        repo / "apps" / "overlays" / "dev" / "kustomization.yaml",
        "resources:\n  - ../../base\n  - https://github.com/acme/manifests//base?ref=v1\n",
    )
    findings = lint(capsys, "--no-remote", "apps/overlays/dev")
    (gp004,) = [finding for finding in findings if finding["rule"] == "GP004"]
    assert gp004["file"] == "apps/overlays/dev/kustomization.yaml" and "--no-remote" in gp004["message"]


# -- the stream and the in-memory path agree ------------------------------------------------------


def test_streaming_agrees_on_rendered_parts(repo: Path) -> None:
    policy = default_policy()
    assert_streams_the_same(list(iter_sources(["."])), policy)
    for given in (["charts/trainer/templates/deployment.yaml"], ["apps/base/deployment.yaml"]):
        sources, context = sources_with_context(given, repo, session=RenderSession())
        assert [source.part.only for source in sources if source.part.only]
        assert any(source.part.without for source in context)
        assert_streams_the_same(sources, policy, context)


# -- the pre-commit hook ---------------------------------------------------------------------------


@pytest.mark.slow
def test_pre_commit_reports_a_changed_template_and_a_changed_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not PRE_COMMIT.is_file() or shutil.which("git") is None:
        pytest.skip("needs git and pre-commit (in the test extra)")
    root = make_repo(tmp_path / "gitops")
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "test@example.com")
    git(root, "config", "user.name", "test")
    write(root / ".pre-commit-config.yaml", yaml.safe_dump(hook_config(), sort_keys=False))
    git(root, "add", ".")
    git(root, "commit", "-q", "--no-verify", "-m", "initial")
    helm_on_path(monkeypatch)
    result = run([str(PRE_COMMIT), "run", "--all-files"], root, tmp_path)
    output = result.stdout + result.stderr
    assert "GP004" not in output and "GP003" not in output, output
    assert re.search(r"^charts/trainer/templates/deployment\.yaml:\d+:\d+: GP701", output, re.M), output
    assert len(re.findall(r"^apps/base/deployment\.yaml:\d+:\d+: GP701", output, re.M)) == 1, output

    # A changed values file: its chart rendered again, the finding on the template.
    write(root / "charts" / "trainer" / "values.yaml", VALUES.replace("gpus: 1", "gpus: 4"))
    git(root, "add", ".")
    result = run([str(PRE_COMMIT), "run", "--files", "charts/trainer/values.yaml"], root, tmp_path)
    output = result.stdout + result.stderr
    line = line_of(DEPLOYMENT_TEMPLATE, "nvidia.com/gpu: 1")
    assert result.returncode != 0, output
    assert re.search(rf"^charts/trainer/templates/deployment\.yaml:{line}:\d+: GP102", output, re.M), output

    # A changed template: only its objects are reported, on it.
    result = run(
        [str(PRE_COMMIT), "run", "--files", "charts/trainer/templates/deployment.yaml"], root, tmp_path
    )
    output = result.stdout + result.stderr
    reported = re.findall(r"^(\S+?):\d+:\d+: GP\d+", output, re.M)
    assert reported and set(reported) == {"charts/trainer/templates/deployment.yaml"}, output
    result = run([str(PRE_COMMIT), "run", "--files", "charts/trainer/templates/service.yaml"], root, tmp_path)
    assert "deployment.yaml" not in result.stdout + result.stderr

    # A changed base, judged through the overlays that use it.
    write(
        root / "apps" / "base" / "deployment.yaml",
        BASE_DEPLOYMENT.replace(
            "limits:\n              nvidia.com/gpu: 1", "limits:\n              nvidia.com/gpu: 3"
        ),
    )
    result = run([str(PRE_COMMIT), "run", "--files", "apps/base/deployment.yaml"], root, tmp_path)
    output = result.stdout + result.stderr
    assert re.search(
        r"^apps/base/deployment\.yaml:\d+:\d+: GP102 .*as rendered by apps/overlays/dev", output, re.M
    ), output
    assert "apps/overlays/prod/gpus.yaml" not in output


# -- suppression comments in the files a person edits ----------------------------------------------

IGNORE = "          # gpupolicy: ignore GP701 -- pulled through the registry mirror, which pins\n"


def test_an_ignore_comment_in_a_template_or_a_base_suppresses_there(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in (repo / "charts/trainer/templates/deployment.yaml", repo / "apps/base/deployment.yaml"):
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("          image:", IGNORE + "          image:", 1), encoding="utf-8")
    main(["lint", "--no-repo-policy", "--format", "json", "."])
    report = json.loads(capsys.readouterr().out)
    assert not where(report["findings"], "GP701")
    assert not where(report["findings"], "GP011")  # the base's comment is one comment, used
    suppressed = sorted(item["file"] for item in report["suppressed"] if item["rule"] == "GP701")
    assert suppressed == ["apps/base/deployment.yaml", "charts/trainer/templates/deployment.yaml"]


# -- tracing, on its own ---------------------------------------------------------------------------


def test_a_source_comment_names_a_file_inside_the_chart_only(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    write(chart / "templates" / "a.yaml", "kind: ConfigMap\n")
    write(tmp_path / "secret.yaml", "kind: Secret\n")
    assert (
        helm_template_file(chart, "any-name/templates/a.yaml") == (chart / "templates" / "a.yaml").resolve()
    )
    assert helm_template_file(chart, "any-name/../secret.yaml") is None  # leaves the chart
    assert helm_template_file(chart, "any-name/charts/sub-0.1.0.tgz/templates/x.yaml") is None  # packaged
    assert helm_template_file(chart, "no-slash") is None


def test_a_field_is_found_by_its_keys_and_falls_back_to_the_kind_line(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    write(path, "# a comment\n---\n" + DEPLOYMENT_TEMPLATE)
    text = SourceText.read(path)
    origin = Origin("t.yaml", text, text.kind_lines("Deployment")[0])
    offset = 2  # the comment and the document marker
    containers = ("spec", "template", "spec", "containers", 0)
    assert origin.position((*containers, "image")) == (offset + line_of(DEPLOYMENT_TEMPLATE, "image:"), 11)
    limits = (*containers, "resources", "limits")
    assert origin.position((*limits, "nvidia.com/gpu"))[0] == offset + line_of(DEPLOYMENT_TEMPLATE, "gpu: {{")
    # a key the template does not hold (Helm writes it): the nearest key above it that it holds
    assert origin.position((*limits, "amd.com/gpu"))[0] == offset + line_of(DEPLOYMENT_TEMPLATE, "limits:")
    assert origin.position(())[0] == offset + 2  # kind: Deployment
    assert Origin("t.yaml", text, None).position(("nothing",)) == (1, 1)


SIDECARS_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
spec:
  template:
    spec:
      containers:
        - name: first
          image: a
        {{- range .Values.sidecarContainers }}
        - name: {{ .name }}
          image: {{ .image }}
          {{- if .command }}
          command: {{ toYaml .command }}
          {{- end }}
        {{- end }}
        - name: {{ include "app.fullname" . }}
          image: "{{ .Values.image }}"
        - name: last
          image: b
"""


@pytest.mark.parametrize(("sidecars", "middle"), [(0, None), (1, "sidecar"), (3, None)])
def test_an_item_written_after_a_range_is_counted_from_the_lists_end(
    tmp_path: Path, sidecars: int, middle: str | None
) -> None:
    """LocalAI's chart writes its sidecars in a `range` before its main container: with no sidecar
    the main container is the list's second item, and GP401 pointed at the range's `- name:`,
    a line that rendered nothing. Items before the first action count from the start, those after
    the last from the end; one between (a rendered sidecar) is found where it is written."""
    path = tmp_path / "deployment.yaml"
    write(path, SIDECARS_TEMPLATE)
    text = SourceText.read(path)
    origin = Origin("deployment.yaml", text, text.kind_lines("Deployment")[0])
    names = ["first", *(f"side-{n}" for n in range(sidecars)), "main", "last"]
    obj = {"spec": {"template": {"spec": {"containers": [{"name": name, "image": "x"} for name in names]}}}}
    containers = ("spec", "template", "spec", "containers")

    def line(index: int) -> int:
        return origin.position((*containers, index, "image"), obj)[0]

    assert line(0) == line_of(SIDECARS_TEMPLATE, "image: a")
    assert line(len(names) - 2) == line_of(SIDECARS_TEMPLATE, 'image: "{{ .Values.image }}"')
    assert line(len(names) - 1) == line_of(SIDECARS_TEMPLATE, "image: b")
    if middle is not None:
        assert line(1) == line_of(SIDECARS_TEMPLATE, "image: {{ .image }}")
    # Without the rendered object (or a list it does not have) the written place is all there is.
    assert origin.position((*containers, 1, "image"))[0] == line_of(SIDECARS_TEMPLATE, "image: {{ .image }}")


def test_a_symlink_loop_named_by_a_kustomization_or_beside_a_chart_is_no_crash(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo / "apps" / "base" / "loop-a.yaml").symlink_to(repo / "apps" / "base" / "loop-b.yaml")
    (repo / "apps" / "base" / "loop-b.yaml").symlink_to(repo / "apps" / "base" / "loop-a.yaml")
    write(repo / "apps" / "base" / "kustomization.yaml", "resources:\n  - deployment.yaml\n  - loop-a.yaml\n")
    (repo / "charts" / "trainer" / "values-loop.yaml").symlink_to(
        repo / "charts" / "trainer" / "values-loop.yaml"
    )
    main(
        [
            "lint",
            "--no-repo-policy",
            "--context-root",
            ".",
            "apps/base/loop-a.yaml",
            "charts/trainer/values-loop.yaml",
        ]
    )
    main(["lint", "--no-repo-policy", "."])
    out = capsys.readouterr().out
    assert "kubectl kustomize apps/overlays/dev failed" in out  # kustomize's own error, once per overlay


def test_a_kustomization_or_chart_file_given_stands_for_the_whole_overlay_or_chart(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    findings = lint(capsys, "apps/overlays/prod/kustomization.yaml", "charts/trainer/Chart.yaml")
    files = {finding["file"] for finding in findings}
    assert files == {"apps/base/deployment.yaml", "charts/trainer/templates/deployment.yaml"}
    assert {
        finding["object"]["namespace"] for finding in findings if finding["file"].startswith("apps/")
    } == {"prod"}
    # a base's kustomization file: every overlay that uses the base
    findings = lint(capsys, "apps/base/kustomization.yaml")
    assert {finding["object"]["namespace"] for finding in findings if finding["rule"] == "GP106"} == {"dev"}
    assert "(as rendered by apps/overlays/dev, apps/overlays/prod)" in " ".join(
        f["message"] for f in findings
    )


TWO_CONTAINERS = """\
apiVersion: v1
kind: Pod
metadata:
  name: two
spec:
  containers:
  - name: first
    image: a:1
  {{- if .Values.second }}
  - name: second
    image: b:1
    resources:
      limits:
        nvidia.com/gpu: 1
  {{- end }}
  volumes:
    - name: resources
"""


def test_list_items_are_counted_and_a_key_is_searched_in_its_own_block(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    write(path, TWO_CONTAINERS)
    text = SourceText.read(path)
    origin = Origin("pod.yaml", text, text.kind_lines("Pod")[0])
    containers = ("spec", "containers")
    assert origin.position((*containers, 1, "image")) == (line_of(TWO_CONTAINERS, "image: b:1"), 5)
    assert origin.position((*containers, 0, "image"))[0] == line_of(TWO_CONTAINERS, "image: a:1")
    # the first container has no resources: its item, not the second container's resources
    assert origin.position((*containers, 0, "resources", "limits"))[0] == line_of(
        TWO_CONTAINERS, "- name: first"
    )
    assert origin.position((*containers, 1, "resources", "limits", "nvidia.com/gpu"))[0] == line_of(
        TWO_CONTAINERS, "nvidia.com/gpu: 1"
    )
    assert origin.position((*containers, 2, "image"))[0] == line_of(TWO_CONTAINERS, "containers:")


@needs_helm
def test_a_template_gated_on_a_controllers_api_renders_where_the_policy_serves_it(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NVIDIA's RAG blueprint and nv-ingest render each NIMService only where
    apps.nvidia.com/v1alpha1 is served: `helm template` serves no CRD's API, and every GPU
    workload of both charts went unlinted without a word."""
    chart = repo / "charts" / "trainer"
    write(
        chart / "templates" / "nim.yaml",
        '{{- if .Capabilities.APIVersions.Has "apps.nvidia.com/v1alpha1/NIMService" }}\n'
        "apiVersion: apps.nvidia.com/v1alpha1\nkind: NIMService\nmetadata:\n  name: llm\n"
        "spec:\n  image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: '1.8.0'}\n"
        "  resources: {limits: {nvidia.com/gpu: 1}}\n{{- end }}\n",
    )
    kinds = {finding["object"]["kind"] for finding in lint(capsys, "charts")}
    assert "NIMService" in kinds
    write(repo / "policy.yaml", "helm:\n  apiVersions: []\n")
    kinds = {finding["object"]["kind"] for finding in lint(capsys, "--policy", "policy.yaml", "charts")}
    assert "NIMService" not in kinds


@needs_helm
def test_two_charts_are_two_releases_whose_services_select_only_their_own_pods(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NVIDIA's Triton tutorials: a frontend chart's Service and PDB select `app: {{ .Release.Name }}`,
    and a multi-node chart's MPI workers carry the same label. Rendered as one release name, the
    frontend's Service made the workers servers (GP401, GP901) and its PDB covered them."""
    for chart, body in (
        ("frontend", "apiVersion: v1\nkind: Service\nmetadata: {name: '{{ .Release.Name }}'}\n"
         "spec: {selector: {app: '{{ .Release.Name }}'}, ports: [{port: 8000}]}\n"),
        ("workers", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: '{{ .Release.Name }}-worker'}\nspec:\n"
         "  selector: {matchLabels: {app: '{{ .Release.Name }}'}}\n  template:\n"
         "    metadata: {labels: {app: '{{ .Release.Name }}'}}\n    spec:\n      containers:\n"
         "      - name: worker\n        image: nvcr.io/nvidia/tritonserver:24.08-trtllm-python-py3\n"
         "        command: [python3, ./server.py, worker]\n"
         "        resources: {limits: {nvidia.com/gpu: 1}}\n"),
    ):  # fmt: skip
        write(repo / "tutorials" / chart / "Chart.yaml", f"apiVersion: v2\nname: {chart}\nversion: 0.1.0\n")
        write(repo / "tutorials" / chart / "templates" / "all.yaml", body)
    findings = lint(capsys, "tutorials")
    assert not where(findings, "GP401") and not where(findings, "GP901")


@needs_helm
def test_a_chart_renders_for_the_kubernetes_the_policy_names(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ClearML's charts declare `kubeVersion: >= 1.21.0-0 < 1.32.0-0`: Helm rendered them for its
    own default (v1.35), and every one was a GP004 whatever the policy's kubernetesVersion said."""
    chart = repo / "charts" / "trainer"
    write(
        chart / "Chart.yaml",
        'apiVersion: v2\nname: trainer-chart\nversion: 0.1.0\nkubeVersion: ">= 1.21.0-0 < 1.32.0-0"\n',
    )
    [refused] = [finding for finding in lint(capsys, "charts") if finding["rule"] == "GP004"]
    assert "requires kubeVersion" in refused["message"]
    assert refused["message"].endswith("(gpupolicy renders charts for the policy's kubernetesVersion)")
    write(repo / "policy.yaml", 'kubernetesVersion: "1.31"\n')
    findings = lint(capsys, "--policy", "policy.yaml", "charts")
    assert not where(findings, "GP004") and any(f["object"]["kind"] == "Deployment" for f in findings)
