"""The loader and the engine on any text: arbitrary strings, YAML-looking fragments, and real
manifests from tests/data/corpus mutated (lines cut, repeated, swapped; fragments inserted).

What must hold: no exception escapes `load_text` or `evaluate`, no rule fails with an internal
error, and every position (of a load problem or a finding) lies inside the text, as an editor
shows it: lines are separated by "\\n" (a "\\r\\n" ends one line too), columns count characters
from 1 and may point one past the end of a line.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gpupolicy.core.findings import Finding
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import Policy, default_policy

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
FILE = "fuzzed.yaml"

# Pieces of YAML and of what sits in manifests: structure, anchors and aliases, tags, merge keys,
# block scalars, flow collections, placeholders, comments and directives, line breaks of every
# kind YAML knows (\r, \x85, \u2028, \u2029), tabs, a BOM, and values the rules parse.
FRAGMENTS = [
    "\n", "\r\n", "\r", "\x85", "\u2028", "\u2029", "\t", "\ufeff", " ", "  ", "- ", ": ", "---\n", "...\n",
    "apiVersion: v1\n", "kind: Pod\n", "kind: Deployment\n", "kind: List\nitems:\n", "metadata:\n  name: x\n",
    "spec:\n", "  containers:\n  - name: c\n    image: nvcr.io/nvidia/tritonserver:24.08-py3\n",
    "    resources: {limits: {nvidia.com/gpu: 1}}\n", "nvidia.com/gpu: 1e1000000", "&a ", "*a", "<<: *a\n",
    "!!bool maybe", "!!int x", "!!binary AAAA", "!!python/object:os.system", "!custom", "|\n  text\n", ">-\n",
    "{", "}", "[", "]", "'", '"', "#", "# gpupolicy: ignore GP601\n", "${IMAGE}", "{{ .Values.x }}", "%YAML 1.1\n",
    "? ", "9" * 30, "0x1F", "1_000", ".nan", "-.inf", "~", "null", "yes", "on", "١", "😀", "\x00", "\udcff",
]  # fmt: skip


@cache
def corpus() -> tuple[str, ...]:
    return tuple(sorted(path.read_text(encoding="utf-8") for path in CORPUS.glob("*.yaml")))


@cache
def policy() -> Policy:
    return default_policy()


yaml_like = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=6), max_size=40).map("".join)


@st.composite
def mutated_manifests(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(corpus())).split("\n")
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        at = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["cut", "repeat", "swap", "insert", "indent", "truncate"]))
        if action == "cut":
            del lines[at : at + draw(st.integers(1, 5))]
        elif action == "repeat":
            lines[at:at] = lines[at : at + draw(st.integers(1, 5))] * draw(st.integers(1, 3))
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        elif action == "insert":
            line = lines[at]
            column = draw(st.integers(0, len(line)))
            lines[at] = line[:column] + draw(st.sampled_from(FRAGMENTS) | st.text(max_size=4)) + line[column:]
        elif action == "indent":
            lines[at] = draw(st.sampled_from(["", " ", "  ", "\t", "    "])) + lines[at].lstrip()
        else:
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
    return "\n".join(lines)


texts = st.text() | yaml_like | mutated_manifests()


def inside(text: str, line: int | None, column: int | None) -> bool:
    """Whether (line, column) lies inside `text` as an editor numbers it."""
    if line is None:
        return column is None
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return False
    return column is None or 1 <= column <= len(lines[line - 1]) + 1


def where(finding: Finding) -> str:
    return f"{finding.rule_id} at {finding.line}:{finding.column} ({finding.message[:80]})"


@given(texts)
def test_load_problems_lie_inside_the_text(text: str) -> None:
    loaded = load_text(text, FILE)
    for problem in loaded.problems:
        assert problem.file == FILE
        assert inside(text, problem.line, problem.column), (
            problem.rule_id,
            problem.line,
            problem.column,
            problem.message[:100],
        )


@given(texts)
def test_findings_lie_inside_the_file_and_no_rule_fails(text: str) -> None:
    loaded = load_text(text, FILE)
    report = evaluate(loaded.resources, policy(), problems=loaded.problems, directives=loaded.directives)
    assert report.errors == [], report.errors[:3]
    for finding in report.findings:
        assert finding.file == FILE, where(finding)
        assert finding.line is not None, where(finding)
        assert inside(text, finding.line, finding.column), where(finding)
