"""The journal's replayer against the real stores: entries become the records the webhook would
have written, exactly once — through database outages (spooled, replayed once), through a crash
between the store's commit and the checkpoint (a real process killed there), and past entries
that cannot be records."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from gpupolicy.policy.loading import Policy
from gpupolicy.provenance import WriterStopped, build_record
from gpupolicy.provenance.journal import segments
from gpupolicy.provenance.journal.appender import JournalAppender
from gpupolicy.provenance.journal.replayer import JournalReplayer
from gpupolicy.provenance.schema import records
from gpupolicy.provenance.spool import Spool
from gpupolicy.provenance.store import ProvenanceStore, open_reader
from gpupolicy.webhook.records import record_of_admission
from tests.provenance.journal_samples import admission_frame
from tests.provenance.samples import (
    T0,
    Backend,
    admission_request,
    deployment,
    kill_after_first_line,
    report_for,
)

WAIT = 60  # seconds: a liveness bound, not a performance threshold
T0_NS = int(T0.timestamp()) * 1_000_000_000


def journal_of(directory: Path, frames: list[bytes], policy: Policy) -> None:
    """A journal holding `frames`, written and closed by the webhook."""
    journal = JournalAppender(directory, segment_bytes=64 * 1024, max_bytes=64 * 1024 * 1024).open()
    try:
        for future in [journal.submit(frame, policy) for frame in frames]:
            future.result(WAIT)
    finally:
        journal.close()


def rows(backend: Backend) -> list[str]:
    reader = open_reader(backend.url, schema=backend.schema)
    try:
        with reader.engine.connect() as conn:
            uids = list(conn.execute(select(records.c.uid).order_by(records.c.uid)).scalars())
            assert conn.execute(select(func.count()).select_from(records)).scalar_one() == len(uids)
            return uids
    finally:
        reader.close()


@pytest.fixture
def store(backend: Backend) -> Iterator[ProvenanceStore]:
    opened: ProvenanceStore = backend.open(retry_seconds=0)
    yield opened
    opened.close()


def test_replayed_records_are_those_the_webhook_would_have_written(
    backend: Backend, store: ProvenanceStore, tmp_path: Path, gpu_policy: Policy
) -> None:
    uids = [f"uid-{index:02d}" for index in range(12)]
    journal_of(
        tmp_path / "journal", [admission_frame(uid, gpu_policy, time_ns=T0_NS) for uid in uids], gpu_policy
    )
    replayer = JournalReplayer(tmp_path / "journal", store, record_of_admission)
    while replayer.replay_once():
        pass
    obj = deployment()
    for uid in uids:
        direct = build_record(
            admission_request(obj, uid=uid), obj, report_for(obj, gpu_policy), gpu_policy, now=T0
        )
        assert store.get(uid) == direct  # every field, redacted the same way, the same hash
    assert rows(backend) == uids
    assert replayer.counts.stored == len(uids) and replayer.counts.unrecordable == 0
    assert segments.segment_numbers(tmp_path / "journal") == []  # finished and replayed: deleted
    assert segments.read_checkpoint(tmp_path / "journal") == replayer.position


def test_a_database_outage_spools_the_replay_and_the_spool_replays_once(
    tmp_path: Path, gpu_policy: Policy
) -> None:
    blocked = tmp_path / "db"
    blocked.write_text("a file where the database directory should be")
    backend = Backend("sqlite", f"sqlite:///{blocked / 'provenance.db'}", None, tmp_path / "spool")
    uids = [f"uid-{index:02d}" for index in range(10)]
    journal_of(tmp_path / "journal", [admission_frame(uid, gpu_policy) for uid in uids], gpu_policy)
    with backend.open(retry_seconds=0) as store:
        replayer = JournalReplayer(tmp_path / "journal", store, record_of_admission)
        while replayer.replay_once():
            pass
        assert sorted(str(item["uid"]) for item in Spool(backend.spool_dir).waiting()) == uids
        assert segments.segment_numbers(tmp_path / "journal") == []  # durable in the spool: let go
        blocked.unlink()
        blocked.mkdir()  # the database is back
        assert store.replayer.replay_spool() == len(uids)
    assert rows(backend) == uids


CRASHING_REPLAYER = """
import sys
from pathlib import Path
from gpupolicy.provenance.journal.replayer import JournalReplayer
from gpupolicy.provenance.store import open_store
from gpupolicy.webhook.records import record_of_admission

url, schema, spool_dir, journal_dir = sys.argv[1], sys.argv[2] or None, Path(sys.argv[3]), Path(sys.argv[4])
store = open_store(url, spool_dir=spool_dir, schema=schema, start_replayer=False)
replayer = JournalReplayer(journal_dir, store, record_of_admission, batch=int(sys.argv[5]))

def after_store(count):
    print(f"stored {count}", flush=True)
    sys.stdin.readline()  # wait here until the test kills us

