"""Load-generator output to per-request samples. One reader per format, each documented field by
field in docs/results.md; every error names the file and the line (or the JSON path) and is
raised before anything is stored.

| format | what it reads |
| --- | --- |
| `vllm` | vLLM's serving benchmark (`benchmarks/benchmark_serving.py`, `vllm bench serve`) result JSON saved with `--save-result --save-detailed`: `duration`, `date`, and per request `ttfts`, `itls`, `input_lens`, `output_lens`, `errors` (`start_times` when present) |
| `genai-perf` | GenAI-Perf's `profile_export.json`: one load level's `requests` with `timestamp` and `response_timestamps` (ns) |
| `k6` | k6's `--out json` lines: `Point`s of `http_req_duration` with `tags.status` |
| `jsonl`, `csv` | one request per line or row: `start`, `e2e_ms`, `ttft_ms`, `tpot_ms`, `status`, `input_tokens`, `output_tokens` |
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from gpupolicy.core.immutable import immutable

FORMATS = ("auto", "vllm", "genai-perf", "k6", "jsonl", "csv")
MAX_FILE_BYTES = 256 * 1024 * 1024  # a benchmark of millions of requests; more is not a result file


class ResultsInputError(ValueError):
    """A results file that cannot be read: one line naming the file and the line or JSON path."""


@immutable
class RequestSample:
    """One request. Times in milliseconds; `start` in seconds on the file's own clock."""

    ok: bool
    e2e_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    start: float | None = None

    def to_row(self) -> list[Any]:
        return [
            self.ok,
            self.e2e_ms,
            self.ttft_ms,
            self.tpot_ms,
            self.input_tokens,
            self.output_tokens,
            self.start,
        ]

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> RequestSample:
        return cls(bool(row[0]), row[1], row[2], row[3], row[4], row[5], row[6])


@immutable
class RunData:
    """What one results file says about one run."""

    file: str
    format: str
    samples: list[RequestSample]
    duration_s: float
    date: str | None = None  # when the benchmark ran, as the file says it

    @property
    def has_ttft(self) -> bool:
        return any(sample.ttft_ms is not None for sample in self.samples if sample.ok)

    @property
    def has_tokens(self) -> bool:
        return any(sample.output_tokens is not None for sample in self.samples if sample.ok)


def _fail(file: str, where: str, message: str) -> ResultsInputError:
    return ResultsInputError(f"{file}: {where}: {message}" if where else f"{file}: {message}")


