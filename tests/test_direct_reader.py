"""The direct reader (gpupolicy/loading/_direct.c) against the Python loader it stands in for.

Where the extension is built, `parse_text` reads a text straight from libyaml's events, and
leaves to the Python loader (PyYAML's composer, then `construct_with_positions`) every text it
does not read itself. Both must give the same objects, the same position tables (entry for
entry, not only the positions they answer), the same problems and duplicate keys, on every rule
example, example, labelled corpus file and real corpus file, on the tricky texts, and on plain
scalars of every shape YAML 1.1 types. tests/test_loader_equivalence.py compares both with the
node-graph reference.
"""

from __future__ import annotations

import hashlib
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupolicy.loading import direct
from gpupolicy.loading.documents import LoadedText, LoadLimits, iter_parse, parse_text
from gpupolicy.loading.documents import _plain_value as plain_value
from gpupolicy.loading.positions import LineIndex, LineStarts
from tests.yaml_texts import TRICKY, manifests

pytestmark = pytest.mark.skipif(
    not direct.AVAILABLE, reason="the direct reader is not built here (no C compiler or libyaml headers)"
)


def test_the_extension_is_built_where_it_can_be() -> None:
    """The build hook compiles it wherever a compiler and libyaml's headers are: this machine kind
    has both, so the skip above never hides the comparisons in CI."""
    headers = [Path(folder, "yaml.h") for folder in ("/usr/include", "/usr/local/include")]
    compiler = shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0])
    if any(header.exists() for header in headers) and compiler:
        assert direct.AVAILABLE


def test_the_extension_is_built_from_its_source() -> None:
    """An editable install copies the built extension into the source tree: after _direct.c
    changes, the old build would go on reading until it is built again."""
    from gpupolicy.loading import _direct

    source = Path(direct.__file__).with_name("_direct.c").read_bytes()
    assert hashlib.sha256(source).hexdigest() == _direct.SOURCE_DIGEST, (
        "the direct reader was built from another _direct.c: build it again (pip install -e .)"
    )


def view(loaded: LoadedText) -> list[tuple[Any, ...]]:
    """Everything a reading gives: each object with its table, and each problem, word for word."""
    objects = [
        (
            resource.doc_index,
            resource.obj,
            resource.positions.root,
            resource.line_span(),
            resource.in_list,
            [(d.key, d.first_line, d.place, d.path) for d in resource.duplicates],
        )
        for resource in loaded.resources
    ]
    problems = [(p.rule_id, p.doc_index, p.line, p.column, p.message) for p in loaded.problems]
    return [*objects, problems]


def in_python(text: str, monkeypatch: pytest.MonkeyPatch, **options: Any) -> list[tuple[Any, ...]]:
    with monkeypatch.context() as patch:
        patch.setattr(direct, "AVAILABLE", False)
        return view(parse_text(text, "direct.yaml", **options))


def assert_same(text: str, monkeypatch: pytest.MonkeyPatch, **options: Any) -> None:
    assert view(parse_text(text, "direct.yaml", **options)) == in_python(text, monkeypatch, **options)


def read_directly(text: str, max_depth: int = 200) -> list[direct.DirectDocument]:
    lines = LineStarts(text, skips_bom=True, editor=LineIndex.needed(text))
    return list(direct.read_documents(text, lines, max_depth, plain_value))


