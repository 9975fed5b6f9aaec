"""What tells a Kubernetes object from the other YAML and JSON a repository holds.

A GitOps repository keeps CI workflows, mkdocs.yml, docker compose files, Helm values, OpenAPI
specs, renovate.json and the like beside its manifests, and pre-commit hands every changed YAML
or JSON file to the hook. Those documents are skipped (and counted in the report), never judged.
A document that tries to be an object and fails is still linted: GP003 says what it lacks.

The evidence that a document tries to be an object (`tries_to_be_object`), from the fields every
object has (https://kubernetes.io/docs/concepts/overview/working-with-objects/#required-fields):

- an `apiVersion` key beside a `kind` key or a key of an object's body (`metadata`, `spec`, `data`,
  `stringData`, `items`). An `apiVersion` alone heads other formats too: a Helm chart repository's
  `index.yaml` (`apiVersion: v1`, `entries`, `generated`), a chart's `Chart.yaml`;
- a `kind` key beside a key of an object's body. A `kind` key alone is a Helm values setting as
  often as not (fluent-bit's values say `kind: DaemonSet`);
- a `metadata` mapping that names an object (`name`, `generateName`, `namespace`): an object
  whose apiVersion and kind were lost. Labels or annotations alone are not: other formats keep
  them too (a Kubeflow Pipelines component spec's `metadata.annotations`);
- an item of a `kind: List` (the List said its items are objects);
- a document that is not a mapping (plain text, a list) in a file that holds an object or an
  attempt: a broken separator or indentation among manifests, not a file of another format.

Some files that name an apiVersion and kind are configuration read by a program, never sent to
the API server (`CONFIGURATION_GROUPS`: kubeconfig, kubeadm, kubelet, kind, kustomize ...): they
have no metadata to judge, and are skipped too; so is a document with neither metadata nor an
object's body whose kind or group says configuration (`…Config`, `…Configuration`, a `config.`
group: a controller's manager config, a router's).
"""

from __future__ import annotations

import re
from dataclasses import field
from typing import Any

from gpupolicy.core.immutable import mutable
from gpupolicy.loading.documents import Resource, Skipped

OBJECT_BODY_KEYS = frozenset({"metadata", "spec", "data", "stringData", "items"})
OBJECT_META_KEYS = frozenset({"name", "generateName", "namespace"})
# API groups of the configuration files of Kubernetes' own programs and tools, which a program
# reads from disk: https://kubernetes.io/docs/reference/config-api/ (kube-apiserver, audit,
# client authentication, kubeadm, kubelet and its credential providers, kube-proxy,
# kube-scheduler, kube-controller-manager), kind (https://kind.sigs.k8s.io/docs/user/configuration/)
# and kustomize (https://kubectl.docs.kubernetes.io/references/kustomize/kustomization/).
CONFIGURATION_GROUPS = frozenset(
    {
        "apiserver.config.k8s.io", "apiserver.k8s.io", "audit.k8s.io", "client.authentication.k8s.io",
        "kubeadm.k8s.io", "kubelet.config.k8s.io", "credentialprovider.kubelet.k8s.io",
        "kubeproxy.config.k8s.io", "kubescheduler.config.k8s.io", "kubecontrollermanager.config.k8s.io",
        "controllermanager.config.k8s.io", "kind.x-k8s.io", "kustomize.config.k8s.io",
        # controller-runtime's ControllerManagerConfig, which kubebuilder's operators read from a file
        # (https://pkg.go.dev/sigs.k8s.io/controller-runtime/pkg/config/v1alpha1)
        "controller-runtime.sigs.k8s.io",
        # operator-sdk's scorecard configuration (bundle/tests/scorecard/config.yaml), which the SDK
        # writes with a lowercase `apiversion` key
        "scorecard.operatorframework.io",
    }
)  # fmt: skip
# Istio's IstioOperator is a custom resource with metadata when an operator reconciles it, and
# istioctl's input without (`istioctl manifest generate -f profile.yaml`).
ISTIO_OPERATOR = ("install.istio.io", "IstioOperator")
# Kinds whose controller fills `{{…}}` in their strings itself, by the template language it speaks:
# - Argo Workflows (argoproj.io) when it runs a step: `{{inputs.parameters.x}}`, `{{item}}`,
#   Kubeflow Pipelines' `{{$}}`; never with a leading dot, which is Helm's
#   (https://argo-workflows.readthedocs.io/en/latest/variables/);
# - KServe (serving.kserve.io) with Go's text/template over the InferenceService, for a serving
#   runtime's containers (`{{.Name}}`, `{{.Labels.modelClass}}`: pkg/.../ReplacePlaceholders) and an
#   LLMInferenceServiceConfig (`{{ .GlobalConfig.IngressGatewayName }}`): a leading dot is theirs,
#   and only Helm's own objects and functions (`.Values`, `include`) are Helm's.
ARGO_WORKFLOW_KINDS = frozenset({"Workflow", "WorkflowTemplate", "ClusterWorkflowTemplate", "CronWorkflow"})
ARGO_GROUP = "argoproj.io"
KSERVE_TEMPLATED_KINDS = frozenset({"ServingRuntime", "ClusterServingRuntime", "LLMInferenceServiceConfig"})
KSERVE_GROUP = "serving.kserve.io"
# KWOK's Stage: its `statusTemplate` (and `next` patches) are Go templates KWOK evaluates against the
# object it simulates (https://kwok.sigs.k8s.io/docs/user/stages-configuration/).
KWOK_TEMPLATED_KINDS = frozenset({"Stage"})
KWOK_GROUP = "kwok.x-k8s.io"
ARGO, GO = "argo", "go"  # the dialects


