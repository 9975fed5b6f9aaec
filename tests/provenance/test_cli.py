"""`gpupolicy provenance list|show|export`, run as a subprocess like a user would."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.provenance.samples import REPO_ROOT, Backend, MakeRecord

pytestmark = pytest.mark.slow


def gpupolicy(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpupolicy", "provenance", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.fixture
def db(backend: Backend, make_record: MakeRecord) -> list[str]:
    """The --db (and --schema) arguments of a store holding five records."""
    with backend.open() as store:
        for index in range(5):
            store.record(
                make_record(
                    f"uid-{index}",
                    minutes=index * 60,
                    labels={
                        "gpupolicy.io/experiment": "exp-a" if index < 3 else "exp-b",
                        "gpupolicy.io/arm": "control",
                    },
                )
            )
        store.set_status("uid-0", "confirmed", at="2026-11-30T03:00:00.000000Z")
    return ["--db", backend.url, *(["--schema", backend.schema] if backend.schema else [])]


def test_list_in_every_format(db: list[str]) -> None:
    table = gpupolicy("list", *db)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "TIME",
        "STATUS",
        "OPERATION",
        "OBJECT",
        "EXPERIMENT",
        "ARM",
        "USER",
        "FINDINGS",
        "UID",
    ]
    assert [line.split()[-1] for line in lines[1:]] == [f"uid-{index}" for index in range(5)]
    assert "confirmed" in lines[1] and "Deployment ai-lab/vllm-llama" in lines[1]

    as_json = json.loads(gpupolicy("list", *db, "--format", "json", "--experiment", "exp-a").stdout)
    assert [item["uid"] for item in as_json] == ["uid-0", "uid-1", "uid-2"]
    assert as_json[0]["status"] == "confirmed"

    jsonl = gpupolicy("list", *db, "--format", "jsonl", "--since", "2026-11-30T03:00:00Z").stdout
    assert [json.loads(line)["uid"] for line in jsonl.splitlines()] == ["uid-1", "uid-2", "uid-3", "uid-4"]

    rows = list(
        csv.DictReader(io.StringIO(gpupolicy("list", *db, "--format", "csv", "--status", "admitted").stdout))
    )
    assert [row["uid"] for row in rows] == ["uid-1", "uid-2", "uid-3", "uid-4"]
    assert rows[0]["experiment"] == "exp-a" and rows[0]["gpu_resources"] == "vllm:nvidia.com/gpu=1"


def test_list_pages_with_a_cursor(db: list[str]) -> None:
    first = gpupolicy("list", *db, "--format", "jsonl", "--limit", "2")
    assert [json.loads(line)["uid"] for line in first.stdout.splitlines()] == ["uid-0", "uid-1"]
    cursor = first.stderr.split("--cursor ", 1)[1].strip()
    second = gpupolicy("list", *db, "--format", "jsonl", "--limit", "2", "--cursor", cursor)
    assert [json.loads(line)["uid"] for line in second.stdout.splitlines()] == ["uid-2", "uid-3"]


def test_show(db: list[str]) -> None:
    shown = gpupolicy("show", "uid-2", *db)
    assert shown.returncode == 0
    assert "uid: uid-2" in shown.stdout and "template_hash: sha256:" in shown.stdout
    as_json = json.loads(gpupolicy("show", "uid-2", *db, "--format", "json").stdout)
    assert as_json["uid"] == "uid-2" and as_json["experiment"] == "exp-a"
    assert json.loads(gpupolicy("show", "uid-2", *db, "--format", "jsonl").stdout)["uid"] == "uid-2"
    assert "uid-2" in gpupolicy("show", "uid-2", *db, "--format", "csv").stdout.splitlines()[1]
    missing = gpupolicy("show", "nope", *db)
    assert missing.returncode == 1 and "no provenance record 'nope'" in missing.stderr


def test_export(db: list[str], tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    done = gpupolicy("export", *db, "--experiment", "exp-b", "--output", str(out))
    assert done.returncode == 0 and done.stdout == ""
    assert [json.loads(line)["uid"] for line in out.read_text().splitlines()] == ["uid-3", "uid-4"]
    assert not out.with_name("export.jsonl.partial").exists()
    stdout = gpupolicy("export", *db, "--format", "csv", "--until", "2026-11-30T03:00:00Z").stdout
    assert [row["uid"] for row in csv.DictReader(io.StringIO(stdout))] == ["uid-0"]
    assert [item["uid"] for item in json.loads(gpupolicy("export", *db, "--format", "json").stdout)] == [
        f"uid-{index}" for index in range(5)
    ]
    assert len(gpupolicy("export", *db, "--format", "table").stdout.splitlines()) == 6


def test_usage_errors(tmp_path: Path) -> None:
    missing = gpupolicy("list", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert missing.returncode == 2 and "no provenance database at" in missing.stderr
    assert not (tmp_path / "none.db").exists()
    default = gpupolicy("list", env={"GPUPOLICY_PROVENANCE_DB": f"sqlite:///{tmp_path / 'env.db'}"})
    assert default.returncode == 2 and str(tmp_path / "env.db") in default.stderr
    bad_time = gpupolicy("list", "--db", f"sqlite:///{tmp_path / 'none.db'}", "--since", "soon")
    assert bad_time.returncode == 2 and "cannot read time" in bad_time.stderr
    unreachable = gpupolicy("list", "--db", "postgresql://postgres@127.0.0.1:1/test")
    assert unreachable.returncode == 2 and "unavailable" in unreachable.stderr
