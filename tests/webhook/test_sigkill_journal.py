"""Exactly once, with real processes: kill -9 the webhook, its replayer, or both, in the middle of
a stream of admissions; restart; once the journal is replayed, every admission that got an
answer is in the database, once, and nothing is there that was not sent.

The replayer stores a batch, then moves the journal's checkpoint past it: a kill between the two
(likely at some point under load, and what the kills aim at) replays the batch again, and the
request uid (the primary key) keeps it from adding a row."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from gpupolicy.provenance.schema import records
from gpupolicy.provenance.store import open_reader
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import (
    ServerProcess,
    replayer_pid,
    start_server,
    wait_for_replay,
    wait_for_replayer,
)
from tests.webhook.test_sigkill import Database, postgres_database

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CLIENTS = 4
PER_PHASE = 60  # acknowledged admissions between two kills


class Stream:
    """Clients posting admissions until stopped, each remembering what it sent and what was
    answered (a connection the kill cut is retried on a new one)."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.sent: list[str] = []
        self.acknowledged: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run) for _ in range(CLIENTS)]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self.server.client() as http:
                    while not self._stop.is_set():
                        self._admit(http)
            except httpx.TransportError:
                time.sleep(0.05)  # the webhook is gone: keep trying until the test stops us

    def _admit(self, http: httpx.Client) -> None:
        obj = gpu_deployment()
        obj["metadata"]["name"] = f"llm-{uuid.uuid4().hex[:8]}"
        body = admission_review(obj)
        self.sent.append(body["request"]["uid"])
        answer = http.post("/validate", json=body).json()["response"]
        assert answer["allowed"] is True and answer["uid"] == body["request"]["uid"]
        self.acknowledged.append(body["request"]["uid"])

    def wait_for(self, count: int, seconds: float = 120.0) -> None:
        deadline = time.monotonic() + seconds
        while len(self.acknowledged) < count:
            assert time.monotonic() < deadline, self.server.logs()[-3000:]
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest) -> Iterator[Database]:
    if request.param == "sqlite":
        yield Database(None)
    else:
        yield from postgres_database()


def db_rows(database: Database, data_dir: Path) -> tuple[list[str], int]:
    reader = open_reader(database.url or f"sqlite:///{data_dir / 'provenance.db'}")
    try:
        with reader.engine.connect() as conn:
            uids = list(conn.execute(select(records.c.uid)).scalars())
            total = int(conn.execute(select(func.count()).select_from(records)).scalar_one())
        return uids, total
    finally:
        reader.close()


@pytest.mark.parametrize("victims", ["replayer", "webhook", "both"])
def test_every_answered_admission_is_stored_once_after_kill_9(
    tmp_path: Path, database: Database, victims: str
) -> None:
    args = ["--no-cluster", *(["--db", database.url] if database.url else [])]
    server = start_server(tmp_path, *args)
    stream = Stream(server)
    try:
        stream.wait_for(PER_PHASE)
        if victims == "replayer":  # twice, the webhook answering meanwhile; its supervisor restarts it
            for phase in (2, 3):
                kill(replayer_pid(server))
                stream.wait_for(phase * PER_PHASE)
            server.stop()  # SIGTERM: journal closed, the (restarted) replayer drains
        else:
            pid = replayer_pid(server)
            if victims == "both":
                kill(pid)
            server.kill()
            wait_for_replayer(server)  # "webhook": the orphan replays what it can, then exits
    finally:
        stream.stop()
        server.stop()
    assert server.process.returncode == (-9 if victims != "replayer" else 0)
    acknowledged, sent = set(stream.acknowledged), set(stream.sent)
    assert len(acknowledged) >= PER_PHASE

    restarted = start_server(tmp_path, *args)  # the same data directory: its journal, its spool
    try:
        detail = wait_for_replay(restarted)
        assert detail["spool_backlog"] == 0
    finally:
        restarted.stop()
    uids, total = db_rows(database, server.data_dir)
    assert total == len(uids) == len(set(uids))  # no uid twice
    missing = acknowledged - set(uids)
    assert missing == set(), f"{len(missing)} of {len(acknowledged)} answered admissions not stored"
    assert set(uids) <= sent  # nothing that was not sent
