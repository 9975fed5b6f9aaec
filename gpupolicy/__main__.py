from __future__ import annotations

from gpupolicy.cli.main import entry

raise SystemExit(entry())
