"""GP612-GP616: what a GPU workload may reach besides its devices: credentials written into the
manifest, the service-account token, the network, the namespace's Pod Security and RBAC. They
apply to a GPU pod as to any pod; node agents (the GPU stack's and the cluster's own) are judged by their profile.
https://kubernetes.io/docs/concepts/security/secrets-good-practices/
https://kubernetes.io/docs/concepts/security/rbac-good-practices/
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.wording import listed
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Scope, Violation, rule
from gpupolicy.engine.unknowns import NETWORK_POLICIES, said_unknown, unknown_fact
from gpupolicy.kube import pod_security_levels as levels
from gpupolicy.kube.inventory import Coverage, namespace_of, workload_namespace
from gpupolicy.kube.placeholders import excerpt
from gpupolicy.kube.pod_spec import (
    CONFIG_KINDS,
    EXTRACTORS,
    Container,
    PodTemplate,
    Workload,
    as_list,
    as_mapping,
    workload_of,
)
from gpupolicy.kube.roles import NOT_AGENT, SERVERS
from gpupolicy.kube.secrets_detect import detect, detect_in_arguments, placeholder_credential
from gpupolicy.loading.documents import Resource


@rule(
    id="GP612",
    name="secret-literal-in-env",
    severity="error",
    summary="Reports an env value that is a literal credential (Hugging Face, OpenAI-style, AWS, GitHub, Slack, "
    "Google keys, JWTs, private keys, or a literal in a `*_TOKEN`/`*_PASSWORD`/`*_SECRET`/`*_KEY` variable), "
    "a credential-named variable whose value is a placeholder to fill in at deploy time (`$HF_TOKEN`, "
    "`${HF_TOKEN}`, `<secret>`, `YOUR_TOKEN_HERE`), and provider-shaped tokens or `--api-key`/`--token` values "
    "in command and args; and the same in a ConfigMap key a container loads into its environment (`envFrom`, "
    "`configMapKeyRef`), said once at the ConfigMap's key.",
    rationale="A manifest is read by everyone with repo or `get` access and lands in Git history, CI logs and "
    "the admission audit trail; a leaked Hugging Face or cloud token is usable at once.",
    remediation="Move the value into a Secret and reference it with env[].valueFrom.secretKeyRef.",
    references=(
        "https://kubernetes.io/docs/concepts/security/secrets-good-practices/",
        "https://kubernetes.io/docs/tasks/inject-data-application/distribute-credentials-secure/",
    ),
)
def secret_literal_in_env(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for _template, container in workload.containers():
        # One literal carried by several variables (HTTP_PROXY, http_proxy, HTTPS_PROXY…) is one
        # credential: reported once, at its first variable, naming the others.
        carried: dict[str, list[str]] = {}
        literals: list[tuple[JsonPath, str, str, str]] = []
        for path, item in container.env_items():
            value = item.get("value")
            if not isinstance(value, str):
                continue
            name = str(item.get("name", ""))
            hit = detect(name, value)
            if hit is not None:
                if value in carried:
                    carried[value].append(name)
                    continue
                carried[value] = [name]
                literals.append(((*path, "value"), value, name, hit.describe()))
            elif (placeholder := placeholder_credential(name, value)) is not None:
                how = (
                    "the workflow parameter {!r}: a credential passed as a parameter is kept in the Workflow "
                    "object, readable by whoever can get it"
                    if placeholder.evidence == "parameter"
                    else "the placeholder {!r}: a credential filled in at deploy time is still a credential in "
                    "the manifest (and in every rendered copy of it)"
                )
                yield Violation(
                    (*path, "value"),
                    f"{container.label} env {excerpt(name)} ({placeholder.kind}) is "
                    + how.format(excerpt(value.strip())),
                    container=container.name,
                )
        for where, value, name, described in literals:
            also = carried[value][1:]
            beside = f" (so do {listed([excerpt(other, 40) for other in also], ', ')})" if also else ""
            yield Violation(
                where,
                f"{container.label} env {excerpt(name)} holds a literal {described}{beside}",
                container=container.name,
            )
        for key in ("command", "args"):
            words = [str(word) for word in as_list(container.spec.get(key))]
            for index, hit in detect_in_arguments(words):
                yield Violation(
                    container.field(key, index),
                    f"{container.label} {key} holds a literal {hit.describe()}",
                    container=container.name,
                )
        yield from _credentials_in_config_maps(container, workload, ctx)


def _credentials_in_config_maps(
    container: Container, workload: Workload, ctx: Context
) -> Iterator[Violation]:
    """A credential in a ConfigMap the container loads into its environment (`envFrom`, or a
    `configMapKeyRef`): a ConfigMap is no Secret (kept unencrypted, readable with `get configmaps`,
    shown by `kubectl describe`), so a token there is as exposed as a literal in the pod. Said at the
    ConfigMap's key, once however many containers load it (OPEA's TGI chart puts HF_TOKEN there).
    Not looked for where only findings about the pod itself are kept (the webhook's review of one
    object): it would be dropped there, and the lint of the repository says it."""
    if ctx.subjects_only:
        return
    for name, keys in _config_map_keys(container).items():
        found = ctx.inventory.get("ConfigMap", name, workload_namespace(workload))
        if found is None:
            continue
        data = as_mapping(as_mapping(found.obj).get("data"))
        for key, value in data.items():
            if not isinstance(value, str) or (keys is not None and key not in keys):
                continue
            hit = detect(str(key), value) or placeholder_credential(str(key), value)
            if hit is None:
                continue
            what = (
                f"a {hit.kind} to fill in at deploy time ({excerpt(value.strip(), 40)})"
                if hit.evidence in ("placeholder", "parameter")
                else f"a literal {hit.describe()}"
            )
            yield Violation(
                ("data", str(key)),
                f"ConfigMap {found.name} key {excerpt(str(key))} holds {what}, and {container.label} of "
                f"{workload.kind} {workload.name} loads it into its environment; a ConfigMap is not a Secret",
                target=found,
                once=("GP612-config-map", found.namespace, found.name, key),
            )


def _config_map_keys(container: Container) -> dict[str, set[str] | None]:
    """The ConfigMaps a container's environment reads: every key of those `envFrom` names (None),
    the keys `configMapKeyRef`s name."""
    named: dict[str, set[str]] = {}
    for item in as_list(container.spec.get("env")):
        ref = as_mapping(as_mapping(as_mapping(item).get("valueFrom")).get("configMapKeyRef"))
        name, key = ref.get("name"), ref.get("key")
        if isinstance(name, str) and isinstance(key, str):
            named.setdefault(name, set()).add(key)
    whole = (
        as_mapping(as_mapping(source).get("configMapRef")).get("name")
        for source in as_list(container.spec.get("envFrom"))
    )
    every: dict[str, set[str] | None] = {name: None for name in whole if isinstance(name, str)}
    return {**named, **every}


def service_account_of(template: PodTemplate) -> str:
    name = template.spec.get("serviceAccountName") or template.spec.get("serviceAccount") or "default"
    return str(name)


@rule(
    id="GP613",
    roles=NOT_AGENT,
    name="service-account-token-automount",
    severity="info",
    summary="Reports a pod that mounts its service-account token: `automountServiceAccountToken` is not false on "
    "the pod, nor on its ServiceAccount in the inventory, and no RoleBinding or ClusterRoleBinding at hand grants "
    "that account the API (a pod given the API on purpose uses its token).",
    rationale="A model server rarely calls the Kubernetes API; a mounted token lets anyone who gets code "
    "execution in it (a prompt-injected tool call, a malicious checkpoint) act as its service account.",
    remediation="Set automountServiceAccountToken: false in the pod spec (or on its ServiceAccount).",
    references=(
        "https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/#opt-out-of-api-credential-automounting",
    ),
)
def service_account_token_automount(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if workload.kind in CONFIG_KINDS:  # a partial spec: the service that names it sets the account
        return
    for template in workload.templates:
        if not template.spec.get("containers"):  # KServe components and CRD fragments
            continue
        value = template.spec.get("automountServiceAccountToken")
        if value is False:
            continue
        name = service_account_of(template)
        if (workload_namespace(workload), name) in _bound_service_accounts(ctx):
            continue  # granted access to the API by a binding at hand: the pod calls it, with the token
        if value is True:
            yield Violation(
                template.field("automountServiceAccountToken"),
                f"{template.describe()} mounts the token of service account {name}",
            )
            continue
        account = ctx.inventory.get("ServiceAccount", name, workload.namespace)
        if account is not None and as_mapping(account.obj).get("automountServiceAccountToken") is False:
            continue
        where = (
            template.field("serviceAccountName") if "serviceAccountName" in template.spec else template.path
        )
        yield Violation(
            where,
            f"{template.describe()} mounts the token of service account {name} (automount not disabled)",
        )


@rule(
    id="GP614",
    roles=SERVERS,
    name="namespace-without-network-policy",
    severity="warning",
    summary="Reports a GPU workload whose namespace has no NetworkPolicy in the inventory (an info finding when "
    "the inventory cannot tell).",
    rationale="Without a NetworkPolicy every pod of the cluster can reach the model server's port, metrics and "
    "admin endpoints, and the server can reach anything, including the cloud metadata service.",
    remediation="Add a NetworkPolicy to the namespace that admits only the callers of the server.",
    references=("https://kubernetes.io/docs/concepts/services-networking/network-policies/",),
)
def namespace_without_network_policy(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not ctx.uses_gpus(workload):
        return
    coverage = ctx.inventory.coverage("NetworkPolicy")
    if coverage is Coverage.PARTIAL and said_unknown(ctx, NETWORK_POLICIES):
        return  # of a partial inventory that unknown is all it can say, whatever the namespace holds
    namespace = workload_namespace(workload)
    where = ("metadata", "namespace") if workload.namespace else ("metadata",)
    if coverage is Coverage.UNAVAILABLE:
        yield Violation(
            where,
            f"cannot tell whether namespace {namespace} has a NetworkPolicy (the inventory is unavailable)",
            unknown=True,
            once=("GP614", namespace),
        )
        return
    if ctx.inventory.list("NetworkPolicy", namespace):
        return
    if coverage is not Coverage.COMPLETE:
        # A repository seldom holds the cluster's NetworkPolicies: absence here proves nothing.
        yield from unknown_fact(ctx, NETWORK_POLICIES, where, "network isolation of GPU servers (GP614)")
        return
    yield Violation(  # a namespace-level fact: once per namespace
        where,
        f"namespace {namespace} runs GPU server {workload.name} but has no NetworkPolicy",
        once=("GP614", namespace),
    )


ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"


def gpu_workloads_in(namespace: str, ctx: Context) -> list[Workload]:
    def compute() -> list[Workload]:
        found = []
        for kind in EXTRACTORS:
            for resource in ctx.inventory.list(kind, namespace):
                if resource.namespace != namespace:  # only workloads that name the namespace
                    continue
                workload = workload_of(resource)
                if workload is not None and ctx.uses_gpus(workload):
                    found.append(workload)
        return found

    result: list[Workload] = ctx.namespace_memo(namespace, "gpu-workloads-in", compute)
    return result


@rule(
    id="GP615",
    name="namespace-pod-security-missing",
    severity="warning",
    scope=Scope.OBJECT,
    kinds=("Namespace",),
    summary="Reports a Namespace holding GPU workloads (in the inventory) whose `pod-security.kubernetes.io/enforce` "
    "label is missing or not baseline/restricted.",
    rationale="Pod Security admission is the cluster's own backstop: without the enforce label a privileged "
    "pod that slipped past review is admitted into the namespace where the GPUs are.",
    remediation="Label the Namespace pod-security.kubernetes.io/enforce: baseline (or restricted).",
    references=("https://kubernetes.io/docs/concepts/security/pod-security-admission/", levels.PSS_URL),
)
def namespace_pod_security_missing(resource: Resource, ctx: Context) -> Iterator[Violation]:
    workloads = gpu_workloads_in(resource.name, ctx)
    if not workloads or _declaration_judged(resource, workloads, ctx) is not resource:
        return
    value = resource.labels.get(ENFORCE_LABEL)
    if value in ("baseline", "restricted"):
        return
    names = listed(sorted({f"{w.kind}/{w.name}" for w in workloads}), ", ")
    if value is None:
        where = ("metadata", "labels") if resource.labels else ("metadata",)
        yield Violation(
            where, f"Namespace {resource.name} runs GPU workloads ({names}) without the {ENFORCE_LABEL} label"
        )
    else:
        yield Violation(
            ("metadata", "labels", ENFORCE_LABEL),
            f"Namespace {resource.name} enforces {value!r}, not baseline or restricted",
        )


def _declaration_judged(namespace: Resource, workloads: list[Workload], ctx: Context) -> Resource:
    """The one declaration of a namespace the repository declares several times (one per blueprint
    or overlay) that speaks for it: the first in the folder of one of its GPU workloads, else the
    first. One namespace, one finding."""
    declared = [item for item in ctx.inventory.list("Namespace") if item.name == namespace.name]
    if len(declared) < 2:
        return namespace
    folders = {PurePosixPath(workload.resource.file).parent for workload in workloads}
    beside = [item for item in declared if PurePosixPath(item.file).parent in folders]
    return (beside or declared)[0]


CLUSTER_ADMIN = "cluster-admin"


def _service_account_users(ctx: Context) -> dict[tuple[str, str], list[str]]:
    """(namespace, service account) → workloads in the inventory that run as it."""

    def compute() -> dict[tuple[str, str], list[str]]:
        users: dict[tuple[str, str], list[str]] = {}
        for kind in EXTRACTORS:
            for resource in ctx.inventory.list(kind):
                workload = workload_of(resource)
                if workload is None:
                    continue
                for template in workload.templates:
                    key = (namespace_of(resource), service_account_of(template))
                    users.setdefault(key, []).append(f"{resource.kind}/{resource.name}")
        return users

    result: dict[tuple[str, str], list[str]] = ctx.memo("service-account-users", compute)
    return result


def _bound_service_accounts(ctx: Context) -> frozenset[tuple[str, str]]:
    """(namespace, name) of each service account a RoleBinding or ClusterRoleBinding at hand names
    as a subject: its pods are given the API on purpose (a scheduler extender, an operator), so
    their token is used, not a stray credential (GP613)."""

    def compute() -> frozenset[tuple[str, str]]:
        found: set[tuple[str, str]] = set()
        for kind in ("RoleBinding", "ClusterRoleBinding"):
            for binding in ctx.inventory.list(kind):
                for subject in as_list(as_mapping(binding.obj).get("subjects")):
                    account = _service_account_subject(as_mapping(subject), binding)
                    if account is not None:
                        found.add(account)
        return frozenset(found)

    result: frozenset[tuple[str, str]] = ctx.memo("bound-service-accounts", compute)
    return result


def _service_account_subject(subject: dict[str, Any], binding: Resource) -> tuple[str, str] | None:
    """(namespace, name) of a binding's ServiceAccount subject (in the binding's namespace unless
    it names one), else None."""
    if subject.get("kind") != "ServiceAccount":
        return None
    return str(subject.get("namespace") or namespace_of(binding)), str(subject.get("name", ""))


def bound_workloads(binding: Resource, ctx: Context) -> list[str]:
    """Workloads in the inventory that run as a service account (or group of them) the binding names."""
    users = _service_account_users(ctx)
    found: list[str] = []
    for subject in as_list(as_mapping(binding.obj).get("subjects")):
        subject = as_mapping(subject)
        kind, name = subject.get("kind"), str(subject.get("name", ""))
        account = _service_account_subject(subject, binding)
        if account is not None:
            found += [f"{w} (service account {account[0]}/{account[1]})" for w in users.get(account, [])]
        elif kind == "Group" and name.startswith("system:serviceaccounts"):
            scope = name.removeprefix("system:serviceaccounts").lstrip(":")
            found += [
                f"{w} (group {name})" for (ns, _), ws in users.items() if not scope or ns == scope for w in ws
            ]
    # A workflow's templates, or one installer copied twice, run as the same account: each once.
    return list(dict.fromkeys(found))


def _bindings_of(role: Resource, ctx: Context) -> list[Resource]:
    kinds = ("RoleBinding",) if role.kind == "Role" else ("RoleBinding", "ClusterRoleBinding")
    namespace = role.namespace if role.kind == "Role" else None
    return [
        binding
        for kind in kinds
        for binding in ctx.inventory.list(kind, namespace)
        if as_mapping(as_mapping(binding.obj).get("roleRef")).get("kind") == role.kind
        and as_mapping(as_mapping(binding.obj).get("roleRef")).get("name") == role.name
    ]


@rule(
    id="GP616",
    name="rbac-overbroad",
    severity="error",
    scope=Scope.OBJECT,
    kinds=("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"),
    summary="Reports a Role/ClusterRole with wildcard verbs or resources, or a binding to cluster-admin, bound to a "
    "service account that a workload in the inventory runs as.",
    rationale="Whoever gets code execution in the workload (a prompt-injected tool, a malicious checkpoint) holds "
    "its service account's rights; a wildcard or cluster-admin is the whole cluster.",
    remediation="Grant the service account only the verbs and resources it uses, never cluster-admin.",
    references=("https://kubernetes.io/docs/concepts/security/rbac-good-practices/",),
)
def rbac_overbroad(resource: Resource, ctx: Context) -> Iterator[Violation]:
    obj = as_mapping(resource.obj)
    if resource.kind.endswith("Binding"):
        ref = as_mapping(obj.get("roleRef"))
        if (
            ref.get("kind") == "ClusterRole"
            and ref.get("name") == CLUSTER_ADMIN
            and (users := bound_workloads(resource, ctx))
        ):
            yield Violation(
                ("roleRef", "name"),
                f"{resource.kind} {resource.name} grants cluster-admin to {listed(users)}",
            )
        return
    if resource.name == CLUSTER_ADMIN:
        return
    users = list(
        dict.fromkeys(
            user for binding in _bindings_of(resource, ctx) for user in bound_workloads(binding, ctx)
        )
    )
    if not users:
        return
    for index, item in enumerate(as_list(obj.get("rules"))):
        # One PolicyRule is one grant: `resources: ['*'], verbs: ['*']` is one finding naming both.
        wild = [
            (field, values.index("*"))
            for field in ("verbs", "resources")
            if "*" in (values := [str(value) for value in as_list(as_mapping(item).get(field))])
        ]
        if wild:
            field, position = wild[0]
            yield Violation(
                ("rules", index, field, position),
                f"{resource.kind} {resource.name} grants {' and '.join(name for name, _ in wild)} '*' "
                f"to {listed(users)}",
            )
