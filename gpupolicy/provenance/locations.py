"""Where the provenance database and spool live by default (no SQLAlchemy needed to ask)."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DATA_DIR = Path("/var/lib/gpupolicy")
DB_ENV = "GPUPOLICY_PROVENANCE_DB"
DATA_DIR_ENV = "GPUPOLICY_DATA_DIR"
DB_FILE = "provenance.db"
SPOOL_DIR = "spool"


def data_dir() -> Path:
    """`$GPUPOLICY_DATA_DIR`, else /var/lib/gpupolicy (the chart mounts a volume there)."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def default_spool_dir() -> Path:
    return data_dir() / SPOOL_DIR


def default_db_url() -> str:
    """`$GPUPOLICY_PROVENANCE_DB`, else SQLite beside the spool: <data dir>/provenance.db —
    the same file `open_store(None, spool_dir=<data dir>/spool)` uses."""
    return os.environ.get(DB_ENV) or f"sqlite:///{data_dir() / DB_FILE}"


def sqlite_path(url: str) -> Path | None:
    """The file of a `sqlite:///…` URL (None for other databases and in-memory SQLite)."""
    for prefix in ("sqlite+pysqlite:///", "sqlite:///"):
        if url.startswith(prefix):
            path = url[len(prefix) :].split("?", 1)[0]
            return Path(path) if path and path != ":memory:" else None
    return None
