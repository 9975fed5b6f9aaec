"""A fake Kubernetes API server speaking the real list and watch wire format over HTTP.

List responses are the recorded `*List` documents under `data/` (paged with `limit` and
`continue` as the API server does). `?watch=true` answers with a chunked stream of
newline-delimited JSON events (`{"type": "ADDED", "object": {...}}`) after the requested
resourceVersion; a resourceVersion older than the resource's compaction point gets an
`ERROR` event carrying a `Status` with code 410, as a real server sends when its watch cache
no longer holds that version. Groups that are not served get a 404 `Status`; paths marked
forbidden get a 403 `Status`.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

DATA = Path(__file__).resolve().parent / "data"

# path of the all-namespaces list -> recorded file
PATHS = {
    "/apis/scheduling.k8s.io/v1/priorityclasses": "priorityclasses.json",
    "/apis/policy/v1/poddisruptionbudgets": "poddisruptionbudgets.json",
    "/apis/autoscaling/v2/horizontalpodautoscalers": "horizontalpodautoscalers.json",
    "/api/v1/configmaps": "configmaps.json",
    "/api/v1/namespaces": "namespaces.json",
    "/apis/networking.k8s.io/v1/networkpolicies": "networkpolicies.json",
    "/apis/node.k8s.io/v1/runtimeclasses": "runtimeclasses.json",
    "/apis/argoproj.io/v1alpha1/analysistemplates": "analysistemplates.json",
    "/apis/argoproj.io/v1alpha1/clusteranalysistemplates": "clusteranalysistemplates.json",
}
# Served empty unless a test loads a recorded cluster (`load_cluster`).
EMPTY = {
    "/api/v1/nodes": ("NodeList", "v1"),
    "/api/v1/resourcequotas": ("ResourceQuotaList", "v1"),
}
CLUSTER_DATA = DATA.parent.parent / "data" / "cluster"
# Where the API server lists a recorded object of these kinds (the group's version in its apiVersion).
KIND_PATHS = {
    "Node": "/api/v1/nodes",
    "ResourceQuota": "/api/v1/resourcequotas",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "RuntimeClass": "/apis/node.k8s.io/v1/runtimeclasses",
    "DeviceClass": "/apis/{apiVersion}/deviceclasses",
    "WorkloadPriorityClass": "/apis/{apiVersion}/workloadpriorityclasses",
}
CUSTOM_GROUPS = ("argoproj.io", "flagger.app", "kueue.x-k8s.io")


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


@dataclass
class Collection:
    list_kind: str
    api_version: str
    items: dict[tuple[str, str], dict[str, Any]]
    events: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    compacted_before: int = 0  # watches from an older resourceVersion get 410 Gone
    forbidden: bool = False
    generation: int = 0  # bumped by expire(): open watches end with 410


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata") or {}
    return (str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


class FakeApiServer:
    def __init__(self, *, absent_groups: tuple[str, ...] = ("flagger.app",)) -> None:
        self.collections: dict[str, Collection] = {}
        self.objects: dict[str, dict[str, Any]] = {}  # namespaced objects served by GET, by path
        self.absent_groups = absent_groups
        self.resource_version = 1000
        self.requests: list[str] = []
        self.condition = threading.Condition()
        for path, file in PATHS.items():
            recorded = json.loads((DATA / file).read_text(encoding="utf-8"))
            self.collections[path] = Collection(
                list_kind=recorded["kind"],
                api_version=recorded["apiVersion"],
                items={_key(item): item for item in recorded["items"]},
            )
        for path, (list_kind, api_version) in EMPTY.items():
            self.collections[path] = Collection(list_kind=list_kind, api_version=api_version, items={})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._stopping = False

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.condition:
            self._stopping = True
            self.condition.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def load_cluster(self, name: str, kinds: tuple[str, ...] = ("Node",)) -> list[dict[str, Any]]:
        """Serve the objects of `kinds` from a recorded cluster (tests/data/cluster/<name>, the
        output of `kubectl get ... -o yaml|json`) in place of what was served; returns them."""
        text = (CLUSTER_DATA / name).read_text(encoding="utf-8")
        loaded = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
        objects = [item for item in loaded["items"] if item.get("kind") in kinds]
        for kind in kinds:
            for path in {self._path_of(item) for item in objects if item["kind"] == kind}:
                api_version = (
                    path.removeprefix("/apis/").rsplit("/", 1)[0] if path.startswith("/apis/") else "v1"
                )
                self.collections[path] = Collection(
                    list_kind=f"{kind}List",
                    api_version=api_version,
                    items={_key(item): item for item in objects if self._path_of(item) == path},
                )
        return objects

    @staticmethod
    def _path_of(obj: dict[str, Any]) -> str:
        return KIND_PATHS[obj["kind"]].format(apiVersion=obj.get("apiVersion", ""))

    # -- what a test does to the "cluster" -------------------------------------------------------
    def put_object(self, obj: dict[str, Any]) -> str:
        """Serve `obj` (namespaced, of a built-in API group) at its path to GET; returns the path."""
        group_version = obj["apiVersion"]
        root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        metadata = obj["metadata"]
        plural = obj["kind"].lower() + "s"
        path = f"{root}/namespaces/{metadata['namespace']}/{plural}/{metadata['name']}"
        self.objects[path] = obj
        return path

    def emit(self, path: str, event_type: str, obj: dict[str, Any]) -> int:
        """Change an object and queue the watch event (objects in events carry kind and apiVersion)."""
        with self.condition:
            self.resource_version += 1
            version = self.resource_version
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {})["resourceVersion"] = str(version)
            collection = self.collections[path]
            if event_type == "DELETED":
                collection.items.pop(_key(obj), None)
            else:
                collection.items[_key(obj)] = obj
            collection.events.append((version, event_type, obj))
            self.condition.notify_all()
            return version

    def expire(self, path: str) -> None:
        """Compact history: open watches end with an ERROR 410, and so do watches resumed from
        any version older than the current one (a fresh list gets the current one)."""
        with self.condition:
            collection = self.collections[path]
            collection.compacted_before = self.resource_version
            collection.generation += 1
            self.condition.notify_all()

    def forbid(self, path: str) -> None:
        self.collections[path].forbidden = True

    def count(self, path: str, *, watch: bool) -> int:
        marker = "watch=true" if watch else ""
        return sum(
            1
            for line in list(self.requests)
            if line.split("?")[0] == path and (marker in line if watch else "watch=true" not in line)
        )

    # -- HTTP ------------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # a response in several writes must not wait for a delayed ACK
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _json(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.requests.append(self.path)
                parts = urlsplit(self.path)
                query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
                group = parts.path.split("/")[2] if parts.path.startswith("/apis/") else ""
                if group in fake.absent_groups:
                    self._json(
                        404, status(404, "NotFound", "the server could not find the requested resource")
                    )
                    return
                single = fake.objects.get(parts.path)
                if single is not None:
                    self._json(200, single)
                    return
                collection = fake.collections.get(parts.path)
                if collection is None:
                    self._json(
                        404, status(404, "NotFound", "the server could not find the requested resource")
                    )
                    return
                if collection.forbidden:
                    resource = parts.path.rsplit("/", 1)[-1]
                    self._json(
                        403,
                        status(
                            403,
                            "Forbidden",
                            f'{resource} is forbidden: User "system:serviceaccount:gpupolicy:gpupolicy" '
                            f'cannot list resource "{resource}" at the cluster scope',
                        ),
                    )
                    return
                if query.get("watch") in ("true", "1"):
                    self._watch(collection, query)
                else:
                    self._list(collection, query)

            def _list(self, collection: Collection, query: dict[str, str]) -> None:
                with fake.condition:
                    items = sorted(collection.items.values(), key=_key)
                    version = fake.resource_version
                start = int(query.get("continue") or 0)
                limit = int(query.get("limit") or 0) or len(items) or 1
                page = items[start : start + limit]
                more = start + limit < len(items)
                custom = collection.api_version.split("/")[0] in CUSTOM_GROUPS
                body = {
                    "kind": collection.list_kind,
                    "apiVersion": collection.api_version,
                    "metadata": {
                        "resourceVersion": str(version),
                        **({"continue": str(start + limit)} if more else {}),
                    },
                    # Built-in list items carry no kind/apiVersion; custom resources' items do.
                    "items": [
                        item if custom else {k: v for k, v in item.items() if k not in ("kind", "apiVersion")}
                        for item in page
                    ],
                }
                self._json(200, body)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _watch(self, collection: Collection, query: dict[str, str]) -> None:
                since = int(query.get("resourceVersion") or 0)
                deadline = time.monotonic() + float(query.get("timeoutSeconds") or 30)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                generation = collection.generation
                try:
                    if since < collection.compacted_before:
                        self._gone(since)
                        return
                    while True:
                        with fake.condition:
                            pending = [event for event in collection.events if event[0] > since]
                            if not pending:
                                remaining = deadline - time.monotonic()
                                if remaining <= 0 or fake._stopping:
                                    break
                                if collection.generation != generation:
                                    self._gone(since)
                                    return
                                fake.condition.wait(min(remaining, 0.2))
                                continue
                        for version, event_type, obj in pending:
                            line = json.dumps({"type": event_type, "object": obj}) + "\n"
                            self._chunk(line.encode())
                            since = version
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _gone(self, since: int) -> None:
                error = status(410, "Expired", f"too old resource version: {since} ({fake.resource_version})")
                self._chunk((json.dumps({"type": "ERROR", "object": error}) + "\n").encode())
                self.wfile.write(b"0\r\n\r\n")

        return Handler
