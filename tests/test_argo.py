"""Argo Workflows (Workflow, WorkflowTemplate, ClusterWorkflowTemplate, CronWorkflow): the pods its
templates run are judged as any other's, under the pod-level fields the workflow sets for all; the
`{{…}}` its controller fills in are its own, not an unrendered chart (Kubeflow Pipelines compiles
to these, `{{$}}` included). https://argo-workflows.readthedocs.io/en/latest/fields/"""

from __future__ import annotations

from gpupolicy.core.findings import Finding
from gpupolicy.loading.inputs import load_text
from tests.conftest import LintText, workload_in

WORKFLOW = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: finetune-, namespace: ml}
spec:
  entrypoint: main
  serviceAccountName: trainer
  podMetadata: {labels: {team: llm}}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  volumes: [{name: dshm, emptyDir: {medium: Memory}}]
  templates:
    - name: main
      steps:
        - - {name: train, template: train}
    - name: train
      metadata: {labels: {step: train}}
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      container:
        image: nvcr.io/nvidia/pytorch:latest
        command: [torchrun, --nproc-per-node=2, train.py]
        env: [{name: HF_TOKEN, value: hf_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM}]
        securityContext: {privileged: true}
        resources:
          requests: {nvidia.com/gpu: 2, cpu: "8", memory: 64Gi}
          limits: {nvidia.com/gpu: 1, memory: 64Gi}
        volumeMounts: [{name: dshm, mountPath: /dev/shm}]
      sidecars:
        - {name: metrics, image: nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.0-ubuntu22.04}
    - name: report
      script:
        image: python:3.12-slim
        command: [python]
        source: print("{{inputs.parameters.message}}")
    - name: pair
      containerSet:
        containers:
          - {name: a, image: busybox:1.37}
          - {name: b, image: busybox:1.37}
"""

# Kubeflow Pipelines' compiled workflow, cut down (kubeflow/pipelines test_data/compiled-workflows).
COMPILED = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: add-numbers-}
spec:
  arguments:
    parameters:
      - {name: implementations, value: "{{$}}"}
  entrypoint: entrypoint
  templates:
    - name: driver
      container:
        image: ghcr.io/kubeflow/kfp-driver:2.5.0
        args: [--component, "{{inputs.parameters.component}}", --task, "{{$.inputs.parameters['text']}}"]
    - name: loop
      container:
        image: "{{inputs.parameters.image}}"
        args: ["echo {{item}}"]
        env: [{name: RUN, value: "{{workflow.name}}"}]
"""


def of(findings: list[Finding], rule: str) -> list[Finding]:
    return [finding for finding in findings if finding.rule_id == rule]


def test_each_template_that_runs_a_pod_is_a_pod_template() -> None:
    workload = workload_in(WORKFLOW)
    assert [(t.path, t.role) for t in workload.templates] == [
        (("spec", "templates", 1), "train"),
        (("spec", "templates", 2), "report"),
        (("spec", "templates", 3), "pair"),
    ]
    train = workload.templates[0]
    assert [(c.name, c.role, c.path[-1]) for c in train.containers] == [
        ("main", "container", "container"),
        ("metrics", "sidecar", 0),
    ]
    # the workflow's pod-level fields under the template's own; volumes add up
    assert (
        train.spec["serviceAccountName"] == "trainer"
        and train.spec["tolerations"][0]["key"] == "nvidia.com/gpu"
    )
    assert train.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert [v["name"] for v in train.spec["volumes"]] == ["dshm"]
    assert train.labels == {"team": "llm", "step": "train"}
    assert [c.name for c in workload.templates[2].containers] == ["a", "b"]


def test_a_pod_patched_when_the_step_runs_is_not_judged_from_the_manifest() -> None:
    """Kubeflow Pipelines' executor template: its image is `should-be-overridden-during-runtime`,
    and `podSpecPatch: '{{inputs.parameters.pod-spec-patch}}'` sets the real pod when it runs."""
    patched = WORKFLOW.replace(
        "    - name: report\n",
        "    - name: report\n      podSpecPatch: '{{inputs.parameters.pod-spec-patch}}'\n",
    )
    workload = workload_in(patched)
    assert [t.role for t in workload.templates] == ["train", "pair"]


