"""Redacted parts of records, remembered: what comes back from one admission to the next is
redacted (and, for the template hash, written as canonical JSON) once.

It comes back because admissions repeat their content: the Pods of one ReplicaSet or Job carry
the spec of their template (the Deployment's, the ReplicaSet's and each Pod's admission: one
spec, redacted and written once instead of five times); a scale or a re-apply sends the same
template again; and most of a record — placement, priority, GPU resources, findings, the user,
the GitOps source — is the same for every object of a team's rollout. Placement was also
redacted twice per record, once in the spec the template hash covers and once as a field.

Both memos are keyed by the part's content itself (`canonical.content_bytes`: types included,
so only an equal value shares an entry, and the record's field name where the redaction depends
on it) and bounded in bytes, keys counted. The dictionary hashes the bytes (SipHash, keyed per
process) for less than their SHA-256 digest, which they were keyed by before (1.2 against 3.4 µs
for a 6 KB spec, timeit), and a hit compares the content itself. A part without content bytes
(no orjson, a value JSON does not have) is redacted each time. Nothing about the result changes
(tests compare it with `redact` and the template hash's definition); records built here may share the lists and
mappings of their fields with each other, so they are read and serialised, never changed.

A remembered field keeps its canonical JSON too (`float_free_json`, when it holds no float), and
`redacted_record` writes the record's body from those: orjson then writes only the record's
strings and numbers around them, and no text needs the scan for small floats (a record with a
float anywhere is left to `canonical_json` of the whole, as before).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.provenance.canonical import (
    canonical_json,
    canonical_json_with_fragments,
    content_bytes,
    float_free_json,
    fragment,
)
from gpupolicy.provenance.redaction import redact

# A 10 KB Deployment's spec writes about 2-6 KB: a few thousand templates' parts.
_REDACTED_JSON: BoundedCache[bytes, str] = BoundedCache(max_bytes=8 << 20)
# A redacted field in memory: its lists, mappings and strings take at most about this many times
# the bytes of its JSON (`estimate_size` over the bytes of its JSON, for the fields of the bench's
# records: 3.2 for findings to 11.2 for a short GitOps source), and its canonical JSON besides.
# Counted so, not walked: a walk of every value put would cost a good part of what the memo saves.
_BYTES_PER_JSON_BYTE = 12
_REDACTED_FIELDS: BoundedCache[tuple[str, bytes], tuple[int, Any, Any]] = BoundedCache(
    max_bytes=8 << 20, size_of=lambda key, entry: len(key[0]) + len(key[1]) + entry[0]
)

# The items of list fields that were not remembered whole (see `_redacted_items`).
_REDACTED_ITEMS: BoundedCache[tuple[str, bytes], tuple[int, Any]] = BoundedCache(
    max_bytes=4 << 20, size_of=lambda key, entry: len(key[0]) + len(key[1]) + entry[0]
)


def redacted_json(part: Any) -> str:
    """`canonical_json(redact(part))`, remembered by `part`'s content."""
    content = content_bytes(part)
    if content is None:
        return canonical_json(redact(part))
    found = _REDACTED_JSON.get(content)
    if found is None:
        found = _REDACTED_JSON.put(content, canonical_json(redact(part)))
    return found


# Names whose value `redact` treats by the mapping around it (an env list; a pair's value): a
# record's fields have none, and fields that do are redacted whole.
_NAMES_OF_THE_MAPPING = frozenset({"env", "value", "values"})


class RedactedRecord(NamedTuple):
    fields: dict[str, Any]  # `redact(fields)`
    # canonical_json(fields) when it was written from remembered parts; None when a field holds
    # a float (or what orjson does not write), left to `canonical_json` of the whole.
    body_json: str | None


def redacted_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """`redact(fields)` of a record's fields, each list or mapping remembered by its name and
    content."""
    return redacted_record(fields).fields


def redacted_record(fields: dict[str, Any], *, clean: Mapping[str, str] | None = None) -> RedactedRecord:
    """`redact(fields)` of a record's fields, each list or mapping remembered by its name and
    content with its canonical JSON, and the canonical JSON of the whole written from those.
    `clean` holds fields of the record that the caller wrote itself and redaction keeps as they
    are (record.py's time and template hash): they join the result as they are."""
    if not _NAMES_OF_THE_MAPPING.isdisjoint(fields):
        return RedactedRecord({**redact(fields), **(clean or {})}, None)
    plain: dict[str, Any] = {}
    parts: dict[str, Any] = {}
    written: dict[str, Any] = {}  # the parts' JSON, as fragments
    for name, value in fields.items():
        if isinstance(value, dict | list) and value:
            parts[name], written[name] = _redacted_field(name, value)
        else:
            plain[name] = value
    # Strings, numbers and empty fields in one pass: `redact` of a mapping redacts each value as
    # `redact(value, name, 1)`, as `redact(fields)` does (no name here is one of the mapping's).
    redacted = redact(plain)
    if clean:
        redacted.update(clean)
    text = None if None in written.values() else canonical_json_with_fragments(redacted, written)
    redacted.update(parts)
    return RedactedRecord(redacted, text)


def _redacted_field(name: str, value: Any) -> tuple[Any, Any]:
    """A non-empty list or mapping field redacted, and its canonical JSON as a `fragment` (None
    when it may hold a float)."""
    # `redact(fields)` redacts each field as `redact(value, name, 1)`: under its name, one level down.
    # Keyed by the name and the content itself (see the module).
    content = content_bytes(value)
    if content is None:
        return redact(value, name, 1), None
    key = (name, content)
    found = _REDACTED_FIELDS.get(key)
    if found is None:
        redacted = _redacted_items(name, value) if isinstance(value, list) else redact(value, name, 1)
        text = float_free_json(redacted)
        size = _BYTES_PER_JSON_BYTE * len(content) + (0 if text is None else len(text))
        found = _REDACTED_FIELDS.put(key, (size, redacted, None if text is None else fragment(text)))
    return found[1], found[2]


def _redacted_items(name: str, items: list[Any]) -> list[Any]:
    """`redact(items, name, 1)` of a list field the memo did not hold, each list or mapping item
    remembered by its content: a field seen for the first time mostly repeats items seen before
    (the findings of a rollout's Pods differ in the one or two messages that name the Pod, and a
    message is too long for redaction's memo of clean strings)."""
    redacted = []
    for item in items:
        # `redact` of a list redacts each item as `redact(item, name, depth + 1)`.
        content = content_bytes(item) if isinstance(item, dict | list) and item else None
        if content is None:
            redacted.append(redact(item, name, 2))
            continue
        key = (name, content)
        found = _REDACTED_ITEMS.get(key)
        if found is None:
            found = _REDACTED_ITEMS.put(key, (_BYTES_PER_JSON_BYTE * len(content), redact(item, name, 2)))
        redacted.append(found[1])
    return redacted