@pytest.mark.parametrize("path", manifests(), ids=lambda path: str(path.relative_to(path.parents[1])))
def test_a_manifest_reads_as_the_python_loader_reads_it(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert_same(path.read_text(encoding="utf-8"), monkeypatch)


@pytest.mark.parametrize("name", TRICKY)
def test_a_tricky_text_reads_as_the_python_loader_reads_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_same(TRICKY[name], monkeypatch)


def test_most_manifests_are_read_directly() -> None:
    """The comparisons above compare something: the direct reader reads most texts itself."""
    read = left = 0
    for path in manifests():
        try:
            read_directly(path.read_text(encoding="utf-8"))
            read += 1
        except direct.Unsupported:
            left += 1
    assert read > 10 * left


# What the direct reader leaves to the Python loader, each a text it must not read itself.
LEFT_TO_PYTHON = {
    "an anchor and an alias": "a: &x {b: 1}\nc: *x\n",
    "an anchor on a scalar": "a: &x 1\n",
    "a tag": "a: !!str 123\n",
    "a custom tag on a mapping": "a: !Ref {b: 1}\n",
    "a merge key": "a:\n  <<: {b: 1}\n  c: 2\n",
    "a key written twice": "a: 1\na: 1\n",
    "a key written twice, both null": "a:\na:\n",
    "an integer key": "1: one\n",
    "a hexadecimal key": "0x10: sixteen\n",
    "a boolean key": "on: push\n",
    "a null key": "~: none\n",
    "an empty key": ": v\n",
    "a mapping as a key": "? {m: 1}\n: v\n",
    "a syntax error": "a: [1,\n",
    "an integer too long to read": "a: " + "9" * 5000 + "\n",
    "a boolean tag on a word": "a: !!bool maybe\n",
    "a lone surrogate": "a: \ud800\n",
}


@pytest.mark.parametrize("name", LEFT_TO_PYTHON)
def test_what_the_direct_reader_leaves_reads_as_the_python_loader_reads_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = LEFT_TO_PYTHON[name]
    with pytest.raises(direct.Unsupported):
        read_directly(text)
    assert_same(text, monkeypatch)


def test_a_stream_left_to_python_midway_gives_each_document_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents read directly before one the reader leaves are not read again or twice."""
    text = "a: 1\n---\nb: [2, 3]\n---\nc: &x {d: 4}\ne: *x\n---\nf: 5\n"
    streamed = [view(document) for document in iter_parse(text, "direct.yaml")]
    with monkeypatch.context() as patch:
        patch.setattr(direct, "AVAILABLE", False)
        expected = [view(document) for document in iter_parse(text, "direct.yaml")]
    assert streamed == expected
    assert [row[0] for document in streamed for row in document[:-1]] == [0, 1, 2, 3]
    assert_same(text, monkeypatch)


def test_nesting_past_the_limit_is_left_to_python(monkeypatch: pytest.MonkeyPatch) -> None:
    deep = "a: " + "[" * 50 + "1" + "]" * 50 + "\n"
    with pytest.raises(direct.Unsupported):
        read_directly(deep, max_depth=20)
    assert len(read_directly(deep, max_depth=60)) == 1
    assert_same(deep, monkeypatch, limits=LoadLimits(max_depth=20))
    # A limit set far higher still stops the C recursion at its own ceiling (a thousand levels).
    deeper = "[" * 1200 + "]" * 1200 + "\n"
    with pytest.raises(direct.Unsupported):
        read_directly(deeper, max_depth=1_000_000)


# -- plain scalars: every shape YAML 1.1's resolvers tell apart ---------------------------------

SCALAR_PIECES = [
    *"0123456789",
    "+", "-", ".", ":", "_", "e", "E", "x", "b", "o",
    "inf", ".inf", ".NaN", "nan", "0x", "0b", "0o",
    "yes", "Yes", "YES", "no", "NO", "on", "On", "off", "OFF", "true", "False", "null", "Null", "~",
    "y", "n", "T", "F", "<<", "=", "a", "Gi", "m", "T", "-", "2026-12-06", " 10:00:00",
]  # fmt: skip


def plain_scalars() -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(SCALAR_PIECES), min_size=1, max_size=4).map("".join)


@settings(max_examples=400, deadline=None)
@given(scalars=st.lists(plain_scalars(), min_size=1, max_size=8))
def test_plain_scalars_are_typed_as_pyyaml_types_them(scalars: list[str]) -> None:
    items = "".join(f"  - {scalar}\n" for scalar in scalars)
    values = "".join(f"  k{index}: {scalar}\n" for index, scalar in enumerate(scalars))
    direct_view, python_view = _both(f"items:\n{items}values:\n{values}")
    assert repr(direct_view) == repr(python_view)  # repr: `nan` is not equal to itself


def _both(text: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with pytest.MonkeyPatch.context() as patch:
        found = view(parse_text(text, "direct.yaml"))
        patch.setattr(direct, "AVAILABLE", False)
        return found, view(parse_text(text, "direct.yaml"))


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(plain_scalars(), min_size=1, max_size=6), value=plain_scalars())
def test_plain_keys_are_read_or_left_as_pyyaml_reads_them(keys: list[str], value: str) -> None:
    text = "".join(f"{key}: {value}\n" for key in keys)
    direct_view, python_view = _both(text)
    assert repr(direct_view) == repr(python_view)


# -- any text: the same reading, never a crash --------------------------------------------------

YAML_PIECES = [
    "a", "b", "0", "1", ":", ": ", "- ", "-", "[", "]", "{", "}", ",", "\n", "  ", "\t", "'", '"', "#",
    "&x ", "*x", "!!str ", "!t ", "<<: ", "? ", "|", ">", "|-\n  ", "---\n", "...\n", "%YAML 1.1\n",
    "~", "yes", "0x1F", "1:30", "\\", "\ufeff", "\r", "\x85", "é", "\U0001f600", "\x00",
]  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(pieces=st.lists(st.sampled_from(YAML_PIECES), max_size=40))
def test_any_text_reads_as_the_python_loader_reads_it(pieces: list[str]) -> None:
    direct_view, python_view = _both("".join(pieces))
    assert repr(direct_view) == repr(python_view)
