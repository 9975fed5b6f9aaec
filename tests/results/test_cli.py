"""`gpupolicy results ingest|report` end to end on the real stores (SQLite and PostgreSQL): runs
joined to provenance records, the verdict, the JSON report against its schema, one transaction
per ingest, and the one-line errors (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpupolicy.cli.main import main
from gpupolicy.policy.loading import Policy
from gpupolicy.provenance import build_record
from tests.provenance.samples import REPO_ROOT, Backend, admission_request, deployment, report_for

EXAMPLE = REPO_ROOT / "examples" / "results" / "day29"
SEED_CONFIG = REPO_ROOT / "examples" / "seeds" / "day29-experiment.yaml"
SCHEMA = json.loads((REPO_ROOT / "policies" / "schemas" / "results-report.v1.schema.json").read_text())
SLO = "ttft_ms<=1500, tpot_ms<=60, p95_latency_ms<=6000, error_rate<=0.02"


def db_args(backend: Backend) -> list[str]:
    return ["--db", backend.url, *(["--schema", backend.schema] if backend.schema else [])]


def workload(
    name: str, arm: str, *, args: list[str] | None = None, image: str | None = None
) -> dict[str, Any]:
    obj = deployment(
        name=name,
        uid=f"uid-{name}",
        labels={"gpupolicy.io/experiment": "day29-experiment", "gpupolicy.io/arm": arm},
    )
    container = obj["spec"]["template"]["spec"]["containers"][0]
    if args is not None:
        container["args"] = args
    if image is not None:
        container["image"] = image
    return obj


def admit(
    backend: Backend, policy: Policy, *objects: dict[str, Any], config: dict[str, Any] | None = None
) -> None:
    with backend.open() as store:
        for obj in objects:
            store.record(
                build_record(
                    admission_request(obj), obj, report_for(obj, policy), policy, experiment_config=config
                )
            )


def ingest(backend: Backend, *args: str) -> int:
    return main(["results", "ingest", *args, *db_args(backend)])


def report(backend: Backend, tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    output = tmp_path / "report.json"
    code = main(
        ["results", "report", "day29-experiment", "-f", "json", "-o", str(output), *db_args(backend), *args]
    )
    return code, json.loads(output.read_text()) if output.exists() else {}


@pytest.fixture
def priced_policy(tmp_path: Path) -> Path:
    path = tmp_path / "pools.yaml"
    path.write_text(
        "apiVersion: gpupolicy.io/v1alpha1\nkind: Policy\nnodePools:\n"
        "  - {name: l4, gpuProduct: NVIDIA-L4, gpusPerNode: 4, pricePerGpuHour: 0.8}\n",
        encoding="utf-8",
    )
    return path


def test_runs_joined_to_provenance_give_a_trade_off_and_name_a_broken_comparison(
    backend: Backend, gpu_policy: Policy, tmp_path: Path, priced_policy: Path
) -> None:
    base_args = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"]
    admit(
        backend,
        gpu_policy,
        workload("llm-control", "control", args=[*base_args, "--max-num-seqs", "64"]),
        workload("llm-batch", "max-num-seqs-256", args=[*base_args, "--max-num-seqs", "256"]),
        workload(
            "llm-new-image",
            "new-image",
            args=[*base_args, "--max-num-seqs", "64"],
            image="vllm/vllm-openai:v0.7.0",
        ),
    )
    plan = [("control", "llm-control", "control"), ("max-num-seqs-256", "llm-batch", "max-num-seqs-256")]
    plan.append(("new-image", "llm-new-image", "max-num-seqs-256"))
    for arm, name, data in plan:
        for repeat in (1, 2, 3):
            code = ingest(
                backend,
                str(EXAMPLE / f"{data}-{repeat}.json"),
                *("--experiment", "day29-experiment", "--arm", arm, "--repeat", str(repeat)),
                *(
                    "--workload",
                    f"ai-lab/{name}",
                    "--config",
                    str(SEED_CONFIG),
                    "--policy",
                    str(priced_policy),
                ),
            )
            assert code == 0
    code, document = report(backend, tmp_path, "--slo", SLO)
    jsonschema.validate(document, SCHEMA)
    assert code == 0  # no treatment regressed (the default --fail-on)
    assert document["config"]["source"] == f"stored, from {SEED_CONFIG}"
    control = document["arms"][0]
    assert control["arm"] == "control" and len(control["runs"]) == 3
    first = control["runs"][0]
    assert (first["gpus"], first["gpu_source"], first["node_pool"], first["price_per_gpu_hour"]) == (
        2,
        "workload ai-lab/llm-control",
        "l4",
        0.8,
    )
    assert first["record_uid"] and first["template_hash"].startswith("sha256:")
    assert first["metrics"]["gpu_hours"] == pytest.approx(2 * first["metrics"]["duration_s"] / 3600)
    verdicts = {item["arm"]: item for item in document["treatments"]}
    batch = verdicts["max-num-seqs-256"]
    assert batch["verdict"] == "trade-off"
    assert {"accepted_rps", "goodput_per_gpu_hour", "cost_per_1k_accepted"} <= set(batch["improved"])
    assert {"latency_p95_ms", "latency_p99_ms", "ttft_p95_ms"} <= set(batch["worsened"])
    broken = verdicts["new-image"]
    assert broken["verdict"] == "inconclusive"
    assert broken["reasons"][0].startswith(
        f"run new-image#1 ({EXAMPLE / 'max-num-seqs-256-1.json'}) differs from control#1 in the fixed factor image"
    )
    assert document["comparability"]["unchecked"] == []
    # the same report, reproduced: the bootstrap is seeded
    assert report(backend, tmp_path, "--slo", SLO)[1] == document
    assert (
        main(
            [
                "results",
                "report",
                "day29-experiment",
                "--fail-on",
                "trade-off",
                "-o",
                str(tmp_path / "t.txt"),
                *db_args(backend),
                "--slo",
                SLO,
            ]
        )
        == 1
    )


def test_an_ingest_is_one_transaction(backend: Backend, tmp_path: Path) -> None:
    args = ["--experiment", "day29-experiment", "--arm", "control", "--gpus", "1"]
    assert ingest(backend, str(EXAMPLE / "control-1.json"), *args, "--repeat", "1") == 0
    # the run row goes in first, the config row fails: nothing of the ingest stays
    _refuse_config_inserts(backend)
    assert (
        ingest(backend, str(EXAMPLE / "control-2.json"), *args, "--repeat", "2", "--config", str(SEED_CONFIG))
        == 2
    )
    assert _run_count(backend) == 1


def _refuse_config_inserts(backend: Backend) -> None:
    from sqlalchemy import text

    from gpupolicy.provenance.engines import create_store_engine

    engine = create_store_engine(backend.url, schema=backend.schema)
    with engine.begin() as conn:
        if backend.name == "sqlite":
            conn.execute(
                text(
                    "CREATE TRIGGER refuse BEFORE INSERT ON result_experiments "
                    "BEGIN SELECT RAISE(ABORT, 'refused'); END"
                )
            )
        else:
            conn.execute(
                text(
                    "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$ "
                    "LANGUAGE plpgsql"
                )
            )
            conn.execute(
                text("CREATE TRIGGER refuse BEFORE INSERT ON result_experiments EXECUTE FUNCTION refuse()")
            )
    engine.dispose()


def _run_count(backend: Backend) -> int:
    from sqlalchemy import func, select

    from gpupolicy.provenance.engines import create_store_engine
    from gpupolicy.provenance.schema import result_runs

    engine = create_store_engine(backend.url, schema=backend.schema)
    with engine.connect() as conn:
        count = int(conn.execute(select(func.count()).select_from(result_runs)).scalar_one())
    engine.dispose()
    return count


def test_bad_input_stores_nothing_and_says_where(
    backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(
        '{"duration": 5, "ttfts": [0.1], "itls": [[0.01]], "input_lens": [5], "output_lens": [2], "errors": [7]}'
    )
    args = ["--experiment", "day29-experiment", "--arm", "control", "--repeat", "1", "--gpus", "1"]
    assert ingest(backend, str(EXAMPLE / "control-1.json"), str(broken), *args) == 2
    assert (
        capsys.readouterr().err
        == f"gpupolicy: {broken}: $.errors[0]: expected a string (empty for success)\n"
    )
    assert ingest(backend, str(EXAMPLE / "control-1.json"), *args) == 0
    assert ingest(backend, str(EXAMPLE / "control-2.json"), *args) == 2
    assert "already has run control#1; pass --replace" in capsys.readouterr().err
    assert ingest(backend, str(EXAMPLE / "control-2.json"), *args, "--replace") == 0
    assert _run_count(backend) == 1


def test_report_errors_are_one_line_exit_2(
    backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    k6 = REPO_ROOT / "tests" / "data" / "results" / "k6-out.json"
    assert (
        ingest(
            backend,
            str(k6),
            "--experiment",
            "day29-experiment",
            "--arm",
            "control",
            "--repeat",
            "1",
            "--gpus",
            "1",
        )
        == 0
    )
    capsys.readouterr()
    assert report(backend, tmp_path)[0] == 2
    assert (
        "no experiment config day29-experiment in the database: pass --config FILE" in capsys.readouterr().err
    )
    assert report(backend, tmp_path, "--config", str(SEED_CONFIG), "--slo", "ttft_ms<=500")[0] == 2
    assert "the SLO ttft_ms<=500 needs TTFT, which run control#1" in capsys.readouterr().err
    assert report(backend, tmp_path, "--config", str(SEED_CONFIG), "--slo", "gpu_util>=0.9")[0] == 2
    assert capsys.readouterr().err.startswith("gpupolicy: --slo: gpu_util: unknown objective")
    code, document = report(backend, tmp_path, "--config", str(SEED_CONFIG), "--slo", "e2e_ms<=800")
    assert code == 0 and document["arms"][0]["metrics"]["accepted"]["values"] == [2.0]
    assert (
        main(["results", "report", "other-experiment", *db_args(backend), "--config", str(SEED_CONFIG)]) == 2
    )
    capsys.readouterr()
    output = tmp_path / "no" / "r.txt"
    assert main(["results", "report", "day29-experiment", *db_args(backend), "-o", str(output)]) == 2
    assert capsys.readouterr().err == f"gpupolicy: --output {output}: no directory {output.parent}\n"


def test_the_worked_example_as_the_docs_run_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/results.md: the six generated runs of the day-29 experiment, priced by the example
    cluster's pool, end in a trade-off, and the report is the one the page shows; the generator
    writes the same files again."""
    monkeypatch.chdir(REPO_ROOT)
    regenerated = tmp_path / "day29"
    subprocess.run([sys.executable, str(EXAMPLE.parent / "generate.py"), str(regenerated)], check=True)
    assert sorted(p.name for p in regenerated.iterdir()) == sorted(p.name for p in EXAMPLE.iterdir())
    for path in regenerated.iterdir():
        assert path.read_bytes() == (EXAMPLE / path.name).read_bytes(), path.name
    db = ["--db", f"sqlite:///{tmp_path / 'results.db'}"]
    for arm in ("control", "max-num-seqs-256"):
        for repeat in (1, 2, 3):
            code = main(
                [
                    "results", "ingest", str(EXAMPLE / f"{arm}-{repeat}.json"),
                    "--experiment", "day29-experiment", "--arm", arm, "--repeat", str(repeat),
                    "--gpus", "1", "--policy", str(REPO_ROOT / "examples" / "cluster" / "policy.yaml"),
                    "--node-pool", "a100-80gb", "--config", "examples/seeds/day29-experiment.yaml", *db,
                ]
            )  # fmt: skip
            assert code == 0
    output = tmp_path / "report.md"
    assert (
        main(
            ["results", "report", "day29-experiment", "--slo", SLO, "-f", "markdown", "-o", str(output), *db]
        )
        == 0
    )
    text = output.read_text()
    assert "**max-num-seqs-256**: **trade-off**; improved: accepted throughput +" in text
    assert "worsened: SLO attainment" in text and "P95 latency +" in text
    table = tmp_path / "report.txt"
    assert main(["results", "report", "day29-experiment", "--slo", SLO, "-o", str(table), *db]) == 0
    docs = (REPO_ROOT / "docs" / "results.md").read_text()
    assert f"```\n{table.read_text()}```\n" in docs


