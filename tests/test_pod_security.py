"""The Pod Security Standards checks as data and as functions, with pod/container precedence."""

from __future__ import annotations

from typing import Any

import yaml

from gpupolicy import pod_security as pss
from gpupolicy.inputs import load_text
from gpupolicy.pod_spec import PodTemplate, workload_of


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


def test_lists_match_the_admission_checks() -> None:
    # check_capabilities_baseline.go: the 13 capabilities of Docker's default set.
    assert len(pss.BASELINE_CAPABILITIES) == 13
    assert {"SYS_ADMIN", "NET_RAW", "IPC_LOCK", "SYS_PTRACE"}.isdisjoint(pss.BASELINE_CAPABILITIES)
    assert sorted(pss.RESTRICTED_CAPABILITIES) == ["NET_BIND_SERVICE"]
    # check_sysctls.go up to 1.32 (tcp_rmem/tcp_wmem).
    assert {
        "net.ipv4.tcp_rmem",
        "net.ipv4.ip_local_reserved_ports",
        "kernel.shm_rmid_forced",
    } <= pss.SAFE_SYSCTLS
    assert "kernel.shmmax" not in pss.SAFE_SYSCTLS
    # check_restrictedVolumes.go: image volumes since 1.33, never hostPath or nfs.
    assert "image" in pss.RESTRICTED_VOLUME_SOURCES
    assert {"hostPath", "nfs", "gitRepo"}.isdisjoint(pss.RESTRICTED_VOLUME_SOURCES)


def test_level_parse_defaults_to_baseline() -> None:
    assert pss.Level.parse("restricted") is pss.Level.RESTRICTED
    assert pss.Level.parse("baseline") is pss.Level.BASELINE
    assert pss.Level.parse(None) is pss.Level.BASELINE
    assert pss.Level.RESTRICTED > pss.Level.BASELINE


def test_effective_container_overrides_pod() -> None:
    template = template_of(
        {"securityContext": {"runAsUser": 1000}, "containers": [container("a", runAsUser=0), container("b")]}
    )
    own, inherited = (pss.effective(template, c, "runAsUser") for c in template.containers)
    assert (own.value, own.source, own.path) == (
        0,
        "container",
        ("spec", "containers", 0, "securityContext", "runAsUser"),
    )
    assert (inherited.value, inherited.source, inherited.path) == (
        1000,
        "pod",
        ("spec", "securityContext", "runAsUser"),
    )
    unset = pss.effective(template, template.containers[1], "runAsNonRoot")
    assert unset.source == "unset" and not unset.is_set


def test_pod_run_as_non_root_with_container_root_user() -> None:
    template = template_of(
        {
            "securityContext": {"runAsNonRoot": True},
            "containers": [container("root", runAsUser=0), container("ok")],
        }
    )
    problems = list(pss.run_as_root(template))
    assert [p.path for p in problems] == [("spec", "containers", 0, "securityContext", "runAsUser")]
    assert "kubelet will refuse" in problems[0].message


def test_container_non_root_covers_unset_pod_and_user_namespaces_are_exempt() -> None:
    assert not list(pss.run_as_root(template_of({"containers": [container(runAsNonRoot=True)]})))
    missing = list(pss.run_as_root(template_of({"containers": [container()]})))
    assert [p.container for p in missing] == ["c"]
    assert not list(
        pss.run_as_root(template_of({"hostUsers": False, "containers": [container(runAsUser=0)]}))
    )


def test_pod_level_false_is_reported_even_if_containers_override() -> None:
    template = template_of(
        {"securityContext": {"runAsNonRoot": False}, "containers": [container(runAsNonRoot=True)]}
    )
    assert [p.path for p in pss.run_as_root(template)] == [("spec", "securityContext", "runAsNonRoot")]


