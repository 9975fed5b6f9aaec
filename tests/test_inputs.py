"""Where manifests come from: directories, excludes, Helm/envsubst templates (GP004), kustomize."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from gpupolicy.cli.main import main
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.loading.inputs import (
    LIBRARY_CHART,
    RENDERER_ERROR_CHARS,
    STARTER_CHART,
    display_path,
    is_manifest_name,
    iter_manifest_files,
    iter_sources,
    load_paths,
    load_text,
    renderer_error,
    resolved_cwd,
    sources_with_context,
)
from gpupolicy.policy.loading import default_policy

GPU_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  namespace: ai-lab
spec:
  replicas: 1
  selector:
    matchLabels: {app: vllm}
  template:
    metadata:
      labels: {app: vllm}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            requests: {cpu: "4", memory: 24Gi, nvidia.com/gpu: 1}
            limits: {memory: 24Gi, nvidia.com/gpu: 2}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def namespace(name: str) -> str:
    return f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "repo"
    write(root / "a.yaml", namespace("a"))
    write(root / "apps" / "b.yml", namespace("b"))
    write(
        root / "apps" / "deep" / "c.json",
        '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "c"}}',
    )
    write(root / "apps" / "deep" / "generated.yaml", namespace("generated"))
    write(root / ".hidden" / "d.yaml", namespace("hidden"))
    write(root / "apps" / ".git" / "e.yaml", namespace("git"))
    write(root / "values.yaml", "replicaCount: 2\n")
    write(root / "values-prod.yaml", "replicaCount: 3\n")
    write(root / "Chart.yaml", "apiVersion: v2\nname: x\nversion: 0.1.0\n")
    write(root / "README.md", "# not a manifest\n")
    write(root / "skip" / "f.yaml", namespace("skipped"))
    return root


def names(paths: list[str], exclude: list[str] | None = None) -> list[str]:
    loaded = load_paths(paths, exclude=exclude or [])
    return sorted(resource.name for resource in loaded.resources)


def test_directories_are_walked_recursively_skipping_hidden_folders(tree: Path) -> None:
    assert names(["repo"]) == ["a", "b", "c", "generated", "skipped"]


def test_values_and_chart_files_are_not_manifests(tree: Path) -> None:
    found = [path.relative_to(tree).as_posix() for path in iter_manifest_files(tree)]
    # values.yaml, Chart.yaml, non-YAML files and hidden folders are skipped; the order is stable;
    # another values file outside a chart is read, and what it holds decides
    assert found == [
        "a.yaml",
        "apps/b.yml",
        "apps/deep/c.json",
        "apps/deep/generated.yaml",
        "skip/f.yaml",
        "values-prod.yaml",
    ]
    loaded = load_paths([str(tree / "values-prod.yaml")])
    assert loaded.resources == [] and [item.reason for item in loaded.skipped] == [
        "not a Kubernetes object (no apiVersion, kind or metadata)"
    ]


def test_manifests_rendered_into_a_values_named_file_are_linted(tmp_path: Path) -> None:
    """`helm template -f values-01-minimal.yaml > out/values-01-minimal.yaml`: a folder of such
    files once linted as 0 objects from 0 files."""
    write(tmp_path / "values-01-minimal.yaml", namespace("rendered"))
    write(tmp_path / "values-prod.yaml", "replicaCount: 3\nimage: {tag: v1}\n")
    loaded = load_paths([str(tmp_path)])
    assert [resource.name for resource in loaded.resources] == ["rendered"]
    assert [Path(item.file).name for item in loaded.skipped] == ["values-prod.yaml"]


def test_a_changed_values_named_file_outside_a_chart_is_linted_as_a_walk_would(tmp_path: Path) -> None:
    """pre-commit passes only the changed file: a rendered `values-01-minimal.yaml` is read as a
    folder's walk reads it (it once was dropped by its name), a chart's `values.yaml` still is not."""
    write(tmp_path / "out" / "values-01-minimal.yaml", namespace("rendered"))
    write(tmp_path / "out" / "values.yaml", "replicaCount: 3\n")
    given = [str(tmp_path / "out" / "values-01-minimal.yaml"), str(tmp_path / "out" / "values.yaml")]
    sources, _ = sources_with_context(given, tmp_path)
    assert [source.name for source in sources] == [display_path(tmp_path / "out" / "values-01-minimal.yaml")]
    assert is_manifest_name("values-01-minimal.yaml") and not is_manifest_name("values.yaml")


def test_exclude_globs(tree: Path) -> None:
    assert names(["repo"], ["skip"]) == ["a", "b", "c", "generated"]
    assert names(["repo"], ["skip/"]) == ["a", "b", "c", "generated"]
    assert names(["repo"], ["*.json"]) == ["a", "b", "generated", "skipped"]
    assert names(["repo"], ["generated.yaml"]) == ["a", "b", "c", "skipped"]


def test_exclude_globs_are_relative_to_the_given_directory(tree: Path) -> None:
    assert names(["repo"], ["apps/deep/*"]) == ["a", "b", "skipped"]
    assert names(["repo"], ["apps/deep"]) == ["a", "b", "skipped"]
    assert names(["repo"], ["apps/deep/generated.yaml"]) == ["a", "b", "c", "skipped"]


def test_a_walk_names_files_as_display_path_does(tree: Path) -> None:
    """A walk resolves the current directory once (`resolved_cwd`) for every file it names."""
    expected = [display_path(path) for path in iter_manifest_files(Path("repo"))]
    assert expected == ["repo/a.yaml", "repo/apps/b.yml", "repo/apps/deep/c.json",
                        "repo/apps/deep/generated.yaml", "repo/skip/f.yaml", "repo/values-prod.yaml"]  # fmt: skip
    for given in (["repo"], [str(tree.resolve())], ["repo", str(tree.resolve())]):
        # the same folder given twice is one walk's files once
        assert [source.name for source in iter_sources(given)] == expected
    outside = Path("/")
    assert display_path(outside, here=resolved_cwd()) == display_path(outside) == "/"


def test_a_file_given_explicitly_is_loaded(tree: Path) -> None:
    loaded = load_paths(["repo/apps/b.yml"])
    assert [r.name for r in loaded.resources] == ["b"]
    assert loaded.files == ["repo/apps/b.yml"]
    assert loaded.resources[0].file == "repo/apps/b.yml"


# -- GP004: templates ---------------------------------------------------------------------

HELM_TEMPLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "llm.fullname" . }}
spec:
  replicas: {{ .Values.replicaCount }}
"""


