"""A deadline for reading each request: a client that sends its headers or body slowly (slowloris)
is disconnected, instead of holding a connection for as long as it trickles bytes.

uvicorn bounds only the idle time between requests (`timeout_keep_alive`, armed after a
response and cancelled by any byte received), so a client that sends one byte every few seconds
keeps its connection forever; thousands of them exhaust the server's file descriptors and
memory. `ReadDeadlineProtocol` is uvicorn's httptools protocol with one more timer: armed when
the connection is made (after the TLS handshake, which asyncio bounds at 60 s) and after each
response, cancelled once the whole request (headers and body) has arrived. When it fires, the
connection is closed; a route still waiting for the body sees the client gone.

The same protocol sends what a response writes within one turn of the event loop in one write
(`OneWritePerTick`: one TLS record and one `send()` for the head and the body).

The API server sends each AdmissionReview at once (https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/#request),
so a deadline of a few seconds costs it nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from gpupolicy.webhook.logs import LOGGER, log

DEFAULT_READ_TIMEOUT = 10.0  # seconds, for the headers and the body of one request

_log = logging.getLogger(LOGGER)


class ReadDeadlineProtocol(HttpToolsProtocol):
    read_timeout: float = DEFAULT_READ_TIMEOUT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None

    @classmethod
    def with_timeout(cls, seconds: float) -> type[ReadDeadlineProtocol]:
        """The protocol class to give uvicorn (`Config(http=...)`), with its deadline set."""
        if not seconds > 0:
            raise ValueError(f"the read timeout must be positive, got {seconds}")
        return type(cls.__name__, (cls,), {"read_timeout": seconds})

    def _arm(self) -> None:
        if self._read_deadline is None:
            self._read_deadline = self.loop.call_later(self.read_timeout, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if not self.transport.is_closing():
            client = f"{self.client[0]}:{self.client[1]}" if self.client else None
            log(
                _log,
                logging.WARNING,
                "request not received in time: connection closed",
                client=client,
                timeout_seconds=self.read_timeout,
            )
            self.transport.close()

    # -- uvicorn's protocol callbacks --------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()  # a request on a kept-alive connection whose wait was not timed (see below)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle  # the request's, made just now (its task has not run yet)
        if cycle is not None and cycle.transport is self.transport:
            cycle.transport = OneWritePerTick(self.transport, self.loop)  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Waiting for the next request on this connection. (Bytes of it cancel uvicorn's own
        # keep-alive timer, so only this deadline bounds a next request sent slowly.)
        if not self.transport.is_closing() and not self.pipeline:
            self._arm()


class OneWritePerTick:
    """The connection's transport as one request's response sees it: what is written within one
    turn of the event loop goes out in one write.

    uvicorn writes a response in two calls, the status line and headers, then the body. Over TLS
    each write is a record of its own and a `send()` of its own: two of the three `write` system
    calls of a served `/validate` (strace; the third is its log line). A route that answers at
    once (every route of the webhook's: a `Response` of bytes) writes both in the same turn of
    the loop: they are joined here and sent as one record. Whatever is still held when the turn
    ends (a response that waits between its parts, a `100 Continue`) is sent then, in order;
    closing sends it first."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self._send_held)
        else:
            self._held = None
            self._transport.write(held + data)

    def _send_held(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self._send_held()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:  # anything else uvicorn may ask of a transport
        return getattr(self._transport, name)
