"""The shells stay thin and apart: the webhook imports nothing of the command line, and the
commands import nothing of the CLI that registers them (it imports them: the other way would be a
cycle). Read from the source, lazy imports inside functions included."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpupolicy"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> Iterator[str]:
    """Every gpupolicy module `path` imports, at the top or inside a function."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("gpupolicy"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gpupolicy"):
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def graph() -> dict[str, set[str]]:
    return {module_name(path): set(imports_of(path)) for path in PACKAGE.rglob("*.py")}


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_webhook_imports_nothing_of_the_command_line() -> None:
    leaks = {
        module: sorted(
            name for name in names if within(name, "gpupolicy.cli") or within(name, "gpupolicy.commands")
        )
        for module, names in graph().items()
        if within(module, "gpupolicy.webhook")
    }
    assert {module: names for module, names in leaks.items() if names} == {}


def test_commands_import_nothing_of_the_cli_that_registers_them() -> None:
    leaks = {
        module: sorted(name for name in names if within(name, "gpupolicy.cli"))
        for module, names in graph().items()
        if within(module, "gpupolicy.commands")
    }
    assert {module: names for module, names in leaks.items() if names} == {}


def test_exit_codes_sit_below_every_shell() -> None:
    assert graph()["gpupolicy.exit_codes"] == set()


def test_the_graph_is_read_whole() -> None:
    """The test reads what it claims to: the CLI's lazy import of the command modules is seen."""
    modules = graph()
    assert "gpupolicy.webhook.server" in modules and "gpupolicy.commands.serve" in modules
    assert "gpupolicy.webhook.server" in modules["gpupolicy.commands.serve"] or any(
        within(name, "gpupolicy.webhook.server") for name in modules["gpupolicy.commands.serve"]
    )
