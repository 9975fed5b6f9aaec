"""The HTML report in a real browser: headless Chromium renders the page to a PNG, and the
screenshot shows the plots drawn — points of both arms and the SLO line in the goodput plot,
the spread plots below it. Skipped (with the reason) only when no Chromium is installed and
neither CI nor GPUPOLICY_REQUIRE_CHROMIUM is set; .ci/run installs it."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest

from gpupolicy.results.html import ARM_COLOURS, GOODPUT_BOX, SLO_COLOUR, render_html
from gpupolicy.results.readers import read_file
from gpupolicy.results.report import build_report
from gpupolicy.results.slo import parse_slo
from gpupolicy.results.store import StoredRun
from tests.results.test_verdict import config

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "results" / "day29"
WIDTH, HEIGHT = 1280, 1400
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI") or os.environ.get("GPUPOLICY_REQUIRE_CHROMIUM"):
        pytest.fail(
            f"no Chromium ({', '.join(BROWSERS)}) on PATH, and CI needs this test: apt-get install chromium"
        )
    pytest.skip(f"no Chromium on PATH ({', '.join(BROWSERS)}): apt-get install chromium")


def decode_png(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Width, height, rows and bytes per pixel of an 8-bit, non-interlaced RGB(A) PNG
    (what Chromium writes), per the PNG specification's filter types 0-4."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks, header = 8, [], b""
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up = previous[x]
            corner = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                line[x] = (line[x] + predictor) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows, channels


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def pixels(
    rows: list[bytes], channels: int, box: tuple[int, int, int, int]
) -> Counter[tuple[int, int, int, int]]:
    """How many pixels of each (r, g, b, column) there are inside box (left, top, width, height)."""
    left, top, width, height = box
    found: Counter[tuple[int, int, int, int]] = Counter()
    for y in range(top, top + height):
        row = rows[y]
        for x in range(left, left + width):
            offset = x * channels
            found[(row[offset], row[offset + 1], row[offset + 2], x)] += 1
    return found


def example_report() -> str:
    runs = []
    for arm in ("control", "max-num-seqs-256"):
        for repeat in (1, 2, 3):
            data = read_file(EXAMPLE / f"{arm}-{repeat}.json")
            runs.append(
                StoredRun(
                    experiment="day29-experiment",
                    arm=arm,
                    repeat=repeat,
                    format=data.format,
                    files=[data.file],
                    duration_s=data.duration_s,
                    gpus=1,
                    gpu_source="--gpus",
                    samples=data.samples,
                    price_per_gpu_hour=1.8,
                )
            )
    slo = parse_slo("ttft_ms<=1500, tpot_ms<=60, p95_latency_ms<=6000, error_rate<=0.02", source="--slo")
    return render_html(build_report("day29-experiment", config(), "day29-experiment.yaml", slo, runs, seed=1))


def test_the_html_report_draws_its_plots_in_chromium(tmp_path: Path) -> None:
    executable = browser()
    page = tmp_path / "report.html"
    page.write_text(example_report(), encoding="utf-8")
    text = page.read_text()
    assert "<script" not in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            executable, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--force-device-scale-factor=1", f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", page.as_uri(),
        ],
        check=True, capture_output=True, timeout=180,
    )  # fmt: skip
    width, height, rows, channels = decode_png(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)

    plot = pixels(rows, channels, GOODPUT_BOX)
    colours = Counter()
    columns: Counter[int] = Counter()
    for (r, g, b, x), count in plot.items():
        colours[(r, g, b)] += count
        if (r, g, b) == rgb(SLO_COLOUR):
            columns[x] += count
    drawn = sum(count for colour, count in colours.items() if colour != (255, 255, 255))
    assert drawn > 0.03 * GOODPUT_BOX[2] * GOODPUT_BOX[3], drawn  # axes, grid, labels, points
    for arm_colour in ARM_COLOURS[:2]:  # control and the treatment: their run points and means
        assert colours[rgb(arm_colour)] > 200, arm_colour
    # the SLO line: dashed, vertical, 3 px wide: a few columns holding most of the plot's height
    assert columns and max(columns.values()) > 0.4 * (GOODPUT_BOX[3] - 72), columns.most_common(3)

    below = GOODPUT_BOX[1] + GOODPUT_BOX[3] + 24
    spread = Counter()
    for (r, g, b, _), count in pixels(rows, channels, (0, below, WIDTH, HEIGHT - below)).items():
        spread[(r, g, b)] += count
    for arm_colour in ARM_COLOURS[:2]:  # each spread plot's dots, means and intervals
        assert spread[rgb(arm_colour)] > 500, arm_colour
