"""Slow clients against the real server over TLS, with raw sockets: a request whose headers or
body trickle in (slowloris), or that stops half-way, is cut off once `--read-timeout` has passed,
and meanwhile the server keeps answering everyone else."""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.webhook.server_process import ServerProcess, client_context, start_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

READ_TIMEOUT = 1.0  # seconds: the server's --read-timeout here
SLACK = 10.0  # a liveness bound on top of it (a loaded machine), not a performance figure
TRICKLE_EVERY = 0.1  # seconds between two bytes of a slow client

REQUEST_LINE = b"POST /validate HTTP/1.1\r\nHost: gpupolicy\r\n"
ENDLESS_HEADERS = b"X-Slow: a\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = start_server(
        tmp_path_factory.mktemp("slow"),
        "--no-cluster",
        "--no-provenance",
        "--read-timeout",
        str(READ_TIMEOUT),
    )
    try:
        yield process
    finally:
        process.stop()


def connect(server: ServerProcess) -> ssl.SSLSocket:
    address = urlsplit(server.url)
    raw = socket.create_connection((address.hostname or "127.0.0.1", address.port or 443), timeout=SLACK)
    return client_context(server.ca).wrap_socket(raw, server_hostname="127.0.0.1")


def closed_by_server(sock: ssl.SSLSocket) -> bool:
    """Whether the server has closed the connection (without waiting more than TRICKLE_EVERY)."""
    sock.settimeout(TRICKLE_EVERY)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except (ssl.SSLError, OSError):
        return True


def trickle(sock: ssl.SSLSocket, data: bytes) -> float | None:
    """Send `data` over and over, one byte every TRICKLE_EVERY seconds, until the server closes
    the connection: returns how long that took, or None when it kept it open past the bound."""
    started = time.monotonic()
    for byte in itertools.cycle(data):
        elapsed = time.monotonic() - started
        if elapsed > READ_TIMEOUT + SLACK:
            return None
        try:
            sock.sendall(bytes([byte]))
        except (ssl.SSLError, OSError):
            return elapsed
        if closed_by_server(sock):
            return time.monotonic() - started
    raise AssertionError("unreachable")


def assert_cut_off_in_time(elapsed: float | None) -> None:
    assert elapsed is not None, "the server kept a trickling connection open"
    assert READ_TIMEOUT * 0.9 <= elapsed <= READ_TIMEOUT + SLACK, elapsed


def test_headers_sent_slowly_are_cut_off_after_the_read_timeout(server: ServerProcess) -> None:
    with contextlib.closing(connect(server)) as sock:
        sock.sendall(REQUEST_LINE)
        assert_cut_off_in_time(trickle(sock, ENDLESS_HEADERS))
    assert "request not received in time" in server.logs()


def test_a_body_sent_slowly_is_cut_off_after_the_read_timeout(server: ServerProcess) -> None:
    with contextlib.closing(connect(server)) as sock:
        sock.sendall(REQUEST_LINE + b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        assert_cut_off_in_time(trickle(sock, b" "))


def test_a_slow_second_request_on_a_kept_alive_connection_is_cut_off(server: ServerProcess) -> None:
    with contextlib.closing(connect(server)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: gpupolicy\r\n\r\n")
        sock.settimeout(SLACK)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert_cut_off_in_time(trickle(sock, ENDLESS_HEADERS))


def test_many_half_sent_requests_are_all_closed_and_others_are_served_meanwhile(
    server: ServerProcess,
) -> None:
    stalled = [connect(server) for _ in range(100)]
    try:
        for sock in stalled:
            sock.sendall(REQUEST_LINE)  # and nothing more: before, held open for ever
        with server.client() as client:
            assert client.get("/healthz").status_code == 200
        deadline = time.monotonic() + READ_TIMEOUT + SLACK
        open_ = list(stalled)
        while open_ and time.monotonic() < deadline:
            open_ = [sock for sock in open_ if not closed_by_server(sock)]
        assert not open_, f"{len(open_)} of {len(stalled)} stalled connections still open"
        with server.client() as client:
            assert client.get("/healthz").status_code == 200
    finally:
        for sock in stalled:
            sock.close()


def test_a_read_timeout_that_is_not_positive_is_refused(tmp_path: Path) -> None:
    from gpupolicy.cli.main import main

    assert main(["serve", "--insecure-dev", "--port", "1", "--read-timeout", "0"]) == 2
