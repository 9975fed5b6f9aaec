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


_CRC_HEAD = struct.Struct("<B3xI")  # kind, spare, length: what the CRC covers before the payload
# zlib.crc32 lets go of the GIL for buffers past 5 KiB: on the event loop (the route encodes its
# frame there) taking it back behind the journal's thread cost 50 µs and more a frame, ten times
# the CRC itself. Chunks below that size keep it.
_CRC_CHUNK = 4096


def _crc_of_parts(kind: int, length: int, parts: tuple[bytes, ...]) -> int:
    """The CRC of a frame whose payload is `parts` joined (`length` bytes), in chunks that keep
    the GIL."""
    crc = zlib.crc32(_CRC_HEAD.pack(kind, length))
    for part in parts:
        if len(part) <= _CRC_CHUNK:
            crc = zlib.crc32(part, crc)
            continue
        view = memoryview(part)
        for start in range(0, len(view), _CRC_CHUNK):
            crc = zlib.crc32(view[start : start + _CRC_CHUNK], crc)
    return crc


def _crc_at_once(kind: int, payload: bytes) -> int:
    """The CRC in one call, for a reader (the replayer has no event loop to keep the GIL for)."""
    return zlib.crc32(payload, zlib.crc32(_CRC_HEAD.pack(kind, len(payload))))


def encode(kind: int, payload: bytes) -> bytes:
    return encode_parts(kind, payload)


def encode_parts(kind: int, *parts: bytes) -> bytes:
    """The frame whose payload is `parts` joined: the payload is copied once, into the frame
    (an admission's body is most of it, and the route encodes it on the event loop)."""
    length = sum(map(len, parts))
    return b"".join((_HEAD.pack(MAGIC, kind, length, _crc_of_parts(kind, length, parts)), *parts))


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
    if _crc_at_once(kind, payload) != crc:
        return None
    return Frame(int(kind), payload, offset + length)
