"""`# gpupolicy: ignore ...` comments, as they are written in a file.

Reading a file finds its directives; what they mean (which rules, whether the reason is enough,
what they suppress) is decided later by `gpupolicy.engine.suppressions`, which loading does not
know. A directive is kept raw here: its rules as written and its reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpupolicy.core.immutable import immutable
from gpupolicy.loading.documents import comment_starts

# `# gpupolicy: ignore GP102, GP104[worker] -- reason` (the body runs to the end of the line)
_DIRECTIVE = re.compile(r"#[ \t]*gpupolicy:[ \t]*ignore\b")


@immutable
class InlineDirective:
    """A `# gpupolicy: ignore` comment found in a file (by `scan_comments`)."""

    file: str
    line: int
    column: int
    rules: str  # the rules as written, before the `--` (e.g. " GP102[vllm], privileged-container ")
    reason: str  # after the `--`, stripped; "" when there is none
    own_line: bool  # the comment is alone on its line (it then covers the next line)


def scan_comments(text: str, file: str) -> list[InlineDirective]:
    """Every `# gpupolicy: ignore ...` comment of a file's text.

    Only a real YAML comment is a directive, and only when the directive starts it: text inside a
    quoted, plain or block scalar is not (a JSON string that mentions the syntax, a shell script
    in a ConfigMap), and JSON has no comments at all. Linear in the text: the directive pattern
    is searched once, and the file is tokenized (libyaml) only when it holds a candidate.
    """
    # Every directive starts with `#`: a text without one (memchr: 0.2 us for ten GPU Deployments,
    # 26 KB) holds none, and need not be searched for "gpupolicy:" (8.8 us there; timeit, *one-off*).
    if file.endswith(".json") or "#" not in text or "gpupolicy:" not in text:
        return []
    lines = _candidate_lines(text)
    if not lines:
        return []
    hashes = [offset for start, end in lines for offset in _hashes(text, start, end)]
    comments = comment_starts(text, hashes)
    found: list[InlineDirective] = []
    number, counted = 1, 0
    for start, end in lines:
        first = next((offset for offset in _hashes(text, start, end) if offset in comments), None)
        match = _DIRECTIVE.match(text, first) if first is not None else None
        if match is None:
            continue
        number += text.count("\n", counted, start)
        counted = start
        rules, separator, reason = text[match.end() : end].rstrip("\r").partition("--")
        found.append(
            InlineDirective(
                file=file,
                line=number,
                column=match.start() - start + 1,
                rules=rules,
                reason=reason.strip() if separator else "",
                own_line=not text[start : match.start()].strip(),
            )
        )
    return found


def _candidate_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of the lines that hold the directive pattern, each line once."""
    lines: list[tuple[int, int]] = []
    line_end = -1
    for match in _DIRECTIVE.finditer(text):
        if match.start() < line_end:
            continue  # a second candidate on a line already taken
        start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        if line_end < 0:
            line_end = len(text)
        lines.append((start, line_end))
    return lines


def _hashes(text: str, start: int, end: int) -> Iterator[int]:
    """Offsets of `#` in text[start:end]."""
    offset = text.find("#", start, end)
    while offset >= 0:
        yield offset
        offset = text.find("#", offset + 1, end)
