"""Run `gpupolicy serve` as a real process (uvicorn over TLS, certificates from trustme) and talk
to it with httpx, as the API server would."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import trustme

REPO = Path(__file__).resolve().parents[2]
POSTGRES_URL_ENV = "GPUPOLICY_TEST_POSTGRES_URL"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def write_certificate(ca: trustme.CA, folder: Path, *, name: str = "tls") -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    issued = ca.issue_cert("127.0.0.1", "localhost", "gpupolicy-webhook.gpupolicy.svc")
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    for extra in issued.cert_chain_pems[1:]:
        extra.write_to_path(str(cert), append=True)
    issued.private_key_pem.write_to_path(str(key))
    return cert, key


def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def write_kubeconfig(path: Path, server_url: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: fake, cluster: {{server: '{server_url}'}}}}]\n"
        "users: [{name: fake, user: {}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n"
        "current-context: fake\n",
        encoding="utf-8",
    )
    return path


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    url: str
    ca: trustme.CA
    log_path: Path
    data_dir: Path

    def client(self, **options: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=client_context(self.ca), timeout=10.0, **options)

    def logs(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


def start_server(
    tmp_path: Path,
    *args: str,
    ca: trustme.CA | None = None,
    cert: tuple[Path, Path] | None = None,
    env: dict[str, str] | None = None,
    wait_seconds: float = 30.0,
    module: str = "gpupolicy",
) -> ServerProcess:
    """`python -m <module> serve …` (`module`: gpupolicy, or a test's wrapper of its CLI)."""
    ca = ca or trustme.CA()
    cert_file, key_file = cert or write_certificate(ca, tmp_path / "tls")
    port = free_port()
    data_dir = tmp_path / "data"
    log_path = tmp_path / f"server-{port}.log"
    command = [
        sys.executable, "-m", module, "serve",
        "--host", "127.0.0.1", "--port", str(port),
        "--tls-cert", str(cert_file), "--tls-key", str(key_file),
        "--data-dir", str(data_dir),
        *args,
    ]  # fmt: skip
    # Only what the test gives: not a cluster or a provenance database of the machine's.
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in ("KUBERNETES_SERVICE_HOST", "GPUPOLICY_PROVENANCE_DB")
    }
    environment.update(env or {})
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=environment)
    server = ServerProcess(process, f"https://127.0.0.1:{port}", ca, log_path, data_dir)
    deadline = time.monotonic() + wait_seconds
    with server.client() as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"gpupolicy serve exited with {process.returncode}:\n{server.logs()}")
            try:
                if client.get("/healthz").status_code == 200:
                    return server
            except httpx.TransportError:
                pass
            time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"gpupolicy serve did not answer within {wait_seconds} s:\n{server.logs()}")


def replayer_pid(server: ServerProcess, seconds: float = 60.0) -> int:
    """The process id of the server's provenance replayer, once /readyz reports one."""
    deadline = time.monotonic() + seconds
    with server.client() as client:
        while (pid := client.get("/readyz").json()["provenance"]["replayer"]["pid"]) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no provenance replayer within {seconds} s:\n{server.logs()[-5_000:]}")
            time.sleep(0.1)
    return int(pid)


def wait_for_replayer(server: ServerProcess, seconds: float = 60.0) -> None:
    """Until no provenance replayer holds the server's journal: one whose webhook was killed
    replays what the journal holds, then exits."""
    from gpupolicy.provenance.journal.segments import REPLAYER_LOCK, DirectoryLock

    journal = server.data_dir / "journal"
    lock = DirectoryLock(journal, REPLAYER_LOCK)
    deadline = time.monotonic() + seconds
    while not lock.acquire(blocking=False):
        if time.monotonic() > deadline:
            try:
                status = (journal / "replayer.json").read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                status = f"none ({exc})"
            raise RuntimeError(
                f"a provenance replayer still holds {journal} after {seconds} s; its last status: "
                f"{status}\nthe server's and the replayer's log:\n{server.logs()[-20_000:]}"
            )
        time.sleep(0.1)
    lock.release()


def wait_for_replay(server: ServerProcess, seconds: float = 120.0) -> dict[str, Any]:
    """Until the server's replayer has stored everything its journal holds; its /readyz detail."""
    deadline = time.monotonic() + seconds
    with server.client() as client:
        while True:
            detail: dict[str, Any] = client.get("/readyz").json()["provenance"]
            if detail["journal"]["backlog_bytes"] == 0:
                return detail
            if time.monotonic() > deadline:
                raise RuntimeError(f"the journal was not replayed within {seconds} s: {detail}")
            time.sleep(0.1)
