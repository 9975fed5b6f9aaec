"""Placeholders in images and env values: GP004 per field, GP612 for credentials, GP701-GP703 on
what the placeholder leaves intact; the same answer from a file and from an admission."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.engine.report import Report
from gpupolicy.kube.placeholders import symbolic_quantity
from gpupolicy.policy.loading import default_policy
from gpupolicy.webhook.review import ReviewEngine, review
from gpupolicy.webhook.settings import Mode
from tests.conftest import LintText
from tests.webhook.reviews import admission_review

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: llm
  namespace: ai-lab
spec:
  containers:
    - name: vllm
      image: {image}
      command: ["/bin/sh", "-c", "exec vllm serve --download-dir ${{HOME}}/models --lr ${{trialParameters.lr}}"]
      args: ["--api-key", "${{VLLM_API_KEY}}"]
      resources:
        limits: {{nvidia.com/gpu: 1}}
      env:
{env}"""


def pod(image: str = "vllm/vllm-openai:v0.8.5", **env: str) -> str:
    items = "".join(f"        - name: {name}\n          value: {value!r}\n" for name, value in env.items())
    return POD.format(image=image, env=items or "        []\n")


def of(report: Report, *rules: str) -> list[Finding]:
    return [finding for finding in report.findings if finding.rule_id in rules]


def test_an_image_placeholder_is_gp004_at_the_image(lint_text: LintText) -> None:
    report = lint_text(pod("$IMAGE_URL"), {"supplyChain": {"allowedRegistries": ["nvcr.io"]}})
    [finding] = of(report, "GP004")
    assert (finding.severity, finding.line, finding.path) == (
        Severity.ERROR,
        9,
        ("spec", "containers", 0, "image"),
    )
    assert finding.message == (
        "container 'vllm' image is the placeholder '$IMAGE_URL': render the manifest (envsubst, kustomize or "
        "helm) before it is applied; GP701-GP703 could not check it"
    )
    assert of(report, "GP701", "GP702", "GP703") == []


def test_a_tag_in_single_braces_is_gp004s_not_an_unpinned_image(lint_text: LintText) -> None:
    """`image: …/composer:{TAG}` (filled in by a sed step): the reference is invalid as written, so
    GP004 says what to render and GP701 does not judge a tag that is not there yet."""
    report = lint_text(pod("123456789012.dkr.ecr.us-west-2.amazonaws.com/composer:{TAG}"))
    (finding,) = of(report, "GP004")
    assert "holds the placeholder '{TAG}'" in finding.message
    assert of(report, "GP701", "GP702") == []


def test_what_the_placeholder_leaves_intact_is_still_checked(lint_text: LintText) -> None:
    for image in ("<your-registry>/image:latest", "${REGISTRY}/vllm:latest"):
        report = lint_text(pod(image), {"supplyChain": {"allowedRegistries": ["nvcr.io"]}})
        [gp004] = of(report, "GP004")
        assert "GP703 could not check its registry" in gp004.message
        assert [f.rule_id for f in of(report, "GP702", "GP703")] == ["GP702"]


def test_a_gpu_count_placeholder_is_gp004_alone(lint_text: LintText) -> None:
    # `nvidia.com/gpu: $NUM_GPU_PER_NODE`, filled in by envsubst: one problem, GP004's; GP103 judges
    # the counts a renderer will not change (a `$(VAR)` is the kubelet's, and never in resources).
    for count, expected in (
        ("$NUM_GPUS", ["GP004"]),
        ("${NUM_GPUS}", ["GP004"]),
        ("<number-of-gpus>", ["GP004"]),
        ("$(NUM_GPUS)", ["GP103"]),
        ("one", ["GP103"]),
        # AWS's verl RayCluster: an all-capitals name where a quantity must stand, as an image's
        ("PLACEHOLDER_NUM_GPU_PER_NODE", ["GP004"]),
        ("ALL", ["GP004"]),
        ("Gi", ["GP103"]),  # a unit without digits: no name for a value, a malformed quantity
    ):
        text = pod().replace("limits: {nvidia.com/gpu: 1}", f"limits: {{nvidia.com/gpu: {count!r}}}")
        found = [f for f in of(lint_text(text), "GP004", "GP103") if f.path[-1] == "nvidia.com/gpu"]
        assert [f.rule_id for f in found] == expected, count


