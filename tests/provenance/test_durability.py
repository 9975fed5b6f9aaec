"""Nothing is lost and nothing is written twice: database outages, the spool, replays, crashes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from gpupolicy.core.immutable import replace
from gpupolicy.provenance import open_store
from gpupolicy.provenance.schema import records
from gpupolicy.provenance.spool import Spool
from gpupolicy.provenance.store import open_reader
from tests.provenance.samples import REPO_ROOT, Backend, MakeRecord, kill_after_first_line

N = 10


def uids_in_db(store: Any) -> list[str]:
    with store.engine.connect() as conn:
        return list(conn.execute(select(records.c.uid).order_by(records.c.uid)).scalars())


def spooled_uids(spool_dir: Path) -> list[str]:
    return [str(item["uid"]) for item in Spool(spool_dir).waiting()]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_sqlite_outage_spools_fsynced_and_replays_exactly_once(
    tmp_path: Path, make_record: MakeRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "db"
    blocked.write_text("a file where the database directory should be")
    spool_dir = tmp_path / "spool"
    synced: list[str] = []
    real_fsync = os.fsync

    def spy_fsync(fd: int) -> None:
        synced.append(str(Path(f"/proc/self/fd/{fd}").readlink()))
        real_fsync(fd)

    monkeypatch.setattr("gpupolicy.provenance.spool.os.fsync", spy_fsync)
    store = open_store(
        f"sqlite:///{blocked / 'provenance.db'}", spool_dir=spool_dir, start_replayer=False, retry_seconds=0
    )
    try:
        wanted = [f"uid-{index:02d}" for index in range(N)]
        for uid in wanted:
            assert store.record(make_record(uid)) == uid
        assert spooled_uids(spool_dir) == wanted
        pending = str(spool_dir / "pending.jsonl")
        assert synced.count(pending) == N  # every record fsync'ed before record() returned
        assert str(spool_dir) in synced  # and the directory entry of the new file
        health = store.health()
        assert health["reachable"] is False and health["spool_backlog"] == N
        assert health["spooled"] == N and health["writes"] == 0 and health["failures"] >= N
        assert "OperationalError" in str(health["last_error"])

        with pytest.raises(OperationalError):
            store.replayer.replay_spool()  # still down: the records stay where they are
        assert list(spool_dir.glob("replay-*")) == [] and spooled_uids(spool_dir) == wanted

        blocked.unlink()
        blocked.mkdir()  # the database is back
        assert store.replayer.replay_spool(batch_size=3) == N
        assert uids_in_db(store) == wanted
        assert store.health()["spool_backlog"] == 0 and list(spool_dir.glob("*.jsonl")) == []
        assert store.replayer.replay_spool() == 0  # nothing left, nothing written twice
        store.record(make_record("uid-after"))
        assert store.counters.writes == 1 and uids_in_db(store) == [*wanted, "uid-after"]
    finally:
        store.close()


def test_background_replayer_catches_up(tmp_path: Path, make_record: MakeRecord) -> None:
    blocked = tmp_path / "db"
    blocked.write_text("")
    spool_dir = tmp_path / "spool"
    store = open_store(
        f"sqlite:///{blocked / 'provenance.db'}", spool_dir=spool_dir, replay_interval=0.05, retry_seconds=0
    )
    try:
        for index in range(N):
            store.record(make_record(f"uid-{index:02d}"))
        assert len(spooled_uids(spool_dir)) == N
        blocked.unlink()
        blocked.mkdir()
        deadline = time.monotonic() + 60  # a liveness bound, not a performance threshold
        while store.health()["spool_backlog"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert uids_in_db(store) == [f"uid-{index:02d}" for index in range(N)]
        assert store.counters.replayed == N
    finally:
        store.close()


def test_postgres_outage_spools_and_a_restart_replays(
    pg_schema: tuple[str, str], tmp_path: Path, make_record: MakeRecord
) -> None:
    url, schema = pg_schema
    down = f"postgresql://postgres@127.0.0.1:{closed_port()}/test"
    spool_dir = tmp_path / "spool"
    with open_store(down, spool_dir=spool_dir, schema=schema, start_replayer=False) as store:
        for index in range(N):
            store.record(make_record(f"uid-{index:02d}"))
        assert store.health()["reachable"] is False
    assert len(spooled_uids(spool_dir)) == N
    # One of them also reached the database another way (a retried admission request).
    with open_store(url, spool_dir=tmp_path / "other-spool", schema=schema, start_replayer=False) as other:
        other.record(make_record("uid-03"))
    # Startup replay: the webhook restarted with the database reachable again.
    with open_store(url, spool_dir=spool_dir, schema=schema, start_replayer=False) as store:
        assert uids_in_db(store) == [f"uid-{index:02d}" for index in range(N)]
        assert store.counters.replayed == N - 1
        assert spooled_uids(spool_dir) == []


def test_torn_last_line_is_skipped_and_counted(backend: Backend, make_record: MakeRecord) -> None:
    spool = Spool(backend.spool_dir)
    for index in range(3):
        spool.append(make_record(f"uid-{index}").to_dict())
    with (backend.spool_dir / "pending.jsonl").open("ab") as handle:
        handle.write(b'{"uid": "uid-torn", "ti')  # a crash in the middle of an append
    with backend.open() as store:  # startup replay
        assert uids_in_db(store) == ["uid-0", "uid-1", "uid-2"]
        assert store.counters.torn_spool_lines == 1
        assert store.health()["spool_backlog"] == 0


def test_spooled_and_direct_writes_of_one_uid_make_one_row(backend: Backend, make_record: MakeRecord) -> None:
    Spool(backend.spool_dir).append(make_record("uid-x", minutes=1).to_dict())
    with backend.open() as store:
        store.record(make_record("uid-x", minutes=2))
        assert store.replayer.replay_spool() == 0
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(records)).scalar_one() == 1


CRASHING_REPLAY = """
import sys
from pathlib import Path
from gpupolicy.provenance.spool import Spool
from gpupolicy.provenance.store import open_reader
from gpupolicy.provenance.engines import create_store_engine
from gpupolicy.provenance.store import ProvenanceStore

