"""Fixtures for the provenance tests: records for GPU workloads, and stores on SQLite (tmp_path)
and PostgreSQL (a schema of its own per test, dropped afterwards)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from gpupolicy.policy.loading import Policy, default_policy
from gpupolicy.provenance import ProvenanceRecord, build_record
from tests.provenance.relay import DatabaseRelay
from tests.provenance.samples import (
    POSTGRES,
    POSTGRES_SKIP,
    RUN_ID,
    T0,
    Backend,
    MakeRecord,
    admission_request,
    deployment,
    drop_schema,
    report_for,
)


@pytest.fixture(scope="session")
def gpu_policy() -> Policy:
    import gpupolicy.rules  # noqa: F401

    return default_policy()


@pytest.fixture
def make_record(gpu_policy: Policy) -> MakeRecord:
    """A record for DEPLOYMENT with the metadata overrides, at T0 + `minutes`."""

    def make(
        uid: str | None = None, *, minutes: float = 0, operation: str = "CREATE", **metadata: Any
    ) -> ProvenanceRecord:
        obj = deployment(**metadata)
        request = admission_request(obj, uid=uid, operation=operation)
        return build_record(
            request, obj, report_for(obj, gpu_policy), gpu_policy, now=T0 + timedelta(minutes=minutes)
        )

    return make


@pytest.fixture
def pg_schema(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """(url, schema): a fresh schema on the test server, dropped after the test."""
    if POSTGRES is None:
        pytest.skip(POSTGRES_SKIP)
    schema = f"gpupolicy_test_{RUN_ID}_{uuid.uuid4().hex[:8]}"
    yield POSTGRES, schema
    drop_schema(POSTGRES, schema)


@pytest.fixture
def relayed_path(pg_schema: tuple[str, str]) -> Iterator[tuple[str, str, DatabaseRelay]]:
    """(url, schema, relay): the test server reached through a `DatabaseRelay` that scripts
    network faults (freeze, refuse, reset)."""
    url, schema = pg_schema
    parts = urlsplit(url)
    with DatabaseRelay((parts.hostname or "127.0.0.1", parts.port or 5432)) as relay:
        user = f"{parts.username}@" if parts.username else ""
        yield urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{relay.port}")), schema, relay


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        yield Backend("sqlite", f"sqlite:///{tmp_path / 'provenance.db'}", None, tmp_path / "spool")
        return
    if POSTGRES is None:
        pytest.skip(POSTGRES_SKIP)
    schema = f"gpupolicy_test_{RUN_ID}_{uuid.uuid4().hex[:8]}"
    yield Backend("postgresql", POSTGRES, schema, tmp_path / "spool")
    drop_schema(POSTGRES, schema)
