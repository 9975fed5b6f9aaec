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
    Float,
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

# v3: experiment results (gpupolicy/results/, docs/results.md). One row per run of an arm,
# with its per-request samples (so a report can apply another SLO), and the experiment
# ConfigMaps `results ingest --config` supplied.
result_runs = Table(
    "result_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("experiment", String(253), nullable=False),
    Column("arm", String(253), nullable=False),
    Column("repeat", Integer, nullable=False),
    Column("ingested_at", String(32), nullable=False),
    Column("format", String(32), nullable=False),
    Column("files", Text, nullable=False),  # JSON list of the files read
    Column("run_date", String(64)),  # when the benchmark ran, as the file says
    Column("duration_s", Float, nullable=False),
    Column("gpus", Float, nullable=False),
    Column("gpu_source", Text, nullable=False),  # "workload ns/name" or "--gpus"
    Column("price_per_gpu_hour", Float),
    Column("node_pool", String(253)),
    Column("record_uid", String(128)),  # the provenance record of --workload
    Column("template_hash", String(80)),
    Column("provenance", Text),  # JSON: images, model, input, placement, priority, gpu of the record
    Column("samples", Text, nullable=False),  # JSON: one row per request (RequestSample.to_row)
)

result_experiments = Table(
    "result_experiments",
    metadata,
    Column("name", String(253), primary_key=True),
    Column("stored_at", String(32), nullable=False),
    Column("source", Text, nullable=False),  # the --config file it came from
    Column("config", Text, nullable=False),  # the ConfigMap object, JSON
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


def _v3_results(conn: Connection) -> None:
    """Experiment results: runs (unique per experiment, arm and repeat) and experiment configs."""
    conn.execute(
        text(
            """
            CREATE TABLE result_runs (
                run_id VARCHAR(64) NOT NULL PRIMARY KEY,
                experiment VARCHAR(253) NOT NULL,
                arm VARCHAR(253) NOT NULL,
                repeat INTEGER NOT NULL,
                ingested_at VARCHAR(32) NOT NULL,
                format VARCHAR(32) NOT NULL,
                files TEXT NOT NULL,
                run_date VARCHAR(64),
                duration_s DOUBLE PRECISION NOT NULL,
                gpus DOUBLE PRECISION NOT NULL,
                gpu_source TEXT NOT NULL,
                price_per_gpu_hour DOUBLE PRECISION,
                node_pool VARCHAR(253),
                record_uid VARCHAR(128),
                template_hash VARCHAR(80),
                provenance TEXT,
                samples TEXT NOT NULL,
                CONSTRAINT uq_result_runs_repeat UNIQUE (experiment, arm, repeat)
            )
            """
        )
    )
    conn.execute(
        text(
            """
            CREATE TABLE result_experiments (
                name VARCHAR(253) NOT NULL PRIMARY KEY,
                stored_at VARCHAR(32) NOT NULL,
                source TEXT NOT NULL,
                config TEXT NOT NULL
            )
            """
        )
    )


Migration = Callable[[Connection], None]
MIGRATIONS: tuple[Migration, ...] = (_v1_create, _v2_status_time_and_revision, _v3_results)
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
