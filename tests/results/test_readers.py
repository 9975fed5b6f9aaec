"""Each results reader on a file in the load generator's real shape (tests/data/results/README.md
cites where each shape comes from), and the one-line errors for broken files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpupolicy.results.readers import RequestSample, ResultsInputError, detect_format, read_file

DATA = Path(__file__).resolve().parent.parent / "data" / "results"


def approx_sample(sample: RequestSample) -> tuple[object, ...]:
    return tuple(pytest.approx(v) if isinstance(v, float) else v for v in sample.to_row())


def test_vllm_result_with_detailed_per_request_lists() -> None:
    run = read_file(DATA / "vllm-result.json")
    assert (run.format, run.duration_s, run.date) == ("vllm", 2.0, "20261129-101500")
    rows = [approx_sample(sample) for sample in run.samples]
    # end-to-end = TTFT + sum(ITLs); TPOT = sum(ITLs) / (output tokens - 1), none for one token
    assert rows == [
        (True, pytest.approx(300.0), pytest.approx(200.0), pytest.approx(50.0), 100, 3, 50.0),
        (True, pytest.approx(600.0), pytest.approx(300.0), pytest.approx(100.0), 120, 4, pytest.approx(50.1)),
        (True, pytest.approx(100.0), pytest.approx(100.0), None, 110, 1, pytest.approx(50.2)),
        (False, None, None, None, 90, None, pytest.approx(50.3)),
    ]


def test_genai_perf_profile_export_counts_only_responses_with_content() -> None:
    run = read_file(DATA / "genai-perf-profile_export.json")
    assert run.format == "genai-perf"
    assert run.duration_s == pytest.approx(0.7)  # first request sent at 1.0 s, last response at 1.7 s
    first, second, failed = run.samples
    assert (first.ttft_ms, first.e2e_ms, first.output_tokens) == (pytest.approx(250), pytest.approx(370), 3)
    assert first.tpot_ms == pytest.approx(50)
    assert (second.ttft_ms, second.e2e_ms, second.output_tokens, second.tpot_ms) == (
        pytest.approx(300),
        pytest.approx(500),
        2,
        pytest.approx(100),
    )
    assert not failed.ok and failed.e2e_ms is None


def test_k6_json_output_reads_http_req_duration_points_with_status() -> None:
    run = read_file(DATA / "k6-out.json")
    assert run.format == "k6"
    assert [sample.ok for sample in run.samples] == [True, True, False, False]  # 503 and status 0 fail
    assert [sample.e2e_ms for sample in run.samples[:2]] == [500, 750.5]
    assert all(sample.ttft_ms is None for sample in run.samples)
    # time is each request's end: the first started 0.5 s before its end at 10:15:00.5
    assert run.duration_s == pytest.approx(2.5)
    assert not run.has_ttft


@pytest.mark.parametrize("name", ["plain.jsonl", "plain.csv"])
def test_plain_per_request_files(name: str) -> None:
    run = read_file(DATA / name)
    assert run.format == name.split(".")[1]
    ok, slow, failed = run.samples
    assert (ok.e2e_ms, ok.ttft_ms, ok.tpot_ms, ok.input_tokens, ok.output_tokens) == (800, 120, 30, 100, 20)
    assert slow.ok and slow.e2e_ms == 1500
    assert not failed.ok and failed.input_tokens == 90
    assert run.duration_s == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.json", '{"ttfts": [0.1],\n "itls": [[]], oops}', "bad.json:2:16: invalid JSON"),
        (
            "short.json",
            json.dumps(
                {
                    "duration": 1,
                    "ttfts": [0.1, 0.2],
                    "itls": [[]],
                    "input_lens": [1, 1],
                    "output_lens": [1, 1],
                    "errors": ["", ""],
                }
            ),
            "short.json: $.itls: 1 entries, but $.ttfts has 2",
        ),
        (
            "type.json",
            json.dumps(
                {
                    "duration": 1,
                    "ttfts": [0.1, "x"],
                    "itls": [[], []],
                    "input_lens": [1, 1],
                    "output_lens": [1, 1],
                    "errors": ["", ""],
                }
            ),
            'type.json: $.ttfts[1]: expected a number, found "x"',
        ),
        (
            "nodetail.json",
            json.dumps({"duration": 1, "ttfts": [0.1], "completed": 1}),
            "nodetail.json: $.itls: missing or not a list (save the result with --save-detailed)",
        ),
        (
            "k6.json",
            '{"type":"Metric","data":{},"metric":"vus"}\n{"type":"Point","data":{"time":"yesterday","value":5,"tags":{}},"metric":"http_req_duration"}\n',
            'k6.json: line 2: data.time: expected an RFC 3339 time, found "yesterday"',
        ),
        ("k6b.json", '{"type":"Metric","data":{},"metric":"vus"}\n{"type": "Point", \n', "k6b.json:2:"),
        (
            "rows.jsonl",
            '{"start": 1, "e2e_ms": 5}\n{"start": 2, "e2e_ms": "slow"}\n',
            "rows.jsonl: line 2 e2e_ms: 'slow' is not a number",
        ),
        ("rows.csv", "start,e2e_ms\n1,5\n2,-3\n", "rows.csv: line 3 e2e_ms: -3.0 is below 0"),
        ("cols.csv", "begin,latency\n1,5\n", "cols.csv:1: header lacks start, e2e_ms"),
        (
            "levels.json",
            json.dumps({"experiments": [{"requests": []}, {"requests": []}]}),
            "levels.json: $.experiments: 2 load levels in one file",
        ),
        ("what.json", '{"hello": 1}', "what.json: cannot tell the format"),
    ],
)
def test_bad_files_fail_with_file_and_line_or_json_path(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ResultsInputError) as caught:
        read_file(path)
    text = str(caught.value)
    assert text.startswith(str(tmp_path / message.split(":")[0])), text
    assert message.split(":", 1)[1] in text, text
    assert "\n" not in text


def test_detect_format_by_content() -> None:
    assert [
        detect_format(DATA / name, (DATA / name).read_text())
        for name in sorted(p.name for p in DATA.iterdir() if p.suffix != ".md")
    ] == [
        "genai-perf",
        "k6",
        "csv",
        "jsonl",
        "vllm",
    ]


def test_oversized_file_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gpupolicy.results.readers as readers

    monkeypatch.setattr(readers, "MAX_FILE_BYTES", 10)
    path = tmp_path / "big.json"
    path.write_text('{"ttfts": [0.1, 0.2, 0.3]}')
    with pytest.raises(ResultsInputError, match="more than the 10 a results file may have"):
        read_file(path)
