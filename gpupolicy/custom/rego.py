"""Rego, evaluated in-process by regopy (the Python bindings of Microsoft's rego-cpp).

What regopy does and does not do, and how this module copes (docs/custom-rules.md):

- Modules are compiled once into a bundle with one entrypoint per rule; each evaluation sets the
  input and queries the entrypoint. The `data` document (parameters, `data.inventory`) is baked
  into the bundle, so a rule that reads `data.inventory` is rebuilt when the inventory changes
  (once per lint run; once per admission in the webhook).
- rego-cpp has no Rego v0 mode: Gatekeeper's `violation[{"msg": msg}] { ... }` parses as a v1
  partial object keyed by the violation. A wrapper rule iterates `data.<pkg>.violation[v]`,
  which yields set members and object keys alike, so v0 and v1 modules give the same list.
- Syntax errors come back as an s-expression with byte offsets (mapped to line:column here);
  rego-cpp would also print them on the process's stdout unless its log level is NONE.
- A function that does not exist is an error only when a query runs: each rule is evaluated once
  at load time on an empty object, so that such an error stops the run before linting.
  Unsafe variables are not reported by rego-cpp at all (the rule never fires): the rule's own
  examples (`gpupolicy test`) are what catch them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpupolicy.custom.definitions import CustomRuleError, line_of

WRAPPER_PACKAGE = "gpupolicy_custom"
WRAPPER_FILE = "<gpupolicy wrapper>"


@dataclass(frozen=True, slots=True)
class RegoSource:
    """One module: its text, the file it is written in, and the line of that file where the text
    starts (a ConstraintTemplate's Rego starts below its `rego: |` line)."""

    file: str
    text: str
    first_line: int = 1

    @property
    def package(self) -> str:
        for line in self.text.splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] == "package":
                return words[1]
        raise CustomRuleError(self.file, self.first_line, "a Rego module must start with a package")

    def name(self, index: int) -> str:
        """The module's name for rego-cpp: errors name it, so it names the file (and the line)."""
        return f"{self.file}@{self.first_line}#{index}"


def _regopy() -> Any:
    import regopy

    return regopy


class RegoProgram:
    """Compiled modules and one query per package: `violations(package, input, data)`.

    Thread-safe: the webhook evaluates from several threads; a rego-cpp interpreter holds one input
    at a time, so each program has a lock (an evaluation takes well under a millisecond)."""

    def __init__(self, sources: Sequence[RegoSource], rule_packages: Sequence[str]) -> None:
        self.sources = tuple(sources)
        self.packages = tuple(dict.fromkeys(rule_packages))
        self._lock = threading.Lock()
        self._built: dict[str, tuple[Any, Any]] = {}  # data (as JSON) -> (interpreter, bundle)
        self._entry = {package: f"{WRAPPER_PACKAGE}/{_result_name(package)}" for package in self.packages}

    def compile(self, data: Mapping[str, Any]) -> None:
        """Compile now (errors with file:line), and try each rule once on an empty object."""
        for package in self.packages:
            self._check_runs(package, data)

    def violations(self, package: str, document: Any, data: Mapping[str, Any]) -> list[Any]:
        regopy = _regopy()
        shared = regopy.rego_shared
        with self._lock:
            interpreter, bundle = self._bundle(data)
            interpreter.set_input(document)
            output = shared.rego_bundle_query_entrypoint(interpreter._impl, bundle._impl, self._entry[package])
            try:
                text = shared.rego_output_string(output)
                ok = shared.rego_output_ok(output)
            finally:
                shared.rego_free_output(output)
        if not ok or text.startswith("(error"):
            raise RegoEvaluationError(_runtime_message(text))
        if text == "undefined":
            return []
        expressions = json.loads(text).get("expressions") or [[]]
        found = expressions[0]
        return found if isinstance(found, list) else []

    def _bundle(self, data: Mapping[str, Any]) -> tuple[Any, Any]:
        key = json.dumps(data, sort_keys=True, default=str)
        built = self._built.get(key)
        if built is None:
            if len(self._built) >= MAX_BUILDS:  # one policy's data at a time, in practice
                self._built.clear()
            built = self._built[key] = self._build(data)
        return built

    def _build(self, data: Mapping[str, Any]) -> tuple[Any, Any]:
        regopy = _regopy()
        interpreter = _interpreter_with(self.sources)
        interpreter.add_module(WRAPPER_FILE, self._wrapper())
        if data:
            interpreter.add_data(dict(data))
        try:
            bundle = interpreter.build(None, list(self._entry.values()))
        except regopy.RegoError as exc:
            raise _compile_error(str(exc), self.sources) from None
        return interpreter, bundle

    def query_value(self, query: str) -> Any:
        """The value of a query over the modules alone (a rule's constant `metadata`)."""
        regopy = _regopy()
        interpreter = _interpreter_with(self.sources)
        try:
            output = interpreter.query(query)
        except (regopy.RegoError, ValueError) as exc:
            raise _compile_error(str(exc), self.sources) from None
        text = str(output)
        if text == "undefined" or text.startswith("(error"):
            return None
        expressions = json.loads(text).get("expressions") or [None]
        return expressions[0]

    def _wrapper(self) -> str:
        lines = [f"package {WRAPPER_PACKAGE}", "", "import rego.v1", ""]
        for package in self.packages:
            lines.append(f"{_result_name(package)} := [v | some v; data.{package}.violation[v]]")
        return "\n".join(lines) + "\n"

    def _check_runs(self, package: str, data: Mapping[str, Any]) -> None:
        try:
            self.violations(package, {}, data)
        except RegoEvaluationError as exc:
            source = next((s for s in self.sources if s.package == package), self.sources[0])
            raise CustomRuleError(source.file, _line_of_error(source, str(exc)), str(exc)) from None


