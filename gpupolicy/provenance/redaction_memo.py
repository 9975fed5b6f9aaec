"""Redacted parts of records, remembered: what comes back from one admission to the next is
redacted (and, for the template hash, written as canonical JSON) once.

It comes back because admissions repeat their content: the Pods of one ReplicaSet or Job carry
the spec of their template (the Deployment's, the ReplicaSet's and each Pod's admission: one
spec, redacted and written once instead of five times); a scale or a re-apply sends the same
template again; and most of a record — placement, priority, GPU resources, findings, the user,
the GitOps source — is the same for every object of a team's rollout. Placement was also
redacted twice per record, once in the spec the template hash covers and once as a field.

Both memos are keyed by a SHA-256 digest of the part's content (`canonical.content_bytes`:
types included, so only an equal value shares an entry, and the record's field name where the
redaction depends on it) and bounded in bytes. A part without content bytes (no orjson, a value
JSON does not have) is redacted each time. Nothing about the result changes (tests compare it
with `redact` and the template hash's definition); records built here may share the lists and
mappings of their fields with each other, so they are read and serialised, never changed.
"""

from __future__ import annotations

from typing import Any

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.provenance.canonical import canonical_json, content_bytes, sha256
from gpupolicy.provenance.redaction import redact

# A 10 KB Deployment's spec writes about 2-6 KB: a few thousand templates' parts.
_REDACTED_JSON: BoundedCache[bytes, str] = BoundedCache(max_bytes=8 << 20)
# A redacted field in memory: its lists, mappings and strings take at most about this many times
# the bytes of its JSON (`estimate_size` over the bytes of its JSON, for the fields of the bench's
# records: 3.2 for findings to 11.2 for a short GitOps source). Counted so, not walked: a walk of
# every value put would cost a good part of what the memo saves.
_BYTES_PER_JSON_BYTE = 12
_REDACTED_FIELDS: BoundedCache[bytes, tuple[int, Any]] = BoundedCache(
    max_bytes=8 << 20, size_of=lambda key, entry: len(key) + entry[0]
)


def redacted_json(part: Any) -> str:
    """`canonical_json(redact(part))`, remembered by the digest of `part`'s content."""
    content = content_bytes(part)
    if content is None:
        return canonical_json(redact(part))
    key = sha256(content)
    found = _REDACTED_JSON.get(key)
    if found is None:
        found = _REDACTED_JSON.put(key, canonical_json(redact(part)))
    return found


# Names whose value `redact` treats by the mapping around it (an env list; a pair's value): a
# record's fields have none, and fields that do are redacted whole.
_NAMES_OF_THE_MAPPING = frozenset({"env", "value", "values"})


def redacted_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """`redact(fields)` of a record's fields, each list or mapping remembered by its name and
    content."""
    if not _NAMES_OF_THE_MAPPING.isdisjoint(fields):
        return dict(redact(fields))
    return {name: _redacted_field(name, value) for name, value in fields.items()}


def _redacted_field(name: str, value: Any) -> Any:
    # `redact(fields)` redacts each field as `redact(value, name, 1)`: under its name, one level down.
    if not isinstance(value, dict | list) or not value:
        return redact(value, name, 1)
    content = content_bytes(value)
    if content is None:
        return redact(value, name, 1)
    key = sha256(b"%b\0%b" % (name.encode(), content))
    found = _REDACTED_FIELDS.get(key)
    if found is None:
        found = _REDACTED_FIELDS.put(key, (_BYTES_PER_JSON_BYTE * len(content), redact(value, name, 1)))
    return found[1]
