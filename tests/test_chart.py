"""The Helm chart of the webhook (charts/gpupolicy): `helm lint --strict`, `helm template` with the
defaults and with toggles, and what DESIGN.md promises of it — kube-system and its own namespace
excluded, failurePolicy Ignore with a 3 s timeout (Fail available), >= 2 replicas with a PDB and
anti-affinity, Pod Security `restricted` (checked by gpupolicy itself), container arguments that
`gpupolicy serve` accepts, and a policy ConfigMap that the server loads.

Needs the real `helm` (on PATH, or at .tools/helm: `charts/install-helm.sh`); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
import yaml

from gpupolicy.cli.main import build_parser
from gpupolicy.kube.pod_spec import EXTRACTORS, WALKED_CUSTOM_RESOURCES
from gpupolicy.policy.loading import load_policy
from gpupolicy.webhook.cluster_inventory import KINDS
from gpupolicy.webhook.kinds import CROSS_OBJECT_KINDS
from gpupolicy.webhook.settings import Mode, WebhookSettings
from tests.real_tools import HELM, needs_helm
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import client_context, free_port, write_certificate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "gpupolicy"
RELEASE, NAMESPACE = "gp", "gpu-policy"
FULLNAME = f"{RELEASE}-gpupolicy"


# Values variants rendered by several tests: the defaults and the documented toggles.
EXISTING_SECRET: dict[str, Any] = {
    "tls": {"certManager": {"enabled": False}, "existingSecret": "gpupolicy-tls", "caBundle": "Q0EgUEVN"}
}
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "existing-secret": EXISTING_SECRET,
    "fail": {"webhook": {"failurePolicy": "Fail"}},
    "service-monitor": {"serviceMonitor": {"enabled": True}},
    "hard-anti-affinity": {"podAntiAffinity": "hard", "replicaCount": 3},
    "persistent": {"dataDir": {"type": "persistentVolumeClaim"}},
    "postgres": {"provenance": {"db": {"url": "postgresql://gp:secret@pg.db.svc:5432/gpupolicy"}}},
    "db-secret": {"provenance": {"db": {"existingSecret": "gpupolicy-db", "secretKey": "dsn"}}},
    "no-provenance": {"provenance": {"enabled": False}},
    "provenance-api": {"provenance": {"apiPort": 8444}},
    "no-cluster-facts": {"clusterFacts": {"enabled": False}},
    "slow-cluster-facts": {"clusterFacts": {"recomputeSeconds": 60}},
    "modes": {
        "mode": "warn",
        "namespaceModes": [{"namespaces": ["sandbox-*"], "mode": "audit"}],
        "webhook": {"excludedNamespaces": ["gpu-operator"]},
        "policy": {"supplyChain": {"allowedRegistries": ["nvcr.io"]}},
        "priorityClassName": "gpupolicy-webhook",
    },
}


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    assert HELM is not None
    result = subprocess.run([HELM, *args], capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


@cache
def _render(values_json: str, namespace: str) -> str:
    values_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpupolicy-chart-values-{os.getpid()}.json"
    values_file.write_text(values_json, encoding="utf-8")
    try:
        return helm("template", RELEASE, str(CHART), "--namespace", namespace, "-f", str(values_file)).stdout
    finally:
        values_file.unlink(missing_ok=True)


def render_text(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> str:
    return _render(json.dumps(values or {}, sort_keys=True), namespace)


def render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(render_text(values, namespace)) if doc]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def workload(docs: list[dict[str, Any]]) -> dict[str, Any]:
    found = [doc for doc in docs if doc["kind"] in ("Deployment", "StatefulSet")]
    assert len(found) == 1
    return found[0]


def webhook_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    hooks = one(docs, "ValidatingWebhookConfiguration")["webhooks"]
    assert len(hooks) == 1
    hook: dict[str, Any] = hooks[0]
    return hook


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = workload(docs)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["webhook"]
    found: dict[str, Any] = containers[0]
    return found


def plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + ("es" if lower.endswith("s") else "s")


# -- helm lint and template ------------------------------------------------------------------------


@needs_helm
def test_helm_is_real() -> None:
    version = helm("version", "--short").stdout.strip()
    assert re.match(r"v[34]\.\d+\.\d+", version), version


@needs_helm
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_helm_lint_strict(variant: str, tmp_path: Path) -> None:
    values = tmp_path / "values.json"
    values.write_text(json.dumps(VARIANTS[variant]), encoding="utf-8")
    result = helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, "-f", str(values))
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout
    assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout


@needs_helm
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_helm_template_renders(variant: str) -> None:
    docs = render(VARIANTS[variant])
    kinds = {doc["kind"] for doc in docs}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Service"} <= kinds
    assert {"PodDisruptionBudget", "ValidatingWebhookConfiguration"} <= kinds
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration"):
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]


@needs_helm
@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": 1}, "replicaCount"),
        ({"webhook": {"failurePolicy": "Sometimes"}}, "failurePolicy"),
        ({"webhook": {"timeoutSeconds": 31}}, "timeoutSeconds"),
        ({"mode": "deny"}, "mode"),
        ({"namespaceModes": [{"namespaces": ["a"], "mode": "block"}]}, "mode"),
        ({"tls": {"certManager": {"enabled": False}}}, "tls.existingSecret is required"),
        ({"containerPort": 443}, "containerPort"),
        ({"unknownKey": 1}, "unknownKey"),
        ({"provenance": {"timeoutSeconds": 0}}, "timeoutSeconds"),
        (
            {"provenance": {"timeoutSeconds": 5}},
            "provenance.timeoutSeconds (5) must be below webhook.timeoutSeconds (3)",
        ),
        ({"provenance": {"apiPort": 8443}}, "provenance.apiPort must not be the containerPort"),
        ({"provenance": {"apiPort": 70000}}, "apiPort"),
        ({"clusterFacts": {"recomputeSeconds": -1}}, "recomputeSeconds"),
        ({"clusterFacts": {"enable": False}}, "enable"),
    ],
)
def test_bad_values_are_refused(values: dict[str, Any], message: str, tmp_path: Path) -> None:
    file = tmp_path / "values.json"
    file.write_text(json.dumps(values), encoding="utf-8")
    result = helm("template", RELEASE, str(CHART), "-n", NAMESPACE, "-f", str(file), check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


# -- the ValidatingWebhookConfiguration -------------------------------------------------------------


@needs_helm
def test_webhook_defaults() -> None:
    hook = webhook_of(render())
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] == 3
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["clientConfig"]["service"] == {
        "name": FULLNAME,
        "namespace": NAMESPACE,
        "path": "/validate",
        "port": 443,
    }
    assert "objectSelector" not in hook
    for rule in hook["rules"]:
        assert rule["operations"] == ["CREATE", "UPDATE"]
        assert not any("/" in resource for resource in rule["resources"])  # no subresources


@needs_helm
def test_failure_policy_fail_is_available() -> None:
    assert webhook_of(render({"webhook": {"failurePolicy": "Fail"}}))["failurePolicy"] == "Fail"
    assert webhook_of(render({"webhook": {"timeoutSeconds": 10}}))["timeoutSeconds"] == 10


@needs_helm
@pytest.mark.parametrize("namespace", [NAMESPACE, "gpupolicy-system"])
def test_kube_system_and_own_namespace_excluded(namespace: str) -> None:
    docs = render(VARIANTS["modes"], namespace=namespace)
    expressions = webhook_of(docs)["namespaceSelector"]["matchExpressions"]
    exclusion = [e for e in expressions if e["key"] == "kubernetes.io/metadata.name"]
    assert len(exclusion) == 1 and exclusion[0]["operator"] == "NotIn"
    assert set(exclusion[0]["values"]) == {"kube-system", namespace, "gpu-operator"}


@needs_helm
def test_object_selector_and_extra_namespace_selector() -> None:
    selector = {"matchExpressions": [{"key": "gpupolicy.io/skip", "operator": "DoesNotExist"}]}
    extra = [{"key": "gpupolicy.io/enforce", "operator": "In", "values": ["true"]}]
    hook = webhook_of(
        render({"webhook": {"objectSelector": selector, "namespaceSelectorExpressions": extra}})
    )
    assert hook["objectSelector"] == selector
    assert hook["namespaceSelector"]["matchExpressions"][1:] == extra


def _rule_resources(hook: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (group, resource)
        for rule in hook["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


# Where the API serves each kind the engine knows (kind -> API group).
KIND_GROUPS = {
    "Pod": "",
    "ReplicationController": "",
    "PodTemplate": "",
    "ConfigMap": "",
    "Deployment": "apps",
    "StatefulSet": "apps",
    "ReplicaSet": "apps",
    "DaemonSet": "apps",
    "Job": "batch",
    "CronJob": "batch",
    "Rollout": "argoproj.io",
    "AnalysisTemplate": "argoproj.io",
    "ClusterAnalysisTemplate": "argoproj.io",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io",
    "InferenceService": "serving.kserve.io",
    "LLMInferenceService": "serving.kserve.io",
    "LLMInferenceServiceConfig": "serving.kserve.io",
    "NIMService": "apps.nvidia.com",
    "DynamoGraphDeployment": "nvidia.com",
    "Workflow": "argoproj.io",
    "WorkflowTemplate": "argoproj.io",
    "ClusterWorkflowTemplate": "argoproj.io",
    "CronWorkflow": "argoproj.io",
    "SparkApplication": "sparkoperator.k8s.io",
    "ScheduledSparkApplication": "sparkoperator.k8s.io",
    "PodCliqueSet": "grove.io",
    "RayCluster": "ray.io",
    "RayService": "ray.io",
    "RayJob": "ray.io",
    "PyTorchJob": "kubeflow.org",
    "TFJob": "kubeflow.org",
    "MPIJob": "kubeflow.org",
    "XGBoostJob": "kubeflow.org",
    "PaddleJob": "kubeflow.org",
    "JAXJob": "kubeflow.org",
    "TrainJob": "trainer.kubeflow.org",
    "JobSet": "jobset.x-k8s.io",
    "PodDisruptionBudget": "policy",
    "PriorityClass": "scheduling.k8s.io",
    "Canary": "flagger.app",
}


@needs_helm
def test_rules_cover_every_kind_the_engine_knows() -> None:
    """A workload kind added to the engine (or a cross-object kind to the webhook) must be added
    to KIND_GROUPS here and to the chart's webhook.rules."""
    engine_kinds = set(EXTRACTORS) | set(CROSS_OBJECT_KINDS)
    assert engine_kinds <= set(KIND_GROUPS), (
        f"unknown to this test: {sorted(engine_kinds - set(KIND_GROUPS))}"
    )
    covered = _rule_resources(webhook_of(render()))
    # Kinds walked for their pod templates under a name the built-in API uses for another kind.
    assert covered >= WALKED_CUSTOM_RESOURCES
    missing = sorted(kind for kind in engine_kinds if (KIND_GROUPS[kind], plural(kind)) not in covered)
    assert not missing, f"the webhook rules do not send {missing}"