def test_ingest_usage_errors_name_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", f"sqlite:///{tmp_path / 'r.db'}"]
    run = [
        str(EXAMPLE / "control-1.json"),
        "--experiment",
        "day29-experiment",
        "--arm",
        "control",
        "--repeat",
        "1",
    ]
    bad_config = tmp_path / "exp.yaml"
    bad_config.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: day29-experiment}\n"
        "data:\n  change: x\n  fixed: image\n  metrics: P95\n  repeats: three\n",
        encoding="utf-8",
    )
    cases = [
        (["--gpus", "1", "--config", str(bad_config)], f"{bad_config}:8: data.repeats"),
        (["--workload", "vllm"], "--workload vllm: expected NAMESPACE/NAME"),
        (["--workload", "ai-lab/none"], "no provenance record of ai-lab/none in the database"),
        (
            [
                "--gpus",
                "1",
                "--node-pool",
                "mi300x",
                "--policy",
                str(REPO_ROOT / "examples" / "cluster" / "policy.yaml"),
            ],
            "--node-pool mi300x: the pool has no pricePerGpuHour",
        ),
        (["--gpus", "1", "--node-pool", "tpu"], "--node-pool tpu: no such pool"),
    ]
    for extra, message in cases:
        assert main(["results", "ingest", *run, *extra, *db]) == 2, extra
        err = capsys.readouterr().err
        assert err.startswith("gpupolicy: ") and message in err and err.count("\n") == 1, err