def gp004(paths: list[str]) -> list[tuple[str | None, int | None, str]]:
    loaded = load_paths(paths)
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    return [(f.file, f.line, f.message) for f in report.findings if f.rule_id == "GP004"]


def helm_chart(root: Path) -> Path:
    chart = root / "charts" / "llm"
    write(chart / "Chart.yaml", "apiVersion: v2\nname: llm\nversion: 0.1.0\n")
    write(chart / "values.yaml", "replicaCount: 2\n")
    write(chart / "templates" / "deployment.yaml", HELM_TEMPLATE_FULL)
    write(
        chart / "templates" / "_helpers.tpl", '{{- define "llm.fullname" -}}{{ .Release.Name }}-llm{{- end }}'
    )
    return chart


HELM_TEMPLATE_FULL = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "llm.fullname" . }}
  namespace: ai-lab
spec:
  replicas: {{ .Values.replicaCount }}
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
            requests: {nvidia.com/gpu: 2}
            limits: {nvidia.com/gpu: 1}
"""


def without_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH of one empty folder: no helm, no kubectl."""
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))


def test_a_chart_without_helm_is_one_gp004_with_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    helm_chart(tmp_path)
    without_tools(tmp_path, monkeypatch)
    ((file, line, message),) = gp004(["charts"])  # one finding for the chart, not one per template
    assert file == "charts/llm"
    assert line is None
    assert "helm template gpupolicy-lint-llm charts/llm | gpupolicy lint -" in message


HELM = shutil.which("helm") or next(
    (str(path) for path in [Path(__file__).resolve().parent.parent / ".tools" / "helm"] if path.is_file()),
    None,
)


@pytest.mark.skipif(
    HELM is None, reason="helm is not installed (charts/install-helm.sh puts it at .tools/helm)"
)
def test_a_chart_is_rendered_with_helm_and_linted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert HELM is not None
    monkeypatch.chdir(tmp_path)
    helm_chart(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(HELM).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    loaded = load_paths(["charts"])
    assert loaded.files == ["charts/llm"]
    (deployment,) = [r for r in loaded.resources if r.kind == "Deployment"]
    assert deployment.name == "gpupolicy-lint-llm-llm" and deployment.rendered_from == "helm"
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    (gp102,) = [f for f in report.findings if f.rule_id == "GP102"]
    # Reported on the template (Helm's `# Source:` comment), at the line of the field in it.
    assert gp102.file == "charts/llm/templates/deployment.yaml"
    assert (
        gp102.line == HELM_TEMPLATE_FULL.splitlines().index("            requests: {nvidia.com/gpu: 2}") + 1
    )
    assert not [f for f in report.findings if f.rule_id == "GP004"]


@pytest.mark.skipif(
    HELM is None, reason="helm is not installed (charts/install-helm.sh puts it at .tools/helm)"
)
def test_a_chart_that_fails_to_render_says_why_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NVIDIA's device-plugin chart refuses the default namespace with a `fail` over several lines,
    # which Helm follows with a hint to use --debug: the finding says the chart's reason.
    assert HELM is not None
    monkeypatch.chdir(tmp_path)
    chart = helm_chart(tmp_path)
    reason = (
        "Running in the default namespace is not recommended.\\nSet allowDefaultNamespace=true to bypass."
    )
    write(
        chart / "templates" / "validation.yaml",
        '{{- if eq .Release.Namespace "default" }}{{ fail "' + reason + '" }}{{- end }}\n',
    )
    monkeypatch.setenv("PATH", f"{Path(HELM).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    ((file, _, message),) = gp004(["charts"])
    assert file == "charts/llm"
    assert "\n" not in message and "--debug" not in message
    assert message.startswith("helm template gpupolicy-lint-llm charts/llm failed: Error: execution error at")
    assert message.endswith(
        "Running in the default namespace is not recommended. Set allowDefaultNamespace=true to bypass. "
        "(gpupolicy renders a chart with the policy's helm.valuesFiles and helm.namespace)"
    )


@pytest.mark.skipif(HELM is None, reason="needs helm (charts/install-helm.sh)")
def test_a_chart_reading_values_it_does_not_give_says_how_to_give_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GKE's gpu-recipes keep shared charts whose recipes install them with -f values.yaml: alone,
    `.Values.job.gpus` is a nil pointer, and the finding says where a lint takes values from."""
    assert HELM is not None
    monkeypatch.chdir(tmp_path)
    chart = helm_chart(tmp_path)
    write(chart / "templates" / "job.yaml", "gpus: {{ .Values.job.gpus }}\n")
    monkeypatch.setenv("PATH", f"{Path(HELM).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    ((_, _, message),) = gp004(["charts"])
    assert "nil pointer evaluating" in message
    assert message.endswith(
        "(gpupolicy renders a chart with the policy's helm.valuesFiles and helm.namespace)"
    )


def test_a_renderers_error_is_its_error_paragraph_on_one_line() -> None:
    helm = "Error: execution error at (c/t.yaml:1:4): \nfirst\nsecond\n\nUse --debug flag to render out invalid YAML\n"
    assert renderer_error(helm) == "Error: execution error at (c/t.yaml:1:4): first second"
    # NVIDIA's DRA driver chart opens its `fail` text with blank lines.
    blank_first = (
        "Error: execution error at (c/v.yaml:42:4): \n\nthe namespace must not be default\n\nUse --debug\n"
    )
    assert (
        renderer_error(blank_first)
        == "Error: execution error at (c/v.yaml:42:4): the namespace must not be default"
    )
    kustomize = "some warning\nerror: accumulating resources: missing.yaml: no such file\n"
    assert renderer_error(kustomize) == "error: accumulating resources: missing.yaml: no such file"
    assert renderer_error("panic\nlast words\n") == "last words"
    assert renderer_error("") == ""
    long = renderer_error("Error: " + "x" * 5000 + " the innermost cause")
    assert len(long) == RENDERER_ERROR_CHARS and long.startswith("Error: xxx")
    assert "…" in long and long.endswith("x the innermost cause")


def test_kubectls_klog_error_on_one_line_is_its_quoted_error() -> None:
    klog = 'E1206 20:19:35.597030    9559 run.go:72] "command failed" err="accumulating: \\"x\\" missing"\n'
    assert renderer_error(klog) == 'accumulating: "x" missing'


def test_a_renderer_that_crashed_is_said_to_have_crashed() -> None:
    """kustomize v5.5.0 panics on ODH's odh-xks overlay: the finding quoted a stack frame."""
    stderr = (
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x1]\n\ngoroutine 1 [running]:\n"
        "sigs.k8s.io/kustomize/api/krusty.(*Kustomizer).Run(...)\n"
        "\tk8s.io/kubernetes/cmd/kubectl-sdk/kubectl.go:41 +0x85\n"
    )
    assert renderer_error(stderr) == (
        "the renderer crashed (panic: runtime error: invalid memory address or nil pointer dereference); "
        "a bug of the tool on this input, not an error it reports"
    )


def test_kubectls_klog_error_is_read_to_its_closing_line() -> None:
    """kubectl 1.3x logs a failed kustomize through klog: the error sits between `err=<` and `>`."""
    klog = (
        'E1206 20:17:57.271470    8715 run.go:72] "command failed" err=<\n'
        "\taccumulating resources: accumulation err='accumulating resources from 'https://example.com/m.yaml': "
        "no such host': failed to run '/usr/bin/git fetch --depth=1 https://example.com/x HEAD'\n"
        "\t: exit status 128\n"
        " >\n"
    )
    assert renderer_error(klog) == (
        "accumulating resources: accumulation err='accumulating resources from 'https://example.com/m.yaml': "
        "no such host': failed to run '/usr/bin/git fetch --depth=1 https://example.com/x HEAD' : exit status 128"
    )


def test_a_helm_template_given_as_a_file_stands_for_its_chart_rendered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without helm, the chart of the template is one GP004 saying how to render it (not a
    GP004 per template action)."""
    monkeypatch.chdir(tmp_path)
    chart = helm_chart(tmp_path)
    without_tools(tmp_path, monkeypatch)
    ((file, line, message),) = gp004([str((chart / "templates" / "deployment.yaml").relative_to(tmp_path))])
    assert file == "charts/llm"
    assert line is None
    assert "helm template gpupolicy-lint-llm charts/llm | gpupolicy lint -" in message


def test_helm_template_outside_a_chart_still_says_helm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "deployment.yaml", HELM_TEMPLATE)
    ((_, line, message),) = gp004(["deployment.yaml"])
    assert line == 4
    assert "helm template" in message
    assert "envsubst" not in message


def test_an_operators_go_template_outside_a_chart_is_not_called_helm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVIDIA's NIM operator renders its manifests/ itself (`{{ .Name }}`, `{{ .Namespace }}`): still
    not a manifest, but no Helm command renders it."""
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "manifests" / "deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Name }}\n  namespace: {{ .Namespace }}\n",
    )
    ((_, line, message),) = gp004(["manifests/deployment.yaml"])
    assert line == 4
    assert message.startswith("file holds Go template actions ({{ ... }}) and names none of Helm's")
    assert "helm" not in message.replace("Helm's", "")


