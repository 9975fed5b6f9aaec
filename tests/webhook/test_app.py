"""The HTTP shell in-process (Starlette's test client): routing, provenance before the answer,
what a failing store does, readiness, TLS reloading, and that the linter never loads the
webhook's dependencies."""

from __future__ import annotations

import json
import logging
import ssl
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import trustme

with warnings.catch_warnings():  # starlette's notice about httpx2; the client still works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from gpupolicy.policy.loading import default_policy
from gpupolicy.webhook.app import WebhookState, create_app
from gpupolicy.webhook.logs import EXCERPT_CHARS, LOGGER, MAX_LOGGED_FINDINGS, JsonFormatter
from gpupolicy.webhook.metrics import MAX_KINDS
from gpupolicy.webhook.recording import Provenance
from gpupolicy.webhook.review import ReviewEngine
from gpupolicy.webhook.tls import ReloadingCertificate
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import REPO, write_certificate
from tests.webhook.test_review import CLUSTER


class MemoryStore:
    """The provenance store's interface, in memory: `record()` returns the id."""

    def __init__(self, *, fail: bool = False) -> None:
        self.records: dict[str, Any] = {}
        self.fail = fail
        self.closed = False

    def record(self, record: Any) -> str:
        if self.fail:
            raise OSError("disk full")
        self.records[record["uid"]] = record
        return str(record["uid"])

    def close(self) -> None:
        self.closed = True


class NotRecordable(ValueError):
    pass


def build_record(
    request: dict[str, Any], obj: dict[str, Any], report: Any, policy: Any, **_: Any
) -> dict[str, Any]:
    return {"uid": request["uid"], "name": obj["metadata"].get("name"), "findings": len(report.findings)}


class Synced:
    def __init__(self, synced: bool) -> None:
        self._synced = synced

    def synced(self) -> bool:
        return self._synced

    def status(self) -> dict[str, dict[str, Any]]:
        return {"PriorityClass": {"state": "synced" if self._synced else "pending", "synced": self._synced}}


def make_client(store: MemoryStore | None = None, *, synced: bool = True) -> TestClient:
    state = WebhookState(
        engine=ReviewEngine.from_policy(default_policy()),
        inventory=CLUSTER,
        inventory_status=Synced(synced),
        provenance=Provenance(store=store, build_record=build_record, not_recordable=NotRecordable)
        if store is not None
        else None,
    )
    return TestClient(create_app(state))


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def client(store: MemoryStore) -> Iterator[TestClient]:
    with make_client(store) as test_client:
        yield test_client


def test_records_admitted_gpu_workloads_before_answering(client: TestClient, store: MemoryStore) -> None:
    body = admission_review(gpu_deployment())
    answer = client.post("/validate", json=body).json()["response"]
    assert answer["allowed"] is True
    assert body["request"]["uid"] in store.records  # already there when the answer arrived
    assert store.records[body["request"]["uid"]]["name"] == "llm-server"


