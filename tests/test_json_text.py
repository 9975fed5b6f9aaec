"""JSON text for searching an object's text (GP004's precheck): the standard library's encoder and
orjson's, which the webhook installs, write every key and string as written, and refuse what is
not plain JSON with the errors the precheck expects."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from gpupolicy.core import json_text

PLAIN = {
    "metadata": {"name": "${NAME}", "labels": {"<team>": "__TEAM__"}},
    "spec": {"args": ["{{ .Values.x }}", "é ü 模型", 'quote " and back\\slash'], "n": 1, "f": 0.5},
    "none": None,
    "yes": True,
}


@pytest.fixture(params=["stdlib", "orjson"])
def encoder(request: pytest.FixtureRequest) -> Iterator[Callable[[Any], bytes]]:
    original = json_text._encode
    if request.param == "orjson":
        json_text.use_encoder(orjson.dumps)
    else:
        json_text.use_encoder(json_text._stdlib_json_bytes)
    try:
        yield json_text.json_bytes
    finally:
        json_text.use_encoder(original)


def test_keys_and_strings_are_written_as_written(encoder: Callable[[Any], bytes]) -> None:
    text = encoder(PLAIN).decode()
    for written in ("${NAME}", "<team>", "__TEAM__", "{{ .Values.x }}", "é ü 模型"):
        assert written in text
    assert orjson.loads(text) == PLAIN


@pytest.mark.parametrize("value", [{1: "x"}, {"a": object()}, {"big": 2**70}, {"s": "\ud800"}])
def test_what_is_not_plain_json_is_an_error_the_precheck_catches(
    encoder: Callable[[Any], bytes], value: Any
) -> None:
    try:
        encoder(value)
    except (TypeError, ValueError):
        pass  # the precheck then walks the object
    else:  # the standard library writes int keys and big integers: as text, which is fine
        assert value == {1: "x"} or value == {"big": 2**70}


def test_the_webhook_installs_orjson() -> None:
    import gpupolicy.webhook.review  # noqa: F401  (installs the encoder on import)

    assert json_text._encode is orjson.dumps