def test_argo_and_flagger_placeholders_are_not_helm() -> None:
    text = (
        "apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata: {name: p95}\n"
        "spec:\n  metrics:\n    - name: p95\n      provider:\n        prometheus:\n"
        "          query: histogram_quantile(0.95, rate(x{service='{{args.service}}'}[5m]))\n"
    )
    assert not [p for p in load_text(text, "a.yaml").problems if p.rule_id == "GP004"]


def test_placeholders_in_literal_fields_are_gp004_field_by_field_and_the_object_is_still_linted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A half-rendered file is still linted: each placeholder is one finding at its field (the
    webhook judges an admitted object the same way), and the rest of the object is checked."""
    monkeypatch.chdir(tmp_path)
    text = GPU_DEPLOYMENT.replace(
        "name: vllm\n  namespace: ai-lab", "name: ${NAME}\n  namespace: <NAMESPACE>"
    )
    write(tmp_path / "deploy.yaml", text.replace("vllm/vllm-openai:v0.6.3", "${IMAGE}"))
    loaded = load_paths(["deploy.yaml"])
    assert len(loaded.resources) == 1 and loaded.problems == []
    found = gp004(["deploy.yaml"])
    assert [(file, line) for file, line, _ in found] == [
        ("deploy.yaml", 4),
        ("deploy.yaml", 5),
        ("deploy.yaml", 16),
    ]
    assert "metadata.name holds the placeholder '${NAME}'" in found[0][2]
    assert "metadata.namespace holds the placeholder '<NAMESPACE>'" in found[1][2]
    assert all("render the manifest" in message for _, _, message in found)


def test_env_placeholder_in_an_image_is_gp004_at_the_image_and_the_object_is_still_linted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image is judged field by field (as the webhook judges an admitted object): the file is
    linted, and what the placeholder leaves intact is still checked."""
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "deploy.yaml", GPU_DEPLOYMENT.replace("vllm/vllm-openai:v0.6.3", "${REGISTRY}/vllm:latest")
    )
    loaded = load_paths(["deploy.yaml"])
    assert len(loaded.resources) == 1 and loaded.problems == []
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    [finding] = [f for f in report.findings if f.rule_id == "GP004"]
    assert (finding.file, finding.line, finding.path[-1]) == ("deploy.yaml", 16, "image")
    assert (
        "holds the placeholder '${REGISTRY}'" in finding.message and "render the manifest" in finding.message
    )
    assert "GP702" in {f.rule_id for f in report.findings}  # :latest is still seen


@pytest.mark.parametrize(
    "container_extra",
    [
        '          command: ["sh", "-c", "exec vllm serve ${MODEL}"]\n',
        '          args: ["--model", "${MODEL}"]\n',
        "          env:\n            - name: MODEL_PATH\n              value: /models/${MODEL}\n",
    ],
)
def test_env_placeholder_in_command_args_env_is_fine(container_extra: str) -> None:
    text = GPU_DEPLOYMENT.replace("          resources:\n", container_extra + "          resources:\n")
    loaded = load_text(text, "deploy.yaml")
    assert [p for p in loaded.problems if p.rule_id == "GP004"] == []
    assert len(loaded.resources) == 1


def test_env_placeholder_in_configmap_data_is_fine() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: entrypoint\n"
        'data:\n  run.sh: |\n    exec vllm serve "${MODEL}" --port "${PORT}"\n'
    )
    loaded = load_text(text, "cm.yaml")
    assert loaded.problems == [] and len(loaded.resources) == 1


