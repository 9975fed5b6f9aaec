"""Pod Security Standards, field for field as Kubernetes' pod-security-admission checks them.

The Pod Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
are enforced by the checks in `k8s.io/pod-security-admission/policy/check_*.go`; the allowed
values below are copied from those checks (file named beside each), so a pod that passes here
passes the built-in admission controller at the same level, and the other way round.

Each check is a pure function from a pod template (and a container) to `Problem`s: the JSON path
of the offending field and what is wrong with it. Rules map problems to findings; nothing here
knows about rules or severities.

Container settings override pod settings where Kubernetes does (`runAsNonRoot`, `runAsUser`,
`runAsGroup`, `seccompProfile`, `seLinuxOptions`, `appArmorProfile`, `windowsOptions`):
`effective()` answers which one applies to a container and where it was set. Like the admission
checks, an explicitly bad pod-level value is reported even when every container overrides it —
containers added later (`kubectl debug` ephemeral containers) inherit it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpupolicy.findings import JsonPath
from gpupolicy.pod_spec import Container, PodTemplate, as_list, as_mapping

PSS_URL = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"
PSA_CHECKS_URL = (
    "https://github.com/kubernetes/kubernetes/tree/master/staging/src/k8s.io/pod-security-admission/policy"
)


class Level(enum.IntEnum):
    """Ordered: restricted includes everything of baseline."""

    BASELINE = 1
    RESTRICTED = 2

    @classmethod
    def parse(cls, text: Any) -> Level:
        return cls.RESTRICTED if str(text).strip().lower() == "restricted" else cls.BASELINE

    @property
    def label(self) -> str:
        return self.name.lower()


# check_capabilities_baseline.go: capabilities_allowed_1_0 (Docker's default set).
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip
# check_capabilities_restricted.go: drop must include ALL; add may only hold NET_BIND_SERVICE.
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
DROP_ALL = "ALL"

# check_sysctls.go (sysctls_allowed_1_0 … _1_32): the kubelet's safe set
# (https://kubernetes.io/docs/tasks/administer-cluster/sysctl-cluster/#safe-and-unsafe-sysctls).
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",  # 1.27
        "net.ipv4.tcp_keepalive_time",  # 1.29
        "net.ipv4.tcp_fin_timeout",  # 1.29
        "net.ipv4.tcp_keepalive_intvl",  # 1.29
        "net.ipv4.tcp_keepalive_probes",  # 1.29
        "net.ipv4.tcp_rmem",  # 1.32
        "net.ipv4.tcp_wmem",  # 1.32
    }
)

# check_seLinuxOptions.go: type may be empty or one of these (container_engine_t since 1.31);
# user and role must be empty.
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})

# check_seccompProfile_baseline.go / _restricted.go.
SECCOMP_ALLOWED = frozenset({"RuntimeDefault", "Localhost"})
SECCOMP_UNCONFINED = "Unconfined"

# check_appArmorProfile.go: the field form and the deprecated annotation form.
APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
APPARMOR_ANNOTATION_RUNTIME_DEFAULT = "runtime/default"
APPARMOR_ANNOTATION_LOCALHOST_PREFIX = "localhost/"

# check_procMount.go: undefined or Default.
PROC_MOUNT_DEFAULT = "Default"

# check_restrictedVolumes.go: the inline volume sources the restricted level allows
# (`image` since 1.33, kubernetes/kubernetes#130394). hostPath is GP606's.
RESTRICTED_VOLUME_SOURCES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
VOLUME_NON_SOURCE_KEYS = frozenset({"name"})

HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")

# Fields a container's securityContext overrides on the pod's (PodSecurityContext docs).
PRECEDENCE_FIELDS = frozenset(
    {
        "runAsNonRoot",
        "runAsUser",
        "runAsGroup",
        "seccompProfile",
        "seLinuxOptions",
        "appArmorProfile",
        "windowsOptions",
    }
)


@dataclass(frozen=True, slots=True)
class Problem:
    """One offending field: where it is, what is wrong, and which container it concerns."""

    path: JsonPath
    message: str
    container: str | None = None


@dataclass(frozen=True, slots=True)
class Setting:
    """The value a container runs with for a precedence field, and where it was set."""

    value: Any
    path: JsonPath | None  # None: set nowhere
    source: str  # "container", "pod" or "unset"

    @property
    def is_set(self) -> bool:
        return self.path is not None


def pod_context(template: PodTemplate) -> dict[str, Any]:
    return as_mapping(template.spec.get("securityContext"))


def container_context(container: Container) -> dict[str, Any]:
    return as_mapping(container.spec.get("securityContext"))


def effective(template: PodTemplate, container: Container, key: str) -> Setting:
    """The container's own `securityContext.<key>` when set, else the pod's."""
    own = container_context(container)
    if own.get(key) is not None:
        return Setting(own[key], container.field("securityContext", key), "container")
    pod = pod_context(template)
    if pod.get(key) is not None:
        return Setting(pod[key], template.field("securityContext", key), "pod")
    return Setting(None, None, "unset")


def is_windows(template: PodTemplate) -> bool:
    """`spec.os.name: windows`: the admission checks skip Linux-only restricted controls."""
    return as_mapping(template.spec.get("os")).get("name") == "windows"


def uses_user_namespace(template: PodTemplate) -> bool:
    """`hostUsers: false`: root in the pod maps to an unprivileged host user, so the admission
    checks relax runAsNonRoot and runAsUser (KEP-127)."""
    return template.spec.get("hostUsers") is False


# -- baseline ---------------------------------------------------------------------------


def host_namespaces(template: PodTemplate) -> Iterator[tuple[str, JsonPath]]:
    """check_hostNamespaces.go: hostNetwork, hostPID, hostIPC must be false or unset."""
    for key in HOST_NAMESPACES:
        if template.spec.get(key) is True:
            yield key, template.field(key)


def is_privileged(container: Container) -> bool:
    """check_privileged.go."""
    return container_context(container).get("privileged") is True


def added_capabilities(container: Container, allowed: frozenset[str]) -> Iterator[tuple[str, JsonPath]]:
    """check_capabilities_baseline.go / _restricted.go: each added capability not in `allowed`
    (exact names, as the admission check compares them: `CAP_SYS_ADMIN` is not `SYS_ADMIN`)."""
    capabilities = as_mapping(container_context(container).get("capabilities"))
    for index, name in enumerate(as_list(capabilities.get("add"))):
        if str(name) not in allowed:
            yield str(name), container.field("securityContext", "capabilities", "add", index)


def drops_all_capabilities(container: Container) -> bool:
    capabilities = as_mapping(container_context(container).get("capabilities"))
    return DROP_ALL in [str(item) for item in as_list(capabilities.get("drop"))]


def host_path_volumes(template: PodTemplate) -> Iterator[tuple[JsonPath, str, dict[str, Any]]]:
    """check_hostPathVolumes.go: (path of the volume, its host path, the volume)."""
    for path, volume in template.volumes():
        host_path = volume.get("hostPath")
        if isinstance(host_path, dict):
            yield path, str(host_path.get("path", "")), volume


def host_ports(container: Container) -> Iterator[tuple[int, JsonPath]]:
    """check_hostPorts.go: hostPort must be 0 or unset."""
    for index, port in enumerate(as_list(container.spec.get("ports"))):
        value = as_mapping(port).get("hostPort")
        if value not in (None, 0):
            yield value, container.field("ports", index, "hostPort")


def baseline_other(template: PodTemplate) -> Iterator[Problem]:
    """The baseline controls without a rule of their own (GP611): sysctls, procMount, SELinux,
    AppArmor (field and annotation), Windows hostProcess, and host in lifecycle hooks."""
    # Each check is entered only when its field is a mapping (none of them reports anything
    # otherwise): paths and labels are built for the fields that are there, not for every pod.
    yield from _sysctls(template)
    yield from _apparmor_annotations(template)
    pod = pod_context(template)
    if isinstance(value := pod.get("seLinuxOptions"), dict):
        yield from _selinux(value, template.field("securityContext", "seLinuxOptions"), "pod", None)
    if isinstance(value := pod.get("appArmorProfile"), dict):
        yield from _apparmor_field(value, template.field("securityContext", "appArmorProfile"), "pod", None)
    if isinstance(value := pod.get("windowsOptions"), dict):
        yield from _host_process(value, template.field("securityContext", "windowsOptions"), "pod", None)
    for container in template.containers:
        own = container_context(container)
        if own:
            base = container.field("securityContext")
            name = container.name
            if isinstance(value := own.get("seLinuxOptions"), dict):
                yield from _selinux(value, (*base, "seLinuxOptions"), container.label, name)
            if isinstance(value := own.get("appArmorProfile"), dict):
                yield from _apparmor_field(value, (*base, "appArmorProfile"), container.label, name)
            if isinstance(value := own.get("windowsOptions"), dict):
                yield from _host_process(value, (*base, "windowsOptions"), container.label, name)
            proc_mount = own.get("procMount")
            if proc_mount is not None and proc_mount != PROC_MOUNT_DEFAULT:
                yield Problem(
                    (*base, "procMount"),
                    f"{container.label} sets procMount: {proc_mount} (only Default is allowed)",
                    name,
                )
        if "lifecycle" in container.spec:
            yield from _lifecycle_hosts(container)


def _sysctls(template: PodTemplate) -> Iterator[Problem]:
    for index, sysctl in enumerate(as_list(pod_context(template).get("sysctls"))):
        name = str(as_mapping(sysctl).get("name", ""))
        if name not in SAFE_SYSCTLS:
            yield Problem(
                template.field("securityContext", "sysctls", index),
                f"sysctl {name} is not in the safe set (it can affect every pod of the node)",
            )


def _apparmor_annotations(template: PodTemplate) -> Iterator[Problem]:
    if template.metadata_path is None:
        return
    for key, value in template.annotations.items():
        if not str(key).startswith(APPARMOR_ANNOTATION_PREFIX):
            continue
        text = str(value or "")
        if (
            text
            and text != APPARMOR_ANNOTATION_RUNTIME_DEFAULT
            and not text.startswith(APPARMOR_ANNOTATION_LOCALHOST_PREFIX)
        ):
            yield Problem(
                (*template.metadata_path, "annotations", str(key)),
                f"annotation {key}: {text} overrides the runtime's default AppArmor profile "
                "(allowed: runtime/default, localhost/*)",
            )


def _apparmor_field(value: Any, path: JsonPath, who: str, container: str | None) -> Iterator[Problem]:
    if not isinstance(value, dict):
        return
    kind = value.get("type")
    if kind is not None and kind not in APPARMOR_TYPES:
        yield Problem(
            (*path, "type"),
            f"{who} sets appArmorProfile.type: {kind} (allowed: RuntimeDefault, Localhost)",
            container,
        )


def _selinux(value: Any, path: JsonPath, who: str, container: str | None) -> Iterator[Problem]:
    if not isinstance(value, dict):
        return
    kind = value.get("type")
    if kind is not None and str(kind) not in SELINUX_TYPES:
        yield Problem(
            (*path, "type"),
            f"{who} sets seLinuxOptions.type: {kind} (allowed: container_t, container_init_t, container_kvm_t, container_engine_t)",
            container,
        )
    for key in ("user", "role"):
        if value.get(key):
            yield Problem(
                (*path, key), f"{who} sets seLinuxOptions.{key}: {value[key]} (must be unset)", container
            )


def _host_process(value: Any, path: JsonPath, who: str, container: str | None) -> Iterator[Problem]:
    if isinstance(value, dict) and value.get("hostProcess") is True:
        yield Problem(
            (*path, "hostProcess"),
            f"{who} runs as a Windows HostProcess container (full access to the node)",
            container,
        )


def _lifecycle_hosts(container: Container) -> Iterator[Problem]:
    """check_hostProbesAndhostLifecycle.go (1.34): lifecycle hooks must not set host. Probes are
    GP409's."""
    lifecycle = as_mapping(container.spec.get("lifecycle"))
    for hook in ("postStart", "preStop"):
        handler = as_mapping(lifecycle.get(hook))
        for action in ("httpGet", "tcpSocket"):
            host = as_mapping(handler.get(action)).get("host")
            if host:
                yield Problem(
                    container.field("lifecycle", hook, action, "host"),
                    f"{container.label} {hook} hook sets {action}.host: {host} (reaches outside the pod)",
                    container.name,
                )


