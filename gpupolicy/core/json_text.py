"""JSON text of plain values, for checks that search an object's text (GP004's placeholder
precheck): the standard library's encoder, or a faster one that a shell installs. The webhook
installs orjson's, one of its own dependencies (a 10 KB Deployment in about 2 µs where the standard
library takes about 28); the linter's objects carry the loader's text marks and rarely need one, and
its light install has no orjson."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def _stdlib_json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, check_circular=False).encode()


_encode: Callable[[Any], bytes] = _stdlib_json_bytes


def json_bytes(value: Any) -> bytes:
    """`value` as JSON in UTF-8, each key and string as written (no ASCII escapes). Raises
    TypeError or ValueError for what is not plain JSON (keys that are not strings may be
    either written as text or refused, as the encoder does), RecursionError for nesting deeper
    than the encoder goes."""
    return _encode(value)


def use_encoder(encode: Callable[[Any], bytes]) -> None:
    """Encode with `encode` from now on: it must write keys and strings as written, as `json_bytes`
    promises, and raise TypeError or ValueError where it cannot."""
    global _encode
    _encode = encode
