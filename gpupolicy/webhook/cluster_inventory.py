# mypy: disallow-untyped-calls=False
# (the kubernetes client ships type hints only in part)
"""The cluster inventory: list+watch caches of the objects cross-object rules read, behind the
same `Inventory` protocol as the repository's `Bundle`.

One thread per kind lists (in pages), then watches from the list's resourceVersion with the
official `kubernetes` client, and re-lists when the watch expires (HTTP 410 Gone, or an ERROR
event with code 410). Objects are kept as plain dicts (the client's models turned back into
JSON shapes by `sanitize_for_serialization`), wrapped in `Resource`s named
`cluster:<kind>/<namespace>/<name>`.

A cache answers `coverage(kind) == COMPLETE` only while it is synced: before the first list,
after a failure, and without RBAC (403) it is UNAVAILABLE, so a rule says "unknown" instead of
passing or denying on an empty cache. A custom resource whose CRD is not installed (404 for every
version tried) cannot exist: that kind is "absent", complete and empty, and checked again now and
then. Kinds the inventory does not cache are UNAVAILABLE too.

A kind may keep only some objects (`KindSpec.keep`) and only some of each (`KindSpec.project`):
Nodes are cached as their name, labels, taints and capacity, never their status conditions,
images or heartbeats, so that the kubelet's status updates (every few minutes per node) neither
grow the cache nor count as changes. A projected kind is read as JSON, not through the client's
models (0.08 ms a Node instead of 1.4: bench/live_facts.py). Each cache has a `generation`,
bumped only when what it holds changes: a watch event whose projection equals the cached object
changes nothing. The live cluster facts (live_facts.py) recompute only when a generation moved.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import CLUSTER_KIND_BY_NAME
from gpupolicy.kube.experiments import is_experiment_config
from gpupolicy.kube.inventory import Coverage
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.cluster_facts import (
    admits_system_classes,
    device_class_projection,
    node_projection,
    resource_quota_projection,
)
from gpupolicy.webhook.logs import LOGGER, log

_log = logging.getLogger(LOGGER)

PENDING = "pending"  # not listed yet
SYNCED = "synced"
ABSENT = "absent"  # the CRD is not installed: no such object can exist
FORBIDDEN = "forbidden"  # 401/403: the service account may not list or watch the kind
FAILED = "failed"  # the API server could not be reached or answered with an error
NO_CLIENT = "no-client"  # no Kubernetes configuration at all (a laptop, a test)

ListCall = Callable[..., Any]


@immutable
class KindSpec:
    kind: str
    api_version: str
    namespaced: bool
    api: str = ""  # kubernetes.client API class for built-in kinds, e.g. "SchedulingV1Api"
    method: str = ""  # its list method (all namespaces)
    plural: str = ""  # custom resources are listed by it, with CustomObjectsApi
    keep: Callable[[dict[str, Any]], bool] | None = None  # which objects to cache (the whole object)
    project: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # what of a kept object to cache
    custom: bool = False
    # Custom resources: older versions to try, in order, when `api_version` is not served (a
    # cluster one or two releases behind serves only a beta of the group).
    older_versions: tuple[str, ...] = ()

    @property
    def api_versions(self) -> tuple[str, ...]:
        group = self.api_version.rpartition("/")[0]
        return (self.api_version, *(f"{group}/{version}" for version in self.older_versions))

    def list_call(
        self, api_client: k8s.ApiClient, api_version: str | None = None
    ) -> tuple[ListCall, tuple[Any, ...]]:
        if self.custom:
            group, _, version = (api_version or self.api_version).rpartition("/")
            return k8s.CustomObjectsApi(api_client).list_cluster_custom_object, (group, version, self.plural)
        return getattr(getattr(k8s, self.api)(api_client), self.method), ()


def _spec(
    kind: str,
    api: str = "",
    method: str = "",
    *,
    keep: Callable[[dict[str, Any]], bool] | None = None,
    project: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    older_versions: tuple[str, ...] = (),
) -> KindSpec:
    """How to list and keep one of the vocabulary's cached kinds: its typed API class and method
    (built-in kinds), else it is a custom resource listed by group, version and plural."""
    entry = CLUSTER_KIND_BY_NAME[kind]
    return KindSpec(
        entry.kind,
        entry.api_version,
        entry.namespaced,
        api,
        method,
        entry.plural,
        keep=keep,
        project=project,
        custom=not api,
        older_versions=older_versions,
    )


# One spec per kind the vocabulary says is cached (tests/test_vocabulary.py checks they agree).
KINDS: tuple[KindSpec, ...] = (
    _spec("PriorityClass", "SchedulingV1Api", "list_priority_class"),
    _spec("PodDisruptionBudget", "PolicyV1Api", "list_pod_disruption_budget_for_all_namespaces"),
    _spec("HorizontalPodAutoscaler", "AutoscalingV2Api", "list_horizontal_pod_autoscaler_for_all_namespaces"),
    # Only experiment configs are kept (a cluster has many ConfigMaps; rules ask for these).
    _spec("ConfigMap", "CoreV1Api", "list_config_map_for_all_namespaces", keep=is_experiment_config),
    _spec("Namespace", "CoreV1Api", "list_namespace"),
    _spec("NetworkPolicy", "NetworkingV1Api", "list_network_policy_for_all_namespaces"),
    _spec("RuntimeClass", "NodeV1Api", "list_runtime_class"),
    _spec("AnalysisTemplate"),
    _spec("ClusterAnalysisTemplate"),
    _spec("Canary"),
    # The cluster facts (live_facts.py): GPU node pools and taints from the Nodes, GPU DeviceClasses,
    # and the namespaces a ResourceQuota lets use the system PriorityClasses (only those are kept).
    _spec("Node", "CoreV1Api", "list_node", project=node_projection),
    _spec(
        "DeviceClass",
        project=device_class_projection,
        older_versions=("v1beta2", "v1beta1"),  # DRA: GA in 1.34, beta before
    ),
    _spec(
        "ResourceQuota",
        "CoreV1Api",
        "list_resource_quota_for_all_namespaces",
        keep=admits_system_classes,
        project=resource_quota_projection,  # not status.used, which changes with every pod
    ),
    # Kueue's classes (GP308), when Kueue is installed.
    _spec("WorkloadPriorityClass", older_versions=("v1beta1",)),
)


@dataclass(slots=True)
class _KindCache:
    spec: KindSpec
    state: str = PENDING
    reason: str = "not listed yet"
    objects: dict[tuple[str, str], Resource] = field(default_factory=dict)
    resource_version: str | None = None
    relists: int = 0
    lists: int = 0
    synced_at: float | None = None
    generation: int = 0  # bumped when the objects held change (not for an event that changes nothing)
    unchanged: int = 0  # watch events whose kept projection equals the cached object
    api_version: str = ""  # the version listed (a custom resource may be served at an older one)
    # What `list` answers, made once per change of `objects` rather than on every call: rules ask
    # for a namespace's PDBs, Services, ConfigMaps ... several times per admission, and a cluster
    # may hold thousands of each.
    listing: _Listing | None = None

    def listed(self) -> _Listing:
        """The objects held, all and by namespace (the caller holds the inventory's lock)."""
        listing = self.listing
        if listing is None or listing.generation != self.generation or listing.source is not self.objects:
            listing = self.listing = _Listing.of(self.objects, self.generation, self.spec.namespaced)
        return listing


@immutable
class _Listing:
    generation: int
    source: dict[tuple[str, str], Resource]  # the `objects` it was made of (a re-list replaces it)
    items: tuple[Resource, ...]
    by_namespace: dict[str, tuple[Resource, ...]]

    @classmethod
    def of(cls, objects: dict[tuple[str, str], Resource], generation: int, namespaced: bool) -> _Listing:
        grouped: dict[str, list[Resource]] = {}
        if namespaced:
            for item in objects.values():
                grouped.setdefault(item.namespace or "default", []).append(item)
        by_namespace = {namespace: tuple(items) for namespace, items in grouped.items()}
        return cls(generation, objects, tuple(objects.values()), by_namespace)


class ClusterInventory:
    def __init__(
        self,
        api_client: k8s.ApiClient | None,
        *,
        kinds: Sequence[KindSpec] = KINDS,
        watch_timeout_seconds: int = 300,
        page_size: int = 500,
        retry_seconds: tuple[float, float] = (1.0, 30.0),
        absent_recheck_seconds: float = 60.0,
        no_client_reason: str = "no Kubernetes configuration (in-cluster or kubeconfig) was found",
    ) -> None:
        self._api_client = api_client
        self._sanitizer = api_client or k8s.ApiClient()
        self._caches = {spec.kind: _KindCache(spec, api_version=spec.api_version) for spec in kinds}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: set[k8s_watch.Watch] = set()
        self._watch_timeout = watch_timeout_seconds
        self._page_size = page_size
        self._retry = retry_seconds
        self._absent_recheck = absent_recheck_seconds
        if api_client is None:
            for cache in self._caches.values():
                cache.state, cache.reason = NO_CLIENT, no_client_reason

    @property
    def api_client(self) -> Any:
        """The kubernetes ApiClient, or None when the inventory runs without a cluster."""
        return self._api_client

    @classmethod
    def from_environment(cls, *, kubeconfig: str | None = None, **options: Any) -> ClusterInventory:
        """In a pod: the service account; elsewhere: the kubeconfig; neither: no client (every
        kind unavailable, the server still serves)."""
        from kubernetes import config as k8s_config

        configuration = k8s.Configuration()
        try:
            if kubeconfig is not None:
                k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
            else:
                try:
                    k8s_config.load_incluster_config(client_configuration=configuration)
                except k8s_config.ConfigException:
                    k8s_config.load_kube_config(client_configuration=configuration)
        except (k8s_config.ConfigException, OSError, TypeError, ValueError) as exc:
            return cls(None, no_client_reason=f"no Kubernetes configuration: {exc}", **options)
        configuration.connection_pool_maxsize = pool_size(
            configuration.connection_pool_maxsize, options.get("kinds", KINDS)
        )
        return cls(k8s.ApiClient(configuration), **options)

    # -- the Inventory protocol ----------------------------------------------------------------
    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        cache = self._caches.get(kind)
        if cache is None:
            return []
        with self._lock:
            listing = cache.listed()
        if namespace is None or not cache.spec.namespaced:
            return listing.items  # tuples: what a caller is given, it cannot change
        return listing.by_namespace.get(namespace, ())

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
        cache = self._caches.get(kind)
        if cache is None:
            return None
        with self._lock:
            if cache.spec.namespaced:
                if namespace is not None:
                    return cache.objects.get((namespace, name))
                return next((item for (_, key), item in cache.objects.items() if key == name), None)
            return cache.objects.get(("", name))

    def coverage(self, kind: str) -> Coverage:
        cache = self._caches.get(kind)
        if cache is None:
            return Coverage.UNAVAILABLE
        return Coverage.COMPLETE if cache.state in (SYNCED, ABSENT) else Coverage.UNAVAILABLE

    # -- what /readyz and /metrics read --------------------------------------------------------
    def synced(self) -> bool:
        return all(cache.state in (SYNCED, ABSENT) for cache in self._caches.values())

    def status(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {
                kind: {
                    "state": cache.state,
                    "synced": cache.state in (SYNCED, ABSENT),
                    "reason": cache.reason,
                    "objects": len(cache.objects),
                    "resourceVersion": cache.resource_version,
                    "lists": cache.lists,
                    "relists": cache.relists,
                    "generation": cache.generation,
                    "unchanged": cache.unchanged,
                    **({"apiVersion": cache.api_version} if cache.spec.older_versions else {}),
                }
                for kind, cache in self._caches.items()
            }

    def generations(self, kinds: Sequence[str]) -> tuple[tuple[str, int, bool], ...]:
        """For each of `kinds` (those cached): its generation and whether it is synced — a cheap
        fingerprint of what those caches hold, that moves only when their objects change."""
        with self._lock:
            return tuple(
                (kind, cache.generation, cache.state in (SYNCED, ABSENT))
                for kind in kinds
                if (cache := self._caches.get(kind)) is not None
            )

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.synced():
                return True
            time.sleep(0.02)
        return self.synced()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        if self._api_client is None or self._threads:
            return
        for cache in self._caches.values():
            thread = threading.Thread(
                target=self._run, args=(cache,), name=f"inventory-{cache.spec.kind}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            watches = list(self._watches)
        for active in watches:
            active.stop()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    # -- one kind --------------------------------------------------------------------------------
    def _mark(self, cache: _KindCache, state: str, reason: str) -> None:
        with self._lock:
            changed = cache.state != state
            cache.state, cache.reason = state, reason
        if changed:
            level = logging.INFO if state in (SYNCED, ABSENT) else logging.WARNING
            log(_log, level, "inventory cache state", kind=cache.spec.kind, state=state, reason=reason)

    def _run(self, cache: _KindCache) -> None:
        assert self._api_client is not None
        versions = cache.spec.api_versions
        tried = 0  # versions found not served since the last answer
        delay = self._retry[0]
        while not self._stop.is_set():
            cache.api_version = versions[tried]
            call, args = cache.spec.list_call(self._api_client, cache.api_version)
            try:
                self._list(cache, call, args)
                delay = self._retry[0]
                self._watch(cache, call, args)
                continue
            except ApiException as exc:
                if exc.status == 410:  # expired: list again, keep serving the old objects meanwhile
                    cache.relists += 1
                    log(_log, logging.INFO, "watch expired; listing again", kind=cache.spec.kind)
                    continue
                if exc.status == 404 and cache.spec.custom:
                    tried += 1
                    if tried < len(versions):
                        continue  # an older version of the group may be served
                    tried = 0
                    with self._lock:
                        if cache.objects:
                            cache.generation += 1
                        cache.objects = {}
                    served = ", ".join(versions)
                    self._mark(cache, ABSENT, f"{served} is not served (CRD not installed)")
                    self._stop.wait(self._absent_recheck)
                    continue
                state = FORBIDDEN if exc.status in (401, 403) else FAILED
                self._mark(cache, state, f"HTTP {exc.status} {exc.reason or ''}".strip())
            except Exception as exc:  # connection refused, timeouts, a body that does not parse
                self._mark(cache, FAILED, f"{type(exc).__name__}: {exc}")
            self._stop.wait(delay)
            delay = min(delay * 2, self._retry[1])

    def _to_resource(self, cache: _KindCache, item: Any) -> Resource | None:
        obj = item if isinstance(item, dict) else self._sanitizer.sanitize_for_serialization(item)
        if not isinstance(obj, dict):
            return None
        # Items of a list response carry no apiVersion and kind of their own.
        obj.setdefault("apiVersion", cache.api_version)
        obj.setdefault("kind", cache.spec.kind)
        keep = cache.spec.keep
        if keep is not None and not keep(obj):
            return None
        if cache.spec.project is not None:
            obj = cache.spec.project(obj)
        raw_metadata = obj.get("metadata")
        metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
        namespace = str(metadata.get("namespace") or "")
        name = str(metadata.get("name") or "")
        where = f"{namespace}/{name}" if namespace else name
        return Resource(obj, file=f"cluster:{cache.spec.kind}/{where}", doc_index=0)

    @staticmethod
    def _key(resource: Resource) -> tuple[str, str]:
        return (resource.namespace or "", resource.name)

    def _list(self, cache: _KindCache, call: ListCall, args: tuple[Any, ...]) -> None:
        objects: dict[tuple[str, str], Resource] = {}
        token: str | None = None
        while True:
            options: dict[str, Any] = {"limit": self._page_size, "_request_timeout": (10, 60)}
            if token:
                options["_continue"] = token
            if cache.spec.project is not None:
                options["_preload_content"] = False
            page = call(*args, **options)
            items, metadata = _items_and_metadata(
                _json_body(page) if cache.spec.project is not None else page
            )
            for item in items:
                resource = self._to_resource(cache, item)
                if resource is not None:
                    objects[self._key(resource)] = resource
            token = metadata.get("continue") or None
            version = metadata.get("resourceVersion")
            if not token:
                break
        with self._lock:
            if _contents(objects) != _contents(cache.objects):  # a re-list often finds the same objects
                cache.generation += 1
            cache.objects = objects
            cache.resource_version = str(version) if version else None
            cache.lists += 1
            cache.synced_at = time.time()
        self._mark(cache, SYNCED, f"{len(objects)} objects at resourceVersion {version}")

    def _watch(self, cache: _KindCache, call: ListCall, args: tuple[Any, ...]) -> None:
        # A projected kind's events stay JSON (return type "object"): no model to build and turn back.
        watcher = k8s_watch.Watch(return_type="object" if cache.spec.project is not None else None)
        with self._lock:
            self._watches.add(watcher)
        try:
            while not self._stop.is_set():
                stream = watcher.stream(
                    call,
                    *args,
                    resource_version=cache.resource_version,
                    timeout_seconds=self._watch_timeout,
                    allow_watch_bookmarks=True,
                    _request_timeout=(10, self._watch_timeout + 30),
                )
                for event in stream:
                    self._apply(cache, event, watcher)
                    if self._stop.is_set():
                        break
        finally:
            with self._lock:
                self._watches.discard(watcher)

    def _apply(self, cache: _KindCache, event: dict[str, Any], watcher: k8s_watch.Watch) -> None:
        kind = event.get("type")
        if kind == "BOOKMARK":
            if watcher.resource_version:
                cache.resource_version = str(watcher.resource_version)
            return
        resource = self._to_resource(cache, event.get("object"))
        raw = event.get("raw_object")
        version = (raw.get("metadata") or {}).get("resourceVersion") if isinstance(raw, dict) else None
        with self._lock:
            if resource is not None:
                key = self._key(resource)
                if kind == "DELETED":
                    if cache.objects.pop(key, None) is not None:
                        cache.generation += 1
                elif kind in ("ADDED", "MODIFIED"):
                    held = cache.objects.get(key)
                    if held is not None and held.obj == resource.obj:
                        cache.unchanged += 1  # a Node's heartbeat: nothing the cache keeps changed
                    else:
                        cache.objects[key] = resource
                        cache.generation += 1
            elif kind in ("MODIFIED", "DELETED") and isinstance(raw, dict):
                # No longer kept (a ConfigMap that stopped being an experiment config): drop it.
                metadata = raw.get("metadata") or {}
                key = (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
                if cache.objects.pop(key, None) is not None:
                    cache.generation += 1
            if version:
                cache.resource_version = str(version)


def pool_size(default: int, kinds: Sequence[KindSpec]) -> int:
    """Connections the client keeps open: one watch per kind, and room for the list calls and the
    provenance reconciler. The client's default (5 per CPU) is 10 on a two-CPU node: fewer than the
    watches, and each watch that ended would drop its connection ("Connection pool is full")."""
    return max(default, len(kinds) + 4)


def _json_body(response: Any) -> dict[str, Any]:
    """A list response read without the client's models (`_preload_content=False`: the urllib3
    response). Building a V1Node and turning it back into JSON costs 1-3 ms a node, twenty times
    the JSON; the projection keeps nothing the models would check."""
    try:
        body = json.loads(response.data)
    finally:
        response.release_conn()
    return body if isinstance(body, dict) else {}


def _contents(objects: dict[tuple[str, str], Resource]) -> dict[tuple[str, str], Any]:
    return {key: resource.obj for key, resource in objects.items()}


def _items_and_metadata(page: Any) -> tuple[list[Any], dict[str, Any]]:
    if isinstance(page, dict):  # custom objects come back as JSON dicts
        items = page.get("items") or []
        metadata = page.get("metadata") or {}
        return list(items), dict(metadata)
    metadata = page.metadata
    return list(page.items or []), {
        "continue": getattr(metadata, "_continue", None) if metadata else None,
        "resourceVersion": metadata.resource_version if metadata else None,
    }
