"""Through the real server: `gpupolicy serve` (uvicorn over TLS, certificates from trustme), called
with httpx the way the API server calls it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import trustme

from gpupolicy.cli.main import build_parser, main
from gpupolicy.provenance.locations import DB_ENV
from tests.webhook.fake_apiserver import FakeApiServer
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import (
    REPO,
    ServerProcess,
    client_context,
    free_port,
    start_server,
    wait_for_replay,
    write_certificate,
    write_kubeconfig,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
JSON_HEADERS = {"content-type": "application/json"}


def broken(obj: dict[str, object] | None = None) -> dict[str, object]:
    obj = obj or gpu_deployment()
    container = obj["spec"]["template"]["spec"]["containers"][0]  # type: ignore[index]
    container["resources"]["requests"]["nvidia.com/gpu"] = "0.5"
    container["securityContext"]["privileged"] = True
    return obj


PROVENANCE_API_PORT = free_port()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """No Kubernetes API (a laptop): the inventory is unavailable; SQLite provenance store, its
    API on a port of its own."""
    process = start_server(
        tmp_path_factory.mktemp("server"), "--no-cluster", "--provenance-api-port", str(PROVENANCE_API_PORT)
    )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as http:
        yield http


def validate(client: httpx.Client, body: object) -> dict[str, object]:
    response = client.post("/validate", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    answer: dict[str, object] = response.json()["response"]
    return answer


def test_refuses_to_start_without_tls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--port", "1"]) == 2
    assert "--tls-cert and --tls-key" in capsys.readouterr().err
    assert main(["serve", "--port", "1", "--tls-cert", "x.crt"]) == 2
    assert "both --tls-cert and --tls-key" in capsys.readouterr().err


def test_refuses_a_database_timeout_that_is_not_positive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--insecure-dev", "--port", "1", "--db-timeout", "0"]) == 2
    assert "--db-timeout must be a positive number of seconds" in capsys.readouterr().err


def test_admits_creates_updates_and_dry_runs_over_tls(server: ServerProcess, client: httpx.Client) -> None:
    # generateName with an empty name, as `kubectl create` of a generateName manifest sends it
    created = gpu_deployment()
    del created["metadata"]["name"]
    del created["metadata"]["uid"]
    created["metadata"]["generateName"] = "llm-server-"
    create = admission_review(created, name="")
    answer = validate(client, create)
    assert answer["uid"] == create["request"]["uid"] and answer["allowed"] is True
    annotations = answer["auditAnnotations"]
    assert isinstance(annotations, dict) and annotations["policy-hash"].startswith("sha256:")
    assert annotations["experiment"] == "day29-experiment"
    # the cluster could not be asked: said so, not passed silently
    warnings = answer["warnings"]
    assert isinstance(warnings, list) and any(w.startswith("GP302 info") for w in warnings)

    update = admission_review(gpu_deployment(), operation="UPDATE", old_object=broken())
    assert validate(client, update)["allowed"] is True
    dry = admission_review(gpu_deployment(), dry_run=True)
    assert validate(client, dry)["allowed"] is True
    denied = validate(client, admission_review(broken()))
    assert denied["allowed"] is False
    status = denied["status"]
    assert isinstance(status, dict) and status["code"] == 403
    assert "GP102" in status["message"] and "GP601" in status["message"]

    # The replayer's process runs at a lower priority and starts beside the server: on a busy
    # machine its first replay may come later than a read waits for it (2 s; that wait is
    # tests/provenance/test_journal.py's). Here the records themselves are under test.
    wait_for_replay(server, seconds=60)
    with httpx.Client(
        base_url=f"https://127.0.0.1:{PROVENANCE_API_PORT}", verify=client_context(server.ca), timeout=10
    ) as provenance_api:
        recorded = provenance_api.get("/provenance", params={"limit": 100}).json()
    uids = {item["uid"] for item in recorded["items"]}
    assert create["request"]["uid"] in uids and update["request"]["uid"] in uids
    assert dry["request"]["uid"] not in uids  # sideEffects: NoneOnDryRun


def test_the_admission_port_does_not_serve_the_provenance_records(client: httpx.Client) -> None:
    validate(client, admission_review(gpu_deployment()))
    assert client.get("/provenance").status_code == 404
    assert client.get("/provenance/anything").status_code == 404


def test_the_provenance_api_is_off_unless_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_parser().parse_args(["serve"]).provenance_api_port is None
    base = ["serve", "--insecure-dev", "--no-cluster", "--port", "1", "--data-dir", str(tmp_path)]
    assert main([*base, "--no-provenance", "--provenance-api-port", "2"]) == 2
    assert "not with --no-provenance" in capsys.readouterr().err
    assert main([*base, "--provenance-api-port", "1"]) == 2
    assert "must not be the admission port" in capsys.readouterr().err
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main([*base, "--provenance-api-port", str(port)]) == 2
    assert "cannot listen on --provenance-api-port" in capsys.readouterr().err


def test_delete_and_subresources_are_allowed_at_once(client: httpx.Client) -> None:
    delete = admission_review(None, operation="DELETE", old_object=broken())
    assert validate(client, delete) == {"uid": delete["request"]["uid"], "allowed": True}
    scale = admission_review(broken(), operation="UPDATE", sub_resource="scale")
    assert validate(client, scale) == {"uid": scale["request"]["uid"], "allowed": True}


@pytest.mark.parametrize(
    ("content", "status", "words"),
    [
        (b"{not json", 400, "not JSON"),
        (b"\xff\xfe\x00", 400, "not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, 400, "not JSON"),
        (
            json.dumps(
                {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}
            ).encode(),
            400,
            "admission.k8s.io/v1",
        ),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            400,
            "no request",
        ),
        (
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {"operation": "CREATE"},
                }
            ).encode(),
            400,
            "no uid",
        ),
    ],
)
def test_malformed_bodies_get_400_and_the_worker_lives(
    client: httpx.Client, content: bytes, status: int, words: str
) -> None:
    response = client.post("/validate", content=content, headers=JSON_HEADERS)
    assert response.status_code == status
    assert words in response.json()["error"]
    assert validate(client, admission_review(gpu_deployment()))["allowed"] is True


def test_oversized_bodies_get_413_declared_or_chunked(client: httpx.Client) -> None:
    huge = b'{"apiVersion": "' + b"x" * (8 * 1024 * 1024) + b'"}'
    response = client.post("/validate", content=huge, headers=JSON_HEADERS)
    assert response.status_code == 413 and "larger than the limit" in response.json()["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while reading
        for _ in range(9):
            yield b" " * (1024 * 1024)

    response = client.post("/validate", content=chunks(), headers=JSON_HEADERS)
    assert response.status_code == 413
    assert validate(client, admission_review(gpu_deployment()))["allowed"] is True


def test_health_readiness_and_metrics(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 503  # no cluster: serves, but not ready
    detail = ready.json()
    assert detail["policy"]["loaded"] is True and detail["policy"]["digest"].startswith("sha256:")
    assert detail["inventory"]["synced"] is False
    assert detail["inventory"]["kinds"]["PriorityClass"]["state"] == "no-client"
    assert detail["provenance"]["backend"] == "sqlite"
    validate(client, admission_review(broken(), dry_run=True))
    validate(client, admission_review(broken(), dry_run=True))  # the same content: remembered
    client.post("/validate", content=b"nope", headers=JSON_HEADERS)
    metrics = client.get("/metrics").text
    assert 'gpupolicy_decision_cache_total{result="hit"}' in metrics
    assert (
        'gpupolicy_admission_requests_total{decision="denied",dry_run="true",kind="Deployment",mode="enforce"}'
        in metrics
    )
    assert 'gpupolicy_admission_requests_total{decision="invalid"' in metrics
    assert 'gpupolicy_admission_duration_seconds_bucket{le="10.0"}' in metrics
    assert 'gpupolicy_findings_total{rule="GP601",severity="error"}' in metrics
    assert 'gpupolicy_provenance_writes_total{outcome="recorded"}' in metrics
    assert 'gpupolicy_inventory_synced{kind="PriorityClass"} 0.0' in metrics


def test_logs_are_json_with_the_request_uid(server: ServerProcess, client: httpx.Client) -> None:
    body = admission_review(broken())
    validate(client, body)
    uid = body["request"]["uid"]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and uid not in server.logs():
        time.sleep(0.05)
    entries = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    mine = [entry for entry in entries if entry.get("uid") == uid]
    assert len(mine) == 1
    assert mine[0]["decision"] == "denied" and mine[0]["kind"] == "Deployment"
    assert {finding["rule"] for finding in mine[0]["findings"]} >= {"GP102", "GP601"}


def test_ready_once_every_cache_has_synced(tmp_path: Path) -> None:
    fake = FakeApiServer().start()
    try:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake.url)
        process = start_server(tmp_path, "--kubeconfig", str(kubeconfig), "--no-provenance")
        try:
            with process.client() as http:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and http.get("/readyz").status_code != 200:
                    time.sleep(0.1)
                ready = http.get("/readyz").json()
                assert ready["ready"] is True
                assert ready["inventory"]["kinds"]["Canary"]["state"] == "absent"
                assert ready["inventory"]["kinds"]["PriorityClass"]["objects"] == 3
                # the cluster answers: no "could not be verified" findings for a good Deployment
                answer = validate(http, admission_review(gpu_deployment()))
                assert answer["allowed"] is True and "warnings" not in answer
                # a PriorityClass that the cluster does not have is an error now
                obj = gpu_deployment()
                obj["spec"]["template"]["spec"]["priorityClassName"] = "gpu-servng"
                answer = validate(http, admission_review(obj))
                assert answer["allowed"] is False and "GP302" in answer["status"]["message"]  # type: ignore[index]
                metrics = http.get("/metrics").text
                assert 'gpupolicy_inventory_synced{kind="PriorityClass"} 1.0' in metrics
        finally:
            process.stop()
    finally:
        fake.stop()


def test_certificate_rotation_is_picked_up(tmp_path: Path) -> None:
    first_ca, second_ca = trustme.CA(), trustme.CA()
    cert, key = write_certificate(first_ca, tmp_path / "tls")
    process = start_server(
        tmp_path,
        "--no-cluster",
        "--no-provenance",
        "--tls-check-seconds",
        "0.2",
        ca=first_ca,
        cert=(cert, key),
    )
    try:
        new_cert, new_key = write_certificate(second_ca, tmp_path / "next")
        # cert-manager style: new files in place (key first, then chain)
        key.write_bytes(new_key.read_bytes())
        cert.write_bytes(new_cert.read_bytes())
        rotated = ServerProcess(process.process, process.url, second_ca, process.log_path, process.data_dir)
        deadline = time.monotonic() + 15
        served = False
        while time.monotonic() < deadline and not served:
            try:
                with rotated.client() as http:
                    served = http.get("/healthz").status_code == 200
            except httpx.ConnectError:
                time.sleep(0.1)
        assert served, process.logs()
        with pytest.raises(httpx.ConnectError), process.client() as http:  # the old CA no longer matches
            http.get("/healthz")
        assert "TLS certificate reloaded" in process.logs()
    finally:
        process.stop()


def test_serves_when_the_api_server_is_unreachable(tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}")
    process = start_server(tmp_path, "--kubeconfig", str(kubeconfig), "--no-provenance")
    try:
        with process.client() as http:
            deadline = time.monotonic() + 20
            kinds: dict[str, dict[str, object]] = {}
            while time.monotonic() < deadline:
                kinds = http.get("/readyz").json()["inventory"]["kinds"]
                if all(item["state"] == "failed" for item in kinds.values()):
                    break
                time.sleep(0.1)
            assert all(item["state"] == "failed" for item in kinds.values()), kinds
            assert http.get("/readyz").status_code == 503
            answer = validate(http, admission_review(gpu_deployment()))
            assert answer["allowed"] is True
            assert any(w.startswith("GP302 info") for w in answer["warnings"])  # type: ignore[union-attr]
    finally:
        process.stop()


def test_insecure_dev_serves_plain_http(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "gpupolicy", "serve", "--insecure-dev", "--no-cluster", "--no-provenance",
               "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path)]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        answer = None
        while time.monotonic() < deadline and answer is None:
            try:
                answer = httpx.post(
                    f"http://127.0.0.1:{port}/validate", json=admission_review(gpu_deployment())
                )
            except httpx.TransportError:
                time.sleep(0.1)
        assert answer is not None and answer.status_code == 200
        assert answer.json()["response"]["allowed"] is True
    finally:
        process.terminate()
        process.wait(15)


@pytest.mark.parametrize("source", ["file", "environment"])
def test_the_database_url_comes_from_a_file_or_the_environment_not_the_arguments(
    tmp_path: Path, source: str
) -> None:
    secret = "s3cret-in-url"
    port = free_port()  # nothing listens there: the store spools, which is all this test needs
    url = f"postgresql://gpupolicy:{secret}@127.0.0.1:{port}/gpupolicy"
    url_file = tmp_path / "db-url"
    url_file.write_text(url + "\n", encoding="utf-8")
    if source == "file":
        process = start_server(tmp_path, "--no-cluster", "--db-url-file", str(url_file))
    else:
        process = start_server(tmp_path, "--no-cluster", env={DB_ENV: url})
    try:
        with process.client() as client:
            store = client.get("/readyz").json()["provenance"]
        assert store["backend"] == "postgresql" and store["reachable"] is False
        assert store["database"] == f"postgresql+psycopg://gpupolicy:***@127.0.0.1:{port}/gpupolicy"
        arguments = Path(f"/proc/{process.process.pid}/cmdline").read_bytes()
        assert secret.encode() not in arguments
    finally:
        process.stop()
    assert secret not in process.logs()


def test_a_database_url_file_must_hold_one_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n", encoding="utf-8")
    base = ["serve", "--insecure-dev", "--no-cluster", "--port", "1", "--data-dir", str(tmp_path)]
    assert main([*base, "--db-url-file", str(empty)]) == 2
    assert "expected one line holding the database URL" in capsys.readouterr().err
    assert main([*base, "--db-url-file", str(tmp_path / "missing")]) == 2
    assert "--db-url-file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main([*base, "--db", "sqlite:///x.db", "--db-url-file", str(empty)])
    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--data-dir", "/proc/gpupolicy-cannot-be-here"], "cannot open the provenance store"),
        (["--db", "mysql://db/provenance"], "unsupported provenance database"),
        (["--policy", "no-such-policy.yaml"], "no such file"),
    ],
)
def test_unusable_settings_are_usage_errors(tmp_path: Path, args: list[str], words: str) -> None:
    command = [sys.executable, "-m", "gpupolicy", "serve", "--insecure-dev", "--no-cluster",
               "--port", str(free_port()), "--data-dir", str(tmp_path), *args]  # fmt: skip
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and words in result.stderr, result.stderr


def test_a_port_that_cannot_be_bound_is_a_configuration_error(tmp_path: Path) -> None:
    """uvicorn exits 1 when it cannot bind; 1 means findings to a linter's user, so serve says 2."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "gpupolicy", "serve", "--insecure-dev", "--no-cluster",
                   "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path)]  # fmt: skip
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "gpupolicy: could not start the server" in result.stderr
