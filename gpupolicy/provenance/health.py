"""The store's health, for /readyz, /metrics and `gpupolicy provenance`: never raises, and runs
one database check at a time — while one waits on a server that stopped answering, the others
report the database unreachable at once instead of each holding a thread (/readyz runs every
few seconds; its threads would run out)."""

from __future__ import annotations

import threading
from typing import Any

from gpupolicy.provenance.counters import Counters
from gpupolicy.provenance.database import Database
from gpupolicy.provenance.schema import LATEST
from gpupolicy.provenance.spool import Spool
from gpupolicy.provenance.writer import GroupCommitWriter


class HealthCheck:
    def __init__(
        self, database: Database, spool: Spool | None, writer: GroupCommitWriter, counters: Counters
    ) -> None:
        self.database = database
        self.spool = spool
        self.writer = writer
        self.counters = counters
        self._checking = threading.Lock()

    def reachable(self) -> bool:
        """Whether the database answers now; False at once while in backoff or while another
        check waits on it."""
        if self.database.in_backoff() or not self._checking.acquire(blocking=False):
            return False
        try:
            return self.database.check()
        finally:
            self._checking.release()

    def report(self) -> dict[str, Any]:
        reachable = self.reachable()
        counters = self.counters.snapshot()
        spool = self.spool
        return {
            "backend": self.database.backend,
            "database": self.database.engine.url.render_as_string(hide_password=True),
            "reachable": reachable,
            "schema_version": self.database.schema_version,
            "latest_schema_version": LATEST,
            "spool_dir": str(spool.directory) if spool else None,
            "spool_backlog": spool.backlog() if spool else 0,
            "writes": counters.writes,
            "spooled": counters.spooled,
            "replayed": counters.replayed,
            "failures": counters.failures,
            "torn_spool_lines": counters.torn_spool_lines,
            "commits": counters.commits,
            "batches": counters.batches,
            "rescued": counters.rescued,
            "writer": self.writer.status(),
            "rejected": spool.rejected_count() if spool else 0,
            "last_error": counters.last_error,
        }
