"""Documents read apart (`documents.iter_chosen_documents`): pre-commit's context parses only its
documents that may hold an indexed kind, each on its own. What they give must be what reading
the whole stream gives for those documents: values, places, document indexes and problems."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest

from gpupolicy.loading.documents import (
    _DOCUMENT_START,
    LoadedText,
    _document_starts,
    iter_chosen_chunks,
    iter_chosen_documents,
    iter_parse,
    iter_parse_given,
    split_documents,
)
from tests.yaml_texts import TRICKY, manifests

EDGES = {
    "comments before the first marker": "# header\n\n---\na: 1\n---\nb: 2\n",
    "content before the first marker": "a: 1\n---\nb: 2\n",
    "empty documents": "---\n---\n# only a comment\n---\na: 1\n---\n",
    "markers with content": "--- {a: 1}\n--- |\n  text\n---\nb: 2\n--- # a comment\nc: 3\n",
    "a byte order mark": "\ufeff# c\n---\na: 1\n---\nb: 2\n",
    "CRLF": "a: 1\r\n---\r\nb: 2\r\n--- \r\nc: [1, 2]\r\n",
    "a broken document": "a: 1\n---\nb: [\n---\nc: 3\n",
    "dashes in a block scalar": "a: |\n  ---\n  x\n---\nb: 2\n",
    "no document": "# nothing\n\n",
    "a List": "apiVersion: v1\nkind: List\nitems:\n- {kind: Service, apiVersion: v1, metadata: {name: a}}\n",
}
TEXTS = {**{str(path): path.read_text(encoding="utf-8") for path in manifests()}, **TRICKY, **EDGES}
# The texts read apart: all but a few of TRICKY (`test_only_streams_with_markers_are_read_whole`).
APART = {
    name: text for name, text in TEXTS.items() if iter_chosen_documents(text, "f.yaml", bool) is not None
}
NOT_APART = {
    "a directive": "%YAML 1.1\n---\na: 1\n",
    "a directive after a BOM": "\ufeff%YAML 1.1\n---\na: 1\n",
    "a document end marker": "a: 1\n...\nb: 2\n",
    "a lone carriage return": "a: 1\r---\rb: 2\r",
    "a line separator": "a: 1\u2028---\u2028b: 2\n",
}


def _reading(documents: list[LoadedText]) -> list[tuple[Any, ...]]:
    return [
        (
            tuple(document.problems),
            tuple(
                (
                    resource.obj,
                    resource.doc_index,
                    resource.file,
                    resource.in_list,
                    resource.position(()),
                    resource.line_span(),
                    len(resource.duplicates),
                    resource.text_marks,
                )
                for resource in document.resources
            ),
        )
        for document in documents
    ]


def _chosen(text: str, chosen: Callable[[str], bool]) -> list[LoadedText]:
    documents = iter_chosen_documents(text, "f.yaml", chosen)
    assert documents is not None
    return list(documents)


def test_only_streams_with_markers_are_read_whole() -> None:
    whole = set(TEXTS) - set(APART)
    assert whole <= set(TRICKY) and len(whole) <= 3
    for name in whole:
        text = TEXTS[name]
        assert any(mark in text for mark in ("\n%", "\n...", "\r", "\x85", "\u2028", "\u2029"))


@pytest.mark.parametrize("name", APART)
def test_every_document_chosen_reads_as_the_whole_stream(name: str) -> None:
    text = TEXTS[name]
    assert _reading(_chosen(text, lambda chunk: True)) == _reading(list(iter_parse(text, "f.yaml")))


@pytest.mark.parametrize("name", APART)
def test_the_documents_chosen_read_as_in_the_whole_stream(name: str) -> None:
    """Every other document, by a hash of its text: the others are not parsed, and what is given
    is what the whole stream gives for the same document indexes."""
    text = TEXTS[name]

    def chosen(chunk: str) -> bool:
        return zlib.crc32(chunk.encode("utf-8", "surrogatepass")) % 2 == 0

    given = _chosen(text, chosen)
    whole = list(iter_parse(text, "f.yaml"))
    indexes = {resource.doc_index for document in given for resource in document.resources}
    indexes |= {problem.doc_index for document in given for problem in document.problems}
    expected = [
        document
        for document in whole
        if {resource.doc_index for resource in document.resources} & indexes
        or {problem.doc_index for problem in document.problems} & indexes
    ]
    assert [reading for reading in _reading(given) if reading != ((), ())] == _reading(expected)
    assert len(given) <= sum(1 for _, chunk in split_documents(text) if chosen(chunk))


@pytest.mark.parametrize("name", NOT_APART)
def test_streams_whose_documents_a_marker_alone_does_not_separate_are_not_read_apart(name: str) -> None:
    assert iter_chosen_documents(NOT_APART[name], "f.yaml", lambda chunk: True) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "---",
        "a\n---\nb",
        "---a\n---\t\n----\n--- x\n---",
        "x\n---\r\n",
        "\n---",
        "a\n--\n---x\n ---\n---",
    ],
)
def test_document_starts_are_the_expressions(text: str) -> None:
    assert _document_starts(text) == [match.start() for match in _DOCUMENT_START.finditer(text)]


@pytest.mark.parametrize("name", TEXTS)
def test_document_starts_of_every_text_are_the_expressions(name: str) -> None:
    text = TEXTS[name]
    assert _document_starts(text) == [match.start() for match in _DOCUMENT_START.finditer(text)]


@pytest.mark.parametrize("name", APART)
def test_a_stream_read_around_the_chunks_given_reads_as_the_whole_stream(name: str) -> None:
    """Pass 2 of a large file (`iter_parse_given`): the chunks pass 1 read apart given as read,
    every other chunk read apart, and the documents are those of the whole stream."""
    text = TEXTS[name]

    def chosen(chunk: str) -> bool:
        return zlib.crc32(chunk.encode("utf-8", "surrogatepass")) % 2 == 0

    read = iter_chosen_chunks(text, "f.yaml", chosen)
    assert read is not None
    given = dict(read)
    documents = iter_parse_given(text, "f.yaml", given)
    assert documents is not None
    documents = list(documents)
    assert _reading(documents) == _reading(list(iter_parse(text, "f.yaml")))
    given_documents = [document for chunk in given.values() for document in chunk.documents]
    assert all(any(document is mine for mine in documents) for document in given_documents)


def test_a_chunk_given_for_another_text_is_read_again() -> None:
    """A file changed between the two readings: a chunk whose text or first line is not the
    text's any more is parsed again, not given."""
    before = "a: 1\n---\nkind: Service\nb: 2\n---\nc: 3\n"
    read = iter_chosen_chunks(before, "f.yaml", lambda chunk: "Service" in chunk)
    assert read is not None
    given = dict(read)
    assert list(given) == [1]
    for after in (before.replace("b: 2", "b: 20"), "x: 0\n" + before):
        documents = iter_parse_given(after, "f.yaml", given)
        assert documents is not None
        documents = list(documents)
        assert _reading(documents) == _reading(list(iter_parse(after, "f.yaml")))
        assert not any(document is given[1].documents[0] for document in documents)
