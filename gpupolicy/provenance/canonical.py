"""Canonical JSON (sorted keys, no whitespace, UTF-8 as is) and SHA-256 digests, as the
provenance record writes them: the template hash is a digest of canonical JSON, so these bytes
must never change.

`canonical_json` is defined as the standard library writes it:
`json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)`.
orjson writes the same text several times faster (10 µs against 60-100 µs for a record) for
every value a JSON or YAML loader makes, but for two things, and those are left to the
standard library:

- floats below 1e-4 in magnitude: Python writes `1e-05`, orjson `0.00001` or `1e-5`. Every
  such float comes out of orjson as a number with `e-` or as `0.0000…`, so any output
  holding either goes to the standard library (a string holding them too, which costs its
  value the fast path, never its bytes: `tests/provenance/test_canonical.py` compares both on random floats);
- types JSON does not have: orjson would write a datetime (PyYAML makes them of unquoted
  timestamps) or a dataclass its own way where the standard library calls `str`. They are
  passed through (`OPT_PASSTHROUGH_*`) to no `default`, which raises, and the standard library
  writes the value. (orjson also writes enums and UUIDs natively: a record holds neither; a UUID
  would come out as `str` writes it anyway.)

Digests are taken in pieces under 2 KiB: hashlib lets go of the GIL for larger buffers, and
taking it back behind another thread of the process (the webhook's journal writer, the
replayer's store writer) cost more than the hash itself.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

try:
    import orjson
except ImportError:  # pragma: no cover - depends on the install
    orjson = None  # type: ignore[assignment]

# What orjson writes itself only when it writes it as the standard library does: other types go
# to `default`, and there is none (a TypeError: the standard library then writes the value).
_PASSTHROUGH = (
    0
    if orjson is None
    else orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_SORTED = _PASSTHROUGH if orjson is None else _PASSTHROUGH | orjson.OPT_SORT_KEYS

# Below this, hashlib keeps the GIL (HASHLIB_GIL_MINSIZE is 2048 bytes).
_GIL_KEEPING_CHUNK = 2047


def stdlib_canonical_json(value: Any) -> str:
    """The definition of canonical JSON."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(value: Any) -> str:
    """`stdlib_canonical_json(value)`, by orjson where its text is the same (see the module)."""
    if orjson is not None:
        try:
            encoded = orjson.dumps(value, option=_SORTED)
        except TypeError:  # orjson.JSONEncodeError: a type passed through, an integer past 64 bits
            pass
        else:
            if not _may_hold_small_float(encoded):
                return encoded.decode()
    return stdlib_canonical_json(value)


def float_free_json(value: Any) -> bytes | None:
    """`canonical_json(value)`, encoded, for a value that holds no float: orjson's text is then
    the standard library's as it is, with nothing to scan for. None for a value that may hold a
    float, or that orjson does not write (`canonical_json` decides those, on the whole text), or
    without orjson."""
    if orjson is None or _holds_float(value):
        return None
    try:
        return orjson.dumps(value, option=_SORTED)
    except TypeError:  # a type passed through, an integer past 64 bits
        return None


def fragment(text: bytes) -> Any:
    """`text` (a `float_free_json`) as an `orjson.Fragment`: JSON written already, which orjson
    copies as it is into the text of what holds it."""
    assert orjson is not None  # there is a float_free_json only with orjson
    return orjson.Fragment(text)


def canonical_json_with_fragments(plain: dict[str, Any], fragments: dict[str, Any]) -> str | None:
    """`canonical_json` of the mapping `{**plain, **fragments}`, where each fragment (`fragment`)
    stands for a value written already: orjson sorts the keys and copies each fragment's text, so
    the parts of a record remembered with their JSON are not written again. None when a plain
    value may hold a float, or orjson does not write it."""
    if orjson is None or _holds_float(plain):
        return None
    try:
        return orjson.dumps({**plain, **fragments}, option=_SORTED).decode()
    except TypeError:
        return None


# What a JSON or YAML loader makes besides floats, lists and mappings: a value of these types
# holds no float. Anything else (a float, a subclass, a type JSON lacks) counts as one: the whole
# is then left to `canonical_json`, which always writes the right text.
_NO_FLOAT = frozenset({str, int, bool, type(None)})


def _holds_float(value: Any) -> bool:
    """Whether `value` may hold a float anywhere (a loop, not recursion: any depth). Each list or
    mapping is first asked for the types of its items at once (`map(type, …)`, in C): most hold
    strings and numbers only."""
    if type(value) in _NO_FLOAT:
        return False
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is dict:
            item = item.values()
        elif type(item) is not list:
            return True
        if _NO_FLOAT.issuperset(map(type, item)):
            continue
        pending.extend(child for child in item if type(child) not in _NO_FLOAT)
    return False


def _may_hold_small_float(encoded: bytes) -> bool:
    """Whether orjson's text may hold a float below 1e-4 in magnitude: a number with a negative
    exponent (`1e-7`, `2.5e-7`) or `0.0000…` (`0.00009`). A number follows `:`, `,` or `[` (or
    is the whole text); a string may still hold the same (`"a:1e-5"`), which only sends its
    value to the standard library, while a uid's `…-4e8a9e-…` does not. (`e-` is rare in a
    record's text and `find` a memory scan: a few µs for 10 KB, where a regular expression
    took 100.)"""
    for mark in (b"e-", b"0.0000"):
        found = encoded.find(mark)
        while found != -1:
            if _in_a_number(encoded, found):
                return True
            found = encoded.find(mark, found + len(mark))
    return False


_NUMBER = frozenset(b"0123456789.-")
_BEFORE_A_NUMBER = frozenset(b":,[")


def _in_a_number(encoded: bytes, at: int) -> bool:
    """Whether what precedes `at` (digits, `.`, `-`) starts after a separator or the text's start."""
    start = at
    while start > 0 and encoded[start - 1] in _NUMBER:
        start -= 1
    return start == 0 or encoded[start - 1] in _BEFORE_A_NUMBER


def content_bytes(value: Any) -> bytes | None:
    """Bytes that tell `value` from any other JSON or YAML value (types included: `1`, `1.0`
    and `true` differ), in the order its mappings hold their keys; None without orjson or for a
    value it cannot write as such. For keys of caches, under a digest."""
    if orjson is None:
        return None
    try:
        return orjson.dumps(value, option=_PASSTHROUGH)
    except TypeError:
        return None


def sha256(data: bytes) -> bytes:
    """`hashlib.sha256(data).digest()`, holding the GIL (see the module)."""
    digest = hashlib.sha256()
    if len(data) <= _GIL_KEEPING_CHUNK:
        digest.update(data)
        return digest.digest()
    view = memoryview(data)
    for start in range(0, len(view), _GIL_KEEPING_CHUNK):
        digest.update(view[start : start + _GIL_KEEPING_CHUNK])
    return digest.digest()
