"""The spool promise for every way a database fails, each scripted against the real server:
PostgreSQL refusing connections, resetting them mid-statement (before the statement, and after
a COMMIT whose answer is lost), refusing the store's role (authentication) and serving
read-only sessions; SQLite on a full disk and on a read-only file system (the hanging database
is `test_stalls.py`). In each: records keep being admitted while the database fails, every
future resolves to its record id (none fails, the writer keeps running), the records are in the
spool, and once the database is back a replay writes each of them exactly once."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from sqlalchemy import func, select

from gpupolicy.provenance import open_store
from gpupolicy.provenance.schema import records
from gpupolicy.provenance.spool import Spool
from gpupolicy.provenance.store import ProvenanceStore, StoreUnavailable, open_reader
from tests.provenance.relay import DatabaseRelay
from tests.provenance.samples import POSTGRES, POSTGRES_SKIP, RUN_ID, MakeRecord, drop_schema

SETTLE_SECONDS = 60  # a liveness bound (a hang fails the test), not a performance figure
THREADS = 4
PER_THREAD = 10


@dataclass(frozen=True, slots=True)
class Outcome:
    admitted: int  # records submitted while the database failed
    spooled: int  # of them, in the spool after the outage
    replayed: int  # new rows the replay wrote
    rows: int  # rows in the database at the end (the record written before the outage too)
    error: str  # the store's last error during the outage

    def figures(self) -> tuple[int, int, int, int]:
        return self.admitted, self.spooled, self.replayed, self.rows


def rows(url: str, schema: str | None) -> list[str]:
    """Every uid in the database, through a connection of its own."""
    reader = open_reader(url, schema=schema)
    try:
        with reader.engine.connect() as conn:
            uids = list(conn.execute(select(records.c.uid)).scalars())
            assert conn.execute(select(func.count()).select_from(records)).scalar_one() == len(uids)
            return uids
    finally:
        reader.close()


def admit_under_load(store: ProvenanceStore, make_record: MakeRecord, tag: str) -> list[str]:
    """Submit THREADS x PER_THREAD records from concurrent threads, as concurrent admissions
    do; every future must resolve to its record id."""
    futures: list[tuple[str, Future[str]]] = []
    refused: list[Exception] = []
    lock = threading.Lock()

    def admit(thread: int) -> None:
        for index in range(PER_THREAD):
            uid = f"{tag}-{thread}-{index:02d}"
            try:
                future = store.submit(make_record(uid), block=True)
            except Exception as exc:  # WriterStopped: the writer died
                refused.append(exc)
                return
            with lock:
                futures.append((uid, future))

    threads = [threading.Thread(target=admit, args=(thread,)) for thread in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SETTLE_SECONDS)
    assert not refused, refused[0]
    _, not_done = wait([future for _, future in futures], timeout=SETTLE_SECONDS)
    assert not not_done, "admissions waited on a failing database"
    assert [future.result() for _, future in futures] == [uid for uid, _ in futures]
    return [uid for uid, _ in futures]


def outage(
    store: ProvenanceStore,
    make_record: MakeRecord,
    *,
    url: str,
    schema: str | None,
    fail: Callable[[], None],
    recover: Callable[[], None],
) -> Outcome:
    """One record before the failure, THREADS x PER_THREAD during it, a replay after it: checks
    that nothing was lost or doubled and returns the figures."""
    spool_dir = store.spool.directory if store.spool else None
    assert spool_dir is not None
    store.record(make_record("uid-before"))  # the schema is known and a connection pooled
    fail()
    admitted = admit_under_load(store, make_record, "uid-during")
    assert store.writer.status()["running"] is True
    spooled = {str(item["uid"]) for item in Spool(spool_dir).waiting()}
    assert spooled, "nothing was spooled: the failure never reached the store"
    assert spooled <= set(admitted)
    error = str(store.counters.last_error)
    recover()
    store.database._down_until = 0.0  # the backoff is the store's, not the database's
    replayed = store.replayer.try_replay()
    assert store.replayer.try_replay() == 0
    assert Spool(spool_dir).backlog() == 0
    after = store.record(make_record("uid-after"))  # and writes go straight in again
    assert after == "uid-after"
    uids = rows(url, schema)
    assert sorted(uids) == sorted(["uid-before", *admitted, "uid-after"])  # each exactly once
    return Outcome(len(admitted), len(spooled), replayed, len(uids), error)


# -- PostgreSQL ----------------------------------------------------------------------------------


def test_refused_connections_spool_and_replay_exactly_once(
    relayed_path: tuple[str, str, DatabaseRelay], tmp_path: Path, make_record: MakeRecord
) -> None:
    url, schema, relay = relayed_path
    with open_store(
        url, spool_dir=tmp_path / "spool", schema=schema, start_replayer=False, retry_seconds=0
    ) as store:
        result = outage(
            store, make_record, url=url, schema=schema, fail=relay.refuse, recover=relay.listen_again
        )
    assert result.figures() == (40, 40, 40, 42), result
    assert "Connection refused" in result.error


def rows_sent(packet: bytes) -> bool:
    """The writer's `executemany`: extended-protocol Parse or Bind messages."""
    return packet[:1] in (b"P", b"B")