replayer.replay_once(after_store=after_store)
"""


@pytest.mark.slow
def test_sigkill_between_the_store_and_the_checkpoint_writes_nothing_twice(
    backend: Backend, tmp_path: Path, gpu_policy: Policy
) -> None:
    uids = [f"uid-{index:02d}" for index in range(10)]
    journal = tmp_path / "journal"
    journal_of(journal, [admission_frame(uid, gpu_policy) for uid in uids], gpu_policy)
    arguments = [backend.url, backend.schema or "", str(backend.spool_dir), str(journal), "6"]
    line, returncode = kill_after_first_line(CRASHING_REPLAYER, arguments)
    assert line == "stored 6"  # committed, the checkpoint not yet moved
    assert returncode == -signal.SIGKILL
    assert rows(backend) == uids[:6]
    assert segments.read_checkpoint(journal) == segments.START  # the kill came before it
    with backend.open() as store:  # the restarted replayer starts over from the checkpoint
        replayer = JournalReplayer(journal, store, record_of_admission)
        while replayer.replay_once():
            pass
        assert replayer.counts.stored == len(uids)  # the first six submitted again ...
        assert store.counters.writes == len(uids)  # ... as no-ops: ON CONFLICT DO NOTHING
    assert rows(backend) == uids  # each once
    assert segments.segment_numbers(journal) == []


def test_entries_that_cannot_be_records_are_counted_and_passed(
    backend: Backend, store: ProvenanceStore, tmp_path: Path, gpu_policy: Policy, caplog: Any
) -> None:
    frames = [
        admission_frame("uid-good-1", gpu_policy),
        admission_frame("uid-dry-run", gpu_policy, dryRun=True),  # never recorded, wherever it came from
        admission_frame("uid-delete", gpu_policy, operation="DELETE"),
        admission_frame("uid-good-2", gpu_policy),
    ]
    journal_of(tmp_path / "journal", frames, gpu_policy)
    replayer = JournalReplayer(tmp_path / "journal", store, record_of_admission)
    while replayer.replay_once():
        pass
    assert rows(backend) == ["uid-good-1", "uid-good-2"]
    assert replayer.counts.unrecordable == 2
    assert "uid-dry-run is not recorded" in caplog.text


class StoppedStore:
    """A store whose writer died: nothing can be stored any more."""

    def submit(self, record: Any, *, block: bool = False) -> Any:
        raise WriterStopped("provenance writer died: Halt")


def test_a_dead_store_writer_ends_the_replay_and_leaves_the_checkpoint(
    tmp_path: Path, gpu_policy: Policy
) -> None:
    journal_of(tmp_path / "journal", [admission_frame("uid-1", gpu_policy)], gpu_policy)
    replayer = JournalReplayer(tmp_path / "journal", StoppedStore(), record_of_admission)
    with pytest.raises(WriterStopped):  # the process exits; the webhook starts another one
        replayer.run(threading.Event())
    assert segments.read_checkpoint(tmp_path / "journal") == segments.START


class AcceptingStore:
    """A store that holds every record at once."""

    def __init__(self) -> None:
        self.uids: list[str] = []

    def submit(self, record: Any, *, block: bool = False) -> Future[str]:
        self.uids.append(record.uid)
        done: Future[str] = Future()
        done.set_result(record.uid)
        return done


class CountingReplayer(JournalReplayer):
    """Keeps how many admissions each replay found."""

    found: list[int]

    def replay_once(self, *, after_store: Any = None) -> int:
        found = super().replay_once(after_store=after_store)
        self.found.append(found)
        return found


class StopAtFirstWait(threading.Event):
    """Notes the replays made before the loop's first wait, and its timeout; then ends the loop."""

    def __init__(self, replayer: CountingReplayer) -> None:
        super().__init__()
        self.replayer = replayer
        self.waits: list[tuple[list[int], float | None]] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append((list(self.replayer.found), timeout))
        self.set()
        return True


def test_the_replayer_goes_on_at_once_after_a_full_batch_and_waits_its_poll_once_caught_up(
    tmp_path: Path, gpu_policy: Policy
) -> None:
    frames = [admission_frame(f"uid-{number}", gpu_policy) for number in range(3)]
    journal_of(tmp_path / "journal", frames, gpu_policy)
    store = AcceptingStore()
    replayer = CountingReplayer(tmp_path / "journal", store, record_of_admission, batch=2)
    replayer.found = []
    stop = StopAtFirstWait(replayer)
    replayer.run(stop, poll=0.25)
    # A full batch of two, then at once the one left; caught up (a batch short of two), the
    # replayer waits its poll rather than read again for what arrives meanwhile.
    assert stop.waits == [([2, 1], 0.25)]
    assert store.uids == ["uid-0", "uid-1", "uid-2"]
