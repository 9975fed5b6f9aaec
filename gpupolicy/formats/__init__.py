"""Output formats. Each reads the `Report` and its findings' fields; none recomputes them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpupolicy.engine import Report
from gpupolicy.findings import Finding, Severity


@dataclass(frozen=True, slots=True)
class RenderOptions:
    color: bool = False
    show_suppressed: bool = False
    tool_version: str = ""
    fail_on: Severity = Severity.ERROR  # the lowest severity that fails the run (JUnit failures)


def container_note(finding: Finding) -> str:
    """` (container x)` for a line that shows the message, unless the message already names the
    container the way rules do (`Container.label`: `container 'x'`): one name per line."""
    if not finding.container or repr(finding.container) in finding.message:
        return ""
    return f" (container {finding.container})"


Formatter = Callable[[Report, RenderOptions], str]
FORMATTERS: dict[str, Formatter] = {}


def register(name: str) -> Callable[[Formatter], Formatter]:
    def add(formatter: Formatter) -> Formatter:
        if name in FORMATTERS:
            raise ValueError(f"duplicate format {name}")
        FORMATTERS[name] = formatter
        return formatter

    return add


def load_formatters() -> dict[str, Formatter]:
    from gpupolicy.formats import (  # noqa: F401  (registration)
        github,
        json_report,
        junit,
        markdown,
        sarif,
        text,
    )

    return FORMATTERS
