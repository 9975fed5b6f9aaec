"""The provenance tables and their migrations (a small hand-rolled migrator on SQLAlchemy Core).

Alembic would be one more dependency and a directory of scripts for a two-table schema; here a
`schema_version` table holds one integer and `MIGRATIONS` lists ordered functions. `migrate()`
runs at every open, in one transaction, under a lock (PostgreSQL: an advisory lock; SQLite:
`BEGIN IMMEDIATE`), so several replicas opening the same database at once migrate it once.
Migrations only ever append: never edit a released one, add the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
    update,
)

metadata = MetaData()

# The latest shape of the records table (what the code reads and writes).
records = Table(
    "provenance_records",
    metadata,
    Column("uid", String(128), primary_key=True),  # admission request uid: the record id
    Column("recorded_at", String(32), nullable=False),  # RFC 3339 UTC, fixed width: sorts as text
    Column("operation", String(16), nullable=False),
    Column("username", Text),
    Column("object_uid", String(128)),
    Column("kind", String(128), nullable=False),
    Column("namespace", String(253)),
    Column("name", String(253), nullable=False),
    Column("generation", Integer),
    Column("experiment", String(253)),
    Column("arm", String(253)),
    Column("policy_version", String(128)),
    Column("policy_digest", String(128)),
    Column("template_hash", String(80)),
    Column("status", String(32), nullable=False),
    Column("body", Text, nullable=False),  # the whole redacted record, JSON
    # v2
    Column("status_changed_at", String(32)),
    Column("git_revision", Text),
)

schema_version = Table("provenance_schema_version", metadata, Column("version", Integer, nullable=False))


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer gpupolicy: refuse to write into a schema we do not know."""


ADVISORY_LOCK_ID = 0x67707570726F76  # "gpuprov"


def _v1_create(conn: Connection) -> None:
    """The records table as first released."""
    conn.execute(
        text(
            """
            CREATE TABLE provenance_records (
                uid VARCHAR(128) NOT NULL PRIMARY KEY,
                recorded_at VARCHAR(32) NOT NULL,
                operation VARCHAR(16) NOT NULL,
                username TEXT,
                object_uid VARCHAR(128),
                kind VARCHAR(128) NOT NULL,
                namespace VARCHAR(253),
                name VARCHAR(253) NOT NULL,
                generation INTEGER,
                experiment VARCHAR(253),
                arm VARCHAR(253),
                policy_version VARCHAR(128),
                policy_digest VARCHAR(128),
                template_hash VARCHAR(80),
                status VARCHAR(32) NOT NULL,
                body TEXT NOT NULL
            )
            """
        )
    )
    conn.execute(text("CREATE INDEX ix_provenance_time ON provenance_records (recorded_at, uid)"))
    conn.execute(
        text("CREATE INDEX ix_provenance_experiment ON provenance_records (experiment, recorded_at)")
    )
    conn.execute(
        text("CREATE INDEX ix_provenance_object ON provenance_records (namespace, kind, name, recorded_at)")
    )
    conn.execute(text("CREATE INDEX ix_provenance_status ON provenance_records (status, recorded_at)"))


def _v2_status_time_and_revision(conn: Connection) -> None:
    """When the status last changed (the reconciler's mark), and the git revision as a column
    (backfilled from the JSON body) so exports and filters need not parse every body."""
    conn.execute(text("ALTER TABLE provenance_records ADD COLUMN status_changed_at VARCHAR(32)"))
    conn.execute(text("ALTER TABLE provenance_records ADD COLUMN git_revision TEXT"))
    rows = conn.execute(select(records.c.uid, records.c.body)).all()
    for uid, body in rows:
        revision = (json.loads(body).get("git") or {}).get("revision")
        if isinstance(revision, str):
            conn.execute(update(records).where(records.c.uid == uid).values(git_revision=revision))


Migration = Callable[[Connection], None]
MIGRATIONS: tuple[Migration, ...] = (_v1_create, _v2_status_time_and_revision)
LATEST = len(MIGRATIONS)


def current_version(conn: Connection) -> int:
    if not inspect(conn).has_table(schema_version.name):
        return 0
    found = conn.execute(select(schema_version.c.version)).scalar()
    return int(found) if found is not None else 0


def migrate(engine: Engine, *, target: int = LATEST) -> int:
    """Bring the database to `target` (default: the latest version); returns the version."""
    if not 0 <= target <= LATEST:
        raise ValueError(f"no schema version {target} (latest is {LATEST})")
    with engine.connect().execution_options(sqlite_immediate=True) as conn, conn.begin():
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": ADVISORY_LOCK_ID})
        if not inspect(conn).has_table(schema_version.name):
            schema_version.create(conn)
        version = current_version(conn)
        if version > LATEST:
            raise SchemaTooNew(
                f"the provenance database is at schema version {version}, newer than this gpupolicy "
                f"knows ({LATEST}); upgrade gpupolicy"
            )
        for number in range(version + 1, target + 1):
            MIGRATIONS[number - 1](conn)
        if target > version:
            if version == 0:
                conn.execute(schema_version.insert().values(version=target))
            else:
                conn.execute(update(schema_version).values(version=target))
            version = target
        return version
