"""Rego, evaluated in-process by regorus (a Rego interpreter in Rust, with Python bindings).

Why regorus and not regopy (Microsoft rego-cpp's bindings): regopy 1.5 crashes the process
(a segmentation fault) on ordinary Rego — iterating `xs[_]` and then indexing with the value, or a
built-in called with `repos[_]` as an argument, as the gatekeeper-library templates do — and a
crash would take the webhook down with it; regopy 0.4 lacks compiled bundles and error positions.
regorus is not published on PyPI by its authors; the extra pins a build published as
`gordon-to-regorus` (docs/custom-rules.md, "Engines").

- Modules are parsed once per policy load; each evaluation sets the input and evaluates
  `data.<package>.violation`. The `data` document (parameters, `data.inventory`) is added to a
  clone of the parsed engine, kept per data document (a rule that reads `data.inventory` gets a
  new clone when the inventory changes: once per lint run, once per admission in the webhook).
- Gatekeeper templates are Rego v0 (`violation[{"msg": msg}] { ... }`) unless they import
  `rego.v1`; native modules are Rego v1.
- Errors name the file, line and column; a module written inside YAML (a template's `rego: |`) is
  reported at its line in the YAML file.
- A call of a function that exists nowhere is an error only when the call runs: each called name
  is checked at load time instead, so that such a rule stops the run before linting.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.custom.errors import CustomRuleError


@immutable
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

    @property
    def label(self) -> str:
        """The module's name for regorus: its errors name it, so it names the file and the line."""
        return f"{self.file}@{self.first_line}"


# Each thread's engines, by program: freed by the thread itself (oldest programs first).
_THREAD_ENGINES = threading.local()
_PROGRAM_IDS = itertools.count()
MAX_PROGRAMS_PER_THREAD = 256


def _regorus() -> Any:
    import regorus

    return regorus


class RegoProgram:
    """Parsed modules and one query per package: `violations(package, input, data)`.

    A regorus engine belongs to the thread that made it: it refuses to be used, or even freed,
    from another, and holds one input at a time. So each thread that evaluates (the webhook's, the
    time budget's workers) parses its own copy, once, and keeps it in its own storage
    (`_THREAD_ENGINES`), where only that thread ever frees it."""

    def __init__(
        self, sources: Sequence[RegoSource], rule_packages: Sequence[str], *, v0: bool = False
    ) -> None:
        self.sources = tuple(sources)
        self.packages = tuple(dict.fromkeys(rule_packages))
        self.v0 = v0
        self._id = next(_PROGRAM_IDS)

    def compile(self, data: Mapping[str, Any]) -> None:
        """Parse now (errors with file:line:column), refuse calls of functions that exist
        nowhere, and run each rule once on an empty object."""
        self._engine(data)
        _refuse_unknown_functions(self.sources, v0=self.v0)
        for package in self.packages:
            try:
                self.violations(package, {}, data)
            except RegoEvaluationError as exc:
                raise _compile_error(str(exc), self.sources) from None

    def violations(self, package: str, document: Any, data: Mapping[str, Any]) -> list[Any]:
        engine = self._engine(data)
        engine.set_input(document)
        try:
            text = engine.eval_rule_as_json(f"data.{package}.violation")
        except RuntimeError as exc:
            if "not a valid rule path" in str(exc):  # the package defines no violation
                return []
            raise RegoEvaluationError(_first_lines(str(exc))) from None
        found = json.loads(text)
        if isinstance(found, dict):  # a v1 partial object keyed by violations: its keys
            return list(found)
        return found if isinstance(found, list) else []

    def query_value(self, query: str) -> Any:
        """The value of a rule over the modules alone (a rule's constant `metadata`)."""
        engine = self._engine({})
        try:
            return json.loads(engine.eval_rule_as_json(query))
        except RuntimeError:
            return None

    def _engine(self, data: Mapping[str, Any]) -> Any:
        programs: OrderedDict[int, tuple[Any, dict[str, Any]]] | None = getattr(
            _THREAD_ENGINES, "programs", None
        )
        if programs is None:
            programs = _THREAD_ENGINES.programs = OrderedDict()
        entry = programs.get(self._id)
        if entry is None:
            entry = programs[self._id] = (_engine_with(self.sources, v0=self.v0), {})
            if len(programs) > MAX_PROGRAMS_PER_THREAD:  # those of policies no longer in use
                programs.popitem(last=False)
        programs.move_to_end(self._id)
        parsed, engines = entry
        key = json.dumps(data, sort_keys=True, default=str) if data else ""
        engine = engines.get(key)
        if engine is None:
            if len(engines) >= MAX_BUILDS:  # one policy's data at a time, in practice
                engines.clear()
            engine = engines[key] = parsed.clone()
            if data:
                engine.add_data(dict(data))
        return engine


