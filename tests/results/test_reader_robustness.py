"""Whatever a results file holds, a reader returns a run or raises ResultsInputError (one line,
exit 2) — never another exception (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupolicy.results.readers import READERS, ResultsInputError, RunData, read_file

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
KEYS = [
    "ttfts",
    "itls",
    "input_lens",
    "output_lens",
    "errors",
    "duration",
    "start_times",
    "date",
    "experiments",
]
VLLM = st.dictionaries(
    st.sampled_from(KEYS), JSON | st.lists(JSON, min_size=1, max_size=3), max_size=len(KEYS)
)
LINE = st.dictionaries(
    st.sampled_from(["type", "metric", "data", "start", "e2e_ms", "ttft_ms", "status", "output_tokens"]),
    JSON | st.sampled_from(["Point", "http_req_duration", "2026-11-29T10:15:00Z", "200"]),
    max_size=6,
)


def outcome(path: Path, fmt: str) -> None:
    try:
        assert isinstance(read_file(path, fmt), RunData)
    except ResultsInputError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=VLLM, fmt=st.sampled_from(["auto", "vllm", "genai-perf"]))
def test_json_documents(tmp_path: Path, document: dict[str, object], fmt: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    outcome(path, fmt)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(LINE | JSON, max_size=5), fmt=st.sampled_from(["k6", "jsonl", "csv", "auto"]))
def test_line_formats(tmp_path: Path, lines: list[object], fmt: str) -> None:
    path = tmp_path / ("run.csv" if fmt == "csv" else "run.jsonl")
    if fmt == "csv":
        rows = [
            ",".join(str(value) for value in (line.values() if isinstance(line, dict) else [line]))
            for line in lines
        ]
        path.write_text("start,e2e_ms,ttft_ms\n" + "\n".join(rows), encoding="utf-8")
    else:
        path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    outcome(path, fmt)


def test_nesting_too_deep_for_the_parser_is_a_bad_file(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    cases = {
        "run.json": deep,
        "k6.jsonl": '{"type": "Metric"}\n' + deep,
        "plain.jsonl": '{"start": 1, "e2e_ms": 2}\n' + deep,
        "gp.json": json.dumps(
            {"experiments": [{"requests": [{"timestamp": 1, "response_timestamps": [2, 3], "response_outputs": [
                {"response": "data: " + deep}, {"response": "data: [DONE]"}]}]}]}
        ),
    }  # fmt: skip
    for name, text in cases.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        outcome(path, "auto")


def test_every_reader_is_exercised() -> None:
    assert set(READERS) == {"vllm", "genai-perf", "k6", "jsonl", "csv"}