def seccomp_problems(template: PodTemplate) -> Iterator[tuple[Problem, bool]]:
    """check_seccompProfile_baseline.go / _restricted.go: (problem, explicit). Explicit problems
    are `Unconfined` at pod or container level; implicit ones are containers whose effective
    profile is unset (allowed by baseline, not by restricted). A container's own profile
    overrides the pod's."""
    pod_profile = as_mapping(pod_context(template).get("seccompProfile"))
    pod_path = template.field("securityContext", "seccompProfile", "type")
    if pod_profile.get("type") == SECCOMP_UNCONFINED:
        inheriting = [
            c.label for c in template.containers if not as_mapping(container_context(c).get("seccompProfile"))
        ]
        who = (
            ", ".join(inheriting)
            if inheriting
            else "no container now (each overrides it), but any added later"
        )
        yield Problem(pod_path, f"pod sets seccompProfile Unconfined, inherited by {who}"), True
    for container in template.containers:
        setting = effective(template, container, "seccompProfile")
        kind = as_mapping(setting.value).get("type")
        if setting.source == "container" and kind == SECCOMP_UNCONFINED:
            yield (
                Problem(
                    (*setting.path, "type") if setting.path else (),
                    f"{container.label} sets seccompProfile Unconfined",
                    container.name,
                ),
                True,
            )
        elif kind is None and not is_windows(template):  # seccomp is Linux-only
            where = container.field("securityContext") if container_context(container) else container.path
            yield (
                Problem(
                    where,
                    f"{container.label} runs without a seccomp profile (neither it nor the pod sets one)",
                    container.name,
                ),
                False,
            )


