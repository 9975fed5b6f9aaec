"""Structured logs: one JSON object per line, with the admission request's uid where there is one."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.core.findings import Finding
from gpupolicy.provenance.redaction import redact_text

LOGGER = "gpupolicy.webhook"

# What one value of a request may put into a log line: requests are whatever an API client sends
# (a 3 MB label key comes back in a finding's message and path), logs are read by people and
# shipped to collectors that cut or drop long lines.
EXCERPT_CHARS = 200
# Findings (and suppressions, internal errors) listed in one admission line; the rest counted.
MAX_LOGGED_FINDINGS = 20


def excerpt(text: str | None, limit: int = EXCERPT_CHARS) -> str | None:
    """`text` with its credential-looking parts redacted (as provenance records are: a finding's
    message may quote a value of the object), cut to at most `limit` characters, ending in "…"
    when it was cut. Only the head is redacted and shown: a secret that the cut would split is
    redacted whole first."""
    return None if text is None else _excerpt_of(text, limit)


def recurring_excerpt(text: str | None) -> str | None:
    """`excerpt(text)` of a text that comes back from one admission to the next (a finding's
    message, path, container): remembered, see `_EXCERPTS`."""
    if text is None:
        return None
    found = _EXCERPTS.get(text)
    if found is None:
        found = _excerpt_of(text, EXCERPT_CHARS)
        if len(text) <= _REDACTED_HEAD_CHARS:
            _EXCERPTS.put(text, found)
    return found


# How much of a value is redacted before it is cut to an excerpt: enough that a credential
# starting inside the shown part is seen whole (PEM keys are longer: their header is enough).
_REDACTED_HEAD_CHARS = 4 * EXCERPT_CHARS


# The excerpts of the texts seen, by text: the admission line shows each finding's message, path
# and container, and they repeat (a remembered decision has the same findings; the Pods of a
# ReplicaSet the same messages). Messages are longer than redaction's clean-text cache takes, so
# each was redacted again: 1.8 µs a call, 10 calls an admission, and 843 distinct texts in 18,031
# calls on the realistic mix (bench/admission_load.py). Keyed by request content, so bounded in
# bytes; texts past the redacted head are computed each time.
_EXCERPTS: BoundedCache[str, str] = BoundedCache(max_bytes=2 << 20)


# The admission line's entry of each finding (rule, severity, and the excerpts of its path,
# container and message), by what it shows. Findings repeat as their texts do (a remembered
# decision has the same findings; the Pods of a ReplicaSet the same ones) and each entry cost
# five lookups and the path's text made again (1.3 µs a finding, 2.8 findings an admission on
# the realistic mix). Keyed by request content, so bounded in bytes; findings whose message or
# path is past the redacted head are made each time. Entries are shared between log lines: they
# are written, never changed.
_FINDING_ENTRIES: BoundedCache[tuple[Any, ...], dict[str, str | None]] = BoundedCache(max_bytes=2 << 20)


def finding_entry(finding: Finding) -> dict[str, str | None]:
    """`finding` as the admission line lists it."""
    key = (finding.rule_id, finding.severity, finding.path, finding.container, finding.message)
    entry = _FINDING_ENTRIES.get(key)
    if entry is None:
        path = finding.json_path
        entry = {
            "rule": finding.rule_id,
            "severity": finding.severity.label,
            "path": recurring_excerpt(path),
            "container": recurring_excerpt(finding.container),
            "message": recurring_excerpt(finding.message),
        }
        if len(path) <= _REDACTED_HEAD_CHARS and len(finding.message) <= _REDACTED_HEAD_CHARS:
            _FINDING_ENTRIES.put(key, entry)
    return entry


def _excerpt_of(text: str, limit: int) -> str:
    return _cut(redact_text(_cut(text, _REDACTED_HEAD_CHARS)), limit)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _stdlib_dumps(entry: dict[str, Any]) -> str:
    return json.dumps(entry, ensure_ascii=False, default=str)


try:  # one line per admission: orjson writes a typical one in under a tenth of the time (~2 µs against ~24 µs)
    import orjson

    def _dumps(entry: dict[str, Any]) -> str:
        try:
            return orjson.dumps(entry, default=str).decode()
        except TypeError:  # what orjson refuses (keys that are not strings, integers past 64 bits)
            return _stdlib_dumps(entry)

except ImportError:  # pragma: no cover - depends on the install
    _dumps = _stdlib_dumps


# A traceback ends with the exception's message, which may quote request content of any size:
# the head (where it was raised) and the tail (the message's end) are kept, both redacted.
TRACEBACK_HEAD_CHARS = 6000
TRACEBACK_TAIL_CHARS = 2000


def bounded_traceback(text: str) -> str:
    if len(text) > TRACEBACK_HEAD_CHARS + TRACEBACK_TAIL_CHARS:
        left_out = len(text) - TRACEBACK_HEAD_CHARS - TRACEBACK_TAIL_CHARS
        text = (
            f"{text[:TRACEBACK_HEAD_CHARS]}\n… {left_out} characters left out …\n"
            f"{text[-TRACEBACK_TAIL_CHARS:]}"
        )
    return redact_text(text)


class _UtcMilliseconds:
    """`datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")`, with the text up to
    the second made once per second: the datetime and its text were most of a line's format
    (61 of 96 py-spy samples in `JsonFormatter.format`, realistic admissions). The instant is rounded to the microsecond as
    `fromtimestamp` rounds it (half to even, the second carried), then cut to the millisecond as
    `isoformat` cuts it."""

    __slots__ = ("_second",)

    def __init__(self) -> None:
        self._second: tuple[int, str] = (-1, "")  # one attribute: threads read a consistent pair

    def text(self, timestamp: float) -> str:
        fraction, whole = math.modf(timestamp)
        if fraction < 0:  # before 1970: left to datetime
            return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")
        second, microseconds = int(whole), round(fraction * 1e6)
        if microseconds >= 1_000_000:
            second, microseconds = second + 1, microseconds - 1_000_000
        cached, head = self._second
        if second != cached:
            head = datetime.fromtimestamp(second, UTC).isoformat()[:-6]  # without "+00:00"
            self._second = (second, head)
        return f"{head}.{microseconds // 1000:03d}+00:00"


class JsonFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__()
        self._time = _UtcMilliseconds()

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self._time.text(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = bounded_traceback(self.formatException(record.exc_info))
        return _dumps(entry)


# Lines held for the end of the loop's turn at most: past it they are written at once.
TURN_BUFFER_CHARS = 64 * 1024


class TurnBufferedHandler(logging.StreamHandler[TextIO]):
    """A stream handler that writes the lines emitted on an event loop within one turn of it as one
    write, at the end of the turn (`call_soon`), instead of one write and flush per line: a
    saturated webhook answers several admissions per turn, each with its line, and the write was
    a third of what the line cost (15-25 µs of about 40, in process). Lines emitted off the loop
    (the inventory's watch threads, the journal's writers, the replayer) are written at once,
    after whatever the loop holds, so the order of the lines is the order they were emitted. A
    SIGKILL loses what one turn holds (a few milliseconds of lines); `flush()` (shutdown, the
    shutdown deadline, logging's own at exit) writes it."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._held: list[str] = []
        self._held_chars = 0
        self._flush_on: asyncio.AbstractEventLoop | None = None  # the loop a flush is scheduled on

    def emit(self, record: logging.LogRecord) -> None:  # called with the handler's lock held
        try:
            line = self.format(record) + self.terminator
            self._hold_or_write(line)
        except Exception:  # logging's contract: a failed line is reported, not raised
            self.handleError(record)

    def flush(self) -> None:
        self.acquire()
        try:
            self._write([])
            self.stream.flush()
        finally:
            self.release()

    def _hold_or_write(self, line: str) -> None:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or self._held_chars + len(line) > TURN_BUFFER_CHARS:
            self._write([line])
            return
        if self._flush_on is not loop:
            self._write([])  # anything held for a loop that stopped before its turn ended
            loop.call_soon(self._end_of_turn)
            self._flush_on = loop
        self._held.append(line)
        self._held_chars += len(line)

    def _end_of_turn(self) -> None:
        self.acquire()
        try:
            self._flush_on = None
            self._write([])
        except Exception:  # as in emit: reported, never raised into the loop
            self.handleError(logging.makeLogRecord({"msg": "log lines held for the end of a turn"}))
        finally:
            self.release()

    def _write(self, lines: list[str]) -> None:
        """What is held, then `lines`, in one write and a flush."""
        if self._held or lines:
            text = "".join([*self._held, *lines])
            self._held, self._held_chars = [], 0
            self.stream.write(text)
            self.stream.flush()


CONFIGURED_LOGGERS = ("gpupolicy", "uvicorn", "uvicorn.error")


def configure_logging(level: str = "info") -> None:
    """JSON on stderr for gpupolicy's and uvicorn's loggers."""
    handler = TurnBufferedHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    for name in CONFIGURED_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False


def flush_logs() -> None:
    """Write the lines `configure_logging`'s handler holds (before the process ends)."""
    for name in CONFIGURED_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            handler.flush()


def log(logger: logging.Logger, level: int, message: str, **fields: Any) -> None:
    """One line of `message` and `fields` (JsonFormatter writes them). The record is made here,
    not by `Logger.log`, which walks the stack for the caller's file and line: the formatter
    writes neither, and the walk was a tenth of this call (py-spy, realistic admissions)."""
    if logger.isEnabledFor(level):
        logger.handle(
            logger.makeRecord(logger.name, level, _NO_FILE, 0, message, (), None, extra={"fields": fields})
        )


_NO_FILE = "(unknown file)"  # what logging itself records when it cannot find the caller
