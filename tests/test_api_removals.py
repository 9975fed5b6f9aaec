"""GP006 and its table (policies/api-removals.yaml, from the Kubernetes deprecation guide): a test
per entry."""

from __future__ import annotations

import pytest

from gpupolicy.core.findings import Severity
from gpupolicy.kube.api_removals import Removal, minor, removals
from gpupolicy.kube.kube_schemas import OLDEST_SUPPORTED
from tests.conftest import LintText

ENTRIES = sorted(removals().values(), key=lambda r: (r.removed_in, r.api_version, r.kind))


def manifest(api_version: str, kind: str) -> str:
    return f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x, namespace: ai-lab}}\n"


def gp006(lint_text: LintText, api_version: str, kind: str, version: tuple[int, int]) -> list[Severity]:
    report = lint_text(manifest(api_version, kind), {"kubernetesVersion": f"{version[0]}.{version[1]}"})
    return [f.severity for f in report.findings if f.rule_id == "GP006"]


def test_the_table_covers_the_guide() -> None:
    assert len(ENTRIES) >= 40
    assert {r.removed_in for r in ENTRIES} == {(1, 16), (1, 22), (1, 25), (1, 26), (1, 27), (1, 29), (1, 32)}
    for entry in ENTRIES:  # a replacement is never itself removed by the time it is offered
        if entry.replacement is not None and (entry.replacement, entry.kind) in removals():
            assert removals()[(entry.replacement, entry.kind)].removed_in > entry.removed_in


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{r.api_version}-{r.kind}" for r in ENTRIES])
def test_each_removed_version_is_an_error_from_its_release(lint_text: LintText, entry: Removal) -> None:
    major, release = entry.removed_in
    assert gp006(lint_text, entry.api_version, entry.kind, (major, release)) == [Severity.ERROR]
    assert gp006(lint_text, entry.api_version, entry.kind, (1, 34)) == [Severity.ERROR]
    before = (major, release - 1)
    if before >= OLDEST_SUPPORTED:
        expected = [Severity.WARNING] if entry.available_since and before >= entry.available_since else []
        assert gp006(lint_text, entry.api_version, entry.kind, before) == expected
    if entry.replacement is not None:  # the replacement is served where the old version stops
        assert gp006(lint_text, entry.replacement, entry.kind, entry.removed_in) == []


def test_the_message_names_the_replacement_and_the_release(lint_text: LintText) -> None:
    report = lint_text(manifest("autoscaling/v2beta1", "HorizontalPodAutoscaler"))
    [finding] = [f for f in report.findings if f.rule_id == "GP006"]
    assert "not served since Kubernetes 1.25" in finding.message and "use autoscaling/v2" in finding.message
    assert finding.path == ("apiVersion",) and finding.line == 1
    assert minor("1.34") == (1, 34) and minor("v1.9.3") == (1, 9)


DRA_ALPHA = """\
apiVersion: {api_version}
kind: ResourceClaimTemplate
metadata: {{name: gpu-template, namespace: demo}}
spec:
  spec:
    devices:
      requests: [{{name: gpu, deviceClassName: gpu.nvidia.com}}]
"""


@pytest.mark.parametrize(
    ("api_version", "kubernetes", "message"),
    [
        # NVIDIA's DRA driver demos: the alpha claim APIs went without a deprecation period.
        ("resource.k8s.io/v1alpha2", "1.34", "is not served by Kubernetes 1.34 (last served in 1.30): use resource.k8s.io/v1"),
        ("resource.k8s.io/v1alpha3", "1.34", "is not served by Kubernetes 1.34 (last served in 1.33): use resource.k8s.io/v1"),
        ("resource.k8s.io/v1alpha3", "1.33", None),  # still served there
        ("resource.k8s.io/v1", "1.34", None),
    ],
)  # fmt: skip
def test_alpha_versions_the_releases_schemas_no_longer_serve_are_gp006(
    lint_text: LintText, api_version: str, kubernetes: str, message: str | None
) -> None:
    report = lint_text(DRA_ALPHA.format(api_version=api_version), {"kubernetesVersion": kubernetes})
    found = [f.message for f in report.findings if f.rule_id == "GP006"]
    assert found == ([f"{api_version} ResourceClaimTemplate {message}"] if message else [])