def own_template_dialect(api_version: object, kind: object) -> str | None:
    """The template language in which an object of this apiVersion and kind holds `{{…}}` its
    controller fills in (ARGO or GO), or None."""
    if not isinstance(api_version, str):
        return None
    group = api_version.rpartition("/")[0]
    if kind in ARGO_WORKFLOW_KINDS and group == ARGO_GROUP:
        return ARGO
    if kind in KSERVE_TEMPLATED_KINDS and group == KSERVE_GROUP:
        return GO
    if kind in KWOK_TEMPLATED_KINDS and group == KWOK_GROUP:
        return GO
    return None


# A kubeconfig says `apiVersion: v1` and `kind: Config`: no object of the core API is called Config.
KUBECONFIG = ("v1", "Config")
# kube-scheduler's legacy policy file (`--policy-config-file`, removed in 1.23: predicates,
# priorities, extenders) says `apiVersion: v1` and `kind: Policy`: no core object is called Policy.
# https://github.com/kubernetes/kubernetes/blob/release-1.22/pkg/scheduler/apis/config/v1/types.go
SCHEDULER_POLICY = ("v1", "Policy")


# An API version as Kubernetes writes them: `v1`, `apps/v1`, `serving.kserve.io/v1beta1`. A bounded
# literal pattern of one line, matched whole: linear.
_API_VERSION = re.compile(r"(?:[a-z0-9][a-z0-9.-]{0,252}/)?v[0-9]{1,4}[a-z0-9]{0,20}")


def _another_tools_type(api_version: str, kind: str) -> bool:
    """ksonnet's `apiVersion: 0.3.0`, `kind: ksonnet.io/app`: a version no API group writes and a
    kind that is a path, neither a Kubernetes object's (a kind is one CamelCase word). Either
    alone is the object's own mistake (GP003, GP005); both, another tool's file."""
    return ("/" in kind or "." in kind) and _API_VERSION.fullmatch(api_version.strip()) is None


def tries_to_be_object(value: Any) -> bool:
    """Whether a mapping document carries the evidence of an object (the module's list)."""
    if not isinstance(value, dict):
        return False
    # Evidence by shape, not by words: a tokenizer's vocabulary holds "kind", "metadata" and
    # "name" among 50,000 keys, each a number.
    api_version, kind = isinstance(value.get("apiVersion"), str), isinstance(value.get("kind"), str)
    if api_version and kind:  # most documents: asked first, without the body's keys
        return not _another_tools_type(value["apiVersion"], value["kind"])
    if (api_version or kind) and any(isinstance(value.get(key), dict | list) for key in OBJECT_BODY_KEYS):
        return True
    metadata = value.get("metadata")
    return isinstance(metadata, dict) and not OBJECT_META_KEYS.isdisjoint(metadata)