def commit_sent(packet: bytes) -> bool:
    return packet.startswith(b"Q") and b"COMMIT" in packet


@pytest.mark.parametrize(
    ("matches", "forward", "committed"),
    [
        pytest.param(rows_sent, False, False, id="reset-before-the-insert"),
        pytest.param(commit_sent, True, True, id="commit-answer-lost"),
    ],
)
def test_a_connection_reset_mid_statement_spools_and_replays_exactly_once(
    relayed_path: tuple[str, str, DatabaseRelay],
    tmp_path: Path,
    make_record: MakeRecord,
    matches: Callable[[bytes], bool],
    forward: bool,
    committed: bool,
) -> None:
    url, schema, relay = relayed_path
    sprung: list[threading.Event] = []
    with open_store(
        url, spool_dir=tmp_path / "spool", schema=schema, start_replayer=False, retry_seconds=0
    ) as store:
        result = outage(
            store,
            make_record,
            url=url,
            schema=schema,
            fail=lambda: sprung.append(relay.reset_on(matches, forward=forward)),
            recover=lambda: None,
        )
    assert sprung[0].is_set()
    # The reset batch went to the spool; the batches after it straight to the database. A batch
    # whose COMMIT went through is both in the database and spooled: its replay adds no row.
    assert 1 <= result.spooled < result.admitted
    assert result.replayed == (0 if committed else result.spooled)
    assert result.rows == result.admitted + 2


@pytest.fixture
def pg_role(pg_schema: tuple[str, str]) -> Iterator[tuple[str, str, str]]:
    """(url, schema, role): the test server through a role of its own, which the test may
    forbid to log in or make read-only without touching other sessions."""
    if POSTGRES is None:
        pytest.skip(POSTGRES_SKIP)
    admin_url, schema = pg_schema
    role = f"gpupolicy_test_{RUN_ID}_{uuid.uuid4().hex[:8]}"
    parts = urlsplit(admin_url)
    database = parts.path.lstrip("/")
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT CREATE, CONNECT ON DATABASE "{database}" TO "{role}"')
    url = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))
    yield url, schema, role
    drop_schema(admin_url, schema)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        disconnect(admin, role)
        admin.execute(f'DROP OWNED BY "{role}"')
        admin.execute(f'DROP ROLE "{role}"')


def disconnect(admin: psycopg.Connection[tuple[object, ...]], role: str) -> None:
    """End every session of `role` (what a server restart or a failover does to them)."""
    admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))


def alter_role(role: str, sql: str, *, disconnect_sessions: bool) -> None:
    assert POSTGRES is not None
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        admin.execute(f'ALTER ROLE "{role}" {sql}')
        if disconnect_sessions:
            disconnect(admin, role)


def test_authentication_failure_spools_and_replays_exactly_once(
    pg_role: tuple[str, str, str], tmp_path: Path, make_record: MakeRecord
) -> None:
    url, schema, role = pg_role
    with open_store(
        url, spool_dir=tmp_path / "spool", schema=schema, start_replayer=False, retry_seconds=0
    ) as store:
        result = outage(
            store,
            make_record,
            url=url,
            schema=schema,
            # Its sessions end and it may not log in again (a rotated password, a revoked role).
            fail=lambda: alter_role(role, "NOLOGIN", disconnect_sessions=True),
            recover=lambda: alter_role(role, "LOGIN", disconnect_sessions=False),
        )
    assert result.figures() == (40, 40, 40, 42), result
    assert "not permitted to log in" in result.error


def test_a_read_only_database_spools_and_replays_exactly_once(
    pg_role: tuple[str, str, str], tmp_path: Path, make_record: MakeRecord
) -> None:
    url, schema, role = pg_role
    with open_store(
        url, spool_dir=tmp_path / "spool", schema=schema, start_replayer=False, retry_seconds=0
    ) as store:
        result = outage(
            store,
            make_record,
            url=url,
            schema=schema,
            # New sessions are read-only (a primary demoted to a standby answers the same way).
            fail=lambda: alter_role(role, "SET default_transaction_read_only = on", disconnect_sessions=True),
            # Back to read-write for new sessions only: the store must not keep the read-only
            # sessions it opened during the outage.
            recover=lambda: alter_role(
                role, "RESET default_transaction_read_only", disconnect_sessions=False
            ),
        )
    assert result.figures() == (40, 40, 40, 42), result
    assert "read-only transaction" in result.error


