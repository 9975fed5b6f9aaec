"""The route with the admission journal, in-process (Starlette's test client, a real journal in
tmp_path): an admitted GPU workload is in the journal when its answer arrives; dry runs,
denials and deletions never are; a full journal admits and counts the loss; /readyz and
/metrics report the journal and the replayer."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():  # starlette's notice about httpx2; the client still works
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from gpupolicy.policy.loading import default_policy
from gpupolicy.provenance.journal import segments
from gpupolicy.provenance.journal.appender import JournalAppender
from gpupolicy.provenance.journal.reader import JournalReader
from gpupolicy.provenance.record import NotRecordable, build_record
from gpupolicy.webhook.app import WebhookState, create_app
from gpupolicy.webhook.recording import Provenance
from gpupolicy.webhook.review import ReviewEngine
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.test_app import CLUSTER, MemoryStore, Synced


class ReplayerStatus:
    """The replayer's process as the webhook sees it (its report is what a replayer writes)."""

    def __init__(self) -> None:
        self.stopped = False

    def status(self) -> dict[str, Any]:
        return {
            "running": True,
            "pid": 4242,
            "restarts": 1,
            "last_exit": -9,
            "report": {
                "stored": 7,
                "unrecordable": 0,
                "store": {"writes": 6, "spooled": 1, "spool_backlog": 1},
            },
        }

    def stop(self, wait: float = 0.0) -> None:
        self.stopped = True


def journaled_uids(directory: Path) -> list[str]:
    return [entry.uid for entry, _ in JournalReader(directory).read(segments.START, limit=1000).admissions]


def client_for(journal: JournalAppender, replayer: ReplayerStatus | None = None) -> TestClient:
    provenance = Provenance(
        store=MemoryStore(),
        build_record=build_record,
        not_recordable=NotRecordable,
        journal=journal,
        replayer=replayer or ReplayerStatus(),
    )
    state = WebhookState(
        engine=ReviewEngine.from_policy(default_policy()),
        inventory=CLUSTER,
        inventory_status=Synced(True),
        provenance=provenance,
    )
    return TestClient(create_app(state))


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[JournalAppender]:
    appender = JournalAppender(
        tmp_path / "journal", segment_bytes=64 * 1024, max_bytes=8 * 1024 * 1024
    ).open()
    yield appender
    appender.close()


def test_an_admitted_gpu_workload_is_in_the_journal_when_the_answer_arrives(
    journal: JournalAppender, tmp_path: Path
) -> None:
    with client_for(journal) as client:
        body = admission_review(gpu_deployment())
        answer = client.post("/validate", json=body).json()["response"]
        assert answer["allowed"] is True
        assert journaled_uids(tmp_path / "journal") == [body["request"]["uid"]]  # on disk already
        assert 'gpupolicy_provenance_writes_total{outcome="recorded"} 1.0' in client.get("/metrics").text


def test_dry_runs_denials_and_deletions_are_never_journaled(journal: JournalAppender, tmp_path: Path) -> None:
    with client_for(journal) as client:
        client.post("/validate", json=admission_review(gpu_deployment(), dry_run=True))
        bad = gpu_deployment()
        bad["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
        assert client.post("/validate", json=admission_review(bad)).json()["response"]["allowed"] is False
        client.post("/validate", json=admission_review(None, operation="DELETE", old_object=gpu_deployment()))
    assert journaled_uids(tmp_path / "journal") == []


def test_a_full_journal_admits_and_counts_every_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    small = JournalAppender(
        tmp_path / "journal", segment_bytes=4096, max_bytes=8192, preallocate=False
    ).open()
    try:
        with client_for(small) as client, caplog.at_level(logging.ERROR):
            uids = []
            for _ in range(4):  # each body is about 10 KB: none fits
                body = admission_review(gpu_deployment())
                assert client.post("/validate", json=body).json()["response"]["allowed"] is True
                uids.append(body["request"]["uid"])
            metrics = client.get("/metrics").text
        assert 'gpupolicy_provenance_writes_total{outcome="failed"} 4.0' in metrics
        lost = [record for record in caplog.records if record.getMessage() == "provenance record lost"]
        assert [getattr(record, "fields", {}).get("uid") for record in lost] == uids
        assert all("the replayer is behind" in record.fields["reason"] for record in lost)  # type: ignore[attr-defined]
        assert small.status()["refused"] == 4
    finally:
        small.close()


def test_readiness_and_metrics_report_the_journal_and_the_replayer(journal: JournalAppender) -> None:
    replayer = ReplayerStatus()
    with client_for(journal, replayer) as client:
        client.post("/validate", json=admission_review(gpu_deployment()))
        detail = client.get("/readyz").json()["provenance"]
        metrics = client.get("/metrics").text
    assert detail["journal"]["appended"] == 1 and detail["journal"]["max_bytes"] == 8 * 1024 * 1024
    assert detail["replayer"]["restarts"] == 1
    assert detail["spooled"] == 1 and detail["spool_backlog"] == 1  # the replayer's store
    for line in (
        "gpupolicy_provenance_replayer_up 1.0",
        "gpupolicy_provenance_replayer_restarts_total 1.0",
        'gpupolicy_provenance_replayed_total{outcome="stored"} 7.0',
        'gpupolicy_provenance_store_writes_total{outcome="spooled"} 1.0',
        "gpupolicy_provenance_spool_backlog 1.0",
    ):
        assert line in metrics, line
    assert "gpupolicy_provenance_journal_backlog_bytes" in metrics
