from __future__ import annotations

from gpupolicy.cli import entry

raise SystemExit(entry())