def test_gpus_from_a_record_are_gpus_per_pod_times_replicas() -> None:
    from types import SimpleNamespace

    from gpupolicy.cli.commands.results import record_gpus
    from gpupolicy.cli.main import UsageError

    def record(*templates: dict[str, Any]) -> Any:
        return SimpleNamespace(namespace="ai-lab", name="llm", gpu=list(templates))

    def device(limit: str | None, request: str | None = None, kind: str = "device") -> dict[str, Any]:
        return {"resource": "nvidia.com/gpu", "kind": kind, "limit": limit, "request": request}

    leader = {"replicas": 1, "resources": [device("4")]}
    workers = {"replicas": 3, "resources": [device("2"), device(None, "1")]}
    assert record_gpus(record(leader, workers)) == 4 + 3 * 3
    with pytest.raises(UsageError, match=r"uses shared GPU resource nvidia\.com/gpu: pass --gpus"):
        record_gpus(record({"replicas": 1, "resources": [device("1", kind="shared")]}))
    with pytest.raises(UsageError, match="shows no GPUs"):
        record_gpus(record({"replicas": 0, "resources": [device("1")]}))
    assert (
        record_gpus(record({"replicas": 2, "resources": [device("1e0")]})) == 2
    )  # a quantity, as the API reads it
    for amount in ("nan", "inf", "2 GPUs"):
        with pytest.raises(UsageError, match="is not a quantity"):
            record_gpus(record({"replicas": 1, "resources": [device(amount)]}))