# -- restricted -------------------------------------------------------------------------


def restricted_volumes(template: PodTemplate) -> Iterator[Problem]:
    """check_restrictedVolumes.go: inline volume sources other than the allowed ones (hostPath
    excepted: GP606 reports it at every level)."""
    for path, volume in template.volumes():
        sources = [key for key in volume if key not in VOLUME_NON_SOURCE_KEYS]
        if "hostPath" in sources:
            continue
        for source in sources:
            if source not in RESTRICTED_VOLUME_SOURCES:
                yield Problem(
                    (*path, source),
                    f"volume {volume.get('name', '?')!r} uses {source}, not allowed by the restricted level",
                )


def privilege_escalation(template: PodTemplate) -> Iterator[Problem]:
    """check_allowPrivilegeEscalation.go: must be explicitly false (Linux pods)."""
    if is_windows(template):
        return
    for container in template.containers:
        value = container_context(container).get("allowPrivilegeEscalation")
        if value is False:
            continue
        if value is None:
            where = container.field("securityContext") if container_context(container) else container.path
            yield Problem(
                where, f"{container.label} does not set allowPrivilegeEscalation: false", container.name
            )
        else:
            yield Problem(
                container.field("securityContext", "allowPrivilegeEscalation"),
                f"{container.label} sets allowPrivilegeEscalation: {value}",
                container.name,
            )