# -- TLS ----------------------------------------------------------------------------------------


@needs_helm
def test_cert_manager_by_default() -> None:
    docs = render()
    certificate, issuer = one(docs, "Certificate"), one(docs, "Issuer")
    annotation = one(docs, "ValidatingWebhookConfiguration")["metadata"]["annotations"]
    assert annotation["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{certificate['metadata']['name']}"
    assert certificate["spec"]["issuerRef"]["name"] == issuer["metadata"]["name"]
    assert f"{FULLNAME}.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    volumes = {v["name"]: v for v in workload(docs)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == certificate["spec"]["secretName"]
    assert "caBundle" not in webhook_of(docs)["clientConfig"]


@needs_helm
def test_cert_manager_with_own_issuer() -> None:
    docs = render({"tls": {"certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}})
    assert not [doc for doc in docs if doc["kind"] == "Issuer"]
    assert one(docs, "Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
        "group": "cert-manager.io",
    }


@needs_helm
def test_existing_secret_instead_of_cert_manager() -> None:
    docs = render(EXISTING_SECRET)
    assert not [doc for doc in docs if doc["apiVersion"].startswith("cert-manager.io/")]
    configuration = one(docs, "ValidatingWebhookConfiguration")
    assert "cert-manager.io/inject-ca-from" not in (configuration["metadata"].get("annotations") or {})
    assert webhook_of(docs)["clientConfig"]["caBundle"] == "Q0EgUEVN"
    volumes = {v["name"]: v for v in workload(docs)["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "gpupolicy-tls"


# -- availability -----------------------------------------------------------------------------


@needs_helm
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_replicas_pdb_and_anti_affinity(variant: str) -> None:
    docs = render(VARIANTS[variant])
    owner = workload(docs)
    assert owner["spec"]["replicas"] >= 2
    labels = owner["spec"]["template"]["metadata"]["labels"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    anti = owner["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    terms = [t["podAffinityTerm"] for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
    terms += anti.get("requiredDuringSchedulingIgnoredDuringExecution", [])
    assert terms and all(t["topologyKey"] == "kubernetes.io/hostname" for t in terms)
    assert all(t["labelSelector"]["matchLabels"].items() <= labels.items() for t in terms)
    if VARIANTS[variant].get("podAntiAffinity") == "hard":
        assert "requiredDuringSchedulingIgnoredDuringExecution" in anti
    spread = owner["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    service = one(docs, "Service") if owner["kind"] == "Deployment" else None
    if service is not None:
        assert service["spec"]["selector"].items() <= labels.items()


@needs_helm
def test_rolling_update_keeps_every_replica() -> None:
    strategy = workload(render())["spec"]["strategy"]
    assert strategy["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}


@needs_helm
def test_no_system_priority_class_by_default() -> None:
    assert "priorityClassName" not in workload(render())["spec"]["template"]["spec"]
    spec = workload(render(VARIANTS["modes"]))["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "gpupolicy-webhook"


# -- the pod ------------------------------------------------------------------------------------


@needs_helm
def test_probes_and_resources() -> None:
    main = container(render())
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert main["startupProbe"]["httpGet"]["path"] == "/healthz"
    startup = main["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 60
    assert main["resources"]["requests"]["cpu"] and main["resources"]["limits"]["memory"]
    assert main["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]


@needs_helm
def test_security_context_is_restricted() -> None:
    docs = render()
    spec = workload(docs)["spec"]["template"]["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    context = container(docs)["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"]: m["name"] for m in container(docs)["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/var/lib/gpupolicy"]]  # the data directory is writable
    assert "emptyDir" in volumes[mounts["/tmp"]]
    token = volumes[mounts["/var/run/secrets/kubernetes.io/serviceaccount"]]["projected"]["sources"]
    assert any("serviceAccountToken" in source for source in token)


@needs_helm
def test_persistent_data_dir_runs_a_statefulset() -> None:
    docs = render(VARIANTS["persistent"])
    assert not [doc for doc in docs if doc["kind"] == "Deployment"]
    stateful = one(docs, "StatefulSet")
    claims = stateful["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["data"]
    assert claims[0]["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert "data" not in {v["name"] for v in stateful["spec"]["template"]["spec"]["volumes"]}
    services = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "Service"}
    assert services[stateful["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"


def _lint(text: str, tmp_path: Path, *, level: str = "restricted") -> dict[str, Any]:
    policy = tmp_path / "restricted.yaml"
    policy.write_text(f"security: {{level: {level}}}\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", "-", "--policy", str(policy), "--format", "json"],
        input=text,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert not report["internalErrors"]
    return report


@needs_helm
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_pod_security_restricted_by_gpupolicy(variant: str, tmp_path: Path) -> None:
    """gpupolicy lints the rendered chart with security.level restricted: no GP6xx finding (Pod
    Security, RBAC, service-account token), no schema violation (GP005), no error at all."""
    report = _lint(render_text(VARIANTS[variant]), tmp_path)
    assert report["summary"]["objects"] >= 8
    findings = [f"{f['rule']} {f['message']}" for f in report["findings"]]
    assert not [f for f in findings if f.startswith(("GP6", "GP005"))], findings
    assert report["summary"]["errors"] == 0, findings


@needs_helm
def test_the_restricted_check_bites(tmp_path: Path) -> None:
    """The check above is not vacuous: a weaker securityContext is reported."""
    weaker = {"securityContext": {"allowPrivilegeEscalation": True, "capabilities": {"drop": []}}}
    rules = {f["rule"] for f in _lint(render_text(weaker), tmp_path)["findings"]}
    assert {"GP602", "GP604"} <= rules


# -- RBAC -------------------------------------------------------------------------------------------


def _granted(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


@needs_helm
def test_rbac_covers_the_inventory_and_the_reconciler() -> None:
    docs = render()
    role = one(docs, "ClusterRole")
    granted = _granted(role)
    for spec in KINDS:  # what the cluster inventory lists and watches
        group = spec.api_version.rpartition("/")[0]
        resource = spec.plural or plural(spec.kind)
        assert {"list", "watch"} <= granted.get((group, resource), set()), spec.kind
    for kind in EXTRACTORS:  # the workload kinds the provenance reconciler gets
        assert "get" in granted.get((KIND_GROUPS[kind], plural(kind)), set()), kind
    for verbs in granted.values():
        assert verbs <= {"get", "list", "watch"} and "*" not in verbs
    assert ("", "secrets") not in granted
    binding = one(docs, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    account = one(docs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}
    ]
    assert workload(docs)["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]


# -- what `gpupolicy serve` is given ----------------------------------------------------------------


def _serve_args(docs: list[dict[str, Any]]) -> list[str]:
    main = container(docs)
    assert "command" not in main  # the image's entry point is `gpupolicy serve`
    args: list[str] = main["args"]
    return args


@needs_helm
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_container_args_are_gpupolicy_serve_flags(variant: str) -> None:
    docs = render(VARIANTS[variant])
    args = _serve_args(docs)
    parsed = build_parser().parse_args(["serve", *args])  # exits 2 on an unknown flag
    assert str(parsed.tls_cert) == "/tls/tls.crt" and str(parsed.tls_key) == "/tls/tls.key"
    assert [str(p) for p in parsed.policy] == ["/etc/gpupolicy/policy.yaml"]
    assert parsed.mode == VARIANTS[variant].get("mode", "enforce")
    assert str(parsed.data_dir) == "/var/lib/gpupolicy"
    assert parsed.port == 8443
    assert not parsed.insecure_dev and not parsed.no_cluster
    mounts = {m["mountPath"]: m for m in container(docs)["volumeMounts"]}
    assert {"/tls", "/etc/gpupolicy", "/var/lib/gpupolicy"} <= set(mounts)
    provenance = VARIANTS[variant].get("provenance", {})
    assert parsed.no_provenance is (provenance.get("enabled") is False)
    assert parsed.db_timeout == 2.0  # below the webhook's timeoutSeconds (3)
    # The records are served only when asked for, on 127.0.0.1 of another port.
    assert parsed.provenance_api_port == provenance.get("apiPort")
    assert parsed.provenance_api_host == "127.0.0.1"
    assert ("--db-timeout=2" in args) is not parsed.no_provenance
    assert ("--journal-max-mb=256" in args) is not parsed.no_provenance
    facts = {"enabled": True, "recomputeSeconds": 10, **VARIANTS[variant].get("clusterFacts", {})}
    assert parsed.no_cluster_facts is not facts["enabled"]
    if facts["enabled"]:
        assert parsed.cluster_facts_seconds == facts["recomputeSeconds"]
    env = {e["name"]: e for e in container(docs).get("env", [])}
    # The database URL holds a password: from the Secret through the environment, never an argument.
    assert parsed.db is None and parsed.db_url_file is None
    assert not any("GPUPOLICY_PROVENANCE_DB" in arg or "postgresql" in arg for arg in args)
    if provenance.get("db"):
        reference = env["GPUPOLICY_PROVENANCE_DB"]["valueFrom"]["secretKeyRef"]
        secrets = {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == "Secret"}
        if provenance["db"].get("existingSecret"):
            assert reference == {"name": "gpupolicy-db", "key": "dsn"}
            assert not secrets
        else:
            assert secrets[reference["name"]]["stringData"][reference["key"]] == provenance["db"]["url"]
    else:
        assert "GPUPOLICY_PROVENANCE_DB" not in env


def _policy_file(docs: list[dict[str, Any]], folder: Path) -> Path:
    configmap = next(doc for doc in docs if doc["kind"] == "ConfigMap")
    workload_volumes = {v["name"]: v for v in workload(docs)["spec"]["template"]["spec"]["volumes"]}
    assert workload_volumes["policy"]["configMap"]["name"] == configmap["metadata"]["name"]
    path = folder / "policy.yaml"
    path.write_text(configmap["data"]["policy.yaml"], encoding="utf-8")
    return path


@needs_helm
def test_policy_configmap_is_a_policy_the_server_loads(tmp_path: Path) -> None:
    docs = render(VARIANTS["modes"])
    policy = load_policy(extra=[_policy_file(docs, tmp_path)])
    settings = WebhookSettings.from_policy(policy)
    assert {"kube-system", NAMESPACE, "gpu-operator"} <= set(settings.excluded_namespaces)
    assert settings.mode_for("sandbox-a") is Mode.AUDIT
    assert policy.section("supplyChain")["allowedRegistries"] == ["nvcr.io"]
    annotations = workload(docs)["spec"]["template"]["metadata"]["annotations"]
    assert re.fullmatch(r"[0-9a-f]{64}", annotations["checksum/policy"])
    assert (
        annotations["checksum/policy"]
        != workload(render())["spec"]["template"]["metadata"]["annotations"]["checksum/policy"]
    )


@pytest.fixture
def chart_server(tmp_path: Path) -> Iterator[tuple[httpx.Client, list[str]]]:
    """`gpupolicy serve` started with the chart's container arguments; the in-pod paths (TLS,
    policy, data directory) are moved under tmp_path, and there is no cluster."""
    if HELM is None:
        pytest.skip("helm not found on PATH or at .tools/helm (install it: charts/install-helm.sh)")
    docs = render({"namespaceModes": [{"namespaces": ["sandbox-*"], "mode": "warn"}]})
    ca = trustme.CA()
    cert, key = write_certificate(ca, tmp_path / "tls")
    port = free_port()
    moved = {
        "--tls-cert": str(cert),
        "--tls-key": str(key),
        "--policy": str(_policy_file(docs, tmp_path)),
        "--data-dir": str(tmp_path / "data"),
        "--port": str(port),
    }
    args = []
    for arg in _serve_args(docs):
        flag, _, _ = arg.partition("=")
        args.append(f"{flag}={moved[flag]}" if flag in moved else arg)
    command = [sys.executable, "-m", "gpupolicy", "serve", *args, "--host", "127.0.0.1", "--no-cluster"]
    environment = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=environment)
    client = httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=client_context(ca), timeout=10.0)
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise AssertionError(f"gpupolicy serve exited {process.returncode}:\n{log.read_text()}")
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"gpupolicy serve did not answer:\n{log.read_text()}")
            time.sleep(0.2)
        yield client, args
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _privileged_gpu_deployment(namespace: str) -> dict[str, Any]:
    obj = gpu_deployment(managed_fields=0)
    obj["metadata"]["namespace"] = namespace
    obj["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    return obj


def test_the_chart_args_run_the_server(chart_server: tuple[httpx.Client, list[str]]) -> None:
    client, _ = chart_server
    assert client.get("/healthz").status_code == 200
    assert client.get("/metrics").status_code == 200

    def validate(namespace: str) -> dict[str, Any]:
        answer = client.post("/validate", json=admission_review(_privileged_gpu_deployment(namespace)))
        assert answer.status_code == 200, answer.text
        response: dict[str, Any] = answer.json()["response"]
        return response

    denied = validate("ai-lab")  # --mode=enforce from the chart
    assert denied["allowed"] is False and "GP601" in denied["status"]["message"]
    warned = validate("sandbox-a")  # namespaceModes from values, through the policy ConfigMap
    assert warned["allowed"] is True and any(w.startswith("GP601") for w in warned["warnings"])
    assert validate(NAMESPACE)["allowed"] is True  # its own namespace: excluded in the policy too
    assert "warnings" not in validate(NAMESPACE)


# -- other tools ------------------------------------------------------------------------------------


@needs_helm
def test_kubectl_client_dry_run(tmp_path: Path) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not found")
    result = subprocess.run(
        [kubectl, "create", "--dry-run=client", "-o", "name", "-f", "-"],
        input=render_text(),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "KUBECONFIG": str(tmp_path / "none")},
    )
    if result.returncode != 0 and re.search(
        r"connection refused|failed to download openapi|server", result.stderr
    ):
        pytest.skip("kubectl's client dry run still needs an API server (discovery and OpenAPI)")
    assert result.returncode == 0, result.stderr
    assert f"deployment.apps/{FULLNAME}" in result.stdout


def test_values_are_documented() -> None:
    """Every top-level value has a schema entry, and the schema has no entry without a value."""
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert set(values) == set(schema["properties"]) - {"global"}
    notes = (CHART / "templates" / "NOTES.txt").read_text(encoding="utf-8")
    assert "failurePolicy" in notes


@needs_helm
def test_service_monitor_scrapes_metrics_over_tls() -> None:
    assert not [doc for doc in render() if doc["kind"] == "ServiceMonitor"]
    docs = render(VARIANTS["service-monitor"])
    endpoint = one(docs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["scheme"], endpoint["path"]) == ("https", "https", "/metrics")
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": f"{FULLNAME}-tls", "key": "ca.crt"}
    assert endpoint["tlsConfig"]["serverName"] == f"{FULLNAME}.{NAMESPACE}.svc"


@needs_helm
def test_notes_explain_the_failure_policy() -> None:
    """NOTES.txt renders (a client-side dry run needs no cluster) and says what the choice means."""

    def notes(*values: str) -> str:
        args = ["install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client"]
        for value in values:
            args += ["--set", value]
        text = helm(*args).stdout
        return text[text.index("NOTES:") :]

    assert "fails open" in notes()
    closed = notes("webhook.failurePolicy=Fail", "tls.certManager.enabled=false", "tls.existingSecret=t")
    assert "fails closed" in closed and "tls.caBundle is empty" in closed
