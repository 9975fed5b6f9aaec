"""Decisions remembered across admissions of the same content.

The Pods of one ReplicaSet, Job or StatefulSet share their template: the API server sends one
AdmissionReview per Pod, each the same object but for a generated name, a uid and bookkeeping
the server writes (`resourceVersion`, `managedFields`, `creationTimestamp` ...). A validating
webhook sees the generated name (the server makes it from `generateName` before validating
admission, after mutating admission), so a name that is `generateName` and the server's five
random characters is left out of the key like the rest of its bookkeeping. Argo CD and
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
answer without the request's uid, the report and the findings, and the name it was evaluated
under; the hit is made a `Decision` of the new admission (its uid, dry run, name for
provenance). Where messages quote that name, another Pod's answer quotes its own (review.py:
`_renamed`), or is evaluated when the name is quoted otherwise than whole (`is_renamable`).
Entries are keyed by a SHA-256 digest of the content and bounded in bytes (`core.bounded_cache`).
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
# How the API server names an object from `generateName` (k8s.io/apiserver/pkg/storage/names:
# the prefix cut to 63 - 5 characters, then 5 of k8s.io/apimachinery's rand alphabet, which has no
# vowels): https://kubernetes.io/docs/reference/using-api/api-concepts/#generated-values
GENERATED_SUFFIX_LENGTH = 5
GENERATED_PREFIX_MAX = 63 - GENERATED_SUFFIX_LENGTH
GENERATED_SUFFIX_CHARACTERS = frozenset("bcdfghjklmnpqrstvwxz2456789")


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
    name: str = ""  # the object's name when it was evaluated (the deny message quotes it)


@immutable
class _Entry:
    outcome: Outcome
    cluster: tuple[tuple[str, int, bool], ...]  # the generations of the kinds its evaluation read
    renamable: bool  # no finding or warning quotes its name: it answers another of the key's names


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
        self,
        *,
        operation: str,
        kind: str,
        namespace: str | None,
        obj: dict[str, Any],
        owners_read: bool = False,
    ) -> tuple[bytes, bytes] | None:
        """The digest of what the decision rests on and the JSON text it digests (every key and
        string of the object but the server's metadata, as written: `text_marks` reads it), or
        None for content that cannot be keyed."""
        content = obj if self._whole_objects else _without_server_metadata(obj)
        try:
            parts = [operation, kind, namespace, _TODAY.text(), content]
            text = _serialised([*parts, "owners read"] if owners_read else parts)
        except (TypeError, ValueError, RecursionError):  # nested too deep, or not JSON values
            return None
        # Held under the GIL: a released one is taken back behind the journal's writer thread
        # (a 10 KB key cost 30 µs and more on a busy loop where the hash itself takes 6).
        return sha256(text), text

    def get(self, key: bytes, cluster: Generations, name: str) -> Outcome | None:
        """The outcome remembered for `key` if the cluster caches it read have not moved and it
        may answer an object named `name`."""
        entry = self._entries.get(key)
        if (
            entry is not None
            and (entry.renamable or entry.outcome.name == name)
            and cluster.generations([kind for kind, _, _ in entry.cluster]) == entry.cluster
        ):
            self.hits += 1
            return entry.outcome
        self.misses += 1
        return None

    def put(self, key: bytes, text: bytes, outcome: Outcome, read: ReadKinds, cluster: Generations) -> None:
        """Remember `outcome` under `key`, the digest of `text`, in place of what was remembered
        there (evaluated again because the caches it read moved, or for another name)."""
        if outcome.report.errors:
            return  # a rule raised or timed out: the next admission must try again
        renamable = is_renamable(outcome, text)
        self._entries.put(
            key, _Entry(outcome, cluster.generations(sorted(read.kinds)), renamable), replace=True
        )


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
    if is_generated_name(kept.get("name"), kept.get("generateName")):
        del kept["name"]  # generateName, kept, is what the object's author wrote
    annotations = kept.get("annotations")
    if isinstance(annotations, dict) and not UNREAD_ANNOTATIONS.isdisjoint(annotations):
        kept["annotations"] = {
            key: value for key, value in annotations.items() if key not in UNREAD_ANNOTATIONS
        }
    return {**obj, "metadata": kept}


def is_renamable(outcome: Outcome, text: bytes) -> bool:
    """Whether the outcome, its object's name replaced by another generated from the same
    prefix, is what an evaluation of that other object says. Its texts may quote the name (a
    rule's "serving GPU Pod <name>"), but only whole and only as the name: the key's text (the
    content, without the generated name) must not hold it, and the prefix must appear in a message
    only as part of the name (a name cut short, or the prefix quoted alone, would not be replaced).
    The name is of the same length with the same prefix, so answers cut to a length (warnings,
    the deny message) are made again from the messages as an evaluation makes them."""
    name = outcome.name
    if not name:
        return True
    if name.encode() in text:
        return False
    stem = name[:-GENERATED_SUFFIX_LENGTH]
    return all(finding.message.count(stem) == finding.message.count(name) for finding in outcome.findings)


def is_generated_name(name: object, prefix: object) -> bool:
    """Whether `name` is one the API server made from the `generateName` `prefix`."""
    if not isinstance(name, str) or not isinstance(prefix, str) or not prefix:
        return False
    stem = prefix[:GENERATED_PREFIX_MAX]
    return (
        len(name) == len(stem) + GENERATED_SUFFIX_LENGTH
        and name.startswith(stem)
        and GENERATED_SUFFIX_CHARACTERS.issuperset(name[len(stem) :])
    )


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