def test_kubernetes_dependent_variables_are_not_placeholders() -> None:
    text = GPU_DEPLOYMENT.replace("name: vllm\n  namespace", "name: vllm-$(SUFFIX)\n  namespace")
    assert load_text(text, "deploy.yaml").problems == []


# -- kustomize ---------------------------------------------------------------------------------


def kustomize_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "overlays" / "prod"
    write(folder / "deployment.yaml", GPU_DEPLOYMENT)
    write(folder / "kustomization.yaml", "resources:\n  - deployment.yaml\nnamePrefix: prod-\n")
    return folder


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_kustomize_directory_is_rendered_and_findings_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    kustomize_dir(tmp_path)
    write(tmp_path / "plain.yaml", namespace("ai-lab"))
    loaded = load_paths(["."])
    assert sorted(loaded.files) == ["overlays/prod", "plain.yaml"]
    rendered = [r for r in loaded.resources if r.kind == "Deployment"]
    assert [r.name for r in rendered] == ["prod-vllm"]  # rendered, not the raw file
    assert rendered[0].rendered_from == "kustomize"
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    gp102 = [f for f in report.findings if f.rule_id == "GP102"]
    assert len(gp102) == 1
    assert gp102[0].file == "overlays/prod/deployment.yaml"  # the file kustomize read it from
    assert isinstance(gp102[0].line, int) and gp102[0].line > 0
    assert str(gp102[0].object) == "Deployment ai-lab/prod-vllm"


def test_kustomize_without_kubectl_is_gp004_with_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    kustomize_dir(tmp_path)
    without_tools(tmp_path, monkeypatch)
    ((file, line, message),) = gp004(["overlays"])
    assert file == "overlays/prod"
    assert line is None
    assert "kubectl kustomize overlays/prod | gpupolicy lint -" in message
    assert "kubectl is not on PATH" in message


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_broken_kustomization_is_gp004_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "k" / "kustomization.yaml", "resources:\n  - missing.yaml\n")
    ((file, _, message),) = gp004(["k"])
    assert file == "k"
    assert message.startswith("kubectl kustomize k failed: accumulating resources:")
    assert "missing.yaml: no such file or directory" in message
    assert "run.go" not in message and "command failed" not in message  # kubectl's klog prefix


# -- kustomize --no-remote ---------------------------------------------------------------------


@pytest.fixture
def recording_kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `kubectl` first on PATH that records each call in the returned file (its subcommand and
    the folder the wrapper kustomization names) and prints one Namespace: whether kubectl ran at
    all is what --no-remote decides."""
    calls = tmp_path / "kubectl-calls"
    folder = tmp_path / "fake-bin"
    script = folder / "kubectl"
    write(
        script,
        f'#!/bin/sh\necho "$1" >> {calls}\nsed -n "s/^- //p" "$2/kustomization.yaml" >> {calls}\nprintf "apiVersion: v1\\nkind: Namespace\\nmetadata:\\n  name: rendered\\n"\n',
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)
    return calls


def called(calls: Path) -> list[str]:
    """The subcommand and the name of the folder rendered (through the wrapper kustomization)."""
    subcommand, *entries = calls.read_text().split()
    (folder,) = [entry for entry in entries if "/" in entry]  # not buildMetadata's entries
    return [subcommand, Path(folder).name]


REMOTE_ENTRIES = [
    "https://github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v1.0.6",
    "github.com/kubernetes-sigs/kustomize/examples/multibases?ref=v1.0.6",
    "git@github.com:acme/manifests.git//base",
    "ssh://git@git.example.com/acme/manifests.git",
    "git::https://git.example.com/acme/manifests",
    "gh:acme/manifests//base",
    "example.com/acme/manifests/base",
    "../base?ref=main",
]


@pytest.mark.parametrize("entry", REMOTE_ENTRIES)
def test_no_remote_refuses_a_remote_base_before_kubectl_runs(recording_kubectl: Path, entry: str) -> None:
    write(Path("app/deployment.yaml"), GPU_DEPLOYMENT)
    write(Path("app/kustomization.yaml"), f"resources:\n  - deployment.yaml\n  - {entry}\n")
    loaded = load_paths(["app"], allow_remote=False)
    ((problem,),) = [loaded.problems]
    assert problem.rule_id == "GP004"
    assert (problem.file, problem.line, problem.column) == ("app/kustomization.yaml", 3, 5)
    assert problem.message.startswith(f"resources.1 names {entry!r}, a remote location; --no-remote")
    assert "\n" not in problem.message
    assert not recording_kubectl.exists()  # refused before kubectl ran: nothing was fetched
    assert loaded.resources == []


@pytest.mark.parametrize(
    ("field", "text", "where"),
    [
        ("components", "components:\n  - https://example.com/c.tar.gz\n", "components.0"),
        ("patches", "patches:\n  - path: https://example.com/patch.yaml\n", "patches.0.path"),
        ("crds", "crds:\n  - http://example.com/crd.json\n", "crds.0"),
        (
            "configMapGenerator",
            "configMapGenerator:\n  - name: c\n    files:\n      - cfg=https://example.com/x?version=1\n",
            "configMapGenerator.0.files.0",
        ),
        ("openapi", "openapi:\n  path: https://example.com/schema.json\n", "openapi.path"),
        ("transformers", "transformers:\n  - https://example.com/t.yaml\n", "transformers.0"),
    ],
)
def test_no_remote_reads_every_field_that_kustomize_fetches(
    recording_kubectl: Path, field: str, text: str, where: str
) -> None:
    write(Path("app/kustomization.yaml"), text)
    ((problem,),) = [load_paths(["app"], allow_remote=False).problems]
    assert problem.rule_id == "GP004" and problem.message.startswith(f"{where} names "), problem
    assert not recording_kubectl.exists()


def test_no_remote_follows_local_bases_to_a_remote_one(recording_kubectl: Path) -> None:
    write(Path("overlays/prod/kustomization.yaml"), "resources:\n  - ../../base\nnamePrefix: prod-\n")
    write(Path("base/kustomization.yaml"), "resources:\n  - ../common\n")
    write(Path("common/kustomization.yaml"), "resources:\n  - ../base\n  - https://example.com/x.yaml\n")
    ((problem,),) = [load_paths(["overlays"], allow_remote=False).problems]
    assert (problem.file, problem.line) == ("common/kustomization.yaml", 3)  # through a cycle, too
    assert not recording_kubectl.exists()


def test_no_remote_refuses_a_target_that_is_not_local(recording_kubectl: Path) -> None:
    write(Path("app/kustomization.yaml"), "resources:\n  - acme/manifests/base\n")
    ((problem,),) = [load_paths(["app"], allow_remote=False).problems]
    assert "not a local file or folder" in problem.message
    assert not recording_kubectl.exists()


def test_no_remote_renders_local_kustomizations(recording_kubectl: Path) -> None:
    """Inline patches and local files are not locations: kubectl runs as without the flag."""
    write(Path("base/deployment.yaml"), GPU_DEPLOYMENT)
    write(Path("base/kustomization.yaml"), "resources:\n  - deployment.yaml\n")
    write(
        Path("app/kustomization.yaml"),
        "resources:\n  - ../base\npatches:\n  - patch: |-\n      - op: add\n"
        "        path: /metadata/annotations/docs\n        value: https://example.com/x?ref=1\n"
        "configMapGenerator:\n  - name: c\n    literals: [url=https://example.com]\n",
    )
    loaded = load_paths(["app"], allow_remote=False)
    assert loaded.problems == []
    assert [resource.name for resource in loaded.resources] == ["rendered"]
    assert called(recording_kubectl) == ["kustomize", "app"]


def test_without_no_remote_kubectl_renders_remote_bases(recording_kubectl: Path) -> None:
    """The default is unchanged: kubectl kustomize decides (and fetches)."""
    write(Path("app/kustomization.yaml"), f"resources:\n  - {REMOTE_ENTRIES[0]}\n")
    loaded = load_paths(["app"])
    assert loaded.problems == [] and called(recording_kubectl) == ["kustomize", "app"]


def kubectl_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    """A `kubectl` first on PATH that runs `script`, in `tmp_path` as the current directory."""
    folder = tmp_path / "fake-bin"
    write(folder / "kubectl", script)
    (folder / "kubectl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)


def test_a_kubectl_without_build_metadata_still_renders_the_overlay_untraced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kustomize before v4.5 refuses `buildMetadata` (the wrapper that traces objects to their
    files): the overlay is then rendered as it is, findings naming its folder."""
    kubectl_script(
        tmp_path,
        monkeypatch,
        '#!/bin/sh\nif grep -q buildMetadata "$2/kustomization.yaml"; then\n'
        '  echo "Error: json: unknown field \\"buildMetadata\\"" >&2; exit 1\nfi\n'
        'printf "apiVersion: v1\\nkind: Namespace\\nmetadata:\\n  name: rendered\\n"\n',
    )
    write(Path("app/kustomization.yaml"), "resources:\n  - ns.yaml\n")
    loaded = load_paths(["app"])
    assert loaded.problems == []
    assert [(resource.name, resource.file) for resource in loaded.resources] == [("rendered", "app")]


