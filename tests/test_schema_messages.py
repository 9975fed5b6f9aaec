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