def test_container_seccomp_overrides_pod_unconfined() -> None:
    template = template_of(
        {
            "securityContext": {"seccompProfile": {"type": "Unconfined"}},
            "containers": [container(seccompProfile={"type": "RuntimeDefault"})],
        }
    )
    problems = list(pss.seccomp_problems(template))
    # the container is confined; the pod-level field is still what the admission check rejects
    assert [(p.path, explicit) for p, explicit in problems] == [
        (("spec", "securityContext", "seccompProfile", "type"), True)
    ]
    assert "no container now" in problems[0][0].message


def test_container_unconfined_overrides_pod_runtime_default() -> None:
    template = template_of(
        {
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [container("a", seccompProfile={"type": "Unconfined"}), container("b")],
        }
    )
    problems = list(pss.seccomp_problems(template))
    assert [(p.container, explicit) for p, explicit in problems] == [("a", True)]


def test_unset_seccomp_is_implicit_unless_the_container_sets_its_own() -> None:
    template = template_of(
        {"containers": [container("a"), container("b", seccompProfile={"type": "Localhost"})]}
    )
    assert [(p.container, explicit) for p, explicit in pss.seccomp_problems(template)] == [("a", False)]


def test_capabilities_exact_names_and_drop_all() -> None:
    template = template_of(
        {
            "containers": [
                container(capabilities={"add": ["CHOWN", "CAP_CHOWN", "SYS_ADMIN"], "drop": ["NET_RAW"]})
            ]
        }
    )
    c = template.containers[0]
    assert [name for name, _ in pss.added_capabilities(c, pss.BASELINE_CAPABILITIES)] == [
        "CAP_CHOWN",
        "SYS_ADMIN",
    ]
    assert [name for name, _ in pss.added_capabilities(c, pss.RESTRICTED_CAPABILITIES)] == [
        "CHOWN",
        "CAP_CHOWN",
        "SYS_ADMIN",
    ]
    assert not pss.drops_all_capabilities(c)
    assert [p.path[-1] for p in pss.capabilities_not_dropped(template)] == ["drop"]


def test_windows_pods_skip_linux_only_restricted_controls() -> None:
    template = template_of({"os": {"name": "windows"}, "containers": [container()]})
    assert not list(pss.capabilities_not_dropped(template))
    assert not list(pss.privilege_escalation(template))


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
    assert [p.container for p in pss.privilege_escalation(template)] == ["b", "c"]


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
    assert [key for key, _ in pss.host_namespaces(template)] == ["hostNetwork", "hostIPC"]
    assert [value for value, _ in pss.host_ports(template.containers[0])] == [8080]
    assert [host for _, host, _ in pss.host_path_volumes(template)] == ["/dev/nvidia0"]


def test_baseline_other_fields() -> None:
    template = template_of(
        {
            "securityContext": {
                "sysctls": [
                    {"name": "net.ipv4.tcp_wmem", "value": "4096"},
                    {"name": "vm.swappiness", "value": "0"},
                ],
                "seLinuxOptions": {"type": "container_engine_t"},
                "appArmorProfile": {"type": "Unconfined"},
            },
            "containers": [
                container(
                    "a",
                    procMount="Unmasked",
                    seLinuxOptions={"role": "sysadm_r"},
                    windowsOptions={"hostProcess": True},
                ),
                container(
                    "b", procMount="Default", appArmorProfile={"type": "Localhost", "localhostProfile": "x"}
                ),
            ],
        },
        annotations={
            "container.apparmor.security.beta.kubernetes.io/a": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/b": "localhost/custom",
        },
    )
    paths = {p.path for p in pss.baseline_other(template)}
    assert paths == {
        ("spec", "securityContext", "sysctls", 1),
        ("metadata", "annotations", "container.apparmor.security.beta.kubernetes.io/a"),
        ("spec", "securityContext", "appArmorProfile", "type"),
        ("spec", "containers", 0, "securityContext", "procMount"),
        ("spec", "containers", 0, "securityContext", "seLinuxOptions", "role"),
        ("spec", "containers", 0, "securityContext", "windowsOptions", "hostProcess"),
    }


def test_restricted_volumes() -> None:
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
    assert [p.path for p in pss.restricted_volumes(template)] == [("spec", "volumes", 0, "nfs")]
