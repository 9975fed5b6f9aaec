"""Query filters and pagination cursors, shared by `gpupolicy provenance` and `GET /provenance`."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime, timedelta

from gpupolicy.core.immutable import immutable
from gpupolicy.provenance.record import STATUSES, format_time

_RELATIVE = re.compile(r"^(?P<amount>\d+)(?P<unit>[smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class FilterError(ValueError):
    """A filter or cursor the caller got wrong (CLI: exit 2; HTTP: 400)."""


def parse_time(text: str, *, now: datetime | None = None) -> str:
    """An RFC 3339 / ISO 8601 time (naive means UTC), a date, or a duration back from now
    (`90m`, `24h`, `7d`), as the record's sortable time text."""
    text = text.strip()
    match = _RELATIVE.match(text)
    if match:
        delta = timedelta(**{_UNITS[match["unit"]]: int(match["amount"])})
        return format_time((now or datetime.now(UTC)) - delta)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise FilterError(
            f"cannot read time {text!r}: use ISO 8601 (2026-11-30T02:00:00Z, 2026-11-30) or 90m, 24h, 7d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return format_time(moment)


@immutable
class RecordFilter:
    experiment: str | None = None
    namespace: str | None = None
    kind: str | None = None
    name: str | None = None
    since: str | None = None  # inclusive, record time text (see parse_time)
    until: str | None = None  # exclusive
    status: str | None = None

    @classmethod
    def parse(
        cls,
        *,
        experiment: str | None = None,
        namespace: str | None = None,
        kind: str | None = None,
        name: str | None = None,
        since: str | None = None,
        until: str | None = None,
        status: str | None = None,
        now: datetime | None = None,
    ) -> RecordFilter:
        if status is not None and status not in STATUSES:
            raise FilterError(f"unknown status {status!r} (use {', '.join(STATUSES)})")
        return cls(
            experiment=experiment or None,
            namespace=namespace or None,
            kind=kind or None,
            name=name or None,
            since=parse_time(since, now=now) if since else None,
            until=parse_time(until, now=now) if until else None,
            status=status,
        )


@immutable
class Cursor:
    """Keyset position: records are ordered by (time, uid); a page starts after this pair."""

    time: str
    uid: str

    def encode(self) -> str:
        raw = json.dumps([self.time, self.uid], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            time, uid = json.loads(raw)
            if not isinstance(time, str) or not isinstance(uid, str):
                raise TypeError
        except (ValueError, TypeError):
            raise FilterError(f"invalid cursor {text!r}") from None
        return cls(time, uid)
