"""Decisions remembered across admissions of the same content.

The Pods of one ReplicaSet, Job or StatefulSet share their template: the API server sends one
AdmissionReview per Pod, each the same object but for a generated name, a uid and bookkeeping
the server writes (`resourceVersion`, `managedFields`, `creationTimestamp` ...). Argo CD and
Flux re-apply unchanged objects. Evaluating the same content again gives the same answer as long
as three things hold, which together are the key:

- the engine: a cache belongs to one `ReviewEngine` (one policy, its settings and rule set); a
  reloaded policy or newly learned cluster facts make a new engine, and with it a new cache;
- the content the rules read: the request's operation, kind and namespace, and the object
  without the metadata the server writes, which no built-in rule reads (a custom rule may read
  anything: with custom rules the whole object is the key). Today's date too, because policy
  exemptions expire;
- the cluster: each entry keeps the inventory kinds its evaluation read and their generations
  (`ClusterInventory.generations`: moved only when a cache's objects change, or it (un)syncs);
  an entry whose kinds have moved since is evaluated again.

A decision in which a rule raised or ran out of time is never remembered. What is kept is the
answer without the request's uid, the report and the findings; the hit is made a `Decision` of
the new admission (its uid, dry run, name for provenance). Entries are keyed by a SHA-256 digest
of the content and bounded in bytes (`core.bounded_cache`).
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Sequence
from typing import Any, Protocol

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.core.findings import Finding
from gpupolicy.core.immutable import immutable
from gpupolicy.engine.report import Report
from gpupolicy.kube.inventory import Coverage, Inventory
from gpupolicy.loading.documents import Resource
from gpupolicy.provenance.canonical import sha256
from gpupolicy.webhook.settings import Mode

try:  # orjson serialises a 10 KB object in about 10 us, the stdlib in about 70
    import orjson

    def _serialised(value: Any) -> bytes:
        return orjson.dumps(value)

except ImportError:  # pragma: no cover - depends on the install

    def _serialised(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode()


# Metadata the API server writes on every object and no built-in rule reads.
SERVER_METADATA = frozenset(
    {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
)
# Annotations that tools write and no built-in rule reads: kubectl's copy of the last applied
# object (as large as the object itself), the Deployment controller's revision counter.
UNREAD_ANNOTATIONS = frozenset(
    {"kubectl.kubernetes.io/last-applied-configuration", "deployment.kubernetes.io/revision"}
)
DEFAULT_MAX_BYTES = 32 * 1024 * 1024


class Generations(Inventory, Protocol):
    """An inventory that says how its caches moved (`ClusterInventory.generations`)."""

    def generations(self, kinds: Sequence[str]) -> tuple[tuple[str, int, bool], ...]: ...


@immutable
class Outcome:
    """A decision without the admission it answered."""

    allowed: bool
    mode: Mode
    status: dict[str, Any] | None
    warnings: tuple[str, ...]
    audit_annotations: dict[str, str]
    report: Report
    findings: tuple[Finding, ...]
    gpu_workload: bool


@immutable
class _Entry:
    outcome: Outcome
    cluster: tuple[tuple[str, int, bool], ...]  # the generations of the kinds its evaluation read


class ReadKinds:
    """An inventory that notes the kinds its callers ask about, for the entry's cluster key."""

    def __init__(self, base: Inventory) -> None:
        self._base = base
        self.kinds: set[str] = set()

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        self.kinds.add(kind)
        return self._base.list(kind, namespace)

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
        self.kinds.add(kind)
        return self._base.get(kind, name, namespace)

    def coverage(self, kind: str) -> Coverage:
        self.kinds.add(kind)
        return self._base.coverage(kind)


class DecisionCache:
    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES, whole_objects: bool = False) -> None:
        self._entries: BoundedCache[bytes, _Entry] = BoundedCache(max_bytes=max_bytes, size_of=_entry_size)
        self._whole_objects = whole_objects  # custom rules may read any field: key on all of it
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        return self._entries.nbytes

    def keyed(
        self, *, operation: str, kind: str, namespace: str | None, obj: dict[str, Any]
    ) -> tuple[bytes, bytes] | None:
        """The digest of what the decision rests on and the JSON text it digests (every key and
        string of the object but the server's metadata, as written: `text_marks` reads it), or
        None for content that cannot be keyed."""
        content = obj if self._whole_objects else _without_server_metadata(obj)
        try:
            text = _serialised([operation, kind, namespace, _TODAY.text(), content])
        except (TypeError, ValueError, RecursionError):  # nested too deep, or not JSON values
            return None
        # Held under the GIL: a released one is taken back behind the journal's writer thread
        # (a 10 KB key cost 30 µs and more on a busy loop where the hash itself takes 6).
        return sha256(text), text

    def get(self, key: bytes, cluster: Generations) -> Outcome | None:
        entry = self._entries.get(key)
        if entry is not None and cluster.generations([kind for kind, _, _ in entry.cluster]) == entry.cluster:
            self.hits += 1
            return entry.outcome
        self.misses += 1
        return None

    def put(self, key: bytes, outcome: Outcome, read: ReadKinds, cluster: Generations) -> None:
        if outcome.report.errors:
            return  # a rule raised or timed out: the next admission must try again
        self._entries.put(key, _Entry(outcome, cluster.generations(sorted(read.kinds))))


def generations_of(inventory: Inventory | None) -> Generations | None:
    """The inventory's generations when it can say them (the webhook's ClusterInventory); None
    for one that cannot, with which nothing is remembered. (Asked of the type: an isinstance
    check against a runtime protocol costs more than a small review.)"""
    found = getattr(type(inventory), "generations", None)
    return inventory if found is not None else None  # type: ignore[return-value]


def _without_server_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return obj
    kept = {key: value for key, value in metadata.items() if key not in SERVER_METADATA}
    annotations = kept.get("annotations")
    if isinstance(annotations, dict) and not UNREAD_ANNOTATIONS.isdisjoint(annotations):
        kept["annotations"] = {
            key: value for key, value in annotations.items() if key not in UNREAD_ANNOTATIONS
        }
    return {**obj, "metadata": kept}


class Today:
    """Today's local date as text, asked per admission: `date.today().isoformat()` is a
    `localtime` call and a new string (1.6 µs), a look at the clock against the day's bounds a
    tenth of that (0.14 µs; one-off `timeit` on this machine)."""

    __slots__ = ("_from", "_text", "_until")

    def __init__(self) -> None:
        self._text, self._from, self._until = "", 0.0, 0.0

    def text(self) -> str:
        now = time.time()
        if not self._from <= now < self._until:  # a new day, or the clock was set back
            day = datetime.date.fromtimestamp(now)
            start = datetime.datetime.combine(day, datetime.time.min)
            self._text = day.isoformat()
            self._from = start.timestamp()
            self._until = (start + datetime.timedelta(days=1)).timestamp()
        return self._text


_TODAY = Today()


# What a finding holds besides its message and path: its fields, the object reference, the
# remediation (shared with its rule) and its slot in two lists (the report's and the outcome's).
FINDING_BYTES = 900


def _entry_size(key: bytes, entry: _Entry) -> int:
    """The findings and the answer dominate an entry (the report's other fields are small),
    counted from their text: put runs on every evaluated admission."""
    outcome = entry.outcome
    status = outcome.status["message"] if outcome.status is not None else ""
    return (
        len(key)
        + 2048
        + sum(FINDING_BYTES + len(finding.message) + 8 * len(finding.path) for finding in outcome.findings)
        + sum(100 + len(warning) for warning in outcome.warnings)
        + len(status)
    )