def test_an_unreachable_database_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    db = ["--db", "postgresql://postgres@127.0.0.1:9/none"]  # the discard port: nothing listens
    run = [str(EXAMPLE / "control-1.json"), "--experiment", "day29-experiment", "--arm", "control"]
    assert main(["results", "ingest", *run, "--repeat", "1", "--gpus", "1", *db]) == 2
    assert capsys.readouterr().err.startswith("gpupolicy: provenance database unavailable: OperationalError")
    assert main(["results", "report", "day29-experiment", *db]) == 2
    assert capsys.readouterr().err.startswith("gpupolicy: provenance database unavailable")


def test_the_config_admitted_with_the_arms_comes_from_the_store(
    backend: Backend, gpu_policy: Policy, tmp_path: Path
) -> None:
    import yaml

    config = yaml.safe_load(SEED_CONFIG.read_text(encoding="utf-8"))
    config["data"]["slo"] = "ttft_ms<=1500, tpot_ms<=60, p95_latency_ms<=6000"
    admit(
        backend,
        gpu_policy,
        workload("llm-control", "control", args=["--max-num-seqs", "64"]),
        workload("llm-batch", "max-num-seqs-256", args=["--max-num-seqs", "256"]),
        config=config,
    )
    for arm, name in (("control", "llm-control"), ("max-num-seqs-256", "llm-batch")):
        for repeat in (1, 2, 3):
            args = ["--experiment", "day29-experiment", "--arm", arm, "--repeat", str(repeat)]
            assert (
                ingest(backend, str(EXAMPLE / f"{arm}-{repeat}.json"), *args, "--workload", f"ai-lab/{name}")
                == 0
            )
    code, document = report(backend, tmp_path)
    assert code == 0
    assert document["config"]["source"].startswith("admitted 2")
    assert ", from provenance record " in document["config"]["source"]
    assert document["slo"]["source"] == "config"
    assert set(document["slo"]["per_request"]) == {"ttft_ms", "tpot_ms"}
    assert document["treatments"][0]["verdict"] == "trade-off"