def test_a_remote_base_the_network_cannot_reach_says_so_with_relative_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kubeflow Pipelines' overlays fetch Argo's base from GitHub: offline, kustomize names every
    file absolutely and git says it could not resolve the host. The finding's paths read as the
    findings' do, and it says the network, not the manifest, failed."""
    kubectl_script(
        tmp_path,
        monkeypatch,
        "#!/bin/sh\necho \"error: accumulating resources from '$PWD/app/base': failed to run "
        "'/usr/bin/git fetch --depth=1 https://github.com/argoproj/argo-workflows v4.0.8': "
        "fatal: unable to access 'https://github.com/argoproj/argo-workflows/': Could not resolve host: "
        'github.com" >&2\nexit 1\n',
    )
    write(Path("app/kustomization.yaml"), "resources:\n  - base\n")
    (problem,) = load_paths(["app"]).problems
    assert (
        str(tmp_path) not in problem.message and "accumulating resources from 'app/base'" in problem.message
    )
    assert problem.message.endswith(
        "(a remote resource could not be fetched from here: the network, not the manifest)"
    )


def test_lint_no_remote_reports_gp004_and_fails(
    recording_kubectl: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpupolicy.cli.main import main

    write(Path("app/kustomization.yaml"), f"resources:\n  - {REMOTE_ENTRIES[1]}\n")
    assert main(["lint", "--no-remote", "--no-repo-policy", "app"]) == 1
    out = capsys.readouterr().out
    assert "app/kustomization.yaml:2:5: GP004 error" in out and "a remote location" in out
    assert not recording_kubectl.exists()


DCGM_ALERTS = """\
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: dcgm-alerts
  namespace: monitoring
spec:
  groups:
    - name: gpu
      rules:
        - alert: GpuTooHot
          expr: DCGM_FI_DEV_GPU_TEMP > 85
          labels:
            severity: warning
          annotations:
            summary: GPU {{ $labels.gpu }} on {{ $labels.Hostname }} is hot
            description: |
              Temperature is {{ $value }}C.
"""


def test_go_templates_in_alert_annotations_are_not_helm() -> None:
    loaded = load_text(DCGM_ALERTS, "alerts.yaml")
    assert loaded.problems == []
    assert loaded.resources[0].name == "dcgm-alerts"


def test_go_templates_in_configmap_data_are_not_helm() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: alertmanager-templates\n"
        'data:\n  slack.tmpl: |\n    {{ define "slack.title" }}{{ .CommonLabels.alertname }}{{ end }}\n'
    )
    assert load_text(text, "cm.yaml").problems == []


@pytest.mark.parametrize(
    ("replacement", "position"),
    [
        ("name: {{ .Release.Name }}-alerts", (4, 9)),
        ('name: "{{ .Release.Name }}-alerts"', (4, 10)),  # quoted, but not in free text
    ],
)
def test_helm_action_outside_free_text_is_still_gp004(replacement: str, position: tuple[int, int]) -> None:
    loaded = load_text(DCGM_ALERTS.replace("name: dcgm-alerts", replacement), "alerts.yaml")
    ((rule_id, line, column),) = [(p.rule_id, p.line, p.column) for p in loaded.problems]
    assert (rule_id, (line, column)) == ("GP004", position)
    assert loaded.resources == []


@pytest.mark.parametrize(
    "comment",
    [
        "# the chart names it {{ .Release.Name }}-sharding-configmap\n",  # Volcano's sharding example
        "  # {{ .Values.name }} when rendered\n",
    ],
)
def test_helm_actions_only_in_comments_leave_a_plain_manifest(comment: str) -> None:
    text = f"apiVersion: v1\nkind: ConfigMap\n{comment}metadata:\n  name: sharding  # {{{{ .Release.Name }}}}\ndata: {{a: b}}\n"
    loaded = load_text(text, "cm.yaml")
    assert loaded.problems == []
    assert [resource.name for resource in loaded.resources] == ["sharding"]


