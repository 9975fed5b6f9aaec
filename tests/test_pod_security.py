"""The Pod Security checks as pod-security-admission runs them: the versioned table, each check at
its version boundaries, the Windows and user-namespace exemptions, and pod/container precedence."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import yaml

from gpupolicy.kube import pod_security as pss
from gpupolicy.kube import pod_security_levels as levels
from gpupolicy.kube.pod_spec import PodTemplate, workload_of
from gpupolicy.loading.inputs import load_text

B, R = levels.Level.BASELINE, levels.Level.RESTRICTED


def template_of(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> PodTemplate:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": annotations or {}},
        "spec": spec,
    }
    loaded = load_text(yaml.safe_dump(pod), "pod.yaml")
    workload = workload_of(loaded.resources[0])
    assert workload is not None
    return workload.templates[0]


def container(name: str = "c", **security: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name, "image": "busybox:1.37"}
    if security:
        item["securityContext"] = security
    return item


def at(level: levels.Level, version: str) -> levels.Standard:
    return levels.standard_for(level, levels.parse_version(version))


def paths(problems: Any) -> list[tuple[str | int, ...]]:
    return [problem.path for problem in problems]


# -- the table --------------------------------------------------------------------------


def test_table_rows_are_ordered_and_well_formed() -> None:
    by_check: dict[str, list[levels.VersionedCheck]] = defaultdict(list)
    for row in levels.CHECKS:
        by_check[row.check].append(row)
        assert row.source.startswith("check_") and row.source.endswith(".go")
        assert row.rules and all(rule.startswith(("GP6", "GP409")) for rule in row.rules)
    for check, rows in by_check.items():
        versions = [row.since for row in rows]
        assert versions == sorted(set(versions)), f"{check}: versions must strictly increase"
        assert len({row.level for row in rows}) == 1, check
    for row in levels.CHECKS:
        for overridden in row.overrides:  # only restricted checks override, and only baseline ones
            assert row.level is R and by_check[overridden][0].level is B


def test_lists_match_the_admission_checks() -> None:
    assert len(levels.BASELINE_CAPABILITIES) == 13
    assert {"SYS_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_PTRACE"}.isdisjoint(levels.BASELINE_CAPABILITIES)
    assert at(R, "1.34").allowed("capabilities_restricted") == {"NET_BIND_SERVICE"}
    latest = at(B, "1.36").allowed("sysctls")
    assert len(latest) == 12 and "kernel.shmmax" not in latest
    volumes = at(R, "1.34").allowed("restrictedVolumes")
    assert "image" in volumes and {"hostPath", "nfs", "gitRepo"}.isdisjoint(volumes)


@pytest.mark.parametrize("level", [B, R])
@pytest.mark.parametrize("version", ["1.16", "1.25", "1.29", "1.33", "1.34", "1.36"])
def test_allowed_values_are_the_union_of_the_rows_in_force(level: levels.Level, version: str) -> None:
    """`allowed` reads what was gathered when the standard was made, per check in force."""
    standard = at(level, version)
    for check in {row.check for row in levels.CHECKS}:
        union: set[str] = set()
        for row in standard.rows:
            if row.check == check:
                union |= row.allows
        assert standard.allowed(check) == union, check
    assert standard == levels.Standard(  # derived, so not part of what makes two standards equal
        standard.level, standard.version, standard.rows, standard.in_force, standard.behaviours
    )


def test_parse_version_and_level() -> None:
    assert levels.parse_version("1.34") == (1, 34)
    assert levels.parse_version("v1.29.3") == (1, 29)
    with pytest.raises(ValueError, match="not a Kubernetes version"):
        levels.parse_version("latest")
    assert levels.Level.parse("restricted") is R
    assert levels.Level.parse(None) is B
    assert R > B


def test_restricted_overrides_the_baseline_checks_it_replaces() -> None:
    restricted = at(R, "1.34")
    for replaced in ("capabilities_baseline", "seccompProfile_baseline", "hostPathVolumes"):
        assert not restricted.applies(replaced), replaced
    assert restricted.applies("sysctls") and restricted.applies("privileged")  # not overridden
    # an override counts only from the version its check starts
    assert at(R, "1.21").applies("capabilities_baseline")
    assert not at(R, "1.21").applies("capabilities_restricted")
    assert at(R, "1.18").applies("seccompProfile_baseline")
    # baseline has no restricted check
    assert not at(B, "1.34").applies("runAsNonRoot")


# -- baseline checks at their version boundaries -----------------------------------------


@pytest.mark.parametrize(
    ("sysctl", "first"),
    [
        ("net.ipv4.ip_local_reserved_ports", "1.27"),
        ("net.ipv4.tcp_keepalive_time", "1.29"),
        ("net.ipv4.tcp_fin_timeout", "1.29"),
        ("net.ipv4.tcp_keepalive_intvl", "1.29"),
        ("net.ipv4.tcp_keepalive_probes", "1.29"),
        ("net.ipv4.tcp_rmem", "1.32"),
        ("net.ipv4.tcp_wmem", "1.32"),
        ("net.ipv4.tcp_slow_start_after_idle", "1.37"),
        ("net.ipv4.tcp_notsent_lowat", "1.37"),
    ],
)
def test_sysctl_is_safe_from_its_version(sysctl: str, first: str) -> None:
    template = template_of(
        {"securityContext": {"sysctls": [{"name": sysctl, "value": "1"}]}, "containers": [container()]}
    )
    before = f"1.{int(first.split('.')[1]) - 1}"
    assert not list(pss.baseline_other(template, at(B, first)))
    [problem] = pss.baseline_other(template, at(B, before))
    assert problem.path == ("spec", "securityContext", "sysctls", 0)
    assert f"safe set of Kubernetes {before}" in problem.message


def test_original_safe_sysctls_and_unsafe_ones() -> None:
    template = template_of(
        {
            "securityContext": {
                "sysctls": [
                    {"name": "kernel.shm_rmid_forced", "value": "1"},
                    {"name": "vm.swappiness", "value": "0"},
                ]
            },
            "containers": [container()],
        }
    )
    assert paths(pss.baseline_other(template, at(B, "1.23"))) == [("spec", "securityContext", "sysctls", 1)]


def test_selinux_container_engine_t_from_1_31() -> None:
    template = template_of({"containers": [container(seLinuxOptions={"type": "container_engine_t"})]})
    assert not list(pss.baseline_other(template, at(B, "1.31")))
    [problem] = pss.baseline_other(template, at(B, "1.30"))
    assert (
        problem.path[-1] == "type"
        and "allowed: container_init_t, container_kvm_t, container_t" in problem.message
    )


def test_apparmor_field_from_1_30_annotations_always() -> None:
    template = template_of(
        {"containers": [container("a", appArmorProfile={"type": "Unconfined"})]},
        annotations={"container.apparmor.security.beta.kubernetes.io/a": "unconfined"},
    )
    annotation = ("metadata", "annotations", "container.apparmor.security.beta.kubernetes.io/a")
    field = ("spec", "containers", 0, "securityContext", "appArmorProfile", "type")
    assert paths(pss.baseline_other(template, at(B, "1.29"))) == [annotation]
    assert paths(pss.baseline_other(template, at(B, "1.30"))) == [annotation, field]


def test_apparmor_profile_without_type_is_forbidden() -> None:
    template = template_of({"securityContext": {"appArmorProfile": {}}, "containers": [container()]})
    [problem] = pss.baseline_other(template, at(B, "1.34"))
    assert problem.path == ("spec", "securityContext", "appArmorProfile") and "no type" in problem.message


def test_lifecycle_host_from_1_34() -> None:
    spec = container()
    spec["lifecycle"] = {"preStop": {"httpGet": {"host": "10.0.0.1", "path": "/", "port": 80}}}
    template = template_of({"containers": [spec]})
    assert not list(pss.baseline_other(template, at(B, "1.33")))
    assert paths(pss.baseline_other(template, at(B, "1.34"))) == [
        ("spec", "containers", 0, "lifecycle", "preStop", "httpGet", "host")
    ]


def test_proc_mount_user_namespace_relaxation_is_baseline_only_and_from_1_35() -> None:
    spec = {"hostUsers": False, "containers": [container(procMount="Unmasked")]}
    template = template_of(spec)
    assert len(list(pss.baseline_other(template, at(B, "1.34")))) == 1  # gate off before 1.35
    assert not list(pss.baseline_other(template, at(B, "1.35")))
    assert len(list(pss.baseline_other(template, at(R, "1.35")))) == 1  # procMount_restricted
    host_users = template_of({"containers": [container(procMount="Unmasked")]})
    assert len(list(pss.baseline_other(host_users, at(B, "1.35")))) == 1


def test_baseline_other_fields_on_every_kind_of_container() -> None:
    template = template_of(
        {
            "securityContext": {"seLinuxOptions": {"type": "spc_t"}, "windowsOptions": {"hostProcess": True}},
            "initContainers": [container("init", seLinuxOptions={"role": "sysadm_r"})],
            "containers": [container("a", procMount="Default", seLinuxOptions={"user": "system_u"})],
            "ephemeralContainers": [container("debug", windowsOptions={"hostProcess": True})],
        }
    )
    found = {(p.path, p.container_name) for p in pss.baseline_other(template, at(B, "1.34"))}
    assert found == {
        (("spec", "securityContext", "seLinuxOptions", "type"), None),
        (("spec", "securityContext", "windowsOptions", "hostProcess"), None),
        (("spec", "initContainers", 0, "securityContext", "seLinuxOptions", "role"), "init"),
        (("spec", "containers", 0, "securityContext", "seLinuxOptions", "user"), "a"),
        (("spec", "ephemeralContainers", 0, "securityContext", "windowsOptions", "hostProcess"), "debug"),
    }


def test_host_namespaces_ports_and_paths() -> None:
    template = template_of(
        {
            "hostNetwork": True,
            "hostPID": False,
            "hostIPC": True,
            "containers": [
                {
                    "name": "c",
                    "image": "x:1",
                    "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 0}],
                }
            ],
            "volumes": [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}, {"name": "e", "emptyDir": {}}],
        }
    )
    for standard in (at(B, "1.34"), at(R, "1.34")):
        assert [key for key, _ in pss.host_namespaces(template, standard)] == ["hostNetwork", "hostIPC"]
        assert [value for value, _ in pss.host_ports(template.containers[0], standard)] == [8080]
        assert [host for _, host, _ in pss.host_path_volumes(template, standard)] == ["/dev/nvidia0"]


# -- seccomp ----------------------------------------------------------------------------


def test_baseline_allows_unset_seccomp_and_forbids_unconfined() -> None:
    unset = template_of({"containers": [container("a"), container("b")]})
    assert not list(pss.seccomp_problems(unset, at(B, "1.34")))
    unconfined = template_of(
        {
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container("a", seccompProfile={"type": "Unconfined"}), container("b")],
        }
    )
    [(problem, explicit)] = pss.seccomp_problems(unconfined, at(B, "1.34"))
    assert explicit and problem.container_name == "a"
    assert problem.path == ("spec", "containers", 0, "securityContext", "seccompProfile", "type")


def test_pod_unconfined_is_reported_even_if_containers_override() -> None:
    template = template_of(
        {
            "securityContext": {"seccompProfile": {"type": "Unconfined"}},
            "containers": [container(seccompProfile={"type": "RuntimeDefault"})],
        }
    )
    [(problem, explicit)] = pss.seccomp_problems(template, at(B, "1.34"))
    assert explicit and problem.path == ("spec", "securityContext", "seccompProfile", "type")
    assert "no container now" in problem.message


def test_restricted_unset_seccomp_is_one_problem_per_pod_naming_the_containers() -> None:
    template = template_of(
        {
            "initContainers": [container("fetch")],
            "containers": [container("a"), container("b", seccompProfile={"type": "Localhost"})],
            "ephemeralContainers": [container("debug")],
        }
    )
    [(problem, explicit)] = pss.seccomp_problems(template, at(R, "1.34"))
    assert not explicit
    assert problem.path == ("spec", "securityContext")
    assert problem.message.count("'fetch'") == 1 and "'a'" in problem.message and "'debug'" in problem.message
    assert "'b'" not in problem.message and problem.container is None
    # the pod's own profile covers every container that sets none
    covered = template_of(
        {"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}, "containers": [container("a")]}
    )
    assert not list(pss.seccomp_problems(covered, at(R, "1.34")))


def test_restricted_pod_unconfined_names_the_inheritors_once() -> None:
    template = template_of(
        {"securityContext": {"seccompProfile": {"type": "Unconfined"}}, "containers": [container("a")]}
    )
    [(problem, explicit)] = pss.seccomp_problems(template, at(R, "1.34"))
    assert explicit and "inherited by 'a'" in problem.message


def test_seccomp_profile_without_type_is_explicit() -> None:
    template = template_of({"containers": [container(seccompProfile={})]})
    [(problem, explicit)] = pss.seccomp_problems(template, at(B, "1.34"))
    assert explicit and problem.path == ("spec", "containers", 0, "securityContext", "seccompProfile")


def test_seccomp_annotations_before_1_19() -> None:
    template = template_of(
        {"containers": [container("a", seccompProfile={"type": "Unconfined"})]},
        annotations={
            "seccomp.security.alpha.kubernetes.io/pod": "unconfined",
            "container.seccomp.security.alpha.kubernetes.io/a": "docker/default",
        },
    )
    assert paths(p for p, _ in pss.seccomp_problems(template, at(B, "1.18"))) == [
        ("metadata", "annotations", "seccomp.security.alpha.kubernetes.io/pod")
    ]
    assert paths(p for p, _ in pss.seccomp_problems(template, at(B, "1.19"))) == [
        ("spec", "containers", 0, "securityContext", "seccompProfile", "type")
    ]


# -- restricted and its exemptions --------------------------------------------------------


def windows(**security: Any) -> PodTemplate:
    return template_of({"os": {"name": "windows"}, "containers": [container(**security)]})


def test_windows_pods_are_exempt_from_three_restricted_checks_since_1_25() -> None:
    template = windows(capabilities={"add": ["SYS_TIME"]}, seccompProfile={"type": "Unconfined"})
    for check in (pss.privilege_escalation, pss.capabilities_not_dropped):
        assert not list(check(template, at(R, "1.25"))), check
        assert len(list(check(template, at(R, "1.24")))) == 1, check
    assert not list(pss.added_capabilities(template, at(R, "1.25")))
    assert len(list(pss.added_capabilities(template, at(R, "1.24")))) == 1
    assert not list(pss.seccomp_problems(template, at(R, "1.25")))
    assert len(list(pss.seccomp_problems(template, at(R, "1.24")))) == 1
    # baseline has no Windows exemption, and runAsNonRoot none at any level
    assert len(list(pss.seccomp_problems(template, at(B, "1.25")))) == 1
    assert len(list(pss.added_capabilities(template, at(B, "1.25")))) == 1
    assert len(list(pss.run_as_root(template, at(R, "1.25")))) == 1


def test_user_namespace_exemption_of_run_as_root_from_1_35() -> None:
    template = template_of({"hostUsers": False, "containers": [container(runAsUser=0)]})
    assert not list(pss.run_as_root(template, at(R, "1.35")))
    assert len(list(pss.run_as_root(template, at(R, "1.34")))) == 1  # alpha gate, off by default


def test_run_as_user_zero_is_checked_from_1_23() -> None:
    template = template_of(
        {"securityContext": {"runAsNonRoot": True}, "containers": [container(runAsUser=0)]}
    )
    [problem] = pss.run_as_root(template, at(R, "1.23"))
    assert problem.path[-1] == "runAsUser" and "kubelet will refuse" in problem.message
    assert not list(pss.run_as_root(template, at(R, "1.22")))


def test_drop_all_is_required_from_1_22() -> None:
    template = template_of({"containers": [container(capabilities={"add": ["CHOWN"]})]})
    assert not list(pss.capabilities_not_dropped(template, at(R, "1.21")))
    assert not list(pss.added_capabilities(template, at(R, "1.21")))  # baseline list before 1.22
    assert paths(pss.capabilities_not_dropped(template, at(R, "1.22"))) == [
        ("spec", "containers", 0, "securityContext", "capabilities")
    ]
    assert [name for _, name, _ in pss.added_capabilities(template, at(R, "1.22"))] == ["CHOWN"]


def test_capabilities_exact_names() -> None:
    template = template_of(
        {
            "containers": [
                container(capabilities={"add": ["CHOWN", "CAP_CHOWN", "SYS_ADMIN"], "drop": ["NET_RAW"]})
            ]
        }
    )
    assert [name for _, name, _ in pss.added_capabilities(template, at(B, "1.34"))] == [
        "CAP_CHOWN",
        "SYS_ADMIN",
    ]
    assert [name for _, name, _ in pss.added_capabilities(template, at(R, "1.34"))] == [
        "CHOWN",
        "CAP_CHOWN",
        "SYS_ADMIN",
    ]
    assert [p.path[-1] for p in pss.capabilities_not_dropped(template, at(R, "1.34"))] == ["drop"]
    assert pss.implies_privilege_escalation(template.containers[0])


def test_image_volumes_are_allowed_at_restricted_from_1_33() -> None:
    template = template_of(
        {
            "containers": [container()],
            "volumes": [
                {"name": "a", "nfs": {"server": "s", "path": "/"}},
                {"name": "b", "image": {"reference": "registry.example.com/models/x:1"}},
                {"name": "c", "hostPath": {"path": "/data"}},
                {"name": "d", "csi": {"driver": "x"}},
            ],
        }
    )
    assert paths(pss.restricted_volumes(template, at(R, "1.33"))) == [("spec", "volumes", 0, "nfs")]
    assert paths(pss.restricted_volumes(template, at(R, "1.32"))) == [
        ("spec", "volumes", 0, "nfs"),
        ("spec", "volumes", 1, "image"),
    ]
    assert not list(pss.restricted_volumes(template, at(B, "1.34")))


def test_privilege_escalation_must_be_explicitly_false() -> None:
    template = template_of(
        {
            "containers": [
                container("a", allowPrivilegeEscalation=False),
                container("b"),
                container("c", allowPrivilegeEscalation=True),
            ]
        }
    )
    problems = list(pss.privilege_escalation(template, at(R, "1.34")))
    assert [p.container_name for p in problems] == ["b", "c"]
    assert problems[1].message == "container 'c' sets allowPrivilegeEscalation: true"
    assert not list(pss.privilege_escalation(template, at(B, "1.34")))


def test_run_as_root_one_problem_per_defect() -> None:
    template = template_of(
        {"containers": [container("root", runAsUser=0), container("a"), container("b", runAsNonRoot=False)]}
    )
    problems = list(pss.run_as_root(template, at(R, "1.34")))
    assert [(p.path, p.container_name) for p in problems] == [
        (("spec", "containers", 0, "securityContext", "runAsUser"), "root"),
        (("spec", "containers", 2, "securityContext", "runAsNonRoot"), "b"),
        (("spec", "securityContext"), "a"),
    ]
    assert "neither it nor the pod sets runAsNonRoot: true" in problems[0].message
    assert problems[1].message == "container 'b' sets runAsNonRoot: false"
    assert problems[2].message == "may run as root: neither the pod nor container 'a' sets runAsNonRoot: true"


def test_pod_level_false_is_reported_even_if_containers_override() -> None:
    template = template_of(
        {"securityContext": {"runAsNonRoot": False}, "containers": [container(runAsNonRoot=True)]}
    )
    assert paths(pss.run_as_root(template, at(R, "1.34"))) == [("spec", "securityContext", "runAsNonRoot")]