url, schema, spool_dir = sys.argv[1], sys.argv[2] or None, Path(sys.argv[3])
store = ProvenanceStore(create_store_engine(url, schema=schema), spool=Spool(spool_dir), schema=schema)

def after_commit(count):
    print(f"committed {count}", flush=True)
    sys.stdin.readline()  # wait here until the test kills us

store.replayer.replay_spool(batch_size=3, after_commit=after_commit)
"""


@pytest.mark.slow
def test_sigkill_during_replay_loses_nothing_and_duplicates_nothing(
    backend: Backend, make_record: MakeRecord
) -> None:
    spool = Spool(backend.spool_dir)
    wanted = [f"uid-{index:02d}" for index in range(N)]
    for uid in wanted:
        spool.append(make_record(uid).to_dict())
    line, returncode = kill_after_first_line(
        CRASHING_REPLAY, [backend.url, backend.schema or "", str(backend.spool_dir)]
    )
    assert line == "committed 3"  # the first chunk is in the database
    assert returncode == -signal.SIGKILL
    assert sorted(spooled_uids(backend.spool_dir)) == wanted  # the batch file outlives the crash
    reader = open_reader(backend.url, schema=backend.schema)
    try:
        assert uids_in_db(reader) == wanted[:3]  # what the killed replay committed
    finally:
        reader.close()
    with backend.open() as store:  # restart: startup replay
        assert uids_in_db(store) == wanted
        assert store.counters.replayed == N - 3  # the 3 committed before the crash were not rewritten
        assert spooled_uids(backend.spool_dir) == []


RECORDING_CHILD = """
import sys
from pathlib import Path
import gpupolicy.rules
from gpupolicy.policy.loading import default_policy
from gpupolicy.provenance import open_store, build_record
from tests.provenance.samples import admission_request, deployment, report_for

policy = default_policy()
store = open_store(sys.argv[1], spool_dir=Path(sys.argv[2]), start_replayer=False, retry_seconds=3600)
obj = deployment()
report = report_for(obj, policy)
index = 0
while True:
    uid = store.record(build_record(admission_request(obj, uid=f"uid-{index:05d}"), obj, report, policy))
    print(uid, flush=True)
    index += 1
"""


@pytest.mark.slow
def test_sigkill_while_spooling_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    down = f"postgresql://postgres@127.0.0.1:{closed_port()}/test"
    spool_dir = tmp_path / "spool"
    child = subprocess.Popen(
        [sys.executable, "-c", RECORDING_CHILD, down, str(spool_dir)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    acknowledged: list[str] = []
    try:
        assert child.stdout is not None
        while len(acknowledged) < 20:
            acknowledged.append(child.stdout.readline().strip())
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    spooled = Spool(spool_dir)
    spooled.take()
    [batch] = spooled.batches()
    assert set(acknowledged) <= {item["uid"] for item in batch.records}
    assert batch.torn_lines <= 1  # at most the append the kill interrupted (never acknowledged)


def test_a_uid_spooled_twice_is_replayed_once(backend: Backend, make_record: MakeRecord) -> None:
    spool = Spool(backend.spool_dir)
    for uid in ("uid-a", "uid-b", "uid-a"):  # the API server retried while the database was down
        spool.append(make_record(uid).to_dict())
    with backend.open() as store:
        assert uids_in_db(store) == ["uid-a", "uid-b"]
        assert store.counters.replayed == 2


def test_a_record_the_database_refuses_cannot_block_the_queue(
    pg_schema: tuple[str, str], tmp_path: Path, make_record: MakeRecord
) -> None:
    url, schema = pg_schema
    spool_dir = tmp_path / "spool"
    too_long = replace(make_record("uid-bad"), kind="K" * 300)  # kind is VARCHAR(128)
    spool = Spool(spool_dir)
    for record in (make_record("uid-1"), too_long, make_record("uid-2")):
        spool.append(record.to_dict())
    spool.append({"uid": "uid-malformed"})  # parses, but is no record
    with open_store(url, spool_dir=spool_dir, schema=schema, start_replayer=False) as store:
        assert uids_in_db(store) == ["uid-1", "uid-2"]
        assert store.health()["spool_backlog"] == 0
        assert store.health()["rejected"] == 2
        # A direct write of such a record is not lost either: it waits in the spool.
        assert store.record(replace(too_long, uid="uid-bad-2")) == "uid-bad-2"
        assert spooled_uids(spool_dir) == ["uid-bad-2"]
    rejected = [json.loads(line) for line in (spool_dir / "rejected.jsonl").read_text().splitlines()]
    assert [item["record"]["uid"] for item in rejected] == ["uid-malformed", "uid-bad"]
    assert "DataError" in rejected[1]["error"] and "TypeError" in rejected[0]["error"]
