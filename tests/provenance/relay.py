"""A TCP relay between the store and the test PostgreSQL server, for scripting network faults:

- `relaying.clear()` freezes it: connections stay open and the client's kernel still
  acknowledges every packet, so only a timeout of the client itself can notice (a server
  process that hangs, a stuck load balancer); `relaying.set()` resumes;
- `refuse()` resets every connection and closes the port (a server that is down or restarting:
  new connections are refused), `listen_again()` reopens the same port;
- `reset_on(matches, forward=…)` resets the next connection whose client sends a packet that
  `matches` (a server that crashes mid-statement): before the packet reaches the server, or
  after the server has run it and answered (the answer is lost: the client cannot know whether
  it committed).

The test server speaks PostgreSQL's protocol in the clear (`ssl = off`): a packet starts with
its message type, https://www.postgresql.org/docs/current/protocol-message-formats.html — `Q`
a simple query (BEGIN, COMMIT, the pool's ping), `P`/`B` parse and bind (the rows of an
`executemany`).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

POLL = 0.05  # seconds: how often the relay's threads look at their flags


def _reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN (SO_LINGER on, zero seconds)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class _Trap:
    def __init__(self, matches: Callable[[bytes], bool], *, forward: bool) -> None:
        self.matches = matches
        self.forward = forward
        self.sprung = threading.Event()


class DatabaseRelay:
    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.relaying = threading.Event()
        self.relaying.set()
        self.accepted = 0  # client connections relayed so far
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._connections: list[tuple[socket.socket, socket.socket, threading.Event]] = []
        self._lock = threading.Lock()
        self._trap: _Trap | None = None
        self.listener: socket.socket | None = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])

    def __enter__(self) -> DatabaseRelay:
        self._spawn(self._accept, self.listener)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self.relaying.set()
        if self.listener is not None:
            self.listener.close()
        with self._lock:
            for client, upstream, _kill in self._connections:
                for sock in (client, upstream):
                    with contextlib.suppress(OSError):
                        sock.close()
        for thread in self._threads:
            thread.join(5)

    # -- faults ------------------------------------------------------------------------------
    def refuse(self) -> None:
        """Reset every relayed connection and stop listening: connecting is refused."""
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()
        self.reset_all()

    def listen_again(self) -> None:
        """Accept connections on the same port again (SO_REUSEADDR: create_server sets it)."""
        assert self.listener is None, "the relay is listening already"
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self._spawn(self._accept, self.listener)

    def reset_all(self) -> None:
        with self._lock:
            for _client, _upstream, kill in self._connections:
                kill.set()

    def reset_on(self, matches: Callable[[bytes], bool], *, forward: bool) -> threading.Event:
        """Arm a one-shot trap; the event is set once it has reset a connection."""
        self._trap = _Trap(matches, forward=forward)
        return self._trap.sprung

    # -- relaying ----------------------------------------------------------------------------
    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self, listener: socket.socket) -> None:
        listener.settimeout(POLL)  # a close() from another thread does not wake accept()
        while not self._stop.is_set() and self.listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            self.accepted += 1
            upstream = socket.create_connection(self.target)
            kill = threading.Event()
            with self._lock:
                self._connections.append((client, upstream, kill))
            self._spawn(self._relay, client, upstream, kill)

    def _relay(self, client: socket.socket, upstream: socket.socket, kill: threading.Event) -> None:
        peers = {client: upstream, upstream: client}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while not self._stop.is_set():
                if kill.is_set():
                    _reset(client)
                    _reset(upstream)
                    return
                if not self.relaying.wait(POLL):
                    continue
                for key, _ in selector.select(POLL):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = source.recv(65536)
                        if not data:
                            return
                        if source is client and self._spring(data, client, upstream):
                            return
                        peers[source].sendall(data)
                    except OSError:
                        return

    def _spring(self, data: bytes, client: socket.socket, upstream: socket.socket) -> bool:
        """Reset this connection when `data` springs the armed trap (True: it did)."""
        trap = self._trap
        if trap is None or not trap.matches(data):
            return False
        with self._lock:
            if self._trap is not trap:
                return False  # another connection took it
            self._trap = None
        if trap.forward:
            # Let the server run the statement and answer, then lose the answer.
            upstream.sendall(data)
            upstream.settimeout(10)
            with contextlib.suppress(OSError):
                upstream.recv(65536)
        _reset(client)
        _reset(upstream)
        trap.sprung.set()
        return True
