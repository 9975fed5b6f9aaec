"""Benchmark provenance: what the webhook admitted, under which policy, from which revision.

The interface the webhook uses:

- `build_record(request, obj, report, policy, *, experiment_config=None) -> ProvenanceRecord`
  (pure; raises `NotRecordable` for dry runs, non-CREATE/UPDATE and non-GPU objects — check
  `should_record()` first);
- `open_store(url, *, spool_dir) -> ProvenanceStore` with `submit()` (a future that resolves once
  the record is durable; concurrent records share one commit), `record()` (the same,
  synchronous), `health()`, `close()`;
- `router(store) -> fastapi.APIRouter` serving `GET /provenance`.

Only `record`, `redaction`, `filters` and `errors` are imported eagerly: SQLAlchemy and FastAPI
are webhook extras, loaded when a name that needs them is first asked for (`__getattr__`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpupolicy.provenance.errors import StoreOverloaded, StoreStalled, StoreUnavailable, WriterStopped
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
    from gpupolicy.provenance.api import build_router as router
    from gpupolicy.provenance.reconciler import Reconciler
    from gpupolicy.provenance.store import ProvenanceStore, open_store

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

# name -> (module, attribute): what is imported on first use, as it is defined there.
_LAZY = {
    "ProvenanceStore": ("gpupolicy.provenance.store", "ProvenanceStore"),
    "open_store": ("gpupolicy.provenance.store", "open_store"),
    "Reconciler": ("gpupolicy.provenance.reconciler", "Reconciler"),
    "router": ("gpupolicy.provenance.api", "build_router"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _LAZY[name]
    return getattr(importlib.import_module(module), attribute)
