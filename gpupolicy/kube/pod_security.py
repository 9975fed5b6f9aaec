"""Pod Security Standards, check for check as the built-in Pod Security admission runs them.

The checks in force come from the table of gpupolicy/kube/pod_security_levels.py (`CHECKS`,
resolved by `standard_for` for the policy's `security.level` and `kubernetesVersion`); the check
functions here ask the resolved `Standard` what applies, so every version boundary lives in the
table.

Container settings override pod settings where Kubernetes does (`runAsNonRoot`, `runAsUser`,
`seccompProfile`, `seLinuxOptions`, `appArmorProfile`, `windowsOptions`). Like the admission
checks, an explicitly bad pod-level value is reported even when every container overrides it:
containers added later (`kubectl debug` ephemeral containers) inherit it. Like them too, every
check visits init, regular and ephemeral containers.

Each check is a pure function from a pod template to `Problem`s: the JSON path of the offending
field, what is wrong with it, and the container it concerns. Nothing here knows about severities;
which rule reports what, where two checks see one defect, is the rules' choice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.immutable import immutable
from gpupolicy.kube.pod_security_levels import (
    SECCOMP_ALLOWED,
    Behaviour,
    Standard,
    Version,
)
from gpupolicy.kube.pod_spec import Container, PodTemplate, as_list, as_mapping

DROP_ALL = "ALL"
# Both spellings give the container CAP_SYS_ADMIN (the runtime adds the prefix); API validation
# spells the check with the prefix.
SYS_ADMIN = frozenset({"SYS_ADMIN", "CAP_SYS_ADMIN"})

# check_seccompProfile_baseline.go before 1.19: the alpha annotations.
SECCOMP_POD_ANNOTATION = "seccomp.security.alpha.kubernetes.io/pod"
SECCOMP_CONTAINER_ANNOTATION_PREFIX = "container.seccomp.security.alpha.kubernetes.io/"
SECCOMP_ANNOTATION_VALUES = frozenset({"runtime/default", "docker/default"})
LOCALHOST_PREFIX = "localhost/"

APPARMOR_TYPES = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
APPARMOR_ANNOTATION_RUNTIME_DEFAULT = "runtime/default"

PROC_MOUNT_DEFAULT = "Default"
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
VOLUME_NON_SOURCE_KEYS = frozenset({"name"})


@immutable
class Problem:
    """One offending field: where it is, what is wrong, and the container it concerns (None for
    a pod-level field or one naming several containers)."""

    path: JsonPath
    message: str
    container: Container | None = None

    @property
    def container_name(self) -> str | None:
        return (self.container.name or None) if self.container is not None else None


def pod_context(template: PodTemplate) -> dict[str, Any]:
    return template.security_context


def container_context(container: Container) -> dict[str, Any]:
    return container.security_context


def pod_context_path(template: PodTemplate) -> JsonPath:
    """Where a pod-wide setting goes (the position falls back to the spec when it is absent)."""
    return template.field("securityContext")


def _names(containers: Iterable[Container]) -> str:
    return ", ".join(repr(c.name) for c in containers)


def _only(containers: list[Container]) -> Container | None:
    return containers[0] if len(containers) == 1 else None


def _shown(value: Any) -> str:
    """A field value as the manifest spells it (`false`, not Python's `False`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _is_zero(value: Any) -> bool:
    return value == 0 and not isinstance(value, bool)


# -- baseline ---------------------------------------------------------------------------


def host_namespaces(template: PodTemplate, standard: Standard) -> Iterator[tuple[str, JsonPath]]:
    """check_hostNamespaces.go."""
    if standard.applies("hostNamespaces"):
        for key in HOST_NAMESPACES:
            if template.spec.get(key) is True:
                yield key, template.field(key)


def is_privileged(container: Container) -> bool:
    """check_privileged.go."""
    return container_context(container).get("privileged") is True


def implies_privilege_escalation(container: Container) -> bool:
    """Privileged or CAP_SYS_ADMIN: allowPrivilegeEscalation is then always true, and the API
    rejects setting it false (SECURITY_CONTEXT_API)."""
    added = as_list(as_mapping(container_context(container).get("capabilities")).get("add"))
    return is_privileged(container) or any(str(name) in SYS_ADMIN for name in added)


def capabilities_check(template: PodTemplate, standard: Standard) -> str | None:
    """The capability check covering this pod: the restricted one overrides the baseline one."""
    for check in ("capabilities_restricted", "capabilities_baseline"):
        if standard.applies(check):
            return None if standard.exempts(check, template) else check
    return None


def added_capabilities(
    template: PodTemplate, standard: Standard
) -> Iterator[tuple[Container, str, JsonPath]]:
    """check_capabilities_baseline.go / _restricted.go: each added capability outside the allowed
    set, compared by exact name as the admission does (`CAP_CHOWN` is not `CHOWN`)."""
    check = capabilities_check(template, standard)
    if check is None:
        return
    allowed = standard.allowed(check)
    for container in template.containers:
        capabilities = as_mapping(container_context(container).get("capabilities"))
        for index, name in enumerate(as_list(capabilities.get("add"))):
            if str(name) not in allowed:
                yield container, str(name), container.field("securityContext", "capabilities", "add", index)


def drops_all_capabilities(container: Container) -> bool:
    capabilities = as_mapping(container_context(container).get("capabilities"))
    return DROP_ALL in [str(item) for item in as_list(capabilities.get("drop"))]


def host_path_volumes(
    template: PodTemplate, standard: Standard
) -> Iterator[tuple[JsonPath, str, dict[str, Any]]]:
    """check_hostPathVolumes.go (restrictedVolumes at restricted): (path of the volume, its host
    path, the volume)."""
    if not (standard.applies("hostPathVolumes") or standard.applies("restrictedVolumes")):
        return
    for path, volume in template.volumes():
        host_path = volume.get("hostPath")
        if isinstance(host_path, dict):
            yield path, str(host_path.get("path", "")), volume


def host_ports(container: Container, standard: Standard) -> Iterator[tuple[Any, JsonPath]]:
    """check_hostPorts.go."""
    if not standard.applies("hostPorts"):
        return
    for index, port in enumerate(as_list(container.spec.get("ports"))):
        value = as_mapping(port).get("hostPort")
        if value not in (None, 0):
            yield value, container.field("ports", index, "hostPort")


def baseline_other(template: PodTemplate, standard: Standard) -> Iterator[Problem]:
    """The baseline controls without a rule of their own (GP611): sysctls, AppArmor, SELinux,
    Windows hostProcess, procMount, and host in lifecycle hooks."""
    yield from _sysctls(template, standard)
    yield from _apparmor_annotations(template, standard)
    pod = pod_context(template)
    if not _CONTEXT_KEYS.isdisjoint(pod):
        base = pod_context_path(template)
        yield from _context_problems(pod, base, "pod", None, standard)
    proc_mount = _proc_mount_check(template, standard)
    lifecycle = standard.applies("hostProbesAndHostLifecycle")
    for container in template.containers:
        own = container_context(container)
        if own:
            base = container.field("securityContext")
            if not _CONTEXT_KEYS.isdisjoint(own):
                yield from _context_problems(own, base, container.label, container, standard)
            value = own.get("procMount")
            if proc_mount and value is not None and value != PROC_MOUNT_DEFAULT:
                yield Problem(
                    (*base, "procMount"),
                    f"{container.label} sets procMount: {value} (only Default is allowed)",
                    container,
                )
        if lifecycle and "lifecycle" in container.spec:
            yield from _lifecycle_hosts(container)


def _proc_mount_check(template: PodTemplate, standard: Standard) -> bool:
    """procMount_restricted (1.35) overrides the baseline check and keeps it unconditional."""
    if standard.applies("procMount_restricted"):
        return True
    return standard.checks("procMount", template)


# What `_context_problems` reads of a security context: a context without any (most) is not walked.
_CONTEXT_KEYS = frozenset({"seLinuxOptions", "appArmorProfile", "windowsOptions"})


def _context_problems(
    context: dict[str, Any], base: JsonPath, who: str, container: Container | None, standard: Standard
) -> Iterator[Problem]:
    if isinstance(value := context.get("seLinuxOptions"), dict) and standard.applies("seLinuxOptions"):
        yield from _selinux(
            value, (*base, "seLinuxOptions"), who, container, standard.allowed("seLinuxOptions")
        )
    if "appArmorProfile" in context and standard.has("appArmorProfile", Behaviour.APPARMOR_FIELD):
        yield from _apparmor_field(context.get("appArmorProfile"), (*base, "appArmorProfile"), who, container)
    host_process = as_mapping(context.get("windowsOptions")).get("hostProcess")
    if host_process is True and standard.applies("windowsHostProcess"):
        yield Problem(
            (*base, "windowsOptions", "hostProcess"),
            f"{who} runs as a Windows HostProcess container (full access to the node)",
            container,
        )


def _sysctls(template: PodTemplate, standard: Standard) -> Iterator[Problem]:
    """check_sysctls.go: pod-level sysctls only from the safe set of the version."""
    sysctls = as_list(pod_context(template).get("sysctls"))
    if not sysctls or not standard.applies("sysctls"):
        return
    safe = standard.allowed("sysctls")
    for index, sysctl in enumerate(sysctls):
        name = str(as_mapping(sysctl).get("name", ""))
        if name not in safe:
            yield Problem(
                template.field("securityContext", "sysctls", index),
                f"sysctl {name} is not in the safe set of Kubernetes {_dotted(standard.version)} "
                "(it can affect every pod of the node)",
            )


def _dotted(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


def _apparmor_annotations(template: PodTemplate, standard: Standard) -> Iterator[Problem]:
    if template.metadata_path is None or not standard.applies("appArmorProfile"):
        return
    for key, value in template.annotations.items():
        if not str(key).startswith(APPARMOR_ANNOTATION_PREFIX):
            continue
        text = str(value or "")
        if text and text != APPARMOR_ANNOTATION_RUNTIME_DEFAULT and not text.startswith(LOCALHOST_PREFIX):
            yield Problem(
                (*template.metadata_path, "annotations", str(key)),
                f"annotation {key}: {text} overrides the runtime's default AppArmor profile "
                "(allowed: runtime/default, localhost/*)",
            )


def _apparmor_field(value: Any, path: JsonPath, who: str, container: Container | None) -> Iterator[Problem]:
    """Set (not null) means checked: a profile without a type is as forbidden as Unconfined."""
    if value is None:
        return
    kind = as_mapping(value).get("type")
    if kind not in APPARMOR_TYPES:
        shown = f"type: {kind}" if kind is not None else "no type"
        yield Problem(
            (*path, "type") if kind is not None else path,
            f"{who} sets appArmorProfile {shown} (allowed: RuntimeDefault, Localhost)",
            container,
        )


def _selinux(
    value: dict[str, Any], path: JsonPath, who: str, container: Container | None, types: frozenset[str]
) -> Iterator[Problem]:
    kind = value.get("type")
    if kind is not None and str(kind) not in types:
        allowed = ", ".join(sorted(name for name in types if name))
        yield Problem(
            (*path, "type"), f"{who} sets seLinuxOptions.type: {kind} (allowed: {allowed})", container
        )
    for key in ("user", "role"):
        if value.get(key):
            yield Problem(
                (*path, key), f"{who} sets seLinuxOptions.{key}: {value[key]} (must be unset)", container
            )


def _lifecycle_hosts(container: Container) -> Iterator[Problem]:
    """check_hostProbesAndhostLifecycle.go: lifecycle hooks must not set host (probes: GP409)."""
    lifecycle = as_mapping(container.spec.get("lifecycle"))
    for hook in ("postStart", "preStop"):
        handler = as_mapping(lifecycle.get(hook))
        for action in ("httpGet", "tcpSocket"):
            host = as_mapping(handler.get(action)).get("host")
            if host:
                yield Problem(
                    container.field("lifecycle", hook, action, "host"),
                    f"{container.label} {hook} hook sets {action}.host: {host} (reaches outside the pod)",
                    container,
                )


# -- seccomp ----------------------------------------------------------------------------


def seccomp_problems(template: PodTemplate, standard: Standard) -> Iterator[tuple[Problem, bool]]:
    """check_seccompProfile_baseline.go / _restricted.go: (problem, explicit). Explicit problems
    are profiles set to anything but RuntimeDefault or Localhost (the annotations before 1.19).
    At restricted, containers that set no profile while the pod sets none either are one
    implicit problem per pod template, at the pod's securityContext, where one line fixes it."""
    if standard.applies("seccompProfile_restricted"):
        if standard.exempts("seccompProfile_restricted", template):
            return
        yield from ((problem, True) for problem in _seccomp_explicit(template))
        unset = _seccomp_unset(template)
        if unset:
            yield (
                Problem(
                    pod_context_path(template),
                    f"no seccomp profile: neither the pod nor {_plural(unset)} {_names(unset)} "
                    "sets seccompProfile.type RuntimeDefault or Localhost",
                    _only(unset),
                ),
                False,
            )
    elif standard.has("seccompProfile_baseline", Behaviour.SECCOMP_FIELD):
        yield from ((problem, True) for problem in _seccomp_explicit(template))
    elif standard.applies("seccompProfile_baseline"):
        yield from ((problem, True) for problem in _seccomp_annotations(template))


def _plural(containers: list[Container]) -> str:
    return "container" if len(containers) == 1 else "containers"


def _seccomp_type(profile: Any) -> Any:
    return as_mapping(profile).get("type")


def _seccomp_explicit(template: PodTemplate) -> Iterator[Problem]:
    """Profiles set (not null) to a type outside RuntimeDefault/Localhost, pod and containers."""
    profile = pod_context(template).get("seccompProfile")
    if profile is not None and _seccomp_type(profile) not in SECCOMP_ALLOWED:
        inheriting = [c for c in template.containers if container_context(c).get("seccompProfile") is None]
        who = (
            _names(inheriting) if inheriting else "no container now (each sets its own), but any added later"
        )
        yield Problem(
            _seccomp_path(pod_context_path(template), profile),
            f"pod sets seccompProfile {_describe_type(profile)}, inherited by {who}",
        )
    for container in template.containers:
        profile = container_context(container).get("seccompProfile")
        if profile is not None and _seccomp_type(profile) not in SECCOMP_ALLOWED:
            yield Problem(
                _seccomp_path(container.field("securityContext"), profile),
                f"{container.label} sets seccompProfile {_describe_type(profile)}",
                container,
            )


def _seccomp_path(context_path: JsonPath, profile: Any) -> JsonPath:
    if _seccomp_type(profile) is None:
        return (*context_path, "seccompProfile")
    return (*context_path, "seccompProfile", "type")


def _describe_type(profile: Any) -> str:
    kind = _seccomp_type(profile)
    return f"type {kind}" if kind is not None else "without a type"


def _seccomp_unset(template: PodTemplate) -> list[Container]:
    """Containers without a profile of their own when the pod sets none (a bad pod-level profile
    is reported as explicit, naming the containers that inherit it)."""
    if pod_context(template).get("seccompProfile") is not None:
        return []
    return [c for c in template.containers if container_context(c).get("seccompProfile") is None]


def _seccomp_annotations(template: PodTemplate) -> Iterator[Problem]:
    """Before 1.19: the pod and per-container alpha annotations."""
    if template.metadata_path is None:
        return
    keys = [SECCOMP_POD_ANNOTATION] + [
        SECCOMP_CONTAINER_ANNOTATION_PREFIX + c.name for c in template.containers
    ]
    annotations = template.annotations
    for key in keys:
        if key not in annotations:
            continue
        value = str(annotations[key] or "")
        if value not in SECCOMP_ANNOTATION_VALUES and not value.startswith(LOCALHOST_PREFIX):
            yield Problem(
                (*template.metadata_path, "annotations", key),
                f"annotation {key}: {value or '(empty)'} is not runtime/default, docker/default or localhost/*",
            )


# -- restricted -------------------------------------------------------------------------


def restricted_volumes(template: PodTemplate, standard: Standard) -> Iterator[Problem]:
    """check_restrictedVolumes.go: inline volume sources outside the allowed ones (hostPath
    excepted: GP606 reports it at every level)."""
    if not standard.applies("restrictedVolumes"):
        return
    allowed = standard.allowed("restrictedVolumes")
    for path, volume in template.volumes():
        sources = [key for key in volume if key not in VOLUME_NON_SOURCE_KEYS]
        if "hostPath" in sources:
            continue
        for source in sources:
            if source not in allowed:
                yield Problem(
                    (*path, source),
                    f"volume {volume.get('name', '?')!r} uses {source}, not allowed by the restricted level "
                    f"of Kubernetes {_dotted(standard.version)}",
                )


def privilege_escalation(template: PodTemplate, standard: Standard) -> Iterator[Problem]:
    """check_allowPrivilegeEscalation.go: must be explicitly false on every container."""
    if not standard.checks("allowPrivilegeEscalation", template):
        return
    for container in template.containers:
        own = container_context(container)
        value = own.get("allowPrivilegeEscalation")
        if value is False:
            continue
        if value is None:
            where = container.field("securityContext") if own else container.path
            yield Problem(where, f"{container.label} does not set allowPrivilegeEscalation: false", container)
        else:
            yield Problem(
                container.field("securityContext", "allowPrivilegeEscalation"),
                f"{container.label} sets allowPrivilegeEscalation: {_shown(value)}",
                container,
            )


def capabilities_not_dropped(template: PodTemplate, standard: Standard) -> Iterator[Problem]:
    """check_capabilities_restricted.go: every container drops ALL."""
    if capabilities_check(template, standard) != "capabilities_restricted":
        return
    for container in template.containers:
        if drops_all_capabilities(container):
            continue
        own = container_context(container)
        capabilities = as_mapping(own.get("capabilities"))
        if "drop" in capabilities:
            where = container.field("securityContext", "capabilities", "drop")
        elif capabilities:
            where = container.field("securityContext", "capabilities")
        else:
            where = container.field("securityContext") if own else container.path
        yield Problem(where, f"{container.label} does not drop ALL capabilities", container)


def run_as_root(template: PodTemplate, standard: Standard) -> Iterator[Problem]:
    """check_runAsNonRoot.go and check_runAsUser.go, one problem per defect: no level may set
    runAsNonRoot false or runAsUser 0; every container needs runAsNonRoot true, its own or the
    pod's. A container that sets runAsUser 0 with runAsNonRoot unset is one problem (it runs as
    root); the containers that merely leave runAsNonRoot unset are one problem at the pod."""
    non_root = standard.checks("runAsNonRoot", template)
    user = standard.checks("runAsUser", template)
    if not (non_root or user):
        return
    pod = pod_context(template)
    if non_root and pod.get("runAsNonRoot") is False:
        inheriting = [c for c in template.containers if container_context(c).get("runAsNonRoot") is None]
        suffix = f", inherited by {_names(inheriting)}" if inheriting else ""
        yield Problem(
            template.field("securityContext", "runAsNonRoot"), f"pod sets runAsNonRoot: false{suffix}"
        )
    if user and _is_zero(pod.get("runAsUser")):
        yield Problem(template.field("securityContext", "runAsUser"), "pod sets runAsUser: 0 (root)")
    unset: list[Container] = []
    for container in template.containers:
        own = container_context(container)
        pod_non_root = pod.get("runAsNonRoot") is True
        implicit = non_root and own.get("runAsNonRoot") is None and pod.get("runAsNonRoot") is None
        if user and _is_zero(own.get("runAsUser")):
            yield Problem(
                container.field("securityContext", "runAsUser"),
                f"{container.label} sets runAsUser: 0 (root)" + _root_note(own, pod_non_root, implicit),
                container,
            )
        elif implicit:
            unset.append(container)
        if non_root and own.get("runAsNonRoot") is not None and own.get("runAsNonRoot") is not True:
            yield Problem(
                container.field("securityContext", "runAsNonRoot"),
                f"{container.label} sets runAsNonRoot: {_shown(own['runAsNonRoot'])}",
                container,
            )
    if unset:
        yield Problem(
            pod_context_path(template),
            f"may run as root: neither the pod nor {_plural(unset)} {_names(unset)} sets runAsNonRoot: true",
            _only(unset),
        )


def _root_note(own: dict[str, Any], pod_non_root: bool, implicit: bool) -> str:
    if own.get("runAsNonRoot") is True or (own.get("runAsNonRoot") is None and pod_non_root):
        return " although runAsNonRoot is true: the kubelet will refuse to start it"
    if implicit:
        return ", and neither it nor the pod sets runAsNonRoot: true"
    return ""
