"""Structured logs: one JSON object per line, whatever the fields hold."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from pathlib import Path

from gpupolicy.webhook.logs import TURN_BUFFER_CHARS, JsonFormatter, TurnBufferedHandler


def _format(**fields: object) -> str:
    record = logging.LogRecord(
        "gpupolicy.webhook", logging.INFO, __file__, 1, "admission reviewed", None, None
    )
    record.fields = fields
    return JsonFormatter().format(record)


def test_a_log_line_is_one_json_object_with_the_fields() -> None:
    line = _format(uid="8f2c…", findings=[{"rule": "GP601", "message": "privileged: true"}], duration_ms=0.41)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "info" and entry["logger"] == "gpupolicy.webhook"
    assert entry["message"] == "admission reviewed" and entry["uid"] == "8f2c…"
    assert entry["findings"] == [{"rule": "GP601", "message": "privileged: true"}]
    assert entry["time"].endswith("+00:00")


def test_values_json_cannot_hold_natively_are_written_as_text() -> None:
    entry = json.loads(
        _format(path=Path("/var/lib/gpupolicy"), error=ValueError("bad"), big=2**70, by_code={403: "x"})
    )
    assert (
        entry["path"] == "/var/lib/gpupolicy"
        and entry["error"] == "bad"
        and entry["big"] == 2**70
        and entry["by_code"] == {"403": "x"}
    )


def test_an_exception_is_logged_with_its_traceback() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.LogRecord(
            "gpupolicy.webhook", logging.ERROR, __file__, 1, "review failed", None, sys.exc_info()
        )
    entry = json.loads(JsonFormatter().format(record))
    assert "RuntimeError: boom" in entry["exception"]


def test_excerpts_are_redacted_before_they_are_cut() -> None:
    """A finding's message may quote a value of the object: the log gets it redacted, and a
    credential that the cut would split is redacted whole first."""
    from gpupolicy.webhook.logs import EXCERPT_CHARS, excerpt

    token = "hf_" + "Q" * 40
    quoted = excerpt("x" * (EXCERPT_CHARS - 20) + f" HF_TOKEN={token}")
    assert quoted is not None and len(quoted) <= EXCERPT_CHARS
    assert "QQQQ" not in quoted
    assert excerpt("data.arms: 'password: hunter22xyz' is not a list") == (
        "data.arms: 'password: <redacted>' is not a list"
    )
    assert excerpt(None) is None


def test_a_huge_exception_message_is_logged_bounded_and_redacted() -> None:
    try:
        raise ValueError("bad value " + "v" * 1_000_000 + " --api-key=s3cr3tv4lue")
    except ValueError:
        record = logging.LogRecord(
            "gpupolicy.webhook", logging.ERROR, __file__, 1, "review failed", None, sys.exc_info()
        )
    entry = json.loads(JsonFormatter().format(record))
    assert len(entry["exception"]) < 10_000
    assert "ValueError: bad value" in entry["exception"] and "characters left out" in entry["exception"]
    assert "s3cr3tv4lue" not in entry["exception"]


def test_a_recurring_excerpt_is_the_excerpt_remembered_within_its_byte_bound() -> None:
    """The admission line's findings repeat from one admission to the next: their excerpts are
    remembered, each the same as `excerpt` gives, in a cache bounded in bytes that leaves out
    texts longer than the part redacted."""
    from gpupolicy.webhook import logs

    texts = [
        "container 'server' has no readinessProbe",
        "data.arms: 'password: hunter22xyz' is not a list",
        "x" * (logs.EXCERPT_CHARS - 20) + " HF_TOKEN=hf_" + "Q" * 40,
        "image vllm/vllm-openai has no tag (it means latest) " * 10,
        "-----BEGIN RSA PRIVATE KEY----- " + "k" * 3_000,
    ]
    for text in texts:
        first, again = logs.recurring_excerpt(text), logs.recurring_excerpt(text)
        assert first == again == logs.excerpt(text)
    assert logs.recurring_excerpt(None) is None
    assert logs._EXCERPTS.get(texts[1]) == "data.arms: 'password: <redacted>' is not a list"
    assert logs._EXCERPTS.get(texts[-1]) is None  # past the redacted head: computed each time
    for number in range(20_000):  # messages that quote a value of each object: all different
        logs.recurring_excerpt(f"container 'server-{number:05d}' has no readinessProbe " + "." * 200)
    assert 0 < logs._EXCERPTS.nbytes <= logs._EXCERPTS.max_bytes


def test_log_writes_the_fields_without_looking_for_the_caller() -> None:
    from gpupolicy.webhook.logs import log

    logger = logging.getLogger("gpupolicy.webhook.test-log")
    lines: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record)

    logger.handlers[:] = [Keep()]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    log(logger, logging.DEBUG, "not written", uid="a")
    log(logger, logging.INFO, "admission reviewed", uid="b", findings_total=2)
    assert [record.getMessage() for record in lines] == ["admission reviewed"]
    entry = json.loads(JsonFormatter().format(lines[0]))
    assert entry["uid"] == "b" and entry["findings_total"] == 2 and entry["level"] == "info"
    assert lines[0].lineno == 0  # the stack was not walked


def test_the_time_is_written_as_datetime_writes_it_to_the_millisecond() -> None:
    """Each second's text is made once; the milliseconds are the instant rounded to the
    microsecond as `fromtimestamp` rounds it (half to even, into the next second), then cut."""
    import random
    from datetime import UTC, datetime

    from gpupolicy.webhook.logs import _UtcMilliseconds

    written = _UtcMilliseconds()
    second = 1_765_000_000
    edges = [0.0, 0.0005, 0.0009995, 0.0000005, 0.0000015, 0.999, 0.9995, 0.99999949, 0.9999995, 0.9999996]
    instants = [second + step + edge for step in range(3) for edge in edges]
    instants += [random.Random(16).uniform(0, 4e9) for _ in range(2_000)]
    instants += [0.0, 0.25, -1.5]  # the epoch itself, and before it (left to datetime)
    for instant in instants:
        expected = datetime.fromtimestamp(instant, UTC).isoformat(timespec="milliseconds")
        assert written.text(instant) == expected


def test_a_finding_entry_is_the_admission_lines_excerpts_remembered_within_a_byte_bound() -> None:
    from gpupolicy.core.findings import Finding, ObjectRef, Severity
    from gpupolicy.webhook import logs

    def finding(message: str, path: tuple[str | int, ...] = ("spec", "containers", 0)) -> Finding:
        return Finding(
            "GP601", "privileged", Severity.ERROR, message, "Drop it.", ObjectRef("Pod", "a", "p"),
            path=path, container="server",
        )  # fmt: skip

    quoted = finding("env HF_TOKEN=hf_" + "Q" * 40 + " is set inline")
    entry = logs.finding_entry(quoted)
    assert entry == {
        "rule": "GP601",
        "severity": "error",
        "path": "$.spec.containers[0]",
        "container": "server",
        "message": logs.excerpt(quoted.message),
    }
    assert "QQQQ" not in (entry["message"] or "")
    assert logs.finding_entry(finding(quoted.message)) is entry  # another object, the same texts
    long = finding("m" * (logs._REDACTED_HEAD_CHARS + 1))
    first, again = logs.finding_entry(long), logs.finding_entry(long)
    assert first == again and first is not again  # past the redacted head: made each time
    for number in range(20_000):
        logs.finding_entry(finding(f"container 'server-{number:05d}' has no readinessProbe " + "." * 200))
    assert 0 < logs._FINDING_ENTRIES.nbytes <= logs._FINDING_ENTRIES.max_bytes


class RecordedStream:
    """A text stream that keeps each write apart (and counts flushes)."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.flushes = 0

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        self.flushes += 1