def _interpreter_with(sources: Sequence[RegoSource]) -> Any:
    regopy = _regopy()
    interpreter = regopy.Interpreter()
    interpreter.log_level = regopy.LogLevel.NONE  # else rego-cpp prints errors on stdout
    for index, source in enumerate(sources):
        try:
            interpreter.add_module(source.name(index), source.text)
        except regopy.RegoError as exc:
            raise _compile_error(str(exc), sources) from None
    return interpreter


# Programs are built per data document; a webhook's inventory changes with each admission, so
# only a few are kept (the most recent ones are what the next admissions need).
MAX_BUILDS = 8


class RegoEvaluationError(Exception):
    """A rule that failed while evaluating (a built-in's error, a missing function)."""


def _result_name(package: str) -> str:
    return "r_" + package.replace(".", "_").replace("-", "_")


def _runtime_message(text: str) -> str:
    found = _field(text, "(errormsg ")
    return found if found is not None else text.strip().splitlines()[0][:200]


def _field(text: str, marker: str, start: int = 0) -> str | None:
    """A length-prefixed string of rego-cpp's s-expressions: `<marker><n>:<n characters>`."""
    at = text.find(marker, start)
    if at < 0:
        return None
    head = at + len(marker)
    colon = text.find(":", head)
    if colon < 0 or not text[head:colon].isdigit():
        return None
    length = int(text[head:colon])
    return text[colon + 1 : colon + 1 + length]


def _compile_error(text: str, sources: Sequence[RegoSource]) -> CustomRuleError:
    """The first error of rego-cpp's error sequence, at its file and line."""
    module = _field(text, "(error ")
    message = _field(text, "(errormsg ") or "does not compile"
    by_name = {source.name(index): source for index, source in enumerate(sources)}
    source = by_name.get(module or "")
    if source is None:
        first = sources[0] if sources else RegoSource("<rego>", "")
        return CustomRuleError(first.file, first.first_line, f"Rego: {message}")
    after = text.find("|", text.find("(error "))
    end = text.find("|", after + 1)
    offset = int(text[after + 1 : end]) if after > 0 and text[after + 1 : end].isdigit() else 0
    prefix = source.text.encode("utf-8")[:offset].decode("utf-8", "replace")
    line = source.first_line + prefix.count("\n")
    column = len(prefix) - (prefix.rfind("\n") + 1) + 1
    return CustomRuleError(source.file, line, f"Rego: {message}", column)


def _line_of_error(source: RegoSource, message: str) -> int:
    """Where a runtime error points: the function it names, else the module's first line."""
    name = message.rpartition(":")[2].strip()
    line = line_of(source.text, name + "(", 0) if name else 0
    return source.first_line + line - 1 if line else source.first_line
