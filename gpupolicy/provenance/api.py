"""`GET /provenance` (and `GET /provenance/{uid}`): imported only by the webhook, which has FastAPI."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, HTTPException, Query

from gpupolicy.provenance.errors import StoreUnavailable
from gpupolicy.provenance.filters import FilterError, RecordFilter
from gpupolicy.provenance.queries import MAX_PAGE
from gpupolicy.provenance.store import ProvenanceStore


def build_router(store: ProvenanceStore, *, before_read: Callable[[], object] | None = None) -> APIRouter:
    """The `GET /provenance` routes for the webhook's FastAPI app. `before_read` runs before each
    read (the webhook's journal: wait, briefly, until what was admitted so far is stored)."""
    api = APIRouter(tags=["provenance"])

    def caught_up() -> None:
        if before_read is not None:
            before_read()

    # Plain `def` routes: the store blocks on the database, FastAPI runs them in its threadpool.
    @api.get("/provenance")
    def list_records(
        experiment: str | None = None,
        namespace: str | None = None,
        kind: str | None = None,
        name: str | None = None,
        since: str | None = Query(
            None, description="ISO 8601 time or a duration back from now: 90m, 24h, 7d"
        ),
        until: str | None = Query(None, description="exclusive; same forms as since"),
        status: str | None = Query(None, description="admitted, confirmed or never-persisted"),
        limit: int = Query(100, ge=1, le=MAX_PAGE),
        cursor: str | None = Query(None, description="next_cursor of the previous page"),
    ) -> dict[str, Any]:
        try:
            flt = RecordFilter.parse(
                experiment=experiment,
                namespace=namespace,
                kind=kind,
                name=name,
                since=since,
                until=until,
                status=status,
            )
            caught_up()
            page = store.query(flt, limit=limit, cursor=cursor)
        except FilterError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except StoreUnavailable as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        return {
            "items": [record.to_dict() for record in page.items],
            "count": len(page.items),
            "next_cursor": page.next_cursor,
        }

    @api.get("/provenance/{uid}")
    def show_record(uid: str) -> dict[str, Any]:
        try:
            caught_up()
            found = store.get(uid)
        except StoreUnavailable as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        if found is None:
            raise HTTPException(status_code=404, detail=f"no provenance record {uid!r}")
        return found.to_dict()

    return api
