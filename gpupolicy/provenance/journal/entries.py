"""What the journal holds: admissions, and the policies they were decided under.

- `Admission`: one admitted request the webhook answered — its uid, when it was admitted, the
  digest of the policy that decided, the findings as a record keeps them (`finding_entry`), the
  experiment ConfigMap the object named (its name, namespace and data), and the AdmissionReview
  body exactly as the API server sent it. Everything a record needs (record.assemble_record),
  so the record is built later, by the replayer, as the webhook would have built it.
- `PolicySnapshot`: a policy's data (what `Policy` is built from) under its digest. A segment
  holds the snapshot of every policy its admissions name, before the first of them: a segment
  can be replayed alone.
- `End`: the writer finished the segment (rotated, went idle, or closed); nothing follows.

A payload is a JSON header (its length first, 4 bytes) followed by the raw bytes it describes.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.provenance.journal import frames

ADMISSION = 1
POLICY = 2
END = 3  # the writer finished the segment: nothing follows
END_FRAME = frames.encode(END, b"")

_LENGTH = struct.Struct("<I")

try:  # orjson writes and reads the header several times faster; the stdlib is the fallback
    import orjson

    _dumps: Callable[[Any], bytes] = orjson.dumps
    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - depends on the install

    def _dumps(value: Any) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    _loads = json.loads


class MalformedEntry(ValueError):
    """A whole frame (its CRC agrees) whose payload is not an entry of this version."""


@immutable
class Admission:
    uid: str
    time_ns: int  # when it was admitted: the record's time
    policy_digest: str
    findings: list[dict[str, Any]]
    experiment_config: dict[str, Any] | None
    body: bytes  # the AdmissionReview as the API server sent it


@immutable
class PolicySnapshot:
    digest: str
    data: bytes  # the policy's data as JSON


@immutable
class End:
    pass


Entry = Admission | PolicySnapshot | End


def _frame(kind: int, header: dict[str, Any], raw: bytes) -> bytes:
    encoded = _dumps(header)
    return frames.encode_parts(kind, _LENGTH.pack(len(encoded)), encoded, raw)


def encode_admission(
    *,
    uid: str,
    time_ns: int,
    policy_digest: str,
    findings: list[dict[str, Any]],
    experiment_config: dict[str, Any] | None,
    body: bytes,
) -> bytes:
    """The frame of one admission (what the route appends)."""
    header = {
        "uid": uid,
        "time_ns": time_ns,
        "policy": policy_digest,
        "findings": findings,
        "config": experiment_config,
    }
    return _frame(ADMISSION, header, body)


def encode_policy(digest: str, data: Any) -> bytes:
    """The frame of a policy's snapshot (`data`: the policy's data, serialised as its digest is)."""
    raw = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()
    return _frame(POLICY, {"digest": digest}, raw)


def decode(frame: frames.Frame) -> Entry:
    payload = frame.payload
    if frame.kind == END:
        return End()
    try:
        (length,) = _LENGTH.unpack_from(payload, 0)
        header = _loads(payload[_LENGTH.size : _LENGTH.size + length])
        raw = payload[_LENGTH.size + length :]
        if frame.kind == ADMISSION:
            return Admission(
                uid=str(header["uid"]),
                time_ns=int(header["time_ns"]),
                policy_digest=str(header["policy"]),
                findings=list(header["findings"]),
                experiment_config=header["config"],
                body=raw,
            )
        if frame.kind == POLICY:
            return PolicySnapshot(str(header["digest"]), raw)
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        raise MalformedEntry(f"journal entry of kind {frame.kind}: {exc}") from exc
    raise MalformedEntry(f"unknown journal entry kind {frame.kind}")
