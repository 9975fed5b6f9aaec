"""What every format takes besides the `Report`: render options and the shared container note."""

from __future__ import annotations

from collections.abc import Callable

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.core.immutable import immutable
from gpupolicy.engine.report import Report


@immutable
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
