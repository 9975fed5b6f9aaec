"""`{{…}}` that a controller fills in itself is not an unrendered chart: KServe's serving runtimes
and LLMInferenceServiceConfigs speak Go's text/template (`{{.Name}}`, `{{.Labels.modelClass}}`,
`{{ .GlobalConfig.IngressGatewayName }}`), filled in over each InferenceService. kubeflow/manifests'
applications/kserve/kserve/kserve.yaml (75,000 lines, about 65 objects) was read as 0 objects for two
of them. Argo's are tests/test_argo.py's."""

from __future__ import annotations

from gpupolicy.core.findings import Finding
from gpupolicy.loading.inputs import load_text
from tests.conftest import LintText

RUNTIME = """\
apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: kserve-mlserver}
spec:
  supportedModelFormats: [{name: sklearn, version: "1", autoSelect: true}]
  containers:
    - name: kserve-container
      image: docker.io/seldonio/mlserver:1.5.0
      env:
        - {name: MLSERVER_MODEL_IMPLEMENTATION, value: "{{.Labels.modelClass}}"}
        - {name: MLSERVER_MODEL_NAME, value: "{{.Name}}"}
---
apiVersion: serving.kserve.io/v1alpha1
kind: LLMInferenceServiceConfig
metadata: {name: kserve-config-llm-router-route}
spec:
  router:
    route:
      http:
        spec:
          parentRefs: [{name: "{{ .GlobalConfig.IngressGatewayName }}"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: kserve-controller-manager, namespace: kserve}
spec:
  selector: {matchLabels: {app: kserve}}
  template:
    metadata: {labels: {app: kserve}}
    spec:
      containers:
        - name: manager
          image: kserve/kserve-controller:v0.15.0
          securityContext: {privileged: true}
"""


def of(findings: list[Finding], rule: str) -> list[Finding]:
    return [finding for finding in findings if finding.rule_id == rule]


def test_kserves_go_templates_are_its_own(lint_text: LintText) -> None:
    assert len(load_text(RUNTIME, "kserve.yaml").resources) == 3
    findings = lint_text(RUNTIME).findings
    assert not of(findings, "GP004")
    assert of(findings, "GP601")  # the file's other objects are judged


def test_a_stray_go_template_elsewhere_is_one_finding_at_its_field(lint_text: LintText) -> None:
    """The same `{{.Name}}` in a Deployment is nobody's to fill in: GP004 at that field, and the
    file's other objects are still read."""
    text = RUNTIME.replace("image: kserve/kserve-controller:v0.15.0", 'image: "kserve/{{.Name}}:v0.15.0"')
    (finding,) = of(lint_text(text).findings, "GP004")
    assert finding.path[-1] == "image" and "{{.Name}}" in finding.message
    assert len(load_text(text, "kserve.yaml").resources) == 3


def test_helms_own_names_are_helms_in_a_runtime_too(lint_text: LintText) -> None:
    chart = RUNTIME.replace('"{{.Name}}"', '"{{ .Values.modelName }}"')
    (finding,) = of(lint_text(chart).findings, "GP004")
    assert "Helm template actions" in finding.message


def test_a_kwok_stages_status_template_is_kwoks() -> None:
    """knavigator's and fake-gpu-operator's KWOK Stages: `statusTemplate` is a Go template KWOK
    evaluates against the object it simulates, applied as written (a GP004 error said to render it)."""
    text = (
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: pod-complete}\nspec:\n"
        "  resourceRef: {apiGroup: v1, kind: Pod}\n  selector: {matchExpressions: [{key: .status.phase, "
        "operator: In, values: [Running]}]}\n  next:\n    statusTemplate: |\n      {{ $now := Now }}\n"
        "      phase: Succeeded\n      containerStatuses:\n      {{ range .spec.containers }}\n"
        "      - name: {{ .name }}\n      {{ end }}\n"
    )
    loaded = load_text(text, "stage.yaml")
    assert loaded.problems == [] and [resource.kind for resource in loaded.resources] == ["Stage"]