def test_a_commented_out_action_beside_a_programs_own_actions_is_no_template() -> None:
    """cloud-native-stack's Ansible playbook: `{{lookup(...)}}` in a shell block is Ansible's, and a
    commented-out copy of the line at column 0 is a comment, not an action that shapes the file."""
    text = (
        "- hosts: master\n  tasks:\n   - name: Update\n     shell: |\n"
        "       cp {{lookup('pipe', 'pwd')}}/a.yaml {{lookup('pipe', 'pwd')}}/b.yaml\n"
        "#       sed -i s/x/g {{lookup('pipe', 'pwd')}}/b.yaml\n"
    )
    loaded = load_text(text, "playbook.yaml")
    assert loaded.problems == [] and loaded.resources == []
    assert [item.reason for item in loaded.skipped][:1]  # counted as skipped, not linted


def test_a_hash_inside_a_string_opens_no_comment() -> None:
    text = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: "x # {{ .Release.Name }}"\n'
    assert [(p.rule_id, p.line) for p in load_text(text, "cm.yaml").problems] == [("GP004", 4)]


def test_helm_blocks_under_data_are_gp004() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  {{- toYaml .Values.config | nindent 2 }}\n"
    assert [(p.rule_id, p.line) for p in load_text(text, "cm.yaml").problems] == [("GP004", 5)]


def test_a_file_reached_again_through_a_symlink_is_read_once(tmp_path: Path) -> None:
    """NVIDIA's DRA driver demo links nvkind's scripts to kind's: a file and a symlink to it are one
    input, or every finding of it is reported twice under the one path both resolve to."""
    write(tmp_path / "base" / "ns.yaml", namespace("shared"))
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "ns.yaml").symlink_to(tmp_path / "base" / "ns.yaml")
    assert names([str(tmp_path)]) == ["shared"]
    assert names([str(tmp_path / "base" / "ns.yaml"), str(tmp_path / "envs" / "ns.yaml")]) == ["shared"]
    assert len(list(iter_sources([str(tmp_path)]))) == 1
    (tmp_path / "envs" / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")  # still read: GP001
    assert [problem.rule_id for problem in load_paths([str(tmp_path)]).problems] == ["GP001"]


def test_a_broken_symlink_is_named_where_it_is_and_said_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DRA driver's nvkind scripts link to a file kind's folder no longer has: the finding names
    the link, which is in the repository, not its target, which is not."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "slice.yaml").symlink_to(Path("..") / "kind" / "slice.yaml")
    ((file, message),) = [(p.file, p.message) for p in load_paths(["."]).problems]
    assert file == "scripts/slice.yaml"
    assert message == "cannot read file: a broken symlink (to ../kind/slice.yaml, which does not exist)"


def test_a_manifest_beside_an_overlay_that_does_not_list_it_is_linted(tmp_path: Path) -> None:
    """A kubebuilder project's config/samples/kustomization.yaml lists a few samples; the others,
    in folders below it, were never read (NVIDIA's NIM operator: 5 objects of 92 linted). The
    overlay is still one unit; what it or an overlay below it reads (resources, patches, its own
    file) is not read again on its own."""
    root = tmp_path / "samples"
    write(root / "kustomization.yaml", "resources: [listed.yaml]\npatches:\n  - path: patch.yaml\n")
    write(root / "listed.yaml", namespace("listed"))
    write(root / "patch.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: listed, labels: {a: b}}\n")
    write(root / "serving" / "llm.yaml", namespace("read-by-the-overlay-below"))
    write(root / "serving" / "overlay" / "kustomization.yaml", "resources: [../llm.yaml]\n")
    write(root / "serving" / "standalone" / "llm.yaml", namespace("unlisted"))
    given = {Path(source.path).resolve() for source in iter_sources([str(root)]) if source.path is not None}
    assert given == {
        root.resolve(),
        (root / "serving" / "overlay").resolve(),
        (root / "serving" / "standalone" / "llm.yaml").resolve(),
    }


def test_a_terraform_template_is_gp004_not_a_syntax_error() -> None:
    """GKE's accelerated-platforms keeps `*.tftpl.yaml` manifests whose structure Terraform's
    `%{ if }` / `%{ for }` directives make: GP004 saying what renders them, not GP001."""
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n%{ if can(namespace) }  namespace: x\n"
        "%{ endif }\ndata:\n%{ for key in keys }  ${key}: v\n%{ endfor }\n"
    )
    (problem,) = load_text(text, "cm.tftpl.yaml").problems
    assert (problem.rule_id, problem.line, problem.column) == ("GP004", 5, 1)
    assert "Terraform template directives" in problem.message


def test_a_jinja_template_is_gp004_and_a_jinja_text_in_a_value_is_not() -> None:
    """DeepOps' Ansible roles keep manifests whose structure Jinja statements make
    (`{% if nic_policy.ofed %}` between keys): GP004, saying what renders them, not GP001's
    syntax error. A chat template inside a ConfigMap's block scalar is text."""
    template = (
        "apiVersion: mellanox.com/v1alpha1\nkind: NicClusterPolicy\nmetadata:\n  name: nic-cluster-policy\nspec:\n"
        "{% if nic_policy.ofed %}\n  ofedDriver:\n    image: doca-driver\n{% endif %}\n"
    )
    (problem,) = load_text(template, "nic.yaml").problems
    assert (problem.rule_id, problem.line, problem.column) == ("GP004", 6, 1)
    assert "Jinja template statements" in problem.message
    chat = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: chat}\ndata:\n  template.jinja: |\n"
        "    {% for message in messages %}\n    {{ message['content'] }}\n    {% endfor %}\n"
    )
    loaded = load_text(chat, "chat.yaml")
    assert loaded.problems == [] and [r.name for r in loaded.resources] == ["chat"]


