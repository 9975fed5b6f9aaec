"""CEL expressions, compiled once by common-expression-language (cel-rust) with the Kubernetes
CEL library (gpupolicy/custom/k8s_cel.py).

cel-rust parses but does not type-check; what a type check would catch first — a function that
exists nowhere — is checked at load time from the names the expression calls. Errors name the
file and line of the expression (a parse error its line and column inside it).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from gpupolicy.custom.definitions import Origin
from gpupolicy.custom.errors import CustomRuleError
from gpupolicy.custom.k8s_cel import FUNCTIONS

_CONTEXTS = threading.local()  # a cel.Context holds its variables: one per thread


def _cel() -> Any:
    import cel

    return cel


class CelEvaluationError(Exception):
    """An expression that failed on an object (a missing field, a type mismatch, a function's error)."""


class CelExpression:
    def __init__(self, text: str, program: Any, what: str) -> None:
        self.text = text
        self.program = program
        self.what = what

    def __getstate__(self) -> tuple[str, str]:
        """Sent to a worker process as its text: compiled again there (a compiled program is no
        Python value)."""
        return self.text, self.what

    def __setstate__(self, state: tuple[str, str]) -> None:
        self.text, self.what = state
        self.program = _cel().compile(self.text)

    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        """The value on `activation` (a one-off: several expressions on one object share an
        `Activation` instead, which converts the object once)."""
        return Activation(activation).evaluate(self)


class Activation:
    """The variables of one evaluation, converted to CEL values once for every expression that
    reads them (the conversion of a large object costs more than evaluating most expressions).
    The engine's context is per thread and reused: its functions are registered once."""

    def __init__(self, variables: Mapping[str, Any]) -> None:
        context = getattr(_CONTEXTS, "context", None)
        if context is None:
            context = _CONTEXTS.context = _new_context()
        context.update(dict(variables))
        self.context = context

    def set(self, name: str, value: Any) -> None:
        self.context.add_variable(name, value)

    def evaluate(self, expression: CelExpression) -> Any:
        try:
            return expression.program.execute(self.context)
        except KeyError as exc:  # in CEL's words: a field the object does not have
            raise CelEvaluationError(
                f"{expression.what}: no such key: {exc.args[0] if exc.args else ''}"
            ) from None
        except (RuntimeError, TypeError, ValueError) as exc:
            raise CelEvaluationError(f"{expression.what}: {type(exc).__name__}: {exc}") from None


def _new_context() -> Any:
    context = _cel().Context()
    for name, function in FUNCTIONS.items():
        context.add_function(name, function)
    return context


def compile_expression(text: str, origin: Origin, what: str) -> CelExpression:
    try:
        cel = _cel()
    except ImportError:
        raise origin.error(
            "CEL rules need the common-expression-language package: pip install 'gpupolicy[rules]'"
        ) from None
    try:
        program = cel.compile(text)
    except ValueError as exc:
        raise _parse_error(str(exc), origin, what) from None
    for name in program.functions():
        if not _is_known_function(name):
            raise origin.error(f"CEL: {what}: unknown function {name}")
    return CelExpression(text, program, what)


def _parse_error(message: str, origin: Origin, what: str) -> CustomRuleError:
    """`... ERROR: <input>:2:10: Syntax error: ...` at the file's line (and the column in it)."""
    _, marker, rest = message.partition("<input>:")
    if not marker:
        return origin.error(f"CEL: {what}: {message.splitlines()[0]}")
    line_text, _, rest = rest.partition(":")
    column_text, _, detail = rest.partition(":")
    line = int(line_text) if line_text.isdigit() else 1
    column = int(column_text) if column_text.isdigit() else None
    detail = detail.strip().splitlines()[0] if detail.strip() else "syntax error"
    return origin.error(f"CEL: {what}: {detail}", line=origin.line + line - 1, column=column)


# cel-rust's own functions and macros (the CEL standard definitions it implements); a probe call
# cannot tell them from unknown names, as it reports a wrong call of either as undefined.
STANDARD_FUNCTIONS = frozenset(
    {
        "has", "all", "exists", "exists_one", "map", "filter", "size", "contains", "startsWith", "endsWith",
        "matches", "int", "uint", "double", "string", "bytes", "bool", "dyn", "type", "timestamp",
        "duration", "max", "min", "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate",
        "getDayOfWeek", "getHours", "getMinutes", "getSeconds", "getMilliseconds", "optional.of",
        "optional.none", "optional.ofNonZeroValue", "hasValue", "value", "or", "orValue",
    }
)  # fmt: skip


# `strings.quote(x)` parses as the call of `quote` on `strings`: the engine reports the last part.
_LIBRARY_NAMES = frozenset(FUNCTIONS) | {name.rpartition(".")[2] for name in FUNCTIONS}


def _is_known_function(name: str) -> bool:
    """Operators (`_+_`, `@in`, `!_`), the standard functions and the Kubernetes library."""
    return not name[:1].isalpha() or name in STANDARD_FUNCTIONS or name in _LIBRARY_NAMES
