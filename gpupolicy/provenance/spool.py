"""The local spool: where records wait, durably, while the database is unreachable.

Layout of `spool_dir`:

- `pending.jsonl` — records appended by `append()` / `append_many()` (a batch of the store's
  writer), one JSON object per line; each append is written with one `write()` on an
  `O_APPEND` descriptor and `fsync`ed before it returns (and the directory is `fsync`ed when
  the file is created), so an acknowledged record survives a crash or power loss. An append
  that finds the file ending in a torn line (a crash mid-append) starts with a newline.
- `replay-<ns>-<pid>.jsonl` — a batch taken for replay: `take()` renames `pending.jsonl`
  atomically, so appends during a replay go to a fresh file. A batch file is deleted only
  after every record in it is committed; a crash in between leaves it for the next replay,
  and the database's unique request uid turns the second insert into a no-op.
- `rejected.jsonl` — records the database refused for their content during a replay (a value
  too long for its column, a malformed line), with the error: kept for a person to look at,
  never retried, so one bad record cannot block the queue. (A crash right after a rejection
  may list that record twice.)
- `.lock` — an `flock` taken around append and take, so several processes may share the
  directory.

A line that does not parse (a write torn by a crash before `append()` returned, so never
acknowledged) is counted and skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gpupolicy.core.immutable import immutable

PENDING = "pending.jsonl"
REJECTED = "rejected.jsonl"
BATCH_GLOB = "replay-*.jsonl"


@immutable
class SpoolBatch:
    path: Path
    records: list[dict[str, Any]]
    torn_lines: int


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def pending_path(self) -> Path:
        return self.directory / PENDING

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # releases the flock

    def append(self, record: dict[str, Any]) -> None:
        """Append one record and fsync it: when this returns, the record is on disk."""
        self.append_many([record])

    def append_many(self, records: Sequence[dict[str, Any]]) -> None:
        """Append records with one `write()` and one `fsync`: when this returns, all of them are
        on disk. A crash before that may leave some of them (never acknowledged) behind, the
        last one possibly torn; replay inserts the whole ones and skips the torn one."""
        if records:
            self._append_lines(self.pending_path, records)

    def reject(self, record: dict[str, Any], error: str) -> None:
        self._append_lines(self.directory / REJECTED, [{"error": error, "record": record}])

    def rejected_count(self) -> int:
        path = self.directory / REJECTED
        return sum(1 for raw in path.read_bytes().split(b"\n") if raw.strip()) if path.exists() else 0

    def _append_lines(self, path: Path, values: Sequence[dict[str, Any]]) -> None:
        data = b"".join(
            (json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
            for value in values
        )
        with self._locked():
            created = not path.exists()
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    # The tail of an append a crash tore: end it, or the first of these lines
                    # would be glued to it and lost with it.
                    data = b"\n" + data
                written = os.write(fd, data)
                while written < len(data):  # a short write on a regular file is rare, not impossible
                    written += os.write(fd, data[written:])
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                fsync_directory(self.directory)

    def take(self) -> None:
        """Move pending records into a batch file of their own (atomic rename)."""
        with self._locked():
            if not self.pending_path.exists():
                return
            target = self.directory / f"replay-{time.time_ns():020d}-{os.getpid()}.jsonl"
            self.pending_path.rename(target)
            fsync_directory(self.directory)

    def batches(self) -> list[SpoolBatch]:
        """Every batch waiting for replay, oldest first (after `take()`)."""
        found = []
        for path in sorted(self.directory.glob(BATCH_GLOB)):
            records: list[dict[str, Any]] = []
            torn = 0
            for raw in path.read_bytes().split(b"\n"):
                if not raw.strip():
                    continue
                try:
                    loaded = json.loads(raw)
                except ValueError:
                    torn += 1
                    continue
                if isinstance(loaded, dict):
                    records.append(loaded)
                else:
                    torn += 1
            found.append(SpoolBatch(path, records, torn))
        return found

    def remove(self, batch: SpoolBatch) -> None:
        """Called only after every record of `batch` is committed to the database."""
        batch.path.unlink(missing_ok=True)
        fsync_directory(self.directory)

    def backlog(self) -> int:
        """Records waiting (pending and taken), counted by lines."""
        return len(self._waiting_lines())

    def waiting(self) -> list[dict[str, Any]]:
        """Every record waiting (pending and taken), oldest batch first; torn lines left out."""
        found = []
        for raw in self._waiting_lines():
            try:
                loaded = json.loads(raw)
            except ValueError:
                continue
            if isinstance(loaded, dict):
                found.append(loaded)
        return found

    def _waiting_lines(self) -> list[bytes]:
        # Under the lock: a concurrent take() renames pending.jsonl, which would otherwise be
        # missed (listed before the rename, read after it) or counted twice.
        lines: list[bytes] = []
        with self._locked():
            for path in [*sorted(self.directory.glob(BATCH_GLOB)), self.pending_path]:
                with contextlib.suppress(FileNotFoundError):  # a batch another replayer finished
                    lines += [raw for raw in path.read_bytes().split(b"\n") if raw.strip()]
        return lines
