"""The journal's frames: what one append writes, and how a reader tells a whole frame from the
rest of a segment (zeros not yet written over, or the torn tail of a write a crash cut short).

    magic   4 bytes   b"GPJ1"
    kind    1 byte    ADMISSION or POLICY (entries.py)
    spare   3 bytes   zero
    length  4 bytes   payload length, little endian
    crc     4 bytes   CRC-32 of kind, spare, length and payload
    payload

A frame is whole when its magic, length and CRC agree; anything else at an offset ends what can
be read there: for a segment still being written, "not yet"; for a finished one, the end (an
append is acknowledged only after its fsync, so whatever follows the first frame that is not
whole was never acknowledged).
"""

from __future__ import annotations

import struct
import zlib

from gpupolicy.core.immutable import immutable

MAGIC = b"GPJ1"
_HEAD = struct.Struct("<4sB3xII")  # magic, kind, spare, length, crc
HEADER_BYTES = _HEAD.size
# A payload is an admitted body and its decision: the webhook refuses bodies past its own limit
# (3 MiB by default). A length past this one is not a frame but noise.
MAX_PAYLOAD = 64 * 1024 * 1024


@immutable
class Frame:
    kind: int
    payload: bytes
    end: int  # the offset just after the frame


# zlib.crc32 lets go of the GIL for buffers past 5 KiB: on the event loop (the route encodes its
# frame there) taking it back behind the journal's thread cost 50 µs and more a frame, ten times
# the CRC itself. Chunks below that size keep it.
_CRC_CHUNK = 4096


def _crc(kind: int, payload: bytes) -> int:
    crc = zlib.crc32(struct.pack("<B3xI", kind, len(payload)))
    view = memoryview(payload)
    for start in range(0, len(view), _CRC_CHUNK):
        crc = zlib.crc32(view[start : start + _CRC_CHUNK], crc)
    return crc


def encode(kind: int, payload: bytes) -> bytes:
    return _HEAD.pack(MAGIC, kind, len(payload), _crc(kind, payload)) + payload


def frame_length(data: bytes | memoryview, offset: int) -> int | None:
    """The whole length of the frame whose header starts at `offset` (None when the bytes there
    are no frame header: zeros, noise, or too few of them)."""
    if len(data) - offset < HEADER_BYTES:
        return None
    magic, _kind, length, _crc_value = _HEAD.unpack_from(data, offset)
    if magic != MAGIC or length > MAX_PAYLOAD:
        return None
    return HEADER_BYTES + int(length)


def decode(data: bytes | memoryview, offset: int) -> Frame | None:
    """The whole frame at `offset` of `data`, or None (see the module's docstring)."""
    length = frame_length(data, offset)
    if length is None or len(data) - offset < length:
        return None
    _magic, kind, _length, crc = _HEAD.unpack_from(data, offset)
    payload = bytes(data[offset + HEADER_BYTES : offset + length])
    if _crc(kind, payload) != crc:
        return None
    return Frame(int(kind), payload, offset + length)