def _engine_with(sources: Sequence[RegoSource], *, v0: bool) -> Any:
    try:
        engine = _regorus().Engine()
    except ImportError:
        first = sources[0] if sources else None
        raise CustomRuleError(
            first.file if first else "-",
            first.first_line if first else 1,
            "Rego rules need the regorus engine: pip install 'gpupolicy[rules]' (wheels for Linux x86_64)",
        ) from None
    engine.set_rego_v0(v0)
    engine.set_gather_prints(True)  # `print()` in a rule must not reach gpupolicy's output
    for source in sources:
        try:
            engine.add_policy(source.label, source.text)
        except RuntimeError as exc:
            raise _compile_error(str(exc), sources) from None
    return engine


# Programs are built per data document; a webhook's inventory changes with each admission, so
# only a few are kept (the most recent ones are what the next admissions need).
MAX_BUILDS = 8


class RegoEvaluationError(Exception):
    """A rule that failed while evaluating (a built-in's error, a missing function)."""


# Words followed by `(` that are not function calls.
_NOT_CALLS = frozenset(
    {"if", "not", "some", "every", "in", "contains", "with", "as", "else", "print", "trace"}
)


def _refuse_unknown_functions(sources: Sequence[RegoSource], *, v0: bool) -> None:
    """A name called in a module is known when it is defined at the start of a line of a module
    (`is_gpu(c) if ...`), reached through `data.` or an imported package, or a built-in of the
    engine (asked once per name: a probe rule calls it, and only an unknown one fails with
    "could not find function")."""
    texts = [_code_only(source.text) for source in sources]
    defined = {name for text in texts for name in _defined_functions(text)}
    for source, text in zip(sources, texts, strict=True):
        aliases = _import_aliases(text)
        for name, offset in _called_names(text):
            head = name.split(".")[0]
            if name in defined or head in aliases or head == "data" or name in _NOT_CALLS:
                continue
            if not _is_builtin(name):
                line = source.first_line + text.count("\n", 0, offset)
                column = offset - (text.rfind("\n", 0, offset) + 1) + 1
                raise CustomRuleError(source.file, line, f"Rego: unknown function {name}", column)


@functools.lru_cache(maxsize=512)  # names of functions: a small, closed set in practice
def _is_builtin(name: str) -> bool:
    engine = _regorus().Engine()
    engine.add_policy("probe.rego", f"package probe\nimport rego.v1\np if {{ {name}() }}\n")
    engine.set_input({})
    try:
        engine.eval_rule_as_json("data.probe.p")
    except RuntimeError as exc:
        return "could not find function" not in str(exc)
    return True


def _code_only(text: str) -> str:
    """The module with its strings and comments blanked (same length: offsets stay true)."""
    out = list(text)
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char == "#":
            end = text.find("\n", index)
            end = size if end < 0 else end
        elif char in '"`':
            end = index + 1
            while end < size and text[end] != char:
                end += 2 if char == '"' and text[end] == "\\" else 1
            end = min(end + 1, size)
        else:
            index += 1
            continue
        for blank in range(index, end):
            if out[blank] != "\n":
                out[blank] = " "
        index = end
    return "".join(out)


def _is_name_char(char: str) -> bool:
    return char.isalnum() or char in "_."


def _called_names(text: str) -> list[tuple[str, int]]:
    found = []
    at = text.find("(")
    while at >= 0:
        start = at
        while start > 0 and _is_name_char(text[start - 1]):
            start -= 1
        name = text[start:at]
        if name and (name[0].isalpha() or name[0] == "_"):
            found.append((name, start))
        at = text.find("(", at + 1)
    return found


def _defined_functions(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        head, paren, _ = line.partition("(")
        if paren and head and not line[:1].isspace() and all(_is_name_char(char) for char in head):
            names.add(head)
    return names


def _import_aliases(text: str) -> set[str]:
    aliases = set()
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "import":
            aliases.add(words[3] if len(words) >= 4 and words[2] == "as" else words[1].split(".")[-1])
    return aliases


def _first_lines(text: str) -> str:
    """regorus's error without its Rust backtrace."""
    return text.split("Stack backtrace:")[0].strip()


def _compile_error(text: str, sources: Sequence[RegoSource]) -> CustomRuleError:
    """regorus's `--> label:line:col ... error: message` at the file and line of the module."""
    text = _first_lines(text)
    message = next(
        (line.partition("error:")[2].strip() for line in text.splitlines() if line.startswith("error:")),
        text.splitlines()[-1] if text else "does not compile",
    )
    arrow = next((line for line in text.splitlines() if line.strip().startswith("-->")), "")
    location = arrow.strip()[3:].strip()
    label, _, rest = location.rpartition("@")
    first_line, line, column = _location(rest)
    by_label = {source.label: source for source in sources}
    source = by_label.get(f"{label}@{first_line}")
    if source is None:
        first = sources[0] if sources else RegoSource("<rego>", "")
        return CustomRuleError(first.file, first.first_line, f"Rego: {message}")
    return CustomRuleError(
        source.file, source.first_line + max(line, 1) - 1, f"Rego: {message}", column or None
    )


def _location(text: str) -> tuple[int, int, int]:
    """`12:4:7` (first line of the module, line and column in it) -> (12, 4, 7); 0 when missing."""
    parts = [int(part) if part.isdigit() else 0 for part in text.split(":")] + [0, 0, 0]
    return parts[0], parts[1], parts[2]
