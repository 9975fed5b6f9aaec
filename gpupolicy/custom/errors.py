"""The errors of custom rules, apart from the rules themselves: a rule that cannot be used (a lint run
that finds no custom rule imports nothing else of gpupolicy/custom/ to say so), and a Kubernetes CEL
function called with what it does not take."""

from __future__ import annotations


class CustomRuleError(Exception):
    """A custom rule that cannot be used: the message starts with `file:line:` (exit 2)."""

    def __init__(self, file: str, line: int, message: str, column: int | None = None) -> None:
        where = f"{file}:{line}:{column}" if column else f"{file}:{line}"
        super().__init__(f"{where}: {message}")
        self.file, self.line, self.column = file, line, column
        self.reason = message
        # Where in its definition the rule fails (the expression's JSON path), when known: a
        # definition of the linted tree is reported there (gpupolicy/custom/unevaluated.py).
        self.path: tuple[str | int, ...] = ()


class CelFunctionError(ValueError):
    """A Kubernetes CEL function called with what it does not take (an evaluation error)."""
