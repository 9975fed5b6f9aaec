"""Certificate rotation under load, through the real server: clients keep sending admissions on
fresh TLS connections (each request a new handshake) while the certificate and key are
replaced — the way the kubelet updates a mounted Secret (one `..data` symlink swap), and the
way a careless script does (the certificate first, the key a moment later). No request may
fail, and new connections get the new certificate."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import trustme

from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import ServerProcess, client_context, start_server, write_certificate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

CLIENTS = 4
LOOP_SECONDS = 60.0  # the longest the load runs (it stops as soon as the checks are done)


class SecretVolume:
    """A mounted Secret: `tls.crt -> ..data/tls.crt`, `..data -> ..<timestamp>`; an update is a
    new timestamped folder and one rename of `..data` (pkg/volume/util/atomic_writer.go)."""

    def __init__(self, folder: Path, ca: trustme.CA) -> None:
        self.folder = folder
        self.generation = 0
        folder.mkdir(parents=True)
        self.update(ca)
        for name in ("tls.crt", "tls.key"):
            (folder / name).symlink_to(f"..data/{name}")

    def update(self, ca: trustme.CA) -> bytes:
        """Write a new pair issued by `ca`; returns the new certificate (DER)."""
        self.generation += 1
        payload = self.folder / f"..2026_11_30_02_00_{self.generation:02d}.000000001"
        write_certificate(ca, payload)  # payload/tls.crt and payload/tls.key
        temporary = self.folder / "..data_tmp"
        temporary.symlink_to(payload.name)
        temporary.replace(self.folder / "..data")
        return der_of(payload / "tls.crt")

    @property
    def files(self) -> tuple[Path, Path]:
        return self.folder / "tls.crt", self.folder / "tls.key"


def der_of(chain: Path) -> bytes:
    first = chain.read_text().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"
    return ssl.PEM_cert_to_DER_cert(first)


def served_certificate(server: ServerProcess) -> bytes:
    host, port = server.url.removeprefix("https://").split(":")
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        client_context(server.ca).wrap_socket(raw, server_hostname=host) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


@dataclass
class Load:
    """CLIENTS threads sending admissions, each on a new connection, until stopped."""

    server: ServerProcess
    stop: threading.Event = field(default_factory=threading.Event)
    answered: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def run(self) -> None:
        no_keep_alive = httpx.Limits(max_keepalive_connections=0)  # every request: a new handshake
        deadline = time.monotonic() + LOOP_SECONDS
        with self.server.client(limits=no_keep_alive) as http:
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    response = http.post("/validate", json=admission_review(gpu_deployment()))
                    if response.status_code != 200 or response.json()["response"]["allowed"] is not True:
                        self.failures.append(f"HTTP {response.status_code}: {response.text[:200]}")
                except httpx.HTTPError as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                else:
                    self.answered.append(1)

    def __enter__(self) -> Load:
        self.threads = [threading.Thread(target=self.run) for _ in range(CLIENTS)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + 30
        while len(self.answered) < count and time.monotonic() < deadline and not self.failures:
            time.sleep(0.05)


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()  # cert-manager renews with the same issuer: clients trust both pairs


@pytest.fixture
def server(tmp_path: Path, ca: trustme.CA) -> Iterator[tuple[ServerProcess, SecretVolume]]:
    volume = SecretVolume(tmp_path / "tls", ca)
    process = start_server(tmp_path, "--no-cluster", "--tls-check-seconds", "0.2", ca=ca, cert=volume.files)
    try:
        yield process, volume
    finally:
        process.stop()


def wait_until_served(server: ServerProcess, der: bytes) -> bool:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if served_certificate(server) == der:
            return True
        time.sleep(0.1)
    return False


def test_rotating_a_mounted_secret_under_load_fails_no_request(
    server: tuple[ServerProcess, SecretVolume], ca: trustme.CA
) -> None:
    process, volume = server
    first = served_certificate(process)
    with Load(process) as load:
        load.wait_for(40)
        rotated_at = len(load.answered)
        new = volume.update(ca)
        assert wait_until_served(process, new), process.logs()
        load.wait_for(rotated_at + 80)  # and well after it
    assert load.failures == [], load.failures[:5]
    assert len(load.answered) >= rotated_at + 80
    assert new != first and served_certificate(process) == new
    assert process.logs().count("TLS certificate reloaded") == 1


def test_a_rotation_written_file_by_file_keeps_the_old_pair_until_the_new_one_matches(
    server: tuple[ServerProcess, SecretVolume], ca: trustme.CA, tmp_path: Path
) -> None:
    process, volume = server
    first = served_certificate(process)
    cert, key = write_certificate(ca, tmp_path / "next")
    live = volume.folder / "..data"
    with Load(process) as load:
        load.wait_for(40)
        (live / "tls.crt").write_bytes(cert.read_bytes())  # the certificate first …
        deadline = time.monotonic() + 15
        while "do not load yet" not in process.logs() and time.monotonic() < deadline:
            time.sleep(0.1)  # … seen by the server with the old key: refused
        assert served_certificate(process) == first
        half_way = len(load.answered)
        load.wait_for(half_way + 40)
        (live / "tls.key").write_bytes(key.read_bytes())  # … then the key
        assert wait_until_served(process, der_of(cert)), process.logs()
        load.wait_for(len(load.answered) + 40)
    assert load.failures == [], load.failures[:5]
    assert len(load.answered) > half_way + 40
    assert "new TLS files do not load yet; keeping the current certificate" in process.logs()
