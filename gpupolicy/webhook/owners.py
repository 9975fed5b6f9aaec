"""What an object's owner declares for it, read from the cluster for the objects controllers make.

A Pod carries its pod template's metadata, not its owner's: the `gpupolicy.io/ignore` annotation
and the `gpupolicy.io/workload-class` label written on a DaemonSet's metadata reach the DaemonSet's
review, not its Pods', and in enforce mode the DaemonSet was admitted while each of its Pods was
denied. So for an object whose controller is one of Kubernetes' own (a ReplicaSet and the
Deployment above it, a DaemonSet, a StatefulSet, a Job and the CronJob above it) and whose
decision has an error (app.py), the webhook reads the controllers' metadata and decides again, the
object inheriting those two keys where it has none of its own.

Inheriting gives a Pod's author nothing they could not write on the Pod: the policy's
`suppressions` settings bind an inherited annotation as they bind the Pod's own (`annotations:
false`, `forbidden`). The owner is read by name and kept only when its uid is the reference's.
Reads are cached by the owner's uid for `ttl` seconds (an annotation changed on the owner is seen
after that) in a cache bounded in bytes, and a read that fails or takes longer than its budget is
no inheritance: the object is judged on its own metadata, as before.
https://kubernetes.io/docs/concepts/overview/working-with-objects/owners-dependents/
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import IGNORE_ANNOTATION, WORKLOAD_CLASS_LABEL
from gpupolicy.kube.owners import controller_of
from gpupolicy.kube.pod_spec import as_mapping
from gpupolicy.webhook.logs import LOGGER, excerpt, log

_log = logging.getLogger(LOGGER)

# What the owner's metadata passes down: the keys that decide a review, never a label a selector
# could match (a PDB's or a Service's), which would change what selects the Pod.
INHERITED_ANNOTATIONS = (IGNORE_ANNOTATION,)
INHERITED_LABELS = (WORKLOAD_CLASS_LABEL,)
# The objects whose controllers copy only a template's metadata, and those controllers: Kubernetes'
# own (apps/v1, batch/v1), read with the typed client (`(API class, read method)`).
READERS: dict[str, tuple[str, str]] = {
    "ReplicaSet": ("AppsV1Api", "read_namespaced_replica_set"),
    "Deployment": ("AppsV1Api", "read_namespaced_deployment"),
    "DaemonSet": ("AppsV1Api", "read_namespaced_daemon_set"),
    "StatefulSet": ("AppsV1Api", "read_namespaced_stateful_set"),
    "Job": ("BatchV1Api", "read_namespaced_job"),
    "CronJob": ("BatchV1Api", "read_namespaced_cron_job"),
}
CONTROLLED_KINDS = frozenset({"Pod", "ReplicaSet", "Job"})
# A controller's name (a DNS subdomain) and a namespace (a DNS label), as the API server accepts
# them: https://kubernetes.io/docs/concepts/overview/working-with-objects/names/
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
MAX_DEPTH = 2  # Pod -> ReplicaSet -> Deployment, Pod -> Job -> CronJob
DEFAULT_TTL_SECONDS = 30.0
DEFAULT_BUDGET_SECONDS = 1.0


class NotRemembered(LookupError):
    """A controller that `inherited(..., read=False)` would have to read."""


@immutable
class Inherited:
    """What an object inherits: labels and annotations it lacks, and whose they are."""

    labels: dict[str, str]
    annotations: dict[str, str]
    owners: tuple[str, ...]  # "DaemonSet gpu-ops/validator", nearest first


@immutable
class _Owner:
    labels: dict[str, str]
    annotations: dict[str, str]
    controller: dict[str, Any] | None  # the owner's own controller reference
    until: float  # monotonic time after which it is read again
    read: bool = True  # False: it could not be read (or was not the reference's object)


def _unread(until: float) -> _Owner:
    """An owner that could not be read: inherits nothing, and stops the walk."""
    return _Owner(labels={}, annotations={}, controller=None, until=until, read=False)


def wants_owner(obj: Mapping[str, Any]) -> bool:
    """Whether `obj` is one a Kubernetes controller made (cheap: its kind and ownerReferences)."""
    if obj.get("kind") not in CONTROLLED_KINDS:
        return False
    controller = controller_of(as_mapping(obj.get("metadata")))
    return controller is not None and controller["kind"] in READERS


class OwnerMetadata:
    """Reads owners through the kubernetes client (`api_client`); thread-safe."""

    def __init__(
        self,
        api_client: Any,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        budget_seconds: float = DEFAULT_BUDGET_SECONDS,
        max_bytes: int = 4 * 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from kubernetes import client as k8s

        self._apis = {name: getattr(k8s, name)(api_client) for name in {api for api, _ in READERS.values()}}
        self._ttl = ttl_seconds
        self._budget = budget_seconds
        self._clock = clock
        self._owners: BoundedCache[str, _Owner] = BoundedCache(max_bytes=max_bytes)
        self.reads = 0

    def inherited(self, obj: Mapping[str, Any], namespace: str, *, read: bool = True) -> Inherited | None:
        """What `obj` inherits from the controllers read (perhaps nothing); None when it lacks no
        key or its controller could not be read. Raises nothing: a failed read is no inheritance.
        With `read=False`, only what is remembered is used, and `NotRemembered` is raised where a
        controller would have to be read (the caller then reads in a thread, off its event loop)."""
        metadata = as_mapping(obj.get("metadata"))
        labels, annotations = as_mapping(metadata.get("labels")), as_mapping(metadata.get("annotations"))
        missing_labels = [key for key in INHERITED_LABELS if key not in labels]
        missing_annotations = [key for key in INHERITED_ANNOTATIONS if key not in annotations]
        if not missing_labels and not missing_annotations:
            return None  # it declares them all itself: nothing to read
        found_labels: dict[str, str] = {}
        found_annotations: dict[str, str] = {}
        owners: list[str] = []
        reference = controller_of(metadata)
        if not _NAMESPACE.fullmatch(namespace):
            return None
        for _ in range(MAX_DEPTH):
            if (
                reference is None
                or reference["kind"] not in READERS
                or not _NAME.fullmatch(reference["name"] or "")
            ):
                break  # only a name the API server could hold is asked for
            owner = self._owner(reference, namespace, read=read)
            if not owner.read:
                break
            owners.append(f"{reference['kind']} {namespace}/{reference['name']}")
            for key in missing_labels:
                if key not in found_labels and key in owner.labels:
                    found_labels[key] = owner.labels[key]
            for key in missing_annotations:
                if key not in found_annotations and key in owner.annotations:
                    found_annotations[key] = owner.annotations[key]
            reference = owner.controller
        if not owners:
            return None
        return Inherited(found_labels, found_annotations, tuple(owners))

    def _owner(self, reference: Mapping[str, Any], namespace: str, *, read: bool) -> _Owner:
        uid = reference["uid"]
        key = uid or f"{reference['kind']}/{namespace}/{reference['name']}"
        cached = self._owners.get(key)
        now = self._clock()
        if cached is not None and now < cached.until:
            return cached
        if not read:
            raise NotRemembered(key)
        owner = self._read(reference, namespace, now)
        self._owners.put(key, owner, replace=True)
        return owner

    def _read(self, reference: Mapping[str, Any], namespace: str, now: float) -> _Owner:
        api, method = READERS[reference["kind"]]
        self.reads += 1
        try:
            response = getattr(self._apis[api], method)(
                reference["name"], namespace, _preload_content=False, _request_timeout=self._budget
            )
            try:
                body = json.loads(response.data)
            finally:
                response.release_conn()
        except Exception as exc:  # any failure (403, 404, a timeout, a bad body) is no inheritance
            log(
                _log,
                logging.WARNING,
                "an owner could not be read: what it declares is not inherited",
                owner=f"{reference['kind']} {namespace}/{reference['name']}",
                error=excerpt(f"{type(exc).__name__}: {exc}"),
            )
            return _unread(now + self._ttl)  # not asked again for every Pod of the owner
        metadata = as_mapping(as_mapping(body).get("metadata"))
        if reference["uid"] and metadata.get("uid") != reference["uid"]:
            return _unread(now + self._ttl)  # another object of that name: not this object's owner
        return _Owner(
            labels=_texts(metadata.get("labels"), INHERITED_LABELS),
            annotations=_texts(metadata.get("annotations"), INHERITED_ANNOTATIONS),
            controller=controller_of(metadata),
            until=now + self._ttl,
        )


def _texts(values: Any, keys: tuple[str, ...]) -> dict[str, str]:
    found = as_mapping(values)
    return {key: found[key] for key in keys if isinstance(found.get(key), str)}