def test_an_all_capitals_quantity_is_still_a_quantity() -> None:
    """`memory: 32G` is capitals and digits, and a quantity: a name for a value starts with a letter."""
    assert not symbolic_quantity("32G") and not symbolic_quantity("1E3")
    assert symbolic_quantity("NUM_GPUS") and symbolic_quantity("_GPUS")


def test_a_placeholder_named_so_is_a_credential_to_fill_in(lint_text: LintText) -> None:
    """`HF_TOKEN: PLACEHOLDER_HF_TOKEN` is what `${HF_TOKEN}` is: a credential still to fill in."""
    (found,) = of(lint_text(pod(HF_TOKEN="PLACEHOLDER_HF_TOKEN")), "GP612")
    assert "is the placeholder 'PLACEHOLDER_HF_TOKEN'" in found.message


def test_env_placeholders(lint_text: LintText) -> None:
    report = lint_text(
        pod(MODEL_NAME="${MODEL_NAME}", HF_TOKEN="$HF_TOKEN", API_KEY="<secret>", SUFFIX="-${POD}")
    )
    gp004 = of(report, "GP004")
    assert [f.path[-2:] for f in gp004] == [(0, "value")] and "env MODEL_NAME" in gp004[0].message
    gp612 = of(report, "GP612")  # a credential to fill in is GP612's alone: one problem, one finding
    assert [f.path[-2] for f in gp612] == [1, 2]
    assert gp612[0].message == (
        "container 'vllm' env HF_TOKEN (token) is the placeholder '$HF_TOKEN': a credential filled in at "
        "deploy time is still a credential in the manifest (and in every rendered copy of it)"
    )


def test_program_substitutions_in_command_and_args_are_not_reported(lint_text: LintText) -> None:
    assert of(lint_text(pod()), "GP004", "GP612") == []


def test_messages_echo_bounded_excerpts(lint_text: LintText) -> None:
    long = "<your-registry>/" + "team/" * 30 + "image:1.0"
    [finding] = of(lint_text(pod(long)), "GP004")
    assert "…" in finding.message and len(finding.message) < 320


def test_an_admission_gets_the_same_findings_as_the_file(lint_text: LintText) -> None:
    text = pod("${REGISTRY}/vllm:latest", HF_TOKEN="${HF_TOKEN}")
    from_file = {(f.rule_id, f.path, f.message) for f in of(lint_text(text), "GP004", "GP612", "GP702")}
    obj: dict[str, Any] = yaml.safe_load(text)
    engine = ReviewEngine.from_policy(default_policy(), mode=Mode.ENFORCE)
    decision = review(admission_review(obj), engine, None)
    admitted = {
        (f.rule_id, f.path, f.message) for f in decision.findings if f.rule_id in ("GP004", "GP612", "GP702")
    }
    assert admitted == from_file and {rule for rule, _, _ in admitted} == {"GP004", "GP612", "GP702"}
    assert not decision.allowed


def test_a_placeholder_in_a_typed_field_is_gp004_alone(lint_text: LintText) -> None:
    """GKE's gateway-api-inference-extension sample writes `port: ${EXTENSION_GRPC_PORT:-9002}`
    and probe delays the same way: GP004 at each field, not also GP005's "not of type integer" or
    GP405's undeclared port (one problem, one finding). A probe's literal fields are GP004's too;
    the command it runs is the program's."""
    probe = (
        "      livenessProbe:\n"
        "        grpc: {port: '${HEALTH_PORT:-9003}'}\n"
        "        periodSeconds: '${LIVENESS_PERIOD:-10}'\n"
        "      readinessProbe:\n"
        "        exec: {command: [sh, -c, 'test -f ${HOME}/ready']}\n"
        "      ports:\n"
        "        - containerPort: '${GRPC_PORT:-9002}'\n"
    )
    text = pod().replace("      resources:\n", probe + "      resources:\n")
    report = lint_text(text)
    found = sorted(
        (f.rule_id, ".".join(str(step) for step in f.path[-3:]))
        for f in of(report, "GP004", "GP005", "GP405")
    )
    assert found == [
        ("GP004", "0.livenessProbe.periodSeconds"),
        ("GP004", "livenessProbe.grpc.port"),
        ("GP004", "ports.0.containerPort"),
    ]