def configuration_file(value: Any) -> str | None:
    """What a configuration file of a Kubernetes program is (`kind.x-k8s.io Cluster`), or None."""
    if not isinstance(value, dict):
        return None
    api_version, kind = value.get("apiVersion", value.get("apiversion")), value.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    if (api_version, kind) == KUBECONFIG:
        return "a kubeconfig, not an API object"
    if (api_version, kind) == SCHEDULER_POLICY:
        return "a kube-scheduler policy file (--policy-config-file), not an API object"
    group = api_version.rpartition("/")[0]
    if group in CONFIGURATION_GROUPS:
        return f"a {group} {kind[:80]} configuration file, not an API object"
    if (group, kind) == ISTIO_OPERATOR and not isinstance(value.get("metadata"), dict):
        return "an istioctl IstioOperator input file (no metadata), not an API object"
    if (
        "metadata" not in value
        and OBJECT_BODY_KEYS.isdisjoint(value)
        and _reads_as_configuration(group, kind)
    ):
        return (
            f"a {f'{group} ' if group else ''}{kind[:80]} configuration file (no metadata), not an API object"
        )
    return None


def _reads_as_configuration(group: str, kind: str) -> bool:
    """Whether an apiVersion and kind name a program's configuration by the convention Kubernetes'
    own components follow (`kubescheduler.config.k8s.io` `KubeSchedulerConfiguration`), which
    controllers' manager configs (Kueue's `config.kueue.x-k8s.io` `Configuration`, JobSet's, LWS's)
    and routers' (llm-d's `EndpointPickerConfig`) follow too."""
    return kind.endswith(("Config", "Configuration")) or "config" in group.split(".")


def _not_an_object(value: Any) -> str:
    if isinstance(value, dict):
        what = (
            "an apiVersion without kind or metadata"
            if "apiVersion" in value
            else "no apiVersion, kind or metadata"
        )
    elif isinstance(value, list):
        what = "a list"
    else:
        what = "plain text" if isinstance(value, str) else "a scalar"
    return f"not a Kubernetes object ({what})"


EMPTY = "empty"
NO_OBJECT = "no Kubernetes object"


@mutable
class ObjectFilter:
    """One file's documents, given in order (all at once or one at a time), sorted into the objects
    to lint (with the attempts GP003 judges) and the documents skipped.

    A document that is not a mapping is held back until the file shows an object or an attempt
    (then it is one too, and is given back in its place in the order) or ends (then it is
    skipped). What was skipped is known when the file ends (`finish`): a file without objects
    and without problems is one entry (`doc_index` None), otherwise each skipped document is."""

    file: str
    seen_object: bool = False
    seen_problem: bool = False
    pending: list[Resource] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def take(self, resources: list[Resource], *, problems: bool = False) -> list[Resource]:
        """Of `resources` (the next documents of the file), those to lint, in order."""
        self.seen_problem = self.seen_problem or problems
        kept: list[Resource] = []
        for resource in resources:
            value = resource.obj
            configuration = configuration_file(value)
            if configuration is not None and not resource.in_list:
                self.skipped.append(Skipped(self.file, resource.doc_index, configuration))
            elif (
                resource.in_list
                or tries_to_be_object(value)
                or (self.seen_object and not isinstance(value, dict))
            ):
                self.seen_object = True
                kept.extend(self.pending)
                self.pending.clear()
                kept.append(resource)
            elif isinstance(value, dict):
                self.skipped.append(Skipped(self.file, resource.doc_index, _not_an_object(value)))
            else:
                self.pending.append(resource)  # an attempt only if an object shows up
        return kept

    def finish(self) -> list[Skipped]:
        """What the file skipped, once it has ended."""
        skipped = sorted(
            [*self.skipped, *(Skipped(self.file, r.doc_index, _not_an_object(r.obj)) for r in self.pending)],
            key=lambda item: item.doc_index or 0,
        )
        self.pending.clear()
        if self.seen_object or self.seen_problem:
            return skipped
        reasons = {item.reason for item in skipped}
        reason = EMPTY if not skipped else reasons.pop() if len(reasons) == 1 else NO_OBJECT
        return [Skipped(self.file, None, reason)]
