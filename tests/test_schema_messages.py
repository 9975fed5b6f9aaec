"""GP005's messages say what is wrong with the field, in words a manifest's author reads."""

from __future__ import annotations

from tests.conftest import LintText

PERSISTENT_VOLUME = """\
apiVersion: v1
kind: PersistentVolume
metadata:
  name: lustre
spec:
  capacity:
    storage:
  accessModes: [ReadWriteMany]
  csi: {driver: lustre.csi.storage.gke.io, volumeHandle: lustre-0}
"""


def test_an_empty_quantity_is_named_not_the_schemas_one_of(lint_text: LintText) -> None:
    """GKE's gpu-recipes Lustre PersistentVolume, its capacity left to a value not given: null
    passes both nullable branches of a quantity, which jsonschema said as 'null is valid under more
    than one of the schemas listed in the oneOf keyword'."""
    (finding,) = [f for f in lint_text(PERSISTENT_VOLUME).findings if f.rule_id == "GP005"]
    assert finding.message.startswith("'storage' is empty (null) in 'capacity': give it a value")
    assert finding.line == 7
    given = PERSISTENT_VOLUME.replace("    storage:\n", "    storage: 1200Gi\n")
    assert not [f for f in lint_text(given).findings if f.rule_id == "GP005"]


NAMED_POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {pod}}}
spec:
  containers: [{{name: {container}, image: 'cuda:12'}}]
"""


def test_names_the_api_server_refuses_are_gp005(lint_text: LintText) -> None:
    """HAMi's Iluvatar examples name a Pod and its container BI-V100-poddemo: kubectl apply fails."""
    found = [
        (f.path, f.message.split(" is not")[0])
        for f in lint_text(NAMED_POD.format(pod="BI-V100-poddemo", container="BI-V100")).findings
        if f.rule_id == "GP005"
    ]
    assert found == [
        (("metadata", "name"), "name 'BI-V100-poddemo'"),
        (("spec", "containers", 0, "name"), "container name 'BI-V100'"),
    ]
    # Valid (a part of a subdomain may be longer than 63: kubebuilder's namePrefix makes such names), or GP004's.
    long_name = "semantic-router-operator-semantic-router-operator-controller-manager"
    for pod, container in (("bi-v100.poddemo", "bi-v100"), ("${POD_NAME}", "main"), (long_name, "main")):
        assert not [
            f
            for f in lint_text(NAMED_POD.format(pod=pod, container=container)).findings
            if f.rule_id == "GP005"
        ]


def test_an_empty_string_field_and_a_braced_placeholder_are_named(lint_text: LintText) -> None:
    """ai-on-eks' EFS chart leaves `volumeHandle:` for Terraform to fill; KServe's TorchServe sample
    writes `volumeID: {volume-id}`, which YAML reads as a mapping."""
    base = PERSISTENT_VOLUME.replace("    storage:\n", "    storage: 5Gi\n")
    empty = base.replace("volumeHandle: lustre-0}", "volumeHandle: }")
    braced = base.replace("volumeHandle: lustre-0}", "volumeHandle: {volume-id}}")
    (found,) = [f.message for f in lint_text(empty).findings if f.rule_id == "GP005"]
    assert found.startswith("'volumeHandle' is empty (null) in 'csi': give it a value")
    (found,) = [f.message for f in lint_text(braced).findings if f.rule_id == "GP005"]
    assert found.startswith("'volumeHandle' is {volume-id}, which YAML reads as a mapping in 'csi'")


def test_the_required_fields_one_mapping_lacks_are_one_finding(lint_text: LintText) -> None:
    """A kubebuilder CRD patch (`config/crd/patches/webhook_in_*.yaml`) judged alone lacks four
    fields of its spec: one problem, one finding naming them all, at the mapping."""
    text = (
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
        "metadata: {name: widgets.example.com}\nspec:\n  conversion: {strategy: None}\n"
    )
    (finding,) = [f for f in lint_text(text).findings if f.rule_id == "GP005"]
    assert finding.message.startswith('"group", "names", "scope" and "versions" are required properties')
    assert finding.path == ("spec",)
    one = text.replace("  conversion: {strategy: None}\n", "  group: example.com\n  scope: Namespaced\n")
    one += "  versions: []\n"
    (finding,) = [f for f in lint_text(one).findings if f.rule_id == "GP005"]
    assert finding.message.startswith('"names" is a required property')


def test_metadata_fields_beside_a_missing_metadata_are_one_finding(lint_text: LintText) -> None:
    """armada's Queue (`name: test` where metadata would be): one problem, said once; beside a
    metadata mapping, a field written outside it is still its own finding."""
    text = "apiVersion: armadaproject.io/v1beta1\nkind: Queue\nname: test\npriorityFactor: 1.0\n"
    (finding,) = [f for f in lint_text(text).findings if f.rule_id == "GP003"]
    assert finding.message == "object has no metadata mapping ('name' at the top level: metadata holds it)"
    beside = text.replace("name: test\n", "metadata: {name: test}\nlabels: {team: ml}\n")
    (finding,) = [f for f in lint_text(beside).findings if f.rule_id == "GP003"]
    assert finding.path == ("labels",) and "is at the top level, not under metadata" in finding.message


def test_helms_exponent_form_of_a_number_is_a_number(lint_text: LintText) -> None:
    """soperator's chart renders a PriorityClass `value: 1e+07` (Helm prints large numbers of its
    values so): YAML 1.1 reads a string, the API server's go-yaml the number 10000000."""
    text = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: slurm}\nvalue: 1e+07\n"
    assert not [f for f in lint_text(text).findings if f.rule_id == "GP005"]
    words = text.replace("1e+07", "ten-million")
    assert [f.path for f in lint_text(words).findings if f.rule_id == "GP005"] == [("value",)]


def test_a_status_written_in_a_manifest_lacks_nothing_the_server_must_have(lint_text: LintText) -> None:
    """fake-gpu-operator's KWOK GPU node sets status.nodeInfo without the machineID, systemUUID and
    bootID the kubelet reports: the OpenAPI schema's `required` there is no refusal of the server's."""
    text = (
        "apiVersion: v1\nkind: Node\nmetadata: {name: kwok-gpu-0}\nstatus:\n"
        "  allocatable: {nvidia.com/gpu: '8'}\n  nodeInfo: {architecture: amd64, kubeletVersion: fake}\n"
    )
    assert not [f for f in lint_text(text).findings if f.rule_id == "GP005"]