def test_a_cron_workflow_runs_its_workflow_spec() -> None:
    cron = WORKFLOW.replace("kind: Workflow", "kind: CronWorkflow").replace(
        "spec:\n  entrypoint", "spec:\n  schedule: '0 * * * *'\n  workflowSpec:\n    entrypoint"
    )
    lines = cron.splitlines()
    start = lines.index("    entrypoint: main")
    cron = "\n".join(lines[: start + 1] + ["  " + line for line in lines[start + 1 :]]) + "\n"
    workload = workload_in(cron)
    assert workload.templates[0].path == ("spec", "workflowSpec", "templates", 1)


def test_a_workflows_gpu_pod_is_judged(lint_text: LintText) -> None:
    """A Workflow with a GPU request above its limit, a literal token, a privileged container and
    a `latest` image was given no finding at all."""
    findings = lint_text(WORKFLOW).findings
    for rule in ("GP102", "GP612", "GP601", "GP702"):
        assert of(findings, rule), rule
    assert not of(findings, "GP113")  # the workflow's memory emptyDir at /dev/shm
    assert not of(findings, "GP004")  # `{{inputs.parameters.message}}` is Argo's


def test_argos_own_template_language_is_not_an_unrendered_chart(lint_text: LintText) -> None:
    report = lint_text(COMPILED)
    assert not of(report.findings, "GP004"), [f.message for f in of(report.findings, "GP004")]
    assert len(load_text(COMPILED, "c.yaml").resources) == 1


def test_a_charts_workflow_is_still_helms_to_render(lint_text: LintText) -> None:
    chart = COMPILED.replace('image: "{{inputs.parameters.image}}"', 'image: "{{ .Values.image }}"')
    (finding,) = of(lint_text(chart).findings, "GP004")
    assert "Helm template actions" in finding.message
    deployment = COMPILED.replace("argoproj.io/v1alpha1", "apps/v1").replace(
        "kind: Workflow", "kind: Deployment"
    )
    assert of(lint_text(deployment).findings, "GP004")  # `{{$}}` elsewhere is Helm's


def test_a_script_templates_source_is_its_program(lint_text: LintText) -> None:
    """CoreWeave's GPU smoke workflow runs `nvidia-smi` as a script's source: a test, as the same
    program in a Job's args is (no GP107 sizing advice for it)."""
    workflow = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: gpu-smoke, namespace: ci}
spec:
  entrypoint: gpu-echo
  templates:
    - name: gpu-echo
      script:
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        command: [bash]
        source: |
          nvidia-smi
          echo "GPU visible"
        resources: {requests: {memory: 128Mi, cpu: 500m}, limits: {nvidia.com/gpu: 1}}
"""
    report = lint_text(workflow)
    assert [role.decision.evidence for role in report.roles] == ["container 'main' runs 'nvidia-smi'"]
    assert "GP107" not in {f.rule_id for f in report.findings}


def test_a_credential_passed_as_a_workflow_parameter_is_gp612s(lint_text: LintText) -> None:
    """CoreWeave's finetuner passes WANDB_API_KEY as `{{inputs.parameters.wandb_key}}`: the value a
    Workflow is submitted with is kept in its object (Argo's secrets walkthrough uses a Secret)."""
    workflow = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {name: finetune, namespace: ml}
spec:
  entrypoint: train
  templates:
    - name: train
      inputs: {parameters: [{name: wandb_key}, {name: run_name}]}
      container:
        image: 'x:1'
        env:
          - {name: WANDB_API_KEY, value: "{{inputs.parameters.wandb_key}}"}
          - {name: RUN_NAME, value: "{{inputs.parameters.run_name}}"}
"""
    (message,) = [f.message for f in lint_text(workflow).findings if f.rule_id == "GP612"]
    assert (
        "env WANDB_API_KEY (API key) is the workflow parameter '{{inputs.parameters.wandb_key}}'" in message
    )


def test_a_workflows_claims_are_its_pods_claims(lint_text: LintText) -> None:
    """Argo gives every pod the workflow's `spec.resourceClaims` unless its template declares its
    own (workflowpod.go): GP155 said a container used a claim its pod declares none of."""
    text = (
        "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nmetadata: {name: claims, namespace: ai}\nspec:\n"
        "  entrypoint: main\n  resourceClaims:\n  - {name: gpu, resourceClaimTemplateName: single-gpu}\n"
        "  templates:\n  - name: main\n    container:\n      image: busybox:1.37\n"
        "      resources: {claims: [{name: gpu}]}\n"
    )
    workload = workload_in(text)
    (template,) = workload.templates
    assert template.spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
    assert "GP155" not in {f.rule_id for f in lint_text(text).findings}