@pytest.mark.skipif(
    HELM is None, reason="helm is not installed (charts/install-helm.sh puts it at .tools/helm)"
)
def test_a_chart_that_renders_nothing_says_so_and_names_its_values_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ai-on-eks' inference-charts leave `inference.framework` empty and ship one values file per
    model: with the defaults nothing renders, which must not read as a clean pass."""
    assert HELM is not None
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(HELM).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    chart = tmp_path / "inference"
    write(chart / "Chart.yaml", "apiVersion: v2\nname: inference\nversion: 0.1.0\n")
    write(chart / "values.yaml", "framework:\n")
    write(chart / "values-vllm.yaml", "framework: vllm\n")
    write(
        chart / "templates" / "server.yaml",
        '{{- if eq .Values.framework "vllm" }}\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n{{- end }}\n',
    )
    loaded = load_paths(["inference"])
    assert (loaded.resources, loaded.skipped) == ([], [])
    ((rule_id, severity, message),) = [(p.rule_id, p.severity, p.message) for p in loaded.problems]
    assert (rule_id, severity) == ("GP004", "info")
    assert message.endswith(
        "renders no object: nothing of the chart was linted; name the values files that choose what to "
        "deploy (values-vllm.yaml) in the policy's helm.valuesFiles"
    )


def test_a_library_chart_is_skipped_saying_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Helm refuses to render a library chart ('library charts are not installable'): its templates
    are the charts' that include them, not a failure to report."""
    monkeypatch.chdir(tmp_path)
    write(
        tmp_path / "common" / "Chart.yaml",
        "apiVersion: v2\nname: common\nversion: 1.0.0\ntype: library  # helpers\n",
    )
    write(tmp_path / "common" / "templates" / "_names.tpl", '{{- define "common.name" }}x{{- end }}\n')
    loaded = load_paths(["common"])
    assert (loaded.resources, loaded.problems) == ([], [])
    assert [(item.file, item.reason) for item in loaded.skipped] == [("common", LIBRARY_CHART)]


@pytest.mark.parametrize("name", ["<CHARTNAME>", '"<CHARTNAME>"', "'<CHARTNAME>'  # the starter's"])
def test_a_starter_chart_is_skipped_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A Helm starter (`helm create --starter` copies it, <CHARTNAME> replaced in every file) is a
    scaffold: its placeholders are what the copy fills in, not 24 GP004 errors."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "starter" / "Chart.yaml", f"apiVersion: v2\nname: {name}\nversion: 0-latest\n")
    write(
        tmp_path / "starter" / "templates" / "deployment.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: <CHARTNAME>\n",
    )
    loaded = load_paths(["starter"])
    assert (loaded.resources, loaded.problems) == ([], [])
    assert [(item.file, item.reason) for item in loaded.skipped] == [("starter", STARTER_CHART)]


def test_a_chart_that_only_mentions_the_starter_name_is_rendered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert HELM is not None
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{Path(HELM).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    write(
        tmp_path / "app" / "Chart.yaml",
        "apiVersion: v2\nname: app\ndescription: made from <CHARTNAME>\nversion: 0.1.0\n",
    )
    write(tmp_path / "app" / "templates" / "ns.yaml", namespace("app"))
    assert names(["app"]) == ["app"]


def test_vendored_third_party_folders_are_not_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Go operator vendors k8s.io/apimachinery, whose test fixtures are Pods with untagged images;
    npm's node_modules the same. Named on the command line, such a folder is linted."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "go.mod", "module example.com/operator\n")
    write(tmp_path / "vendor" / "k8s.io" / "pod.yaml", namespace("vendored"))
    write(tmp_path / "ui" / "node_modules" / "pkg" / "pod.yaml", namespace("npm"))
    write(tmp_path / "deploy" / "ns.yaml", namespace("mine"))
    write(tmp_path / "docs" / "vendor" / "ns.yaml", namespace("a-folder-named-vendor"))  # no go.mod beside it
    assert sorted(names(["."])) == ["a-folder-named-vendor", "mine"]
    assert names(["vendor"]) == ["vendored"]


SORTED_BY_KUSTOMIZE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: zz
spec:
  selector:
    matchLabels: {app: zz}
  template:
    metadata:
      labels: {app: zz}
    spec:
      containers:
      - name: a
        image: nginx:latest
---
apiVersion: apps/v1
kind: Deployment
metadata:
  # the label below is no name
  labels: {name: zz}
  name: aa
spec:
  selector:
    matchLabels: {app: aa}
  template:
    metadata:
      labels: {app: aa}
    spec:
      containers:
      - name: a
        image: nginx:1.27.0  # gpupolicy: ignore GP702 -- pinned by the release process
"""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
@pytest.mark.parametrize("prefix", ["", "namePrefix: prod-\nnameSuffix: -v2\n"])
def test_an_object_kustomize_sorts_is_placed_on_its_own_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    """kustomize emits aa before zz (it sorts by kind, then name): each finding, and the comment
    that suppresses one, belong to the document that wrote the object, not to the n-th of its kind."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "app" / "d.yaml", SORTED_BY_KUSTOMIZE)
    write(tmp_path / "app" / "kustomization.yaml", "resources:\n  - d.yaml\n" + prefix)
    loaded = load_paths(["app"])
    report = evaluate(
        loaded.resources, default_policy(), problems=loaded.problems, directives=loaded.directives
    )
    (latest,) = [finding for finding in report.findings if finding.rule_id == "GP702"]
    assert (latest.file, latest.line) == ("app/d.yaml", 14)
    assert str(latest.object).endswith("zz" + ("-v2" if prefix else ""))


PLAIN_GPU_SERVER = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: nim-llm, namespace: ai}
spec:
  selector: {matchLabels: {app: nim}}
  template:
    metadata: {labels: {app: nim}}
    spec:
      containers:
        - name: nim
          image: nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3
          resources:
            requests: {nvidia.com/gpu: 2}
            limits: {nvidia.com/gpu: 1}
