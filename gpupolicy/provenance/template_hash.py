"""The template hash of a provenance record: `sha256:` of the redacted pod templates (role,
metadata and spec of each) as canonical JSON — what tells two runs of an experiment apart.

Defined as `sha256(canonical_json([{"role": t.role, "metadata": redact(t.metadata), "spec":
redact(t.spec)} for t in templates]))`, and computed in parts: canonical JSON of a list or a
mapping is its items' canonical JSON joined (keys sorted: `metadata`, `role`, `spec`), so each
template's metadata and spec can be redacted and written on their own, and remembered.

Each part is remembered (redaction_memo.py): the Pods of a ReplicaSet or Job share their
template's spec. Nothing about the result changes: `tests/provenance/test_canonical.py`
compares it with the definition.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpupolicy.kube.pod_spec import PodTemplate
from gpupolicy.provenance.canonical import canonical_json, sha256
from gpupolicy.provenance.redaction_memo import redacted_json


def template_hash(templates: Sequence[PodTemplate]) -> str:
    """sha256 of the redacted pod templates (metadata + spec) as canonical JSON."""
    parts = ",".join(
        f'{{"metadata":{redacted_json(t.metadata)},"role":{canonical_json(t.role)},"spec":{redacted_json(t.spec)}}}'
        for t in templates
    )
    return "sha256:" + sha256(f"[{parts}]".encode()).hex()
