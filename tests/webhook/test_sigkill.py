"""Kill the webhook with SIGKILL in the middle of a stream of admissions: every record whose
response was sent must still be in the store (committed to the database, or fsync'ed to the
local spool when the database is unreachable), because the webhook journals before it answers
and its replayer, outliving it, stores what the journal holds (test_sigkill_journal.py kills
the replayer too)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from gpupolicy.provenance import open_store
from gpupolicy.provenance.spool import Spool
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import POSTGRES_URL_ENV, free_port, start_server, wait_for_replayer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

KILL_AFTER = 80  # acknowledged admissions before the kill
CLIENTS = 4


@dataclass
class Database:
    url: str | None  # None: the server's default (SQLite in its data dir)
    reachable: bool = True


def postgres_database() -> Iterator[Database]:
    url = os.environ.get(POSTGRES_URL_ENV)
    if not url:
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_URL_ENV} (.ci/run sets it)")
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL at {url} not reachable: {exc}")
    schema = f"gpupolicy_webhook_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in url else "?"
    try:
        yield Database(f"{url}{separator}options=-csearch_path%3D{schema}")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgresql", "database-down"])
def database(request: pytest.FixtureRequest) -> Iterator[Database]:
    if request.param == "sqlite":
        yield Database(None)
    elif request.param == "postgresql":
        yield from postgres_database()
    else:  # nothing listens there: every record goes to the spool
        yield Database(f"postgresql://postgres@127.0.0.1:{free_port()}/none", reachable=False)


def stream_admissions(url: str, client_factory: object, acknowledged: list[str], errors: list[str],
                      enough: threading.Event, stop: threading.Event) -> None:  # fmt: skip
    with client_factory() as http:  # type: ignore[operator]
        while not stop.is_set():
            obj = gpu_deployment()
            obj["metadata"]["name"] = f"llm-{uuid.uuid4().hex[:8]}"
            body = admission_review(obj)
            try:
                response = http.post("/validate", json=body)
            except httpx.TransportError as exc:
                errors.append(type(exc).__name__)
                return
            answer = response.json()["response"]
            assert answer["allowed"] is True and answer["uid"] == body["request"]["uid"]
            acknowledged.append(body["request"]["uid"])
            if len(acknowledged) >= KILL_AFTER:
                enough.set()


def test_every_acknowledged_admission_survives_sigkill(tmp_path: Path, database: Database) -> None:
    args = ["--no-cluster", *(["--db", database.url] if database.url else [])]
    server = start_server(tmp_path, *args)
    acknowledged: list[str] = []
    errors: list[str] = []
    enough, stop = threading.Event(), threading.Event()
    threads = [
        threading.Thread(
            target=stream_admissions, args=(server.url, server.client, acknowledged, errors, enough, stop)
        )
        for _ in range(CLIENTS)
    ]
    try:
        for thread in threads:
            thread.start()
        assert enough.wait(120), server.logs()
        server.kill()  # SIGKILL: no shutdown, no flush, no atexit
        for thread in threads:
            thread.join(30)
    finally:
        stop.set()
        server.stop()
    assert server.process.returncode == -9
    assert errors, "the stream was still running when the server died"
    sent = list(acknowledged)
    assert len(sent) >= KILL_AFTER
    # The webhook answered once the admissions were in its journal; its replayer, left alone,
    # stores what the journal holds before it exits.
    wait_for_replayer(server)

    spool_dir = server.data_dir / "spool"
    if database.reachable:
        store = open_store(database.url, spool_dir=spool_dir, start_replayer=False)
        try:
            missing = [uid for uid in sent if store.get(uid) is None]
            assert missing == [], f"{len(missing)} of {len(sent)} acknowledged records lost"
            record = store.get(sent[0])
            assert record is not None and record.kind == "Deployment" and record.status == "admitted"
        finally:
            store.close()
    else:
        spool = Spool(spool_dir)
        spool.take()
        spooled = {item["uid"] for batch in spool.batches() for item in batch.records}
        missing = [uid for uid in sent if uid not in spooled]
        assert missing == [], f"{len(missing)} of {len(sent)} acknowledged records not in the spool"
