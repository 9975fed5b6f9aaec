"""Positions count lines as git, GitHub annotations and `# gpupolicy: ignore` comments do: by "\\n".
libyaml also ends a line at a lone "\\r", NEL, LS and PS (YAML 1.1 line breaks) and skips a
leading BOM; a finding after one of them pointed one line too far, past the end of the file at
the end. Found by tests/robustness/test_properties_loader.py."""

from __future__ import annotations

import pytest

from gpupolicy.loading.documents import parse_text
from gpupolicy.loading.inputs import load_text

POD = """apiVersion: v1
kind: Pod
metadata:
  name: x
  annotations:
    note: "before{brk}after"
spec:
  containers:
  - name: c
    image: nginx:latest
"""


@pytest.mark.parametrize("brk", ["\r", "\x85", "\u2028", "\u2029"], ids=["cr", "nel", "ls", "ps"])
def test_a_yaml_line_break_inside_a_value_does_not_move_later_positions(brk: str) -> None:
    loaded = load_text(POD.format(brk=brk), "pod.yaml")
    [pod] = loaded.resources
    assert pod.position(("spec", "containers", 0, "image")) == (10, 5)


def test_a_leading_bom_is_a_character_of_the_first_line() -> None:
    [pod] = load_text("\ufeff" + POD.format(brk=" "), "pod.yaml").resources
    assert pod.position(("kind",)) == (2, 1)
    assert pod.position(("apiVersion",)) == (1, 2)


@pytest.mark.parametrize(
    ("text", "position"),
    [("{", (1, 2)), ("a: [1,\n", (2, 1)), ("a: 1\x85b: [", (1, 10)), ('a: "x\u2028y"\nb: [', (2, 5))],
    ids=["brace", "newline-at-end", "nel", "ls-in-a-string"],
)
def test_a_syntax_error_at_the_end_of_the_text_is_inside_it(text: str, position: tuple[int, int]) -> None:
    # The parser's reading (load_text skips a broken text that names no object, saying where)
    [problem] = parse_text(text, "broken.yaml").problems
    assert (problem.line, problem.column) == position