KTHENA_TEMPLATE = """\
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelServing
metadata: ${MODEL_SERVING_TEMPLATE_METADATA}
spec:
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          modelserving.volcano.sh/name: ${NAME}
  template:
    roles:
      - name: leader
        entryTemplate:
          spec:
            affinity: ${SERVER_AFFINITY}
            initContainers: ${INIT_CONTAINERS}
            containers:
              - name: engine
                image: vllm/vllm-openai:v0.8.5
                env: ${ENGINE_ENV}
                resources: ${ENGINE_SERVER_RESOURCES}
"""


def test_a_placeholder_where_a_mapping_or_list_stands_is_gp004s_alone(lint_text: LintText) -> None:
    """volcano-sh/kthena's controller templates (`affinity: ${SERVER_AFFINITY}`, `metadata:
    ${…}`): GP003 said 'affinity must be a mapping, not a string' and 'object has no metadata
    mapping' beside GP004's placeholder. One problem, one finding: GP004's."""
    report = lint_text(KTHENA_TEMPLATE)
    assert of(report, "GP003") == []
    placeholders = {f.path[-1] for f in of(report, "GP004")}
    assert {"metadata", "affinity", "initContainers", "env", "resources"} <= placeholders


def test_a_long_fields_path_is_shortened_between_its_segments(lint_text: LintText) -> None:
    (finding,) = [
        f for f in of(lint_text(KTHENA_TEMPLATE), "GP004") if f.path[-1] == "modelserving.volcano.sh/name"
    ]
    assert finding.message.startswith("spec.….matchLabels.modelserving.volcano.sh/name holds the placeholder")


ARGO_RESOURCE_TEMPLATE = """\
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata: {generateName: mpi-, namespace: ai-lab}
spec:
  entrypoint: run
  templates:
    - name: run
      resource:
        action: create
        manifest: |
          apiVersion: batch.volcano.sh/v1alpha1
          kind: Job
          metadata: {name: mpi}
          spec:
            tasks:
              - name: mpimaster
                template:
                  spec:
                    containers:
                      - name: mpimaster
                        image: volcanosh/example-mpi:0.0.3
                        command: [/bin/sh, -c, "MPI_HOST=$(cat /etc/volcano/mpiworker.host); mpiexec --host ${MPI_HOST} hello"]
"""


def test_an_argo_resource_templates_manifest_is_an_objects_text(lint_text: LintText) -> None:
    """Volcano's Argo MPI example: `${MPI_HOST}` in the embedded Job is its container's shell
    variable, set the line before, not a deploy-time placeholder of the Workflow."""
    assert [f for f in lint_text(ARGO_RESOURCE_TEMPLATE).findings if f.rule_id == "GP004"] == []


@pytest.mark.parametrize(
    ("image", "placeholders", "gp702"),
    [
        ("YOUR_REGISTRY/mt-bench-eval:tag", ["YOUR_REGISTRY"], False),  # KAITO's MT-Bench job
        ("ACCOUNT_ID.dkr.ecr.REGION.amazonaws.com/trainer:1.0", ["ACCOUNT_ID", "REGION"], False),
        # What the placeholder leaves intact is still judged: the tag is latest.
        ("registry.example.com/MY_IMAGE:latest", ["MY_IMAGE"], True),
        ("nvcr.io/nvidia/pytorch:24.05-PY3", [], False),  # capitals in a tag are a tag's
    ],
)
def test_all_capitals_parts_of_an_image_are_placeholders(
    lint_text: LintText, image: str, placeholders: list[str], gp702: bool
) -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        f"  containers: [{{name: c, image: '{image}', resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]\n"
    )
    findings = lint_text(text).findings
    gp004 = [f.message for f in findings if f.rule_id == "GP004"]
    if placeholders:
        (message,) = gp004
        assert all(repr(name) in message for name in placeholders), message
    else:
        assert gp004 == []
    assert any(f.rule_id == "GP702" for f in findings) is gp702


