"""Benchmark provenance: what the webhook admitted, under which policy, from which revision.

The interface the webhook uses:

- `build_record(request, obj, report, policy, *, experiment_config=None) -> ProvenanceRecord`
  (pure; raises `NotRecordable` for dry runs, non-CREATE/UPDATE and non-GPU objects — check
  `should_record()` first);
- `open_store(url, *, spool_dir) -> ProvenanceStore` with `submit()` (a future that resolves once
  the record is durable; concurrent records share one commit), `record()` (the same,
  synchronous), `health()`, `close()`;
- `router(store) -> fastapi.APIRouter` serving `GET /provenance`.

Only `record`, `redaction` and `filters` are imported eagerly: SQLAlchemy and FastAPI are
webhook extras, loaded when a store or the router is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpupolicy.provenance.record import (
    STATUS_ADMITTED,
    STATUS_CONFIRMED,
    STATUS_NEVER_PERSISTED,
    STATUSES,
    NotRecordable,
    ProvenanceRecord,
    build_record,
    should_record,
)

if TYPE_CHECKING:
    from fastapi import APIRouter

    from gpupolicy.provenance.reconciler import Reconciler
    from gpupolicy.provenance.store import (
        ProvenanceStore,
        StoreOverloaded,
        StoreStalled,
        StoreUnavailable,
        WriterStopped,
    )

__all__ = [
    "STATUSES",
    "STATUS_ADMITTED",
    "STATUS_CONFIRMED",
    "STATUS_NEVER_PERSISTED",
    "NotRecordable",
    "ProvenanceRecord",
    "ProvenanceStore",
    "Reconciler",
    "StoreOverloaded",
    "StoreStalled",
    "StoreUnavailable",
    "WriterStopped",
    "build_record",
    "open_store",
    "router",
    "should_record",
]


def open_store(
    url: str | None,
    *,
    spool_dir: Path,
    schema: str | None = None,
    start_replayer: bool = True,
    retry_seconds: float = 5.0,
    replay_interval: float = 5.0,
    connect_timeout: float = 2.0,
    write_timeout: float = 2.0,
    max_batch: int = 256,
    max_queue: int = 4096,
) -> ProvenanceStore:
    """See `gpupolicy.provenance.store.open_store`."""
    from gpupolicy.provenance import store

    return store.open_store(
        url,
        spool_dir=spool_dir,
        schema=schema,
        start_replayer=start_replayer,
        retry_seconds=retry_seconds,
        replay_interval=replay_interval,
        connect_timeout=connect_timeout,
        write_timeout=write_timeout,
        max_batch=max_batch,
        max_queue=max_queue,
    )


def router(store: ProvenanceStore) -> APIRouter:
    """The `GET /provenance` routes for the webhook's FastAPI app."""
    from gpupolicy.provenance.api import build_router

    return build_router(store)


def __getattr__(name: str) -> Any:
    if name in ("ProvenanceStore", "StoreOverloaded", "StoreStalled", "StoreUnavailable", "WriterStopped"):
        from gpupolicy.provenance import store

        return getattr(store, name)
    if name == "Reconciler":
        from gpupolicy.provenance.reconciler import Reconciler

        return Reconciler
    raise AttributeError(name)
