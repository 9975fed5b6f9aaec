"""Schema migrations: a v1 database is upgraded in place, once, keeping its rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import inspect, select, text

from gpupolicy.provenance.engines import create_store_engine
from gpupolicy.provenance.record import canonical_json
from gpupolicy.provenance.schema import LATEST, MIGRATIONS, current_version, migrate, records, schema_version
from tests.provenance.samples import Backend, MakeRecord


def _v1_database(backend: Backend, make_record: MakeRecord) -> None:
    """A database as the first release left it, with one row written by that release."""
    engine = create_store_engine(backend.url, schema=backend.schema)
    try:
        if backend.schema:
            with engine.begin() as conn:
                conn.execute(text(f'CREATE SCHEMA "{backend.schema}"'))
        assert migrate(engine, target=1) == 1
        record = make_record("uid-v1", labels={"kustomize.toolkit.fluxcd.io/name": "apps"})
        body = record.body()
        body["git"] = {"tool": "flux", "revision": "main@sha1:40d6b21b888db0ca794876cf7bdd399e3da2137e"}
        with engine.begin() as conn:
            columns = {column["name"] for column in inspect(conn).get_columns("provenance_records")}
            assert "git_revision" not in columns and "status_changed_at" not in columns
            conn.execute(
                text(
                    "INSERT INTO provenance_records (uid, recorded_at, operation, username, object_uid, kind,"
                    " namespace, name, generation, experiment, arm, policy_version, policy_digest,"
                    " template_hash, status, body) VALUES (:uid, :t, 'CREATE', 'alice', 'o1', 'Deployment',"
                    " 'ai-lab', 'vllm-llama', 3, 'day29-experiment', 'control', '0.1', 'd', 'h', 'admitted', :body)"
                ),
                {"uid": "uid-v1", "t": record.time, "body": canonical_json(body)},
            )
    finally:
        engine.dispose()


def test_v1_database_is_upgraded_to_latest(backend: Backend, make_record: MakeRecord) -> None:
    assert LATEST == len(MIGRATIONS) >= 2
    _v1_database(backend, make_record)
    with backend.open() as store:
        assert store.health()["schema_version"] == LATEST
        with store.engine.connect() as conn:
            assert current_version(conn) == LATEST
            columns = {column["name"] for column in inspect(conn).get_columns("provenance_records")}
            assert {"git_revision", "status_changed_at"} <= columns
            row = conn.execute(select(records).where(records.c.uid == "uid-v1")).one()
            assert row.git_revision == "main@sha1:40d6b21b888db0ca794876cf7bdd399e3da2137e"  # backfilled
            assert json.loads(row.body)["name"] == "vllm-llama"
        old = store.get("uid-v1")
        assert old is not None and old.git_revision == row.git_revision and old.status == "admitted"
        store.record(make_record("uid-v2"))
        assert store.set_status("uid-v1", "confirmed", at="2026-11-30T03:00:00.000000Z")
        assert [r.uid for r in store.iter_records()] == ["uid-v1", "uid-v2"]
    # Opening again migrates nothing: one version row, same version.
    with backend.open() as store, store.engine.connect() as conn:
        assert conn.execute(select(schema_version.c.version)).scalars().all() == [LATEST]


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    engine = create_store_engine(f"sqlite:///{tmp_path / 'p.db'}")
    try:
        migrate(engine)
        with engine.begin() as conn:
            conn.execute(schema_version.update().values(version=LATEST + 1))
        with pytest.raises(RuntimeError, match="newer than this gpupolicy knows"):
            migrate(engine)
        with pytest.raises(ValueError, match="no schema version"):
            migrate(engine, target=LATEST + 1)
    finally:
        engine.dispose()
