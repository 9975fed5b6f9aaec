from __future__ import annotations

from gpupolicy.cli import main

raise SystemExit(main())
