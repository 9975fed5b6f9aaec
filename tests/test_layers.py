"""The layers of docs/architecture.md hold: the import-linter contracts in pyproject.toml are kept
(checked by the real `lint-imports`), no module reaches itself through its imports, and the shells
stay thin and apart: the webhook imports nothing of the command line, and the commands import
nothing of the CLI that registers them. Read from the source, lazy imports inside functions
included."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "gpupolicy"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> Iterator[str]:
    """Every gpupolicy module `path` imports, at the top or inside a function (relative imports
    resolved against the module's package)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.startswith("gpupolicy"))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            if module.startswith("gpupolicy"):
                yield module
                yield from (f"{module}.{alias.name}" for alias in node.names)


def graph() -> dict[str, set[str]]:
    return {module_name(path): set(imports_of(path)) for path in PACKAGE.rglob("*.py")}


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_webhook_imports_nothing_of_the_command_line() -> None:
    leaks = {
        module: sorted(
            name
            for name in names
            if within(name, "gpupolicy.cli.main") or within(name, "gpupolicy.cli.commands")
        )
        for module, names in graph().items()
        if within(module, "gpupolicy.webhook")
    }
    assert {module: names for module, names in leaks.items() if names} == {}


def test_commands_import_nothing_of_the_cli_that_registers_them() -> None:
    leaks = {
        module: sorted(name for name in names if within(name, "gpupolicy.cli.main"))
        for module, names in graph().items()
        if within(module, "gpupolicy.cli.commands")
    }
    assert {module: names for module, names in leaks.items() if names} == {}


def test_exit_codes_sit_below_every_shell() -> None:
    assert graph()["gpupolicy.core.exit_codes"] == set()


def test_the_graph_is_read_whole() -> None:
    """The test reads what it claims to: the CLI's lazy import of the command modules is seen."""
    modules = graph()
    assert "gpupolicy.webhook.server" in modules and "gpupolicy.cli.commands.serve" in modules
    assert "gpupolicy.webhook.server" in modules["gpupolicy.cli.commands.serve"] or any(
        within(name, "gpupolicy.webhook.server") for name in modules["gpupolicy.cli.commands.serve"]
    )


def module_edges() -> dict[str, set[str]]:
    """The graph between modules: a name imported from a module (a function, a class) is read as
    an edge to that module; a submodule imported from a package, as an edge to the submodule."""
    modules = graph()
    edges: dict[str, set[str]] = {}
    for module, names in modules.items():
        targets = set()
        for name in names:
            while name not in modules and "." in name:
                name = name.rpartition(".")[0]
            if name in modules and name != module:
                targets.add(name)
        edges[module] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_imports_itself_through_others() -> None:
    assert cycles(module_edges()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_import_linter_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
