"""kube/kube_schemas.py decodes only the definitions a kind's schema reaches, found by the
layout of kubernetes-validate's `_definitions.json`; every schema it composes must be the one
that decoding the whole file gives, for every shipped schema of every bundled version."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpupolicy.kube import kube_schemas
from gpupolicy.kube.kube_schemas import _Definitions, available_versions, schema_document, shipped_schemas


def _whole_file(version: str) -> _Definitions:
    folder = kube_schemas._schemas_root() / f"v{version}.0-local-strict"
    compact = json.dumps(json.loads((folder / "_definitions.json").read_text(encoding="utf-8")))
    definitions = _Definitions(compact)  # one line: not the layout the index reads
    assert definitions._whole is not None
    return definitions


@pytest.mark.parametrize("version", available_versions())
def test_every_schema_is_the_one_the_whole_file_gives(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed = kube_schemas._definitions(version)
    assert indexed._whole is None, "the shipped file's layout was not recognised: every lint decodes it whole"
    names = sorted(shipped_schemas(version))
    composed: dict[str, dict[str, Any]] = {name: schema_document(version, name) for name in names}
    whole = _whole_file(version)
    assert len(indexed._starts) == len(whole._whole or {})
    monkeypatch.setattr(kube_schemas, "_definitions", lambda _version: whole)
    assert [name for name in names if schema_document(version, name) != composed[name]] == []


def test_a_definition_is_read_between_its_own_braces() -> None:
    text = json.dumps(
        {
            "$defs": {
                "a.A": {
                    "properties": {"b": {"$ref": "#/$defs/b.B"}, "note": {"description": '"\n    "x": '}}
                },
                "b.B": {"type": "string"},
            },
            "$id": "x",
            "after": {"c.C": {"type": "integer"}},
        },
        indent=2,
    )
    definitions = _Definitions(text)
    assert definitions._whole is None and sorted(definitions._starts) == ["a.A", "b.B"]
    found = definitions.get("a.A")
    assert found is not None and found[0]["properties"]["b"] == {"$ref": "#/$defs/b.B"}
    assert json.loads(found[1]) == found[0]
    assert definitions.get("c.C") is None and definitions.get("nowhere") is None