def test_a_dashboards_own_variables_are_not_deploy_time_placeholders(lint_text: LintText) -> None:
    """cloud-native-stack's GrafanaDashboard: `spec.json` is the dashboard, whose `${instance}`
    Grafana fills in when it is viewed; a placeholder in a literal field beside it still is one."""
    text = (
        "apiVersion: grafana.integreatly.org/v1beta1\nkind: GrafanaDashboard\n"
        "metadata:\n  name: dcgm\n  namespace: monitoring\nspec:\n"
        "  instanceSelector: {matchLabels: {dashboards: grafana}}\n"
        '  json: \'{"targets": [{"expr": "DCGM_FI_DEV_GPU_UTIL{instance=~\\\\"${instance}\\\\"}"}]}\'\n'
    )
    assert not [f for f in lint_text(text).findings if f.rule_id == "GP004"]
    named = text.replace("name: dcgm", "name: ${DASHBOARD}")
    assert [f.path for f in lint_text(named).findings if f.rule_id == "GP004"] == [("metadata", "name")]


def test_an_openshift_templates_parameters_are_its_own(lint_text: LintText) -> None:
    """semantic-router's OpenShift Template: `${NAMESPACE}` and `${{REPLICAS}}` are parameters that
    `oc process` fills in, and its top-level `labels` is a field of Template (applied to every
    object it makes): 21 errors on one valid object. A credential parameter is still GP612's."""
    text = (
        "apiVersion: template.openshift.io/v1\nkind: Template\nmetadata:\n  name: gpu-server\n"
        "labels:\n  app: gpu-server\nobjects:\n- apiVersion: apps/v1\n  kind: Deployment\n  metadata:\n"
        "    name: vllm\n    namespace: ${NAMESPACE}\n  spec:\n    replicas: ${{REPLICAS}}\n"
        "    selector: {matchLabels: {app: vllm}}\n    template:\n      metadata: {labels: {app: vllm}}\n"
        "      spec:\n        containers:\n        - name: vllm\n          image: ${IMAGE}\n"
        "          env:\n          - {name: HF_TOKEN, value: '${HF_TOKEN}'}\n"
        "parameters:\n- {name: NAMESPACE, value: ai}\n- {name: REPLICAS, value: '2'}\n"
        "- {name: IMAGE, value: vllm/vllm-openai:v0.8.5}\n- {name: HF_TOKEN, required: true}\n"
    )
    found = {f.rule_id for f in lint_text(text).findings}
    assert not found & {"GP003", "GP004"}
    assert "GP612" in found
    other = text.replace("template.openshift.io/v1", "example.com/v1")  # another group's Template
    assert {"GP003", "GP004"} <= {f.rule_id for f in lint_text(other).findings}


def test_a_script_in_a_custom_resources_field_is_its_own_text(lint_text: LintText) -> None:
    """soperator's ActiveCheck runs a `#!/bin/bash` sbatchScript that sets and reads `${gpus_on_node}`."""
    text = (
        "apiVersion: slurm.nebius.ai/v1alpha1\nkind: ActiveCheck\nmetadata: {name: gpu-checks}\nspec:\n"
        "  slurmJobSpec:\n    sbatchScript: |\n      #!/bin/bash\n      gpus=$(nvidia-smi -L | wc -l)\n"
        '      echo "${gpus}"\n    name: ${JOB_NAME}\n'
    )
    assert [f.path for f in lint_text(text).findings if f.rule_id == "GP004"] == [
        ("spec", "slurmJobSpec", "name")
    ]


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: perses.dev/v1alpha1\nkind: PersesDashboard\nmetadata: {name: llm-d}\nspec:\n"
        "  variables:\n  - spec: {defaultValue: $__all, allowAllValue: true}\n"
        "  panels:\n    util: {spec: {queries: [{spec: {seriesNameFormat: '{{k8s_pod_name}}'}}]}}\n",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: templates.template.openshift.io}\n"
        "spec:\n  group: template.openshift.io\n  names: {kind: Template, plural: templates}\n  scope: Namespaced\n"
        "  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n"
        "        description: 'value may hold ${PARAMETER_REFERENCE}'\n        type: object\n",
    ],
)
def test_a_document_in_another_programs_language_holds_no_deploy_time_placeholder(
    lint_text: LintText, text: str
) -> None:
    """ODH's Perses dashboards (`$__all`, `{{k8s_pod_name}}`) and a CRD's schema descriptions."""
    assert not [f for f in lint_text(text).findings if f.rule_id == "GP004"]