def test_never_records_dry_runs_denials_or_skipped_objects(client: TestClient, store: MemoryStore) -> None:
    dry = admission_review(gpu_deployment(), dry_run=True)
    client.post("/validate", json=dry)
    bad = gpu_deployment()
    bad["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    denied = admission_review(bad)
    assert client.post("/validate", json=denied).json()["response"]["allowed"] is False
    delete = admission_review(None, operation="DELETE", old_object=gpu_deployment())
    client.post("/validate", json=delete)
    assert store.records == {}


def test_a_failing_store_admits_and_counts_the_loss() -> None:
    with make_client(MemoryStore(fail=True)) as test_client:
        answer = test_client.post("/validate", json=admission_review(gpu_deployment())).json()["response"]
        assert answer["allowed"] is True
        assert 'gpupolicy_provenance_writes_total{outcome="failed"} 1.0' in test_client.get("/metrics").text


class SubmitStore(MemoryStore):
    """A store with `submit()`: the future is resolved by another thread, later."""

    def __init__(self) -> None:
        super().__init__()
        self.submitted = 0

    def submit(self, record: Any) -> Future[str]:
        self.submitted += 1
        future: Future[str] = Future()

        def durable() -> None:
            time.sleep(0.05)  # the commit: the route must wait for it, whatever it takes
            self.records[record["uid"]] = record
            future.set_result(str(record["uid"]))

        threading.Thread(target=durable).start()
        return future


def test_the_route_awaits_the_stores_future_before_answering() -> None:
    store = SubmitStore()
    with make_client(store) as test_client:
        body = admission_review(gpu_deployment())
        answer = test_client.post("/validate", json=body).json()["response"]
        assert answer["allowed"] is True
        assert store.submitted == 1 and body["request"]["uid"] in store.records
        assert 'gpupolicy_provenance_writes_total{outcome="recorded"} 1.0' in test_client.get("/metrics").text


def test_a_dead_provenance_writer_admits_and_counts_every_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failure policy for provenance: admit (never block the cluster), log, count."""
    from gpupolicy.provenance import NotRecordable as RealNotRecordable
    from gpupolicy.provenance import build_record as real_build_record
    from gpupolicy.provenance import open_store

    store = open_store(None, spool_dir=tmp_path / "spool", start_replayer=False)

    class Halt(BaseException):
        """Stops the writer thread (a batch's own errors are spooled, not fatal)."""

    def broken(_batch: object) -> None:
        raise Halt("the writer thread was stopped")

    monkeypatch.setattr(store.writer, "_write_batch", broken)
    state = WebhookState(
        engine=ReviewEngine.from_policy(default_policy()),
        inventory=CLUSTER,
        inventory_status=Synced(True),
        provenance=Provenance(store=store, build_record=real_build_record, not_recordable=RealNotRecordable),
    )
    try:
        with TestClient(create_app(state)) as test_client:
            for count in (1, 2):  # the writer dies on the first; the second is refused at submit
                answer = test_client.post("/validate", json=admission_review(gpu_deployment())).json()
                assert answer["response"]["allowed"] is True
                metrics = test_client.get("/metrics").text
                assert f'gpupolicy_provenance_writes_total{{outcome="failed"}} {count}.0' in metrics
            assert test_client.get("/readyz").json()["provenance"]["writer"]["running"] is False
    finally:
        store.close()


def test_readiness_follows_the_inventory() -> None:
    with make_client(synced=True) as ready:
        response = ready.get("/readyz")
        assert response.status_code == 200 and response.json()["ready"] is True
        assert 'gpupolicy_inventory_synced{kind="PriorityClass"} 1.0' in ready.get("/metrics").text
    with make_client(synced=False) as waiting:
        response = waiting.get("/readyz")
        assert response.status_code == 503
        assert response.json()["inventory"]["kinds"]["PriorityClass"]["state"] == "pending"


def test_internal_errors_answer_500_and_the_app_keeps_serving(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpupolicy.webhook.app as app_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug")

    monkeypatch.setattr(app_module, "review", broken)
    response = client.post("/validate", json=admission_review(gpu_deployment()))
    assert response.status_code == 500 and "internal error" in response.json()["error"]
    monkeypatch.undo()
    assert client.post("/validate", json=admission_review(gpu_deployment())).status_code == 200


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "application/yaml"],
)
def test_a_body_that_is_not_declared_json_gets_415(client: TestClient, content_type: str | None) -> None:
    headers = {"content-type": content_type} if content_type is not None else {}
    body = json.dumps(admission_review(gpu_deployment())).encode()
    response = client.post("/validate", content=body, headers=headers)
    assert response.status_code == 415, response.text
    assert "application/json" in response.json()["error"]
    metrics = client.get("/metrics").text
    assert 'gpupolicy_admission_requests_total{decision="unsupported-media-type"' in metrics


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
def test_json_with_or_without_parameters_is_reviewed(client: TestClient, content_type: str) -> None:
    body = json.dumps(admission_review(gpu_deployment())).encode()
    response = client.post("/validate", content=body, headers={"content-type": content_type})
    assert response.status_code == 200 and response.json()["response"]["allowed"] is True


def admission_log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        JsonFormatter().format(record)
        for record in caplog.records
        if record.getMessage() == "admission reviewed"
    ]