def _turn_logger(stream: RecordedStream) -> tuple[logging.Logger, TurnBufferedHandler]:
    handler = TurnBufferedHandler(stream)  # type: ignore[arg-type]
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger(f"gpupolicy.test.turn.{id(stream)}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, handler


def test_lines_of_one_turn_of_the_loop_are_one_write_at_its_end() -> None:
    stream = RecordedStream()
    logger, _ = _turn_logger(stream)

    async def answers() -> list[list[str]]:
        seen = []
        for turn in range(3):
            for index in range(4):
                logger.info("turn %d line %d", turn, index)
            seen.append(list(stream.writes))  # nothing written while the turn runs
            await asyncio.sleep(0)  # the turn ends: its lines are written
        return seen

    seen = asyncio.run(answers())
    assert seen == [
        [],
        ["turn 0 line 0\nturn 0 line 1\nturn 0 line 2\nturn 0 line 3\n"],
        seen[1] + ["turn 1 line 0\nturn 1 line 1\nturn 1 line 2\nturn 1 line 3\n"],
    ]
    assert stream.writes[-1] == "turn 2 line 0\nturn 2 line 1\nturn 2 line 2\nturn 2 line 3\n"


def test_a_line_off_the_loop_is_written_at_once_after_what_the_loop_holds() -> None:
    stream = RecordedStream()
    logger, _ = _turn_logger(stream)

    async def mixed() -> None:
        logger.info("on the loop")
        thread = threading.Thread(target=logger.info, args=("from a watch thread",))
        thread.start()
        thread.join()
        assert stream.writes == ["on the loop\nfrom a watch thread\n"]  # in the order emitted
        logger.info("later on the loop")

    asyncio.run(mixed())
    assert stream.writes == ["on the loop\nfrom a watch thread\n", "later on the loop\n"]
    logger.info("no loop at all")
    assert stream.writes[-1] == "no loop at all\n"


def test_flush_writes_what_is_held_and_a_full_turn_is_written_at_once() -> None:
    stream = RecordedStream()
    logger, handler = _turn_logger(stream)
    loop = asyncio.new_event_loop()
    try:

        async def held() -> None:
            logger.info("held")
            handler.flush()  # the shutdown deadline's flush, from the loop or any thread
            assert stream.writes == ["held\n"]
            big = "x" * (TURN_BUFFER_CHARS // 2)
            logger.info(big)
            logger.info(big)  # past the bound: what is held and this line go out now
            assert stream.writes[-1] == f"{big}\n{big}\n"

        loop.run_until_complete(held())
        logger.info("after the loop stopped")  # off any loop: at once
        assert stream.writes[-1] == "after the loop stopped\n"
    finally:
        loop.close()


def test_lines_held_for_a_loop_that_stopped_mid_turn_go_out_before_the_next_loops() -> None:
    stream = RecordedStream()
    logger, _ = _turn_logger(stream)
    first = asyncio.new_event_loop()
    first.call_soon(first.stop)  # this turn is the loop's last: the flush it schedules never runs
    first.call_soon(logger.info, "first loop")
    first.run_forever()
    assert stream.writes == []
    first.close()

    async def one(text: str) -> None:
        logger.info(text)

    asyncio.run(one("second loop"))
    assert stream.writes == ["first loop\n", "second loop\n"]
