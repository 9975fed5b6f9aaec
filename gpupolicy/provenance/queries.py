"""Reading records back: one page at a time, oldest first, ordered by (time, uid), filtered as
the CLI and `GET /provenance` ask; pagination by cursor (keyset on time and uid, no offset)."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import and_, func, or_, select
from sqlalchemy.sql import ColumnElement

from gpupolicy.core.immutable import immutable
from gpupolicy.provenance.database import Database, record_of
from gpupolicy.provenance.filters import Cursor, RecordFilter
from gpupolicy.provenance.record import STATUS_ADMITTED, ProvenanceRecord
from gpupolicy.provenance.schema import records

MAX_PAGE = 1000


@immutable
class Page:
    items: list[ProvenanceRecord]
    next_cursor: str | None


def _conditions(flt: RecordFilter) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    for column, value in (
        (records.c.experiment, flt.experiment),
        (records.c.namespace, flt.namespace),
        (records.c.kind, flt.kind),
        (records.c.name, flt.name),
        (records.c.status, flt.status),
    ):
        if value is not None:
            conditions.append(column == value)
    if flt.since is not None:
        conditions.append(records.c.recorded_at >= flt.since)
    if flt.until is not None:
        conditions.append(records.c.recorded_at < flt.until)
    return conditions


class Queries:
    """Reads raise `StoreUnavailable` when the database cannot be reached."""

    def __init__(self, database: Database) -> None:
        self.database = database

    def query(self, flt: RecordFilter | None = None, *, limit: int = 100, cursor: str | None = None) -> Page:
        """One page of records, oldest first, ordered by (time, uid); `next_cursor` continues."""
        flt = flt or RecordFilter()
        limit = max(1, min(limit, MAX_PAGE))
        conditions = _conditions(flt)
        if cursor is not None:
            after = Cursor.decode(cursor)
            conditions.append(
                or_(
                    records.c.recorded_at > after.time,
                    and_(records.c.recorded_at == after.time, records.c.uid > after.uid),
                )
            )
        statement = (
            select(records).where(*conditions).order_by(records.c.recorded_at, records.c.uid).limit(limit + 1)
        )
        rows = self.database.read(statement)
        items = [record_of(row) for row in rows[:limit]]
        next_cursor = Cursor(items[-1].time, items[-1].uid).encode() if len(rows) > limit else None
        return Page(items, next_cursor)

    def iter_records(
        self, flt: RecordFilter | None = None, *, page_size: int = 500
    ) -> Iterator[ProvenanceRecord]:
        cursor: str | None = None
        while True:
            page = self.query(flt, limit=page_size, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def count(self, flt: RecordFilter | None = None) -> int:
        rows = self.database.read(
            select(func.count()).select_from(records).where(*_conditions(flt or RecordFilter()))
        )
        return int(rows[0][0])

    def get(self, uid: str) -> ProvenanceRecord | None:
        rows = self.database.read(select(records).where(records.c.uid == uid))
        return record_of(rows[0]) if rows else None

    def admitted(self, *, limit: int = 1000) -> list[ProvenanceRecord]:
        """Records still waiting for the reconciler, oldest first."""
        statement = (
            select(records)
            .where(records.c.status == STATUS_ADMITTED)
            .order_by(records.c.recorded_at, records.c.uid)
            .limit(limit)
        )
        return [record_of(row) for row in self.database.read(statement)]