def capabilities_not_dropped(template: PodTemplate) -> Iterator[Problem]:
    """check_capabilities_restricted.go: every container drops ALL (Linux pods)."""
    if is_windows(template):
        return
    for container in template.containers:
        if drops_all_capabilities(container):
            continue
        capabilities = as_mapping(container_context(container).get("capabilities"))
        if "drop" in capabilities:
            where = container.field("securityContext", "capabilities", "drop")
        elif capabilities:
            where = container.field("securityContext", "capabilities")
        elif container_context(container):
            where = container.field("securityContext")
        else:
            where = container.path
        yield Problem(where, f"{container.label} does not drop ALL capabilities", container.name)


def run_as_root(template: PodTemplate) -> Iterator[Problem]:
    """check_runAsNonRoot.go and check_runAsUser.go, with the container overriding the pod:
    runAsNonRoot must be true for every container (its own or the pod's), no level may set it
    false, and no level may set runAsUser 0. Pods with `hostUsers: false` are exempt."""
    if uses_user_namespace(template):
        return
    pod = pod_context(template)
    if pod.get("runAsNonRoot") is False:
        yield Problem(template.field("securityContext", "runAsNonRoot"), "pod sets runAsNonRoot: false")
    if pod.get("runAsUser") == 0 and not isinstance(pod.get("runAsUser"), bool):
        yield Problem(template.field("securityContext", "runAsUser"), "pod sets runAsUser: 0 (root)")
    for container in template.containers:
        own = container_context(container)
        user = own.get("runAsUser")
        if user == 0 and not isinstance(user, bool):
            note = (
                " although runAsNonRoot is true: the kubelet will refuse to start it"
                if effective(template, container, "runAsNonRoot").value is True
                else ""
            )
            yield Problem(
                container.field("securityContext", "runAsUser"),
                f"{container.label} sets runAsUser: 0 (root){note}",
                container.name,
            )
        setting = effective(template, container, "runAsNonRoot")
        if setting.source == "container" and setting.value is not True:
            yield Problem(
                container.field("securityContext", "runAsNonRoot"),
                f"{container.label} sets runAsNonRoot: {setting.value}",
                container.name,
            )
        elif setting.source == "unset":
            where = container.field("securityContext") if own else container.path
            yield Problem(
                where,
                f"{container.label} may run as root: neither it nor the pod sets runAsNonRoot: true",
                container.name,
            )
