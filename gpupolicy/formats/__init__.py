"""Output formats. Each reads the `Report` and its findings' fields; none recomputes them.

Adding a format is one module here with a `render_*(report, options)` function and one line in
`RENDERERS`; `tests/test_vocabulary.py` holds the CLI's list of names (`core.vocabulary.FORMATS`)
to this table."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module

from gpupolicy.formats.options import Formatter
from gpupolicy.formats.options import RenderOptions as RenderOptions
from gpupolicy.formats.options import container_note as container_note

# format name -> (module in this package, its render function); imported only when a run renders.
RENDERERS: dict[str, tuple[str, str]] = {
    "text": ("text", "render_text"),
    "json": ("json_report", "render_json"),
    "sarif": ("sarif", "render_sarif"),
    "junit": ("junit", "render_junit"),
    "github": ("github", "render_github"),
    "markdown": ("markdown", "render_markdown"),
}


def load_formatters(names: Iterable[str] | None = None) -> dict[str, Formatter]:
    """The renderers of `names` (every format when None), each module imported only when its
    format is asked for (JUnit's brings xml.etree into a run that prints text otherwise)."""
    formatters: dict[str, Formatter] = {}
    for name in RENDERERS if names is None else names:
        if name in RENDERERS:
            module, function = RENDERERS[name]
            formatters[name] = getattr(import_module(f"{__name__}.{module}"), function)
    return formatters