"""


def test_manifests_below_a_chart_that_helm_does_not_read_are_linted_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GKE's nemo-rl sample keeps NIM Deployments applied with kubectl in its chart's folder; Helm
    renders only templates/: they were neither linted nor counted, even named on the command line.
    A file a template reads (`files/`, with Helm actions) and a values file are not objects."""
    monkeypatch.chdir(tmp_path)
    chart = helm_chart(tmp_path)
    write(chart / "examples" / "nim.yaml", PLAIN_GPU_SERVER)
    write(chart / "examples" / "values-gpu.yaml", "replicaCount: 3\n")
    write(chart / "nim-local.yaml", PLAIN_GPU_SERVER)
    write(chart / "files" / "config.yaml", "kind: ConfigMap\nmetadata: {name: '{{ .Release.Name }}'}\n")
    # Plain YAML a template reads (KServe's chart renders files/ with its values' images): the chart's.
    write(chart / "data" / "resources.yaml", PLAIN_GPU_SERVER)
    write(chart / "templates" / "data.yaml", '{{ .Files.Get "data/resources.yaml" }}\n')
    walked = [path.relative_to(tmp_path).as_posix() for path in iter_manifest_files(tmp_path / "charts")]
    assert walked == [
        "charts/llm",
        "charts/llm/examples/nim.yaml",
        "charts/llm/examples/values-gpu.yaml",
        "charts/llm/files/config.yaml",
        "charts/llm/nim-local.yaml",
    ]
    without_tools(tmp_path, monkeypatch)  # the chart itself: one GP004 without helm
    loaded = load_paths(["charts"])
    assert sorted({resource.file for resource in loaded.resources}) == [
        "charts/llm/examples/nim.yaml",
        "charts/llm/nim-local.yaml",
    ]
    assert [problem.file for problem in loaded.problems] == ["charts/llm"]
    reasons = {item.file: item.reason for item in loaded.skipped}
    assert reasons["charts/llm/files/config.yaml"].startswith("a file of a chart outside its templates/")
    named = load_paths(["charts/llm/examples/nim.yaml"])  # the file, not its chart
    assert [resource.file for resource in named.resources] == ["charts/llm/examples/nim.yaml"]
    assert not named.problems


def test_helm_actions_beside_a_chart_file_without_templates_say_helm_will_not_render_them(
    tmp_path: Path,
) -> None:
    """NeMo's launcher keeps Helm templates beside a Chart.yaml and copies them into templates/
    when it runs: `helm template` of the folder renders nothing, so the hint does not say to run
    it. A template whose action is a parenthesised `.Files` pipeline is Helm's, not a syntax error."""
    folder = tmp_path / "k8s_templates" / "training"
    write(folder / "Chart.yaml", "apiVersion: v2\nname: training\nversion: 0.1.0\n")
    text = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: training-config\ndata:\n  config.yaml: |-\n"
        '  {{ (.Files.Glob "config/*hydra.yaml").AsConfig | indent 4 }}\n'
    )
    write(folder / "training-config.yaml", text)
    loaded = load_paths([str(folder / "training-config.yaml")])
    (problem,) = loaded.problems
    assert (problem.rule_id, problem.line, problem.column) == ("GP004", 7, 3)
    assert "Helm renders only the templates/ of the chart" in problem.message
    assert "helm template RELEASE" not in problem.message


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_an_overlay_kustomize_cannot_build_still_lints_the_files_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """semantic-router's OpenShift overlay names a namespace.yaml that is not in the repository:
    the build fails, and its two GPU servers were never linted, even named on the command line."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "overlay" / "base" / "deployment.yaml", PLAIN_GPU_SERVER)
    write(tmp_path / "overlay" / "base" / "kustomization.yaml", "resources:\n  - deployment.yaml\n")
    write(tmp_path / "overlay" / "kustomization.yaml", "resources:\n  - namespace.yaml\n  - base\n")
    for given in (["overlay"], ["overlay/base/deployment.yaml"]):
        loaded = load_paths(given)
        (problem,) = loaded.problems
        assert problem.rule_id == "GP004" and problem.file == "overlay"
        assert (
            "linted as written, without what the overlay would change of them (overlay/base/deployment.yaml)"
            in (problem.message)
        )
        assert [(resource.file, resource.name) for resource in loaded.resources] == [
            ("overlay/base/deployment.yaml", "nim-llm")
        ]


@pytest.mark.skipif(
    HELM is None, reason="helm is not installed (charts/install-helm.sh puts it at .tools/helm)"
)
def test_a_controllers_template_left_in_helms_output_hides_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """soperator's NodeSet chart renders `dynamic: "InstanceId={{ .PodName }}"`, which the operator
    fills in per pod: the whole rendered chart was one GP004 ("render it with helm template
    first") and none of its objects, an 8-GPU NodeSet among them, was linted."""
    assert HELM is not None
    monkeypatch.chdir(tmp_path)
    chart = helm_chart(tmp_path)
    write(chart / "values.yaml", 'replicaCount: 2\ndynamic: "InstanceId={{ .PodName }}"\n')
    write(
        chart / "templates" / "config.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nodes\ndata:\n  extra: {{ .Values.dynamic | quote }}\n"
        "spec:\n  dynamic: {{ .Values.dynamic | quote }}\n",
    )
    monkeypatch.setenv("PATH", f"{Path(HELM).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    loaded = load_paths(["charts"])
    assert sorted(resource.kind for resource in loaded.resources) == ["ConfigMap", "Deployment"]
    report = evaluate(loaded.resources, default_policy(), problems=loaded.problems)
    assert not [finding for finding in report.findings if finding.rule_id == "GP004"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_a_base_two_unbuilt_overlays_name_is_reported_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """soperator's dev and prod overlays both fail offline: each linted the shared base as written,
    and every finding of it was said twice."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "base" / "deployment.yaml", PLAIN_GPU_SERVER)
    write(tmp_path / "base" / "kustomization.yaml", "resources:\n  - deployment.yaml\n")
    for overlay in ("dev", "prod"):
        write(tmp_path / overlay / "kustomization.yaml", "resources:\n  - ../base\n  - missing.yaml\n")
    main(["lint", "--no-repo-policy", "-f", "json", "."])
    findings = json.loads(capsys.readouterr().out)["findings"]
    (mismatch,) = [finding for finding in findings if finding["rule"] == "GP102"]
    assert mismatch["message"].endswith("(as rendered by dev [not built], prod [not built])")


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
def test_one_missing_file_that_stops_several_overlays_is_one_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GKE's reference architecture: 66 overlays of one base whose Terraform-generated
    deployment.env is not in the repository were 66 GP004 errors for one missing file."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "base" / "deployment.yaml", PLAIN_GPU_SERVER)
    write(
        tmp_path / "base" / "kustomization.yaml",
        "resources:\n  - deployment.yaml\nconfigMapGenerator:\n  - name: env\n    envs: [deployment.env]\n",
    )
    for overlay in ("l4", "h100", "a100"):
        write(tmp_path / overlay / "kustomization.yaml", "resources:\n  - ../base\n")
    main(["lint", "--no-repo-policy", "-f", "json", "."])
    findings = json.loads(capsys.readouterr().out)["findings"]
    (stopped,) = [finding for finding in findings if finding["rule"] == "GP004"]
    assert stopped["file"] == "a100"
    assert stopped["message"].endswith("; the same missing file stops 2 other overlays (h100, l4)")