def test_a_huge_key_is_an_excerpt_in_the_log_not_a_3_mb_line(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    obj = gpu_deployment()
    huge_name = "HF_TOKEN_" + "k" * 3_000_000  # a credential-shaped env name: GP612 names it
    obj["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": huge_name, "value": "hf_" + "x" * 34}]
    body = admission_review(obj)
    body["request"]["uid"] = "u" * 100_000  # a client other than the API server may send anything
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert client.post("/validate", json=body).status_code == 200
    [line] = admission_log_lines(caplog)
    assert len(line) < 16_000, len(line)
    entry = json.loads(line)
    assert len(entry["uid"]) == EXCERPT_CHARS and entry["uid"].endswith("…")
    about_key = [finding for finding in entry["findings"] if "kkkk" in finding["message"]]
    assert about_key, entry["findings"]
    for finding in about_key:
        assert len(finding["message"]) <= EXCERPT_CHARS and len(finding["path"]) <= EXCERPT_CHARS


def test_one_log_line_lists_at_most_the_first_findings_and_counts_the_rest(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    obj = gpu_deployment()
    template = obj["spec"]["template"]["spec"]
    first = template["containers"][0]
    template["containers"] = [
        {**first, "name": f"c{index}", "securityContext": {"privileged": True}} for index in range(40)
    ]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        client.post("/validate", json=admission_review(obj))
    entry = json.loads(admission_log_lines(caplog)[0])
    assert entry["findings_total"] > MAX_LOGGED_FINDINGS
    assert len(entry["findings"]) == MAX_LOGGED_FINDINGS


def test_request_kinds_are_bounded_as_metric_labels(client: TestClient) -> None:
    for index in range(MAX_KINDS + 20):
        obj = {
            "apiVersion": "example.com/v1",
            "kind": f"Kind{index}",
            "metadata": {"name": "x", "namespace": "a"},
        }
        client.post("/validate", json=admission_review(obj))
    odd = {"apiVersion": "v1", "kind": "x" * 10_000, "metadata": {"name": "x", "namespace": "a"}}
    client.post("/validate", json=admission_review(odd))
    metrics = client.get("/metrics").text
    kinds = {
        line.split('kind="')[1].split('"')[0]
        for line in metrics.splitlines()
        if line.startswith("gpupolicy_admission_requests_total{")
    }
    assert len(kinds) <= MAX_KINDS + 1 and "other" in kinds
    assert all(len(kind) <= 63 for kind in kinds)


def _peer_issuer(context: ssl.SSLContext, ca: trustme.CA) -> bool:
    """Whether a client trusting only `ca` accepts what `context` serves (memory BIOs, no socket)."""
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    server_in, server_out, client_in, client_out = (
        ssl.MemoryBIO(),
        ssl.MemoryBIO(),
        ssl.MemoryBIO(),
        ssl.MemoryBIO(),
    )
    server = context.wrap_bio(server_in, server_out, server_side=True)
    client = client_context.wrap_bio(client_in, client_out, server_hostname="127.0.0.1")
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLCertVerificationError:
                return False
        server_in.write(client_out.read())
        client_in.write(server_out.read())
        try:
            client.do_handshake()
            return True
        except ssl.SSLWantReadError:
            continue
        except ssl.SSLCertVerificationError:
            return False
    return False


def test_certificate_reload_refuses_a_half_written_pair(tmp_path: Path) -> None:
    old_ca, new_ca = trustme.CA(), trustme.CA()
    cert, key = write_certificate(old_ca, tmp_path / "tls")
    reloading = ReloadingCertificate(cert, key)
    assert _peer_issuer(reloading.context, old_ca)
    assert not reloading.reload_if_changed()  # nothing changed
    new_cert, new_key = write_certificate(new_ca, tmp_path / "next")
    cert.write_bytes(new_cert.read_bytes())  # the chain first: it no longer matches the key
    assert not reloading.reload_if_changed()
    assert _peer_issuer(reloading.context, old_ca)  # still serving the old pair
    key.write_bytes(new_key.read_bytes())
    assert reloading.reload_if_changed() and reloading.reloads == 1
    assert _peer_issuer(reloading.context, new_ca) and not _peer_issuer(reloading.context, old_ca)


def test_the_linter_never_imports_the_webhook_dependencies(tmp_path: Path) -> None:
    manifest = tmp_path / "ok.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n", encoding="utf-8"
    )
    code = (
        "import sys; from gpupolicy.cli.main import main; "
        f"code = main(['lint', '--no-repo-policy', {str(manifest)!r}]); "
        "loaded = [m for m in ('fastapi', 'uvicorn', 'starlette', 'kubernetes', 'prometheus_client', 'sqlalchemy') if m in sys.modules]; "
        "print(loaded); sys.exit(0 if not loaded else 3)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_decision_cache_results_are_counted_and_shown_only_once_seen() -> None:
    """`count_decision_cache` keeps the children it made: a result never seen is no line of
    /metrics, as with `labels()` called each time."""
    from prometheus_client import generate_latest

    from gpupolicy.webhook.metrics import WebhookMetrics

    metrics = WebhookMetrics()
    assert b"gpupolicy_decision_cache_total{" not in generate_latest(metrics.registry)
    for remembered in (False, True, True):
        metrics.count_decision_cache(remembered=remembered)
    text = generate_latest(metrics.registry).decode()
    assert 'gpupolicy_decision_cache_total{result="miss"} 1.0' in text
    assert 'gpupolicy_decision_cache_total{result="hit"} 2.0' in text


def stack_calls(app: Any) -> list[tuple[str, str]]:
    """The requests that go through the application's middleware stack from now on."""
    stacked: list[tuple[str, str]] = []
    stack = app.middleware_stack

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        stacked.append((scope["method"], scope["path"]))
        await stack(scope, receive, send)

    app.middleware_stack = counted
    return stacked


def test_plain_routes_skip_the_middleware_stack_and_the_rest_takes_it(client: TestClient) -> None:
    """`/validate`, `/healthz` ... are called straight from the application; another method on
    their path (405) and an unknown path (404) go through FastAPI's middleware and router."""
    stacked = stack_calls(client.app)
    assert client.post("/validate", json=admission_review(gpu_deployment())).status_code == 200
    assert client.get("/healthz").json() == {"status": "ok"}
    assert stacked == []
    assert client.get("/validate").status_code == 405
    missing = client.post("/nowhere", json={})
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
    assert stacked == [("GET", "/validate"), ("POST", "/nowhere")]


def test_with_fastapi_telemetry_on_every_request_takes_the_stack(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether FastAPI traces requests (an OpenTelemetry provider set) is asked once a second:
    once it says yes, `/validate` goes FastAPI's way, traced."""
    app: Any = client.app
    stacked = stack_calls(app)
    assert client.post("/validate", json=admission_review(gpu_deployment())).status_code == 200
    monkeypatch.setattr(app._native_telemetry, "enabled", lambda: True)
    assert client.post("/validate", json=admission_review(gpu_deployment())).status_code == 200
    assert stacked == []  # within the second: the answer asked before
    monkeypatch.setattr(app, "_telemetry_checked_until", float("-inf"))  # the second has passed
    assert client.post("/validate", json=admission_review(gpu_deployment())).status_code == 200
    assert stacked == [("POST", "/validate")]


def test_added_middleware_still_sees_the_plain_routes() -> None:
    from starlette.middleware.base import BaseHTTPMiddleware

    async def tag(request: Any, call_next: Any) -> Any:
        response = await call_next(request)
        response.headers["x-seen"] = "yes"
        return response

    client = make_client()
    client.app.add_middleware(BaseHTTPMiddleware, dispatch=tag)  # type: ignore[attr-defined]
    with client:
        response = client.post("/validate", json=admission_review(gpu_deployment()))
    assert response.status_code == 200 and response.headers["x-seen"] == "yes"


def test_the_body_is_read_from_its_messages_to_the_end_or_the_limit() -> None:
    """`/validate` reads the ASGI messages itself: chunks joined, a total past the limit is
    None, a client gone before the last chunk is `ClientDisconnect` (answered 408)."""
    import asyncio

    from starlette.requests import ClientDisconnect, Request

    from gpupolicy.webhook.app import _read_body

    def request(*messages: dict[str, Any]) -> Request:
        queue = list(messages)

        async def receive() -> dict[str, Any]:
            return queue.pop(0)

        return Request({"type": "http", "headers": []}, receive)

    def more(body: bytes) -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": True}

    last = {"type": "http.request", "body": b"c"}
    assert asyncio.run(_read_body(request(more(b"a"), more(b""), more(b"b"), last), 10, None)) == b"abc"
    assert asyncio.run(_read_body(request(more(b"aaaaaa"), more(b"bbbbbb")), 10, None)) is None
    assert asyncio.run(_read_body(request(last), 10, "11")) is None  # declared past the limit
    with pytest.raises(ClientDisconnect):
        asyncio.run(_read_body(request(more(b"a"), {"type": "http.disconnect"}), 10, None))
