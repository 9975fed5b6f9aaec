"""No leaks, through the real server: admit objects full of secret-looking material (env values,
`--api-key=…` arguments, shell assignments, comments in the rollback annotation, toleration and
selector values under keys named `password`, a Secret itself, malformed reviews carrying a
token), then read every byte the webhook wrote — the SQLite store with its WAL, the spool
files when the database is down, the log at the default level — for each secret: none is there.
Nor is a marker that only the object's body holds (the log never prints object bodies)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpupolicy.provenance import open_store
from gpupolicy.provenance.spool import Spool
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import ServerProcess, free_port, start_server, wait_for_replay

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

# Every secret is unique, long enough to be found once, and looks like nothing else in the files.
RUN = uuid.uuid4().hex[:6]


def secret(name: str) -> str:
    return f"Zq{name}{RUN}Xv9"


SECRETS = {
    name: secret(name)
    for name in (
        "envplain", "envhf", "envjson", "argapikey", "argpass", "argtoken", "shelltoken", "shellpass",
        "annotoken", "annopass", "annojson", "modelpw", "amztoken", "tolpass", "toltoken", "affpass",
        "nodesel", "secretdata", "secretstring", "secretannotation", "cmpass", "badversion",
        "badoperation", "dryrunenv", "hfsuffix",
    )
}  # fmt: skip
HF_TOKEN = "hf_" + SECRETS["hfsuffix"] + "AbCdEfGhIjKlMnOpQrSt"
# Only the object's body holds it, in a field no record keeps: never in the log.
BODY_MARKER = f"body-marker-{RUN}"


def secret_deployment(*, name: str = "llm-server") -> dict[str, Any]:
    obj = gpu_deployment(managed_fields=0)
    metadata = obj["metadata"]
    metadata["name"] = name
    annotations = metadata["annotations"]
    annotations["gpupolicy.io/rollback-criteria"] = (
        "[{metric: p95_latency_ms, max: 800, window: 10m}]  # token=" + SECRETS["annotoken"] + "\n"
        "# password: " + SECRETS["annopass"] + '\n# {"apiToken": "' + SECRETS["annojson"] + '"}'
    )
    annotations["gpupolicy.io/model"] = f"https://user:{SECRETS['modelpw']}@hub.example.com/llama"
    annotations["gpupolicy.io/input"] = f"s3://bucket/set?X-Amz-Security-Token={SECRETS['amztoken']}"
    annotations["example.com/note"] = BODY_MARKER
    spec = obj["spec"]["template"]["spec"]
    container = spec["containers"][0]
    container["env"] += [
        {"name": "PLAIN", "value": SECRETS["envplain"]},
        {"name": "HF_TOKEN", "value": HF_TOKEN},
        {"name": "CONFIG", "value": '{"password": "' + SECRETS["envjson"] + '"}'},
    ]
    container["args"] += [
        f"--api-key={SECRETS['argapikey']}",
        "--password",
        SECRETS["argpass"],
        f"--token={SECRETS['argtoken']}",
    ]
    container["command"] = [
        "sh",
        "-c",
        f"export API_TOKEN={SECRETS['shelltoken']}; password={SECRETS['shellpass']} exec vllm",
    ]
    spec["tolerations"] += [
        {"key": "password", "operator": "Equal", "value": SECRETS["tolpass"], "effect": "NoSchedule"},
        {"key": "example.com/api-token", "operator": "Equal", "value": SECRETS["toltoken"]},
    ]
    spec["nodeSelector"]["secret"] = SECRETS["nodesel"]
    spec["affinity"]["nodeAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "password", "operator": "In", "values": [SECRETS["affpass"]]}]}
            ]
        }
    }
    return obj


def secret_object() -> dict[str, Any]:
    """A Secret itself, as a webhook whose rules match too much would receive it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "hf-token",
            "namespace": "ai-lab",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": SECRETS["secretannotation"]},
        },
        "type": "Opaque",
        "data": {"token": SECRETS["secretdata"]},
        "stringData": {"password": SECRETS["secretstring"]},
    }


def experiment_config_map() -> dict[str, Any]:
    """An experiment ConfigMap (a cross-object kind the webhook evaluates) with bad values."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "day29-experiment",
            "namespace": "ai-lab",
            "labels": {"gpupolicy.io/experiment": "day29-experiment"},
        },
        "data": {"repeats": f"password={SECRETS['cmpass']}", "arms": f"token: {SECRETS['cmpass']}"},
    }


def admit_everything(server: ServerProcess) -> None:
    with server.client() as http:
        for index in range(3):
            body = admission_review(secret_deployment(name=f"llm-{index}"))
            answer = _answer(http, body)
            assert answer["uid"] == body["request"]["uid"]
        dry_run = secret_deployment(name="llm-dry-run")
        dry_run["spec"]["template"]["spec"]["containers"][0]["env"].append(
            {"name": "X", "value": SECRETS["dryrunenv"]}
        )
        _answer(http, admission_review(dry_run, dry_run=True))
        _answer(http, admission_review(secret_object()))
        _answer(http, admission_review(experiment_config_map()))
        update = secret_deployment(name="llm-0")
        _answer(http, admission_review(update, operation="UPDATE", old_object=copy.deepcopy(update)))
        malformed = admission_review(secret_deployment())
        malformed["apiVersion"] = f"password={SECRETS['badversion']}"
        assert http.post("/validate", json=malformed).status_code == 400
        malformed = admission_review(secret_deployment())
        malformed["request"]["operation"] = f"token={SECRETS['badoperation']}"
        assert http.post("/validate", json=malformed).status_code == 400


def _answer(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post("/validate", json=body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()["response"]
    return answer


def written_files(folder: Path) -> Iterator[Path]:
    yield from (path for path in sorted(folder.rglob("*")) if path.is_file())


def leaks(data: bytes) -> list[str]:
    return [name for name, value in SECRETS.items() if value.encode() in data] + (
        ["hf token"] if HF_TOKEN.encode() in data else []
    )


@pytest.mark.parametrize("database", ["sqlite", "database-down"])
def test_store_spool_and_log_hold_no_secret(tmp_path: Path, database: str) -> None:
    args = ["--no-cluster", "--mode", "warn"]  # admitted (and recorded) despite their findings
    if database == "database-down":  # nothing listens there: every record goes to the spool
        args += ["--db", f"postgresql://postgres@127.0.0.1:{free_port()}/none", "--db-timeout", "0.5"]
    server = start_server(tmp_path, *args)
    try:
        admit_everything(server)
        # The journal holds admitted bodies as received until the replayer has made their
        # records: wait for that here rather than leave it to the shutdown's drain, whose few
        # seconds a loaded machine can overrun (the drain has tests of its own, test_shutdown.py).
        wait_for_replay(server)
    finally:
        server.stop()
    files = list(written_files(server.data_dir))
    for path in files:
        assert leaks(path.read_bytes()) == [], path
    log = server.log_path.read_bytes()
    assert b"admission reviewed" in log and b"malformed admission request" in log
    assert leaks(log) == []
    assert BODY_MARKER.encode() not in log
    # What was written is the records (read only now: opening the store rewrites its files).
    assert recorded(server.data_dir, database) == 4  # three creates and one update


def recorded(data_dir: Path, database: str) -> int:
    if database == "database-down":
        spool = Spool(data_dir / "spool")
        spool.take()
        return sum(len(batch.records) for batch in spool.batches())
    store = open_store(None, spool_dir=data_dir / "spool", start_replayer=False)
    try:
        return store.count()
    finally:
        store.close()
