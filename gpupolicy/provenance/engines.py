"""The store's SQLAlchemy engine for SQLite or PostgreSQL, with every wait bounded: SQLite's busy
timeout, and PostgreSQL's statement and lock timeouts, TCP keepalives and `tcp_user_timeout`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

from gpupolicy.provenance.locations import DB_FILE


def normalise_url(url: str) -> URL:
    """`postgresql://` and `postgres://` use the psycopg 3 driver; `sqlite:///path` stays."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise ValueError(
            f"unsupported provenance database {parsed.drivername!r}: use sqlite:/// or postgresql://"
        )
    return parsed


def default_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / DB_FILE}"


def create_store_engine(
    url: str, *, schema: str | None = None, connect_timeout: float = 2.0, write_timeout: float = 2.0
) -> Engine:
    """The store's engine. Its errors never quote the statement's parameters (`hide_parameters`):
    they are a record's content, and errors are logged."""
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, connect_timeout)
    connect_args = postgres_connect_args(schema, connect_timeout, write_timeout)
    # The URL's own `options` (`?options=-csearch_path%3Dtenant`) would be replaced by these:
    # keep them, first, so that the store's timeouts still hold.
    given = parsed.query.get("options")
    for option in (given,) if isinstance(given, str) else given or ():
        connect_args["options"] = f"{option} {connect_args['options']}"
    return create_engine(parsed, connect_args=connect_args, pool_pre_ping=True, hide_parameters=True)


def _sqlite_engine(parsed: URL, connect_timeout: float) -> Engine:
    # A busy database (another process writing) waits at most `connect_timeout`, then the
    # record goes to the spool: an admission request must not hang on a lock.
    busy_ms = max(100, int(connect_timeout * 1000))
    engine = create_engine(parsed, connect_args={"timeout": busy_ms / 1000}, hide_parameters=True)

    @event.listens_for(engine, "connect")
    def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN itself (pysqlite's implicit transactions skip DDL), then
        # ask for durability: WAL, and fsync at every commit.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get("sqlite_immediate")
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def postgres_connect_args(schema: str | None, connect_timeout: float, write_timeout: float) -> dict[str, Any]:
    """libpq parameters that bound every wait: https://www.postgresql.org/docs/current/libpq-connect.html
    (connect_timeout, keepalives*, tcp_user_timeout) and, sent as session settings in `options`,
    https://www.postgresql.org/docs/current/runtime-config-client.html (statement_timeout,
    lock_timeout: the server cancels a write that waits past them)."""
    timeout_ms = max(100, int(write_timeout * 1000))
    # The server cancels first, cleanly, in half the time; the store's watchdog is for a server
    # that cannot cancel anything any more.
    server_ms = max(50, timeout_ms // 2)
    options = [f"-c statement_timeout={server_ms}", f"-c lock_timeout={server_ms}"]
    if schema is not None:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
            raise ValueError(f"invalid schema name {schema!r}")
        options.append(f"-c search_path={schema}")
    return {
        "connect_timeout": max(1, round(connect_timeout)),
        "options": " ".join(options),
        # A peer that vanished (node lost, network partition) is noticed in seconds, not after
        # the kernel's ~15 minutes of retransmissions.
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": timeout_ms,
    }
