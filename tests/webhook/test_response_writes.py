"""A response's writes within one turn of the event loop go out as one (read_deadline.py,
`OneWritePerTick`): over TLS, one record and one `send()` instead of one for the head and one
for the body."""

from __future__ import annotations

import asyncio
from typing import Any

from gpupolicy.webhook.read_deadline import OneWritePerTick


class Recorded:
    """A transport that keeps what it was asked to write, and whether it was closed."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        assert not self.closing, "written after close"
        self.writes.append(data)

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


def on_a_loop(steps: Any) -> Recorded:
    transport = Recorded()

    async def main() -> None:
        await steps(OneWritePerTick(transport, asyncio.get_running_loop()), transport)

    asyncio.run(main())
    return transport


def test_the_head_and_the_body_written_in_one_turn_are_one_write() -> None:
    async def steps(writes: OneWritePerTick, transport: Recorded) -> None:
        writes.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        writes.write(b"{}")
        assert transport.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
        await asyncio.sleep(0)
        assert len(transport.writes) == 1  # nothing left to send at the turn's end

    on_a_loop(steps)


def test_what_is_held_is_sent_when_the_turn_ends_in_order() -> None:
    async def steps(writes: OneWritePerTick, transport: Recorded) -> None:
        writes.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # a lone write: the client waits for it
        assert transport.writes == []
        await asyncio.sleep(0)
        assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        writes.write(b"head")
        await asyncio.sleep(0.01)  # a response that waits between its parts
        writes.write(b"body")
        writes.write(b"end")
        await asyncio.sleep(0)
        assert transport.writes == [b"HTTP/1.1 100 Continue\r\n\r\n", b"head", b"bodyend"]

    on_a_loop(steps)


def test_closing_sends_what_is_held_first_and_nothing_goes_to_a_closed_transport() -> None:
    async def steps(writes: OneWritePerTick, transport: Recorded) -> None:
        writes.write(b"last")
        writes.close()
        assert transport.writes == [b"last"] and transport.closing
        writes.write(b"late")  # held, then dropped at the turn's end: the connection is gone
        await asyncio.sleep(0)
        assert transport.writes == [b"last"]
        assert writes.is_closing() and writes.get_extra_info("peername") == ("127.0.0.1", 1)

    on_a_loop(steps)
