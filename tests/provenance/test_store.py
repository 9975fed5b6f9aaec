"""The store on SQLite and PostgreSQL: record, read back, filter, paginate, export, reconcile."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, text

from gpupolicy.core.immutable import replace
from gpupolicy.provenance import Reconciler
from gpupolicy.provenance.database import record_row
from gpupolicy.provenance.filters import FilterError, RecordFilter
from gpupolicy.provenance.rendering import CSV_COLUMNS, render
from gpupolicy.provenance.schema import LATEST, records
from tests.provenance.samples import SECRET_ENV_VALUE, SECRET_TOKEN, T0, Backend, MakeRecord


def row_count(store: object) -> int:
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        return int(conn.execute(select(func.count()).select_from(records)).scalar_one())


def test_record_and_read_back(backend: Backend, make_record: MakeRecord) -> None:
    record = make_record("uid-1")
    with backend.open() as store:
        assert store.record(record) == "uid-1"
        assert store.get("uid-1") == record
        assert store.get("missing") is None
        assert store.counters.writes == 1 and store.counters.spooled == 0
        health = store.health()
    assert health["reachable"] is True
    assert health["backend"] == backend.name
    assert health["schema_version"] == LATEST
    assert health["spool_backlog"] == 0


def test_same_request_uid_twice_is_one_row(backend: Backend, make_record: MakeRecord) -> None:
    with backend.open() as store:
        first = make_record("uid-dup", minutes=1)
        assert store.record(first) == "uid-dup"
        assert store.record(make_record("uid-dup", minutes=2, name="renamed")) == "uid-dup"
        assert row_count(store) == 1
        assert store.get("uid-dup") == first  # the first write wins; a retry changes nothing


def test_sqlite_is_in_wal_mode_with_full_sync(tmp_path: object, make_record: MakeRecord) -> None:
    from pathlib import Path

    from gpupolicy.provenance import open_store

    base = Path(str(tmp_path))
    with open_store(None, spool_dir=base / "data" / "spool", start_replayer=False) as store:
        store.record(make_record("uid-1"))
        with store.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
    assert (base / "data" / "provenance.db").is_file()  # url None: beside the spool dir


def test_database_errors_never_quote_the_record(tmp_path: object, make_record: MakeRecord) -> None:
    """Errors are logged; what a statement was given is a record's content (SQLAlchemy quotes
    the parameters in its errors unless told not to)."""
    from pathlib import Path

    from sqlalchemy.exc import OperationalError

    from gpupolicy.provenance import open_store

    base = Path(str(tmp_path))
    with open_store(None, spool_dir=base / "spool", start_replayer=False) as store:
        store.ensure_schema()
        with store.engine.begin() as conn:  # every insert fails, as on a broken database
            conn.exec_driver_sql(
                "CREATE TRIGGER fail BEFORE INSERT ON provenance_records BEGIN INSERT INTO gone VALUES (1); END"
            )
        record = make_record("uid-1", name="body-marker-name")
        with pytest.raises(OperationalError) as raised, store.engine.begin() as conn:
            conn.execute(records.insert(), [record_row(record)])
    assert "body-marker-name" not in str(raised.value)
    assert "hidden due to hide_parameters" in str(raised.value)


def _populate(store: object, make_record: MakeRecord) -> None:
    for index in range(12):
        store.record(  # type: ignore[attr-defined]
            make_record(
                f"uid-{index:02d}",
                minutes=index,
                namespace="ai-lab" if index % 2 == 0 else "batch",
                labels={
                    "gpupolicy.io/experiment": "exp-a" if index < 6 else "exp-b",
                    "gpupolicy.io/arm": "control",
                },
            )
        )


def test_filters(backend: Backend, make_record: MakeRecord) -> None:
    with backend.open() as store:
        _populate(store, make_record)

        def uids(**filters: Any) -> list[str]:
            return [record.uid for record in store.iter_records(RecordFilter.parse(**filters))]

        assert uids() == [f"uid-{index:02d}" for index in range(12)]
        assert uids(experiment="exp-a") == [f"uid-{index:02d}" for index in range(6)]
        assert uids(namespace="batch", experiment="exp-b") == ["uid-07", "uid-09", "uid-11"]
        assert uids(kind="Deployment", name="vllm-llama") == uids()
        assert uids(kind="StatefulSet") == []
        since = (T0 + timedelta(minutes=3)).isoformat()
        until = (T0 + timedelta(minutes=5)).isoformat()
        assert uids(since=since, until=until) == ["uid-03", "uid-04"]
        assert uids(since="2026-11-30T02:10:00Z") == ["uid-10", "uid-11"]
        assert uids(status="admitted") == uids()
        assert uids(status="confirmed") == []
        assert store.count(RecordFilter.parse(experiment="exp-b")) == 6


def test_bad_filters_are_rejected() -> None:
    with pytest.raises(FilterError, match="status"):
        RecordFilter.parse(status="done")
    with pytest.raises(FilterError, match="cannot read time"):
        RecordFilter.parse(since="yesterday")


def test_pagination_visits_every_record_once(backend: Backend, make_record: MakeRecord) -> None:
    with backend.open() as store:
        _populate(store, make_record)
        # Two records at the same instant: the uid breaks the tie, so neither is skipped.
        store.record(make_record("uid-05b", minutes=5, labels={"gpupolicy.io/experiment": "exp-a"}))
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = store.query(RecordFilter(), limit=5, cursor=cursor)
            seen += [record.uid for record in page.items]
            pages += 1
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert pages == 3
        assert len(seen) == len(set(seen)) == 13
        assert seen.index("uid-05") + 1 == seen.index("uid-05b")
        filtered = store.query(RecordFilter.parse(experiment="exp-a"), limit=4)
        assert [r.uid for r in filtered.items] == ["uid-00", "uid-01", "uid-02", "uid-03"]
        rest = store.query(RecordFilter.parse(experiment="exp-a"), limit=4, cursor=filtered.next_cursor)
        assert [r.uid for r in rest.items] == ["uid-04", "uid-05", "uid-05b"]
        assert rest.next_cursor is None
        with pytest.raises(FilterError, match="cursor"):
            store.query(RecordFilter(), cursor="not-a-cursor")


def test_export_formats(backend: Backend, make_record: MakeRecord) -> None:
    with backend.open() as store:
        _populate(store, make_record)
        flt = RecordFilter.parse(experiment="exp-a")
        jsonl = "".join(render(store.iter_records(flt), "jsonl"))
        lines = [json.loads(line) for line in jsonl.splitlines()]
        assert [line["uid"] for line in lines] == [f"uid-{index:02d}" for index in range(6)]
        assert lines[0]["images"][0]["digest"] == "sha256:" + "a" * 64
        as_json = json.loads("".join(render(store.iter_records(flt), "json")))
        assert as_json == lines
        rows = list(csv.DictReader(io.StringIO("".join(render(store.iter_records(flt), "csv")))))
        assert [row["uid"] for row in rows] == [line["uid"] for line in lines]
        assert tuple(rows[0]) == CSV_COLUMNS
        assert rows[0]["gpu_resources"] == "vllm:nvidia.com/gpu=1"
        assert rows[0]["experiment"] == "exp-a"
        table = "".join(render(store.iter_records(flt), "table"))
        assert table.splitlines()[0].split()[:3] == ["TIME", "STATUS", "OPERATION"]
        assert len(table.splitlines()) == 7
        assert "".join(render(store.iter_records(RecordFilter.parse(kind="Pod")), "json")) == "[\n]\n"


def test_no_secret_reaches_the_database(backend: Backend, make_record: MakeRecord, tmp_path: object) -> None:
    with backend.open() as store:
        store.record(make_record("uid-secret"))
        with store.engine.connect() as conn:
            dumped = json.dumps([list(row) for row in conn.execute(select(records)).all()], default=str)
        assert SECRET_TOKEN not in dumped and SECRET_ENV_VALUE not in dumped
        assert "uid-secret" in dumped
    if backend.name == "sqlite":
        from pathlib import Path

        for path in Path(str(tmp_path)).glob("provenance.db*"):  # the database, its WAL and shm
            content = path.read_bytes()
            assert SECRET_TOKEN.encode() not in content and SECRET_ENV_VALUE.encode() not in content


def test_reconciler_marks_confirmed_and_never_persisted(backend: Backend, make_record: MakeRecord) -> None:
    object_uid = "0d6c3f8e-0000-4000-8000-000000000001"
    live = {
        ("ai-lab", "seen"): (object_uid, 3),
        ("ai-lab", "later"): (object_uid, 5),
        ("ai-lab", "recreated"): ("another-uid", 3),
        ("ai-lab", "behind"): (object_uid, 2),
    }
    calls: list[tuple[str, str | None, str]] = []

    def lookup(kind: str, namespace: str | None, name: str) -> tuple[str | None, int | None] | None:
        calls.append((kind, namespace, name))
        if name == "broken":
            raise ConnectionError("API server unreachable")
        return live.get((namespace or "", name))

    with backend.open() as store:
        for name in ("seen", "later", "recreated", "behind", "missing", "broken"):
            store.record(make_record(f"uid-{name}", name=name))
        reconciler = Reconciler(store, timeout=timedelta(minutes=5))

        first = reconciler.reconcile_once(T0 + timedelta(minutes=1), lookup)
        assert sorted(first.confirmed) == ["uid-later", "uid-seen"]
        assert first.never_persisted == []
        assert sorted(first.waiting) == ["uid-behind", "uid-missing", "uid-recreated"]
        assert first.errors == ["uid-broken"]
        assert ("Deployment", "ai-lab", "seen") in calls

        second = reconciler.reconcile_once(T0 + timedelta(minutes=5), lookup)
        assert sorted(second.never_persisted) == ["uid-behind", "uid-missing", "uid-recreated"]
        assert second.confirmed == [] and second.errors == ["uid-broken"]  # an error never decides

        seen = store.get("uid-seen")
        assert seen is not None and seen.status == "confirmed"
        assert seen.status_changed_at == "2026-11-30T02:01:00.000000Z"
        missing = store.get("uid-missing")
        assert missing is not None and missing.status == "never-persisted"
        never = store.iter_records(RecordFilter.parse(status="never-persisted"))
        assert [r.uid for r in never] == ["uid-behind", "uid-missing", "uid-recreated"]  # same time: by uid
        # A decided record is never reconsidered.
        calls.clear()
        reconciler.reconcile_once(T0 + timedelta(minutes=6), lookup)
        assert calls == [("Deployment", "ai-lab", "broken")]
        assert store.set_status("uid-seen", "never-persisted", at="x") is False


def test_postgres_tables_live_in_their_own_schema(
    pg_schema: tuple[str, str], tmp_path: object, make_record: MakeRecord
) -> None:
    from pathlib import Path

    from gpupolicy.provenance import open_store

    url, schema = pg_schema
    with open_store(
        url, spool_dir=Path(str(tmp_path)) / "spool", schema=schema, start_replayer=False
    ) as store:
        store.record(make_record("uid-1"))
        with store.engine.connect() as conn:
            found = (
                conn.execute(
                    text(
                        "SELECT table_schema FROM information_schema.tables WHERE table_name = 'provenance_records'"
                    )
                )
                .scalars()
                .all()
            )
    assert schema in found


def test_concurrent_writers_lose_nothing(backend: Backend, make_record: MakeRecord) -> None:
    from concurrent.futures import ThreadPoolExecutor

    prepared = [make_record(f"uid-{index:03d}") for index in range(80)]
    with backend.open() as store, ThreadPoolExecutor(max_workers=8) as pool:
        returned = list(pool.map(store.record, prepared + prepared[:20]))  # 20 retried requests
        assert returned == [record.uid for record in prepared + prepared[:20]]
        assert row_count(store) == 80
        assert store.counters.spooled == 0


def test_verdict_without_uid_or_generation(make_record: MakeRecord) -> None:

    from gpupolicy.provenance.reconciler import verdict

    record = make_record("uid-1")
    assert verdict(record, (record.object_uid, 3))
    assert not verdict(record, (record.object_uid, 2))
    assert not verdict(record, None)
    no_generation = replace(record, generation=None)
    assert verdict(no_generation, (record.object_uid, None))
    assert verdict(no_generation, (record.object_uid, 7))
    assert not verdict(no_generation, ("other", 7))
    no_uid = replace(record, object_uid=None)  # admitted before the uid was known
    assert verdict(no_uid, ("whatever", 3))
    assert not verdict(no_uid, ("whatever", 1))


def test_reconciler_thread(backend: Backend, make_record: MakeRecord) -> None:
    import time

    record = make_record("uid-live")
    with backend.open() as store:
        store.record(record)
        stop = Reconciler(store).start(lambda kind, namespace, name: (record.object_uid, 3), interval=0.05)
        try:
            deadline = time.monotonic() + 60  # a liveness bound, not a performance threshold
            while (found := store.get("uid-live")) is not None and found.status == "admitted":
                assert time.monotonic() < deadline
                time.sleep(0.05)
        finally:
            stop.set()
        assert found is not None and found.status == "confirmed"