def test_an_all_capitals_name_is_a_placeholder_to_fill_in(lint_text: LintText) -> None:
    """kubeflow/examples' serving template names its Deployment MODEL_NAME in KUBEFLOW_NAMESPACE:
    GP005 left names with `_` to GP004, which said nothing; Helm 2's `RELEASE-NAME-redis` was GP005's
    'not a DNS subdomain'. The GPU operator's FILLED_BY_OPERATOR says who fills it in."""
    text = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: MODEL_NAME\n  namespace: KUBEFLOW_NAMESPACE\n"
        "spec:\n  selector: {matchLabels: {app: m}}\n  template:\n    metadata: {labels: {app: m}}\n"
        "    spec:\n      containers: [{name: m, image: 'redis:7.2.4'}]\n"
    )
    found = [(f.rule_id, f.path) for f in lint_text(text).findings if f.rule_id in ("GP004", "GP005")]
    assert found == [("GP004", ("metadata", "name")), ("GP004", ("metadata", "namespace"))]
    helm2 = text.replace("MODEL_NAME", "RELEASE-NAME-redis").replace("  namespace: KUBEFLOW_NAMESPACE\n", "")
    found = [(f.rule_id, f.path) for f in lint_text(helm2).findings if f.rule_id in ("GP004", "GP005")]
    assert found == [("GP004", ("metadata", "name"))]
    operator = text.replace("MODEL_NAME", "FILLED_BY_OPERATOR").replace(
        "  namespace: KUBEFLOW_NAMESPACE\n", ""
    )
    assert not [f for f in lint_text(operator).findings if f.rule_id in ("GP004", "GP005")]


NODE_AGENT = """\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: NAME, namespace: NAMESPACE}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      volumes: [{name: host, hostPath: {path: HOSTPATH}}]
      containers:
        - name: agent
          image: IMAGE
          volumeMounts: [{name: host, mountPath: /host}]
"""


@pytest.mark.parametrize(
    ("name", "namespace", "host_path", "image", "placeholder"),
    [
        # OPEA's memory-bandwidth exporter: a node agent (NRI's socket), its image filled in by a
        # Makefile before it is applied.
        ("memory-bandwidth-exporter", "system", "/var/run/nri", "MBE_IMG", True),
        # The GPU operator's own DaemonSets: the operator writes their images in itself.
        ("nvidia-device-plugin-daemonset", "gpu-operator", "/var/lib/kubelet/device-plugins", "FILLED_BY_OPERATOR", False),
        ("node-agent", "gpu-operator", "/var/run/nri", "FILLED_BY_OPERATOR", False),
    ],
)  # fmt: skip
def test_only_the_gpu_stacks_agents_have_their_all_capitals_images_filled_in(
    lint_text: LintText, name: str, namespace: str, host_path: str, image: str, placeholder: bool
) -> None:
    text = (
        NODE_AGENT.replace("NAMESPACE", namespace)
        .replace("NAME", name)
        .replace("HOSTPATH", host_path)
        .replace("IMAGE", image)
    )
    report = lint_text(text)
    assert [role.decision.role.value for role in report.roles] == ["agent"]
    found = [f.path for f in report.findings if f.rule_id == "GP004"]
    assert (found == [("spec", "template", "spec", "containers", 0, "image")]) is placeholder
