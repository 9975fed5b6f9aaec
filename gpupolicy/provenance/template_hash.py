"""The template hash of a provenance record: `sha256:` of the redacted pod templates (role,
metadata and spec of each) as canonical JSON — what tells two runs of an experiment apart.

Defined as `sha256(canonical_json([{"role": t.role, "metadata": redact(t.metadata), "spec":
redact(t.spec)} for t in templates]))`, and computed in parts: canonical JSON of a list or a
mapping is its items' canonical JSON joined (keys sorted: `metadata`, `role`, `spec`), so each
template's metadata and spec can be redacted and written on their own, and remembered.

Remembered because they come back: the Pods of one ReplicaSet or Job carry the spec of their
template (the Deployment's, the ReplicaSet's and each Pod's admission: one spec, redacted and
written once instead of five times), and a scale or a re-apply sends the same template again.
The memo is keyed by a SHA-256 digest of the part's content (`canonical.content_bytes`: types
included, so only an equal value shares an entry) and bounded in bytes; a part that has no
content bytes is redacted and written each time. Nothing about the result changes:
`tests/provenance/test_canonical.py` compares it with the definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.kube.pod_spec import PodTemplate
from gpupolicy.provenance.canonical import canonical_json, content_bytes, sha256
from gpupolicy.provenance.redaction import redact

# A 10 KB Deployment's spec writes about 2-6 KB: a few thousand templates' parts.
_REDACTED_PARTS: BoundedCache[bytes, str] = BoundedCache(max_bytes=8 << 20)


def template_hash(templates: Sequence[PodTemplate]) -> str:
    """sha256 of the redacted pod templates (metadata + spec) as canonical JSON."""
    parts = ",".join(
        f'{{"metadata":{redacted_json(t.metadata)},"role":{canonical_json(t.role)},"spec":{redacted_json(t.spec)}}}'
        for t in templates
    )
    return "sha256:" + sha256(f"[{parts}]".encode()).hex()


def redacted_json(part: Any) -> str:
    """`canonical_json(redact(part))`, remembered by the digest of `part`'s content."""
    content = content_bytes(part)
    if content is None:
        return canonical_json(redact(part))
    key = sha256(content)
    found = _REDACTED_PARTS.get(key)
    if found is None:
        found = _REDACTED_PARTS.put(key, canonical_json(redact(part)))
    return found
