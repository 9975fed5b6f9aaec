"""The names gpupolicy shares with its users and its deployment, each defined once.

Every `gpupolicy.io/*` label, annotation and schema id; the webhook modes; the output format names;
and the cluster kinds the rules read (what the webhook's inventory lists and watches, and what the
admission webhook is sent). The bottom layer: it imports nothing from gpupolicy.

What must agree with it and cannot import it is tested against it (tests/test_vocabulary.py):
the policy schema's and the chart's mode enums, the format registry (`gpupolicy.formats`), the
chart's RBAC (`templates/rbac.yaml`) and webhook rules (`values.yaml` `webhook.rules`).
"""

from __future__ import annotations

from dataclasses import dataclass

# -- labels and annotations users write on their objects (DESIGN.md) -------------------------------

EXPERIMENT_LABEL = "gpupolicy.io/experiment"  # the experiment ConfigMap a workload belongs to
ARM_LABEL = "gpupolicy.io/arm"  # the experiment arm a workload runs
WORKLOAD_CLASS_LABEL = "gpupolicy.io/workload-class"  # online, batch...
IGNORE_ANNOTATION = "gpupolicy.io/ignore"  # suppressions: "GP601: reason; GP202: ..."
MODEL_ANNOTATION = "gpupolicy.io/model"
INPUT_ANNOTATION = "gpupolicy.io/input"
MODEL_LOAD_ANNOTATION = "gpupolicy.io/model-load-seconds"
ROLLBACK_ANNOTATION = "gpupolicy.io/rollback-criteria"
# A Gatekeeper Constraint's or a ValidatingAdmissionPolicyBinding's rule id and remediation, when
# it runs as a gpupolicy custom rule (gpupolicy/custom/).
RULE_ID_ANNOTATION = "gpupolicy.io/rule-id"
REMEDIATION_ANNOTATION = "gpupolicy.io/remediation"
GIT_REVISION_KEY = "gpupolicy.io/git-revision"  # a label or an annotation: the manifests' revision

# -- versioned names of what gpupolicy writes -------------------------------------------------------

LINT_REPORT_SCHEMA = "gpupolicy.io/lint-report/v1"  # `lint --format json`
BASELINE_SCHEMA = "gpupolicy.io/baseline/v1"
POLICY_API_VERSION = "gpupolicy.io/v1alpha1"  # the Policy document `cluster snapshot` writes

# -- webhook modes and output formats ---------------------------------------------------------------

# `gpupolicy serve --mode`, the policy's webhook.mode and namespaceModes, the chart's `mode`.
ENFORCE, WARN, AUDIT = "enforce", "warn", "audit"
MODES = (ENFORCE, WARN, AUDIT)

# `gpupolicy lint --format`, in the order the help lists them. Each is a renderer registered in
# gpupolicy.formats (the registry renders; this list names).
FORMATS = ("text", "json", "sarif", "junit", "github", "markdown")


def format_help() -> str:
    """`text, json, ... or markdown`."""
    return f"{', '.join(FORMATS[:-1])} or {FORMATS[-1]}"


# -- the cluster kinds the rules read ---------------------------------------------------------------


# A frozen dataclass, not @immutable: this module imports nothing from gpupolicy (few are made).
@dataclass(frozen=True, slots=True)
class ClusterKind:
    """A Kubernetes kind the rules read beyond the object they judge.

    `cached`: the webhook's cluster inventory lists and watches it (the chart's ClusterRole grants
    list and watch on `plural` in `group`). `admitted`: the webhook is sent its changes and
    evaluates them, because admitting one can break a GPU workload that was fine (a PDB that now
    blocks drains, a deleted tier...): the chart's webhook rules send it.
    """

    kind: str
    api_version: str  # the preferred version; the inventory may fall back to older ones
    plural: str
    namespaced: bool
    cached: bool = True
    admitted: bool = False

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


CLUSTER_KINDS: tuple[ClusterKind, ...] = (
    ClusterKind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", False, admitted=True),
    ClusterKind("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", True, admitted=True),
    ClusterKind("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", True),
    # Only experiment configs are cached and evaluated, but the API cannot filter by content.
    ClusterKind("ConfigMap", "v1", "configmaps", True, admitted=True),
    ClusterKind("Namespace", "v1", "namespaces", False),
    ClusterKind("NetworkPolicy", "networking.k8s.io/v1", "networkpolicies", True),
    ClusterKind("RuntimeClass", "node.k8s.io/v1", "runtimeclasses", False),
    ClusterKind("AnalysisTemplate", "argoproj.io/v1alpha1", "analysistemplates", True, admitted=True),
    ClusterKind(
        "ClusterAnalysisTemplate", "argoproj.io/v1alpha1", "clusteranalysistemplates", False, admitted=True
    ),
    ClusterKind("Canary", "flagger.app/v1beta1", "canaries", True, admitted=True),
    # Also a workload; a Rollout with workloadRef carries no template of its own.
    ClusterKind("Rollout", "argoproj.io/v1alpha1", "rollouts", True, cached=False, admitted=True),
    # The cluster facts (live_facts.py): GPU node pools and taints, GPU DeviceClasses, and the
    # namespaces a ResourceQuota lets use the system PriorityClasses.
    ClusterKind("Node", "v1", "nodes", False),
    ClusterKind("DeviceClass", "resource.k8s.io/v1", "deviceclasses", False),
    ClusterKind("ResourceQuota", "v1", "resourcequotas", True),
    # Kueue's classes (GP308), when Kueue is installed.
    ClusterKind("WorkloadPriorityClass", "kueue.x-k8s.io/v1beta2", "workloadpriorityclasses", False),
)

CLUSTER_KIND_BY_NAME = {entry.kind: entry for entry in CLUSTER_KINDS}
CACHED_KINDS = tuple(entry for entry in CLUSTER_KINDS if entry.cached)
CROSS_OBJECT_KINDS = frozenset(entry.kind for entry in CLUSTER_KINDS if entry.admitted)


def built_in_api_group(api_version: str) -> bool:
    """Whether an apiVersion is of a Kubernetes API group (`v1`, `apps/v1`,
    `rbac.authorization.k8s.io/v1`), not a custom resource's (`serving.knative.dev/v1`)."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")
