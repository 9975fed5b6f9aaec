"""Regular expressions that run in time linear in their input, for whatever request content they
scan and for every pattern a policy supplies.

Python's `re` backtracks: `tritonserver:(?!.*-sdk)`, searched in a 1.5 MB image reference, held
the webhook's event loop for 26 s, and the provenance redaction patterns took 55 s on a 100 KB
argument. RE2 (https://github.com/google/re2/wiki/WhyRE2) matches with automata, in time linear
in the text for every pattern it accepts; what it refuses is exactly what cannot run in linear
time (lookahead, lookbehind, backreferences).

Why RE2 rather than length limits and a vetted subset of Python's syntax (issue 12): a length
limit only caps the damage (a pattern quadratic in a 64 KiB value is still seconds), and a
"vetted subset" is a parser of our own to get right, that would still leave each pattern's cost
to reasoning. RE2 makes linear time a property of the engine. The `google-re2` wheel is 0.6 MB
with no dependencies, with wheels for Linux (x86-64, aarch64), macOS and Windows.

Built-in patterns that scan request content with unbounded repetition and no anchor use RE2
too (provenance redaction, credential shapes); Python's `re` is kept for anchored patterns over
bounded tokens, and for literal alternations (each linear by construction: see the audit in
tests/robustness/test_regex_linear.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import re2


class Match(Protocol):
    def group(self, *names: int | str) -> Any: ...
    def __getitem__(self, name: int | str) -> Any: ...
    def start(self, group: int | str = 0) -> int: ...
    def end(self, group: int | str = 0) -> int: ...


class LinearPattern(Protocol):
    """What gpupolicy uses of a compiled RE2 pattern (the API of `re.Pattern`)."""

    def search(self, text: str) -> Match | None: ...
    def match(self, text: str) -> Match | None: ...
    def sub(self, repl: str | Callable[[Match], str], text: str) -> str: ...


class PatternError(ValueError):
    """A pattern RE2 refuses; the message says why and what to write instead."""


def _options(*, ignore_case: bool) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every refused pattern to stderr
    options.case_sensitive = not ignore_case
    return options


def compile_linear(pattern: str, *, ignore_case: bool = False) -> LinearPattern:
    """Compile with RE2, raising PatternError (with the reason) for what it refuses."""
    try:
        compiled: LinearPattern = re2.compile(pattern, _options(ignore_case=ignore_case))
    except re2.error as exc:
        raise PatternError(_explain(exc)) from None
    return compiled


def _explain(exc: Exception) -> str:
    reason = exc.args[0] if exc.args else exc
    text = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
    if any(marker in text for marker in ("(?!", "(?=", "(?<", "\\1", "backreference")):
        text += (
            " (lookahead, lookbehind and backreferences are not supported: patterns run on RE2, "
            "in time linear in the text; express the exclusion with character classes instead)"
        )
    return text


def check_pattern(pattern: object) -> bool:
    """True for a pattern gpupolicy can run; PatternError (why) otherwise. The shape of a
    jsonschema format check: non-strings are the `type` keyword's business."""
    if isinstance(pattern, str):
        compile_linear(pattern)
    return True