# -- SQLite ----------------------------------------------------------------------------------


def mount(*args: str) -> None:
    result = subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise OSError(f"mount {' '.join(args)}: {result.stderr.strip()}")


@pytest.fixture
def mount_point(tmp_path: Path) -> Iterator[Path]:
    """A directory the test may mount over (a small tmpfs, a read-only bind mount): root only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small or read-only file system needs root")
    target = tmp_path / "mnt"
    target.mkdir()
    yield target
    subprocess.run(["umount", "-R", "-l", str(target)], capture_output=True, timeout=30)


def fill(directory: Path) -> Path:
    """Write a file until the file system is full; deleting it frees the space again."""
    filler = directory / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb") as handle:
        try:
            while True:
                handle.write(chunk)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        with contextlib.suppress(OSError):  # the last partial chunk, still buffered
            handle.close()
    return filler


def test_sqlite_on_a_full_disk_spools_and_replays_exactly_once(
    mount_point: Path, tmp_path: Path, make_record: MakeRecord
) -> None:
    try:
        mount("-t", "tmpfs", "-o", "size=2m", "gpupolicy-test", str(mount_point))
    except OSError as exc:
        pytest.skip(str(exc))
    url = f"sqlite:///{mount_point / 'provenance.db'}"
    filler: list[Path] = []
    with open_store(url, spool_dir=tmp_path / "spool", start_replayer=False, retry_seconds=0) as store:
        result = outage(
            store,
            make_record,
            url=url,
            schema=None,
            fail=lambda: filler.append(fill(mount_point)),
            recover=lambda: filler[0].unlink(),
        )
    assert result.figures() == (40, 40, 40, 42), result
    assert "database or disk is full" in result.error


def test_sqlite_on_a_read_only_file_system_spools_and_replays_exactly_once(
    mount_point: Path, tmp_path: Path, make_record: MakeRecord
) -> None:
    url = f"sqlite:///{mount_point / 'provenance.db'}"
    open_store(url, spool_dir=tmp_path / "spool", start_replayer=False).close()  # the database exists
    try:
        mount("--bind", str(mount_point), str(mount_point))
    except OSError as exc:
        pytest.skip(str(exc))
    with open_store(url, spool_dir=tmp_path / "spool", start_replayer=False, retry_seconds=0) as store:
        store.record(make_record("uid-before"))
        # The volume turns read-only (a file system remounted after errors, a volume mounted
        # readOnly): Linux refuses to remount while a file is open for writing, so the store's
        # connections are closed first, as a restart of the pod would.
        store.engine.dispose()
        mount("-o", "remount,bind,ro", str(mount_point))
        admitted = admit_under_load(store, make_record, "uid-during")
        spooled = {str(item["uid"]) for item in Spool(tmp_path / "spool").waiting()}
        assert (len(admitted), len(spooled)) == (40, 40) and spooled == set(admitted)
        assert "OperationalError" in str(store.counters.last_error)
        assert store.writer.status()["running"] is True
        mount("-o", "remount,bind,rw", str(mount_point))
        store.database._down_until = 0.0
        assert store.replayer.try_replay() == 40
        assert store.record(make_record("uid-after")) == "uid-after"
    assert sorted(rows(url, None)) == sorted(["uid-before", *admitted, "uid-after"])


def test_database_and_spool_on_one_full_disk_fail_the_records_not_the_writer(
    mount_point: Path, make_record: MakeRecord
) -> None:
    """The default layout (SQLite and the spool in one data directory): a full disk leaves
    nowhere to put a record. Its future fails (the webhook admits and counts the loss); the
    writer keeps running, and records are stored again once there is room."""
    try:
        mount("-t", "tmpfs", "-o", "size=2m", "gpupolicy-test", str(mount_point))
    except OSError as exc:
        pytest.skip(str(exc))
    url = f"sqlite:///{mount_point / 'provenance.db'}"
    with open_store(url, spool_dir=mount_point / "spool", start_replayer=False, retry_seconds=0) as store:
        store.record(make_record("uid-before"))
        filler = fill(mount_point)
        with pytest.raises(StoreUnavailable, match="not stored"):
            admit_under_load(store, make_record, "uid-during")
        assert store.writer.status()["running"] is True
        filler.unlink()
        assert store.record(make_record("uid-after")) == "uid-after"
    assert "uid-after" in rows(url, None)