def _number(value: Any, file: str, where: str, *, minimum: float | None = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(file, where, f"expected a number, found {json.dumps(value)[:40]}")
    if minimum is not None and value < minimum:
        raise _fail(file, where, f"{value} is below {minimum:g}")
    return float(value)


def _count(value: Any, file: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(file, where, f"expected a whole number of tokens, found {json.dumps(value)[:40]}")
    return value


def _loads(text: str) -> Any:
    """json.loads, with nesting too deep for the parser (a RecursionError) as a decode error."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def _load_json(path: Path, text: str) -> Any:
    try:
        return _loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsInputError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None


def _list(data: Mapping[str, Any], key: str, file: str, size: int | None) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise _fail(file, f"$.{key}", "missing or not a list (save the result with --save-detailed)")
    if size is not None and len(value) != size:
        raise _fail(file, f"$.{key}", f"{len(value)} entries, but $.ttfts has {size}")
    return value


# -- vLLM -------------------------------------------------------------------------------------


def read_vllm(path: Path, text: str) -> RunData:
    """vLLM's result JSON: ttfts and itls in seconds, end-to-end latency = TTFT + the sum of the
    ITLs (as vLLM's own timeline plot computes it), TPOT = sum of ITLs / (output tokens − 1)
    (vLLM's TPOT, which excludes the first token); a non-empty `errors[i]` is a failed request."""
    file = str(path)
    data = _load_json(path, text)
    if not isinstance(data, dict):
        raise _fail(file, "$", "expected a JSON object (vLLM's --save-result file)")
    ttfts = _list(data, "ttfts", file, None)
    size = len(ttfts)
    itls = _list(data, "itls", file, size)
    input_lens = _list(data, "input_lens", file, size)
    output_lens = _list(data, "output_lens", file, size)
    errors = _list(data, "errors", file, size)
    starts = data.get("start_times")
    if starts is not None and (not isinstance(starts, list) or len(starts) != size):
        raise _fail(file, "$.start_times", f"expected a list of {size} numbers")
    duration = _number(data.get("duration"), file, "$.duration")
    if duration <= 0:
        raise _fail(file, "$.duration", "must be positive")
    date = data.get("date")
    samples = []
    for index in range(size):
        error = errors[index]
        if error is not None and not isinstance(error, str):
            raise _fail(file, f"$.errors[{index}]", "expected a string (empty for success)")
        start = _number(starts[index], file, f"$.start_times[{index}]", minimum=None) if starts else None
        input_tokens = _count(input_lens[index], file, f"$.input_lens[{index}]")
        if error:
            samples.append(RequestSample(False, input_tokens=input_tokens, start=start))
            continue
        ttft = _number(ttfts[index], file, f"$.ttfts[{index}]")
        gaps = itls[index]
        if not isinstance(gaps, list):
            raise _fail(file, f"$.itls[{index}]", "expected a list of inter-token latencies")
        decode = math.fsum(_number(gap, file, f"$.itls[{index}][{step}]") for step, gap in enumerate(gaps))
        output = _count(output_lens[index], file, f"$.output_lens[{index}]")
        samples.append(
            RequestSample(
                True,
                e2e_ms=(ttft + decode) * 1000,
                ttft_ms=ttft * 1000,
                tpot_ms=decode * 1000 / (output - 1) if output > 1 else None,
                input_tokens=input_tokens,
                output_tokens=output,
                start=start,
            )
        )
    return RunData(file, "vllm", samples, duration, date if isinstance(date, str) else None)


# -- GenAI-Perf -------------------------------------------------------------------------------


def _has_content(output: Any) -> bool:
    """Whether one streamed response carries generated text: Triton's `text_output`, or an
    OpenAI server-sent event `data: {...}` whose first choice has `delta.content` or `text`
    (role-only chunks, empty deltas and `data: [DONE]` carry none, as GenAI-Perf skips them)."""
    if not isinstance(output, dict):
        return False
    if isinstance(output.get("text_output"), str):
        return bool(output["text_output"])
    response = output.get("response")
    if not isinstance(response, str):
        return False
    payload = response.strip()
    payload = payload[len("data:") :].strip() if payload.startswith("data:") else payload
    if not payload or payload == "[DONE]":
        return False
    try:
        event = _loads(payload)
    except json.JSONDecodeError:
        return True  # a non-JSON body is text the server sent
    choices = event.get("choices") if isinstance(event, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return False
    choice = choices[0]
    delta = choice.get("delta")
    content = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return isinstance(content, str) and bool(content)


def read_genai_perf(path: Path, text: str) -> RunData:
    """GenAI-Perf's profile_export.json (perf_analyzer's export): `experiments[0].requests[*]`
    with `timestamp` and `response_timestamps` in nanoseconds and `response_outputs`. TTFT =
    first response with content − timestamp; latency = last response − timestamp; output tokens
    = responses with content (one per streamed chunk: a server that streams several tokens per
    chunk is undercounted; GenAI-Perf itself re-tokenises the text, which needs the model's
    tokenizer). A request without responses failed. Input tokens are not in the file."""
    file = str(path)
    data = _load_json(path, text)
    experiments = data.get("experiments") if isinstance(data, dict) else None
    if not isinstance(experiments, list) or not experiments:
        raise _fail(file, "$.experiments", "missing or empty (GenAI-Perf's profile_export.json)")
    if len(experiments) > 1:
        raise _fail(
            file,
            "$.experiments",
            f"{len(experiments)} load levels in one file; a run is one load level (profile each alone)",
        )
    requests = experiments[0].get("requests") if isinstance(experiments[0], dict) else None
    if not isinstance(requests, list):
        raise _fail(file, "$.experiments[0].requests", "missing or not a list")
    samples: list[RequestSample] = []
    first, last = math.inf, -math.inf
    for index, request in enumerate(requests):
        where = f"$.experiments[0].requests[{index}]"
        if not isinstance(request, dict):
            raise _fail(file, where, "expected an object")
        sent = _number(request.get("timestamp"), file, f"{where}.timestamp")
        times = request.get("response_timestamps", [])
        outputs = request.get("response_outputs", [])
        if not isinstance(times, list) or not isinstance(outputs, list):
            raise _fail(file, where, "response_timestamps and response_outputs must be lists")
        if outputs and len(outputs) != len(times):
            raise _fail(
                file, f"{where}.response_outputs", f"{len(outputs)} entries for {len(times)} timestamps"
            )
        stamps = [_number(t, file, f"{where}.response_timestamps[{i}]") for i, t in enumerate(times)]
        first = min(first, sent)
        if not stamps:
            samples.append(RequestSample(False, start=sent / 1e9))
            continue
        last = max(last, stamps[-1])
        content = [
            t
            for t, out in zip(stamps, outputs or [None] * len(stamps), strict=True)
            if out is None or _has_content(out)
        ]
        tokens = len(content)
        ttft = (content[0] if content else stamps[0]) - sent
        e2e = stamps[-1] - sent
        decode = (content[-1] - content[0]) if tokens > 1 else 0.0
        samples.append(
            RequestSample(
                True,
                e2e_ms=e2e / 1e6,
                ttft_ms=ttft / 1e6,
                tpot_ms=decode / 1e6 / (tokens - 1) if tokens > 1 else None,
                output_tokens=tokens,
                start=sent / 1e9,
            )
        )
    if not samples:
        raise _fail(file, "$.experiments[0].requests", "no requests")
    duration = (last - first) / 1e9 if last > first else 0.0
    if duration <= 0:
        raise _fail(file, "$.experiments[0].requests", "no request was answered: the run has no duration")
    return RunData(file, "genai-perf", samples, duration)


# -- k6 ---------------------------------------------------------------------------------------

# RFC 3339 with k6's nanoseconds: `2017-05-09T14:34:45.239531499+02:00`. Anchored, over at most
# 40 characters (checked first): Python's `re` is linear here (gpupolicy/core/linear_regex.py).
_K6_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


def _k6_time(value: Any, file: str, where: str) -> float:
    match = _K6_TIME.fullmatch(value) if isinstance(value, str) and len(value) <= 40 else None
    if match is None:
        raise _fail(file, where, f"expected an RFC 3339 time, found {json.dumps(value)[:40]}")
    zone = "+00:00" if match[3] == "Z" else match[3]
    seconds = datetime.fromisoformat(match[1] + zone).timestamp()
    return seconds + (int(match[2].ljust(9, "0")) / 1e9 if match[2] else 0.0)


def read_k6(path: Path, text: str) -> RunData:
    """k6's `--out json` lines. Each `Point` of `http_req_duration` is one request: `value` its
    duration in ms, `time` when it ended (k6 stamps HTTP samples with the request's end time),
    `tags.status` its HTTP status (0: no response). A request succeeded when the tag
    `expected_response` is "true" (k6's default callback: 2xx/3xx), or, without that tag, when
    the status is 2xx or 3xx. Other metrics and `Metric` lines are skipped. No TTFT or tokens."""
    file = str(path)
    samples = []
    first, last = math.inf, -math.inf
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = _loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsInputError(f"{file}:{number}:{exc.colno}: invalid JSON: {exc.msg}") from None
        if not isinstance(item, dict) or "type" not in item:
            raise ResultsInputError(f"{file}:{number}: not a k6 JSON output line (no type)")
        if item.get("type") != "Point" or item.get("metric") != "http_req_duration":
            continue
        data = item.get("data")
        if not isinstance(data, dict):
            raise ResultsInputError(f"{file}:{number}: a Point without data")
        duration = _number(data.get("value"), file, f"line {number}: data.value")
        end = _k6_time(data.get("time"), file, f"line {number}: data.time")
        raw_tags = data.get("tags")
        tags: dict[str, Any] = raw_tags if isinstance(raw_tags, dict) else {}
        expected = tags.get("expected_response")
        status = str(tags.get("status", "0"))
        ok = expected == "true" if expected in ("true", "false") else status[:1] in ("2", "3")
        start = end - duration / 1000
        first, last = min(first, start), max(last, end)
        samples.append(RequestSample(ok, e2e_ms=duration if ok else None, start=start))
    if not samples:
        raise ResultsInputError(f"{file}: no http_req_duration points (k6 run --out json=FILE)")
    return RunData(file, "k6", samples, max(last - first, 1e-9))


# -- plain JSONL / CSV ------------------------------------------------------------------------

PLAIN_FIELDS = ("start", "e2e_ms", "ttft_ms", "tpot_ms", "status", "input_tokens", "output_tokens")


def _plain_ok(status: Any, file: str, where: str) -> bool:
    if status is None or status == "":
        return True
    if isinstance(status, bool):
        return status
    text = str(status).strip().lower()
    if text in ("ok", "success", "true"):
        return True
    if text in ("error", "failed", "false", "timeout"):
        return False
    if text.isdigit():
        return text[:1] in ("2", "3")
    raise _fail(file, where, f"status {text[:40]!r}: use an HTTP status, ok or error")


def _plain_sample(row: Mapping[str, Any], file: str, where: str) -> RequestSample:
    def optional(key: str) -> float | None:
        value = row.get(key)
        if value is None or value == "":
            return None
        if isinstance(value, str):
            try:
                parsed = float(value)
            except ValueError:
                raise _fail(file, f"{where} {key}", f"{value[:40]!r} is not a number") from None
            return _number(parsed, file, f"{where} {key}")
        return _number(value, file, f"{where} {key}")

    def tokens(key: str) -> int | None:
        value = optional(key)
        if value is not None and value != int(value):
            raise _fail(file, f"{where} {key}", "expected a whole number")
        return None if value is None else int(value)

    start = row.get("start")
    if start is None or start == "":
        raise _fail(file, where, "start is missing (seconds, or an RFC 3339 time)")
    start_s = (
        _k6_time(start, file, f"{where} start")
        if isinstance(start, str) and not start.replace(".", "", 1).isdigit()
        else optional("start")
    )
    assert start_s is not None
    ok = _plain_ok(row.get("status"), file, f"{where} status")
    e2e = optional("e2e_ms")
    if ok and e2e is None:
        raise _fail(file, f"{where} e2e_ms", "a successful request needs its end-to-end latency")
    return RequestSample(
        ok,
        e2e_ms=e2e if ok else None,
        ttft_ms=optional("ttft_ms") if ok else None,
        tpot_ms=optional("tpot_ms") if ok else None,
        input_tokens=tokens("input_tokens"),
        output_tokens=tokens("output_tokens"),
        start=start_s,
    )


def _plain_run(file: str, fmt: str, samples: list[RequestSample]) -> RunData:
    if not samples:
        raise ResultsInputError(f"{file}: no requests")
    first = min(sample.start for sample in samples if sample.start is not None)
    last = max((sample.start or 0) + (sample.e2e_ms or 0) / 1000 for sample in samples)
    return RunData(file, fmt, samples, max(last - first, 1e-9))


def read_jsonl(path: Path, text: str) -> RunData:
    file = str(path)
    samples = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = _loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsInputError(f"{file}:{number}:{exc.colno}: invalid JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise ResultsInputError(f"{file}:{number}: expected one JSON object per line")
        samples.append(_plain_sample(row, file, f"line {number}"))
    return _plain_run(file, "jsonl", samples)


def read_csv(path: Path, text: str) -> RunData:
    file = str(path)
    reader = csv.DictReader(io.StringIO(text))
    missing = [key for key in ("start", "e2e_ms") if key not in (reader.fieldnames or [])]
    if missing:
        raise ResultsInputError(
            f"{file}:1: header lacks {', '.join(missing)} (columns: {', '.join(PLAIN_FIELDS)})"
        )
    try:
        samples = [_plain_sample(row, file, f"line {reader.line_num}") for row in reader]
    except csv.Error as exc:
        raise ResultsInputError(f"{file}:{reader.line_num}: {exc}") from None
    return _plain_run(file, "csv", samples)


READERS: dict[str, Callable[[Path, str], RunData]] = {
    "vllm": read_vllm,
    "genai-perf": read_genai_perf,
    "k6": read_k6,
    "jsonl": read_jsonl,
    "csv": read_csv,
}


def detect_format(path: Path, text: str) -> str:
    """The format from the content: a JSON object with `ttfts` (vLLM) or `experiments`
    (GenAI-Perf); lines with `"type": "Point"/"Metric"` (k6); `.csv`; else plain JSONL."""
    if path.suffix.lower() == ".csv":
        return "csv"
    head = text.lstrip()[:1]
    if head == "{":
        first_line = text.lstrip().split("\n", 1)[0]
        try:
            first = _loads(first_line)
        except json.JSONDecodeError:
            first = None
        if isinstance(first, dict) and first.get("type") in ("Metric", "Point"):
            return "k6"
        if isinstance(first, dict) and ("start" in first or "e2e_ms" in first):
            return "jsonl"
        if '"ttfts"' in text:
            return "vllm"
        if '"experiments"' in text:
            return "genai-perf"
    raise ResultsInputError(
        f"{path}: cannot tell the format (vLLM result JSON, GenAI-Perf profile_export.json, k6 "
        "--out json, JSONL or CSV); pass --input-format"
    )


def read_file(path: Path, fmt: str = "auto") -> RunData:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ResultsInputError(
                f"{path}: {size} bytes, more than the {MAX_FILE_BYTES} a results file may have"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ResultsInputError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ResultsInputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ResultsInputError(f"{path}: cannot read: {exc.strerror}") from None
    chosen = detect_format(path, text) if fmt == "auto" else fmt
    return READERS[chosen](path, text)
