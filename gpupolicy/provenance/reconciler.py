"""The reconciler: did an admitted object really persist?

A validating webhook answers before the API server stores the object, and a later webhook or a
conflict may still reject it. So records start `admitted`; the reconciler looks up the live
object and marks a record `confirmed` when an object with the record's uid is live at the
record's generation or a later one (a later generation can only have been built on top of
it), or `never-persisted` when that has not happened within `timeout` of the record's time.

`reconcile_once(now, lookup)` is pure apart from the store: `lookup(kind, namespace, name)`
returns the live object's `(uid, generation)` or None, so tests need no cluster.
`kubernetes_lookup()` adapts the official client's dynamic API.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpupolicy.core.immutable import immutable
from gpupolicy.provenance.record import (
    STATUS_CONFIRMED,
    STATUS_NEVER_PERSISTED,
    ProvenanceRecord,
    format_time,
)

if TYPE_CHECKING:
    from gpupolicy.provenance.store import ProvenanceStore

log = logging.getLogger("gpupolicy.provenance")

LiveObject = tuple[str | None, int | None]  # (metadata.uid, metadata.generation)
Lookup = Callable[[str, str | None, str], LiveObject | None]


@immutable
class ReconcileResult:
    confirmed: list[str]
    never_persisted: list[str]
    waiting: list[str]
    errors: list[str]


def verdict(record: ProvenanceRecord, live: LiveObject | None) -> bool:
    """True when `live` shows that the admitted version of the object persisted."""
    if live is None:
        return False
    uid, generation = live
    if record.object_uid is not None and uid != record.object_uid:
        return False  # deleted and re-created: another object under the same name
    if record.generation is None or generation is None:
        return True  # nothing more to compare: the object (with that uid) is live
    return generation >= record.generation


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Reconciler:
    def __init__(self, store: ProvenanceStore, *, timeout: timedelta = timedelta(minutes=5)) -> None:
        self.store = store
        self.timeout = timeout

    def reconcile_once(self, now: datetime, lookup: Lookup, *, limit: int = 1000) -> ReconcileResult:
        confirmed, never, waiting, errors = [], [], [], []
        stamp = format_time(now)
        for record in self.store.admitted(limit=limit):
            try:
                live = lookup(record.kind, record.namespace, record.name)
            except Exception as exc:  # one failing lookup must not stop the others
                log.warning(
                    "provenance: lookup of %s %s/%s failed: %s",
                    record.kind,
                    record.namespace,
                    record.name,
                    exc,
                )
                errors.append(record.uid)
                continue
            if verdict(record, live):
                if self.store.set_status(record.uid, STATUS_CONFIRMED, at=stamp):
                    confirmed.append(record.uid)
            elif now - _parse_time(record.time) >= self.timeout:
                if self.store.set_status(record.uid, STATUS_NEVER_PERSISTED, at=stamp):
                    never.append(record.uid)
            else:
                waiting.append(record.uid)
        return ReconcileResult(confirmed, never, waiting, errors)

    def start(self, lookup: Lookup, *, interval: float = 30.0) -> threading.Event:
        """Reconcile in a daemon thread every `interval` seconds; set the returned event to stop."""
        stop = threading.Event()
        threading.Thread(
            target=self.run,
            args=(lookup,),
            kwargs={"interval": interval, "stop": stop},
            name="provenance-reconciler",
            daemon=True,
        ).start()
        return stop

    def run(self, lookup: Lookup, *, interval: float, stop: threading.Event) -> None:
        """Reconcile every `interval` seconds until `stop` is set (the webhook's thread)."""
        while not stop.wait(interval):
            try:
                self.reconcile_once(datetime.now(UTC), lookup)
            except Exception:
                log.exception("provenance: reconcile failed")


def kubernetes_lookup(api_client: Any = None) -> Lookup:  # pragma: no cover - needs a cluster
    """A `Lookup` backed by the `kubernetes` client's dynamic API (any kind the cluster serves).

    Reads `metadata.uid` and `metadata.generation` of `kind` `namespace/name`; a 404 is None.
    Needs RBAC `get` on the recorded kinds.
    """
    import importlib

    # Typed as Any: the kubernetes package ships no type hints.
    client: Any = importlib.import_module("kubernetes.client")
    config: Any = importlib.import_module("kubernetes.config")
    dynamic: Any = importlib.import_module("kubernetes.dynamic")
    ApiException: Any = importlib.import_module("kubernetes.client.exceptions").ApiException

    if api_client is None:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        api_client = client.ApiClient()
    dynamic_client = dynamic.DynamicClient(api_client)
    resources: dict[str, Any] = {}

    def lookup(kind: str, namespace: str | None, name: str) -> LiveObject | None:
        if kind not in resources:
            found = dynamic_client.resources.search(kind=kind)
            preferred = [item for item in found if getattr(item, "preferred", False)] or found
            if not preferred:
                raise LookupError(f"the cluster serves no kind {kind!r}")
            resources[kind] = preferred[0]
        try:
            live = resources[kind].get(name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        metadata = live.metadata
        generation = getattr(metadata, "generation", None)
        return (getattr(metadata, "uid", None), int(generation) if generation is not None else None)

    return lookup
