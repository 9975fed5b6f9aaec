"""The labelled corpus (tests/data/corpus/, copies of ../shared/corpus/real with their source and
licence): the linter, with the shipped policy, says what each label expects and nothing a label
forbids (gpupolicy/lint/corpus_labels.py has the conventions; docs/accuracy.md the figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.lint.corpus_labels import Mismatch, check_file, compare, parse_labels

CORPUS = Path(__file__).resolve().parent / "data" / "corpus"
FILES = sorted(path for path in CORPUS.iterdir() if path.suffix in (".yaml", ".yml"))


def test_the_labelled_corpus_is_here_with_its_sources() -> None:
    assert len(FILES) >= 190  # in the repository: never skipped
    sources = (CORPUS / "SOURCES.tsv").read_text(encoding="utf-8").splitlines()
    listed = {line.split("\t", 1)[0] for line in sources[1:]}
    for path in FILES:
        head = path.read_text(encoding="utf-8").splitlines()[:2]
        assert head[0].startswith("# source: https://github.com/"), path.name
        assert head[1].startswith("# licence: "), path.name
        assert path.name in listed, path.name


@pytest.mark.parametrize("path", FILES, ids=[path.name[:80] for path in FILES])
def test_findings_match_the_labels(path: Path) -> None:
    report, mismatches = check_file(path)
    assert not report.errors, report.errors
    assert not mismatches, "\n".join(str(m) for m in mismatches)


def finding(rule_id: str, line: int, severity: Severity = Severity.WARNING) -> Finding:
    return Finding(
        rule_id=rule_id, rule_name="x", severity=severity, message="m", remediation="r.",
        object=None, path=(), file="f.yaml", line=line, column=1, doc_index=0,
    )  # fmt: skip


def kinds(mismatches: list[Mismatch]) -> list[tuple[str, str, int]]:
    return [(m.kind, m.rule_id, m.line) for m in mismatches]


def test_the_harness_holds_findings_to_labels() -> None:
    labels = parse_labels(
        "# forbid: GP601\napiVersion: v1  # expect: GP702, GP612\nkind: Pod\n---\n# forbid: GP606\nkind: Pod\n"
    )
    assert labels.expected == {2: {"GP702", "GP612"}}
    assert labels.forbidden == {0: {"GP601"}, 1: {"GP606"}}
    # expected and reported: nothing to say; a label not reported is missing
    assert kinds(compare([finding("GP702", 2)], labels)) == [("missing", "GP612", 2)]
    # a warning on an unlabelled line is unexpected; info is free unless forbidden
    assert kinds(compare([finding("GP702", 2), finding("GP612", 2), finding("GP701", 3)], labels)) == [
        ("unexpected", "GP701", 3)
    ]
    assert (
        compare([finding("GP702", 2), finding("GP612", 2), finding("GP701", 3, Severity.INFO)], labels) == []
    )
    forbidden = compare(
        [finding("GP702", 2), finding("GP612", 2), finding("GP606", 6, Severity.INFO)], labels
    )
    assert kinds(forbidden) == [("forbidden", "GP606", 6)]
    # a label on the last line of a field that spans lines (no comment fits inside a quoted scalar)
    spanning = finding("GP612", 1)
    assert compare([finding("GP702", 2), spanning], labels, {spanning: 2}) == []
