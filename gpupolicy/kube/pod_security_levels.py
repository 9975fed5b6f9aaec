"""The Pod Security Standards as data: the checks of the built-in Pod Security admission, each
with its level and the Kubernetes versions at which its behaviour changed, and `standard_for`,
which resolves the rows in force for a level and a version (gpupolicy/kube/pod_security.py runs
the checks against a resolved `Standard`).

The Pod Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
are enforced by pod-security-admission (`k8s.io/pod-security-admission/policy/check_*.go`). Each
of its checks declares a level and the Kubernetes versions at which its behaviour changed.
`CHECKS` below is that list as data, one row per versioned behaviour, naming its source file and
the gpupolicy rule that reports it; `standard_for(level, version)` resolves the rows in force for the
policy's `security.level` and `kubernetesVersion`, the way the admission plugin picks its checks
(restricted runs every baseline check that no restricted check overrides).

Read from kubernetes/pod-security-admission at 8f84a87 (master, July 2026) and its release tags
v0.25.0 to v0.36.2. Three behaviours changed in a release without a new `MinimumVersion` in the
source; their rows carry the release that shipped them and say so.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from gpupolicy.core.identity_enum import IdentityEnum
from gpupolicy.core.immutable import immutable
from gpupolicy.kube.pod_spec import PodTemplate, as_mapping

PSS_URL = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"
PSA_CHECKS_URL = (
    "https://github.com/kubernetes/kubernetes/tree/master/staging/src/k8s.io/pod-security-admission/policy"
)
# SecurityContext.allowPrivilegeEscalation: "always true when the container is run as
# privileged, or has CAP_SYS_ADMIN"; API validation rejects `false` together with either.
SECURITY_CONTEXT_API = (
    "https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#security-context-1"
)

Version = tuple[int, int]  # (major, minor)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?$")


def parse_version(text: Any) -> Version:
    """`1.34`, `v1.34` or `1.34.2` → (1, 34). The policy schema admits nothing else."""
    match = _VERSION.match(str(text).strip())
    if match is None:
        raise ValueError(f"not a Kubernetes version: {text!r} (expected e.g. 1.34)")
    return int(match.group(1)), int(match.group(2))


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


class Behaviour(IdentityEnum):
    """A change a versioned check brings besides its allowed values."""

    WINDOWS_EXEMPT = "pods with spec.os.name: windows are exempt"
    USER_NAMESPACE_EXEMPT = "pods with hostUsers: false are exempt"
    SECCOMP_FIELD = "checks securityContext.seccompProfile instead of the alpha annotations"
    APPARMOR_FIELD = "checks securityContext.appArmorProfile besides the annotations"


@immutable
class VersionedCheck:
    """One row: an admission check as it behaves from `since` on (its `MinimumVersion`)."""

    check: str  # the admission check's ID
    level: Level
    since: Version
    rules: tuple[str, ...]  # the gpupolicy rules that report it
    source: str  # its file under policy/
    what: str  # what it checks from this version on
    allows: frozenset[str] = frozenset()  # values it adds to the check's allowed set
    adds: Behaviour | None = None
    overrides: tuple[str, ...] = ()  # baseline checks it replaces at the restricted level


# check_capabilities_baseline.go: capabilities_allowed_1_0 (Docker's default set).
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
        "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
    }
)  # fmt: skip
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
SECCOMP_ALLOWED = frozenset({"RuntimeDefault", "Localhost"})

B, R = Level.BASELINE, Level.RESTRICTED

CHECKS: tuple[VersionedCheck, ...] = (
    # -- baseline ------------------------------------------------------------------------
    VersionedCheck(
        "windowsHostProcess", B, (1, 0), ("GP611",), "check_windowsHostProcess.go",
        "windowsOptions.hostProcess unset or false, on the pod and every container",
    ),
    VersionedCheck(
        "hostNamespaces", B, (1, 0), ("GP605",), "check_hostNamespaces.go",
        "hostNetwork, hostPID and hostIPC unset or false",
    ),
    VersionedCheck(
        "privileged", B, (1, 0), ("GP601",), "check_privileged.go",
        "securityContext.privileged unset or false",
    ),
    VersionedCheck(
        "capabilities_baseline", B, (1, 0), ("GP603",), "check_capabilities_baseline.go",
        "capabilities.add only from Docker's default set", allows=BASELINE_CAPABILITIES,
    ),
    VersionedCheck(
        "hostPathVolumes", B, (1, 0), ("GP606",), "check_hostPathVolumes.go", "no hostPath volumes",
    ),
    VersionedCheck(
        "hostPorts", B, (1, 0), ("GP610",), "check_hostPorts.go", "ports[].hostPort unset or 0",
    ),
    VersionedCheck(
        "appArmorProfile", B, (1, 0), ("GP611",), "check_appArmorProfile.go",
        "AppArmor annotations empty, runtime/default or localhost/*",
    ),
    # The source declares the field check at 1.0 too, but the field exists since 1.30 (commit
    # 32ef468, first in v0.30.0): an older API server drops it before admission sees it.
    VersionedCheck(
        "appArmorProfile", B, (1, 30), ("GP611",), "check_appArmorProfile.go",
        "appArmorProfile.type RuntimeDefault or Localhost, on the pod and every container",
        adds=Behaviour.APPARMOR_FIELD,
    ),
    VersionedCheck(
        "seLinuxOptions", B, (1, 0), ("GP611",), "check_seLinuxOptions.go",
        "seLinuxOptions.type empty, container_t, container_init_t or container_kvm_t; user and role unset",
        allows=frozenset({"", "container_t", "container_init_t", "container_kvm_t"}),
    ),
    VersionedCheck(
        "seLinuxOptions", B, (1, 31), ("GP611",), "check_seLinuxOptions.go",
        "seLinuxOptions.type may also be container_engine_t", allows=frozenset({"container_engine_t"}),
    ),
    VersionedCheck(
        "procMount", B, (1, 0), ("GP611",), "check_procMount_baseline.go",
        "securityContext.procMount unset or Default",
    ),
    VersionedCheck(
        "procMount", B, (1, 35), ("GP611",), "check_procMount_baseline.go",
        "any procMount in a pod with hostUsers: false", adds=Behaviour.USER_NAMESPACE_EXEMPT,
    ),
    VersionedCheck(
        "seccompProfile_baseline", B, (1, 0), ("GP609",), "check_seccompProfile_baseline.go",
        "seccomp alpha annotations runtime/default, docker/default or localhost/*",
    ),
    VersionedCheck(
        "seccompProfile_baseline", B, (1, 19), ("GP609",), "check_seccompProfile_baseline.go",
        "seccompProfile.type, where set on the pod or a container, RuntimeDefault or Localhost (unset is allowed)",
        allows=SECCOMP_ALLOWED, adds=Behaviour.SECCOMP_FIELD,
    ),
    VersionedCheck(
        "sysctls", B, (1, 0), ("GP611",), "check_sysctls.go", "only the safe sysctls",
        allows=frozenset({
            "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
            "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start",
        }),
    ),
    VersionedCheck(
        "sysctls", B, (1, 27), ("GP611",), "check_sysctls.go", "safe sysctls grow",
        allows=frozenset({"net.ipv4.ip_local_reserved_ports"}),
    ),
    VersionedCheck(
        "sysctls", B, (1, 29), ("GP611",), "check_sysctls.go", "safe sysctls grow",
        allows=frozenset({
            "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
            "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
        }),
    ),
    VersionedCheck(
        "sysctls", B, (1, 32), ("GP611",), "check_sysctls.go", "safe sysctls grow",
        allows=frozenset({"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}),
    ),
    # On master for the release after 1.36 (tag v0.37.0-alpha.2 at the time of reading).
    VersionedCheck(
        "sysctls", B, (1, 37), ("GP611",), "check_sysctls.go", "safe sysctls grow",
        allows=frozenset({"net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"}),
    ),
    VersionedCheck(
        "hostProbesAndHostLifecycle", B, (1, 34), ("GP409", "GP611"), "check_hostProbesAndhostLifecycle.go",
        "probes (GP409) and lifecycle handlers (GP611) set no httpGet/tcpSocket host",
    ),
    # -- restricted ----------------------------------------------------------------------
    VersionedCheck(
        "restrictedVolumes", R, (1, 0), ("GP606", "GP611"), "check_restrictedVolumes.go",
        "inline volumes only of the listed types (hostPath stays GP606's)",
        allows=frozenset({
            "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
            "projected", "secret",
        }),
        overrides=("hostPathVolumes",),
    ),
    # Declared at 1.0 in the source, shipped in 1.33 (commit ca569ec, first in v0.33.0): the
    # admission of 1.31 and 1.32 rejects image volumes at restricted as an unknown type.
    VersionedCheck(
        "restrictedVolumes", R, (1, 33), ("GP611",), "check_restrictedVolumes.go",
        "image volumes allowed", allows=frozenset({"image"}),
    ),
    VersionedCheck(
        "allowPrivilegeEscalation", R, (1, 8), ("GP602",), "check_allowPrivilegeEscalation.go",
        "allowPrivilegeEscalation: false on every container",
    ),
    VersionedCheck(
        "allowPrivilegeEscalation", R, (1, 25), ("GP602",), "check_allowPrivilegeEscalation.go",
        "Windows pods exempt", adds=Behaviour.WINDOWS_EXEMPT,
    ),
    VersionedCheck(
        "runAsNonRoot", R, (1, 0), ("GP608",), "check_runAsNonRoot.go",
        "runAsNonRoot: true on the pod or on every container; false nowhere",
    ),
    # Before 1.35 this relaxation sat behind the alpha UserNamespacesPodSecurityStandards gate.
    VersionedCheck(
        "runAsNonRoot", R, (1, 35), ("GP608",), "check_runAsNonRoot.go",
        "pods with hostUsers: false exempt", adds=Behaviour.USER_NAMESPACE_EXEMPT,
    ),
    VersionedCheck(
        "runAsUser", R, (1, 23), ("GP608",), "check_runAsUser.go",
        "runAsUser not 0, on the pod or any container",
    ),
    VersionedCheck(
        "runAsUser", R, (1, 35), ("GP608",), "check_runAsUser.go",
        "pods with hostUsers: false exempt", adds=Behaviour.USER_NAMESPACE_EXEMPT,
    ),
    VersionedCheck(
        "seccompProfile_restricted", R, (1, 19), ("GP609",), "check_seccompProfile_restricted.go",
        "seccompProfile.type RuntimeDefault or Localhost on the pod or on every container; unset is a violation",
        allows=SECCOMP_ALLOWED, overrides=("seccompProfile_baseline",),
    ),
    VersionedCheck(
        "seccompProfile_restricted", R, (1, 25), ("GP609",), "check_seccompProfile_restricted.go",
        "Windows pods exempt", adds=Behaviour.WINDOWS_EXEMPT, overrides=("seccompProfile_baseline",),
    ),
    VersionedCheck(
        "capabilities_restricted", R, (1, 22), ("GP603", "GP604"), "check_capabilities_restricted.go",
        "every container drops ALL and adds at most NET_BIND_SERVICE",
        allows=RESTRICTED_CAPABILITIES, overrides=("capabilities_baseline",),
    ),
    VersionedCheck(
        "capabilities_restricted", R, (1, 25), ("GP603", "GP604"), "check_capabilities_restricted.go",
        "Windows pods exempt", adds=Behaviour.WINDOWS_EXEMPT, overrides=("capabilities_baseline",),
    ),
    VersionedCheck(
        "procMount_restricted", R, (1, 35), ("GP611",), "check_procMount_restricted.go",
        "procMount unset or Default, even with hostUsers: false", overrides=("procMount",),
    ),
)  # fmt: skip


@immutable
class Standard:
    """The checks in force at one level and Kubernetes version."""

    level: Level
    version: Version
    rows: tuple[VersionedCheck, ...]
    in_force: frozenset[str]  # the IDs of `rows`
    # (check, behaviour) of every row: what `has` asks, for each container of each pod checked.
    behaviours: frozenset[tuple[str, Behaviour | None]] = frozenset()
    # What `allowed` answers, per check in force: asked for each container of each pod checked
    # (derived from `rows`, so not part of the identity).
    allows: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def applies(self, check: str) -> bool:
        return check in self.in_force

    def allowed(self, check: str) -> frozenset[str]:
        """The values its rows in force allow for `check` (none for a check not in force)."""
        return self.allows.get(check, _NOTHING_ALLOWED)

    def has(self, check: str, behaviour: Behaviour) -> bool:
        return (check, behaviour) in self.behaviours

    def exempts(self, check: str, template: PodTemplate) -> bool:
        """The check is in force but skips this pod (a Windows or user-namespace exemption)."""
        return (self.has(check, Behaviour.WINDOWS_EXEMPT) and is_windows(template)) or (
            self.has(check, Behaviour.USER_NAMESPACE_EXEMPT) and uses_user_namespace(template)
        )

    def checks(self, check: str, template: PodTemplate) -> bool:
        """The check is in force and covers this pod."""
        return self.applies(check) and not self.exempts(check, template)


@functools.cache
def standard_for(level: Level, version: Version) -> Standard:
    """The rows in force: each check's rows up to `version` for the checks of `level` and below,
    without the baseline checks a restricted check in force overrides."""
    candidates = [row for row in CHECKS if row.level <= level and row.since <= version]
    overridden = {check for row in candidates if row.level == level for check in row.overrides}
    rows = tuple(row for row in candidates if row.check not in overridden)
    in_force = frozenset(row.check for row in rows)
    return Standard(
        level,
        version,
        rows,
        in_force,
        frozenset((row.check, row.adds) for row in rows),
        {check: frozenset().union(*(row.allows for row in rows if row.check == check)) for check in in_force},
    )


_NOTHING_ALLOWED: frozenset[str] = frozenset()


def is_windows(template: PodTemplate) -> bool:
    return as_mapping(template.spec.get("os")).get("name") == "windows"


def uses_user_namespace(template: PodTemplate) -> bool:
    """`hostUsers: false`: root in the pod maps to an unprivileged host user (KEP-127)."""
    return template.spec.get("hostUsers") is False
