"""The provenance replayer yields the CPU to the webhook: every thread of its process runs at a
lower weight (nice + 10) and under SCHED_BATCH, so that none of its wake-ups (ten a second, the
poll) takes a CPU from an admission in flight (docs/performance.md, "The replayer yields on
waking"). Read from the running processes, as the kernel sees them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpupolicy.webhook.provenance_replayer import NICE
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import replayer_pid, start_server, wait_for_replay

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's"),
]


def thread_ids(pid: int) -> list[int]:
    return [int(task.name) for task in Path(f"/proc/{pid}/task").iterdir()]


def test_every_replayer_thread_runs_under_sched_batch_at_a_lower_weight(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--no-cluster")
    try:
        with server.client() as http:  # a record stored: the store's threads have started
            assert http.post("/validate", json=admission_review(gpu_deployment())).status_code == 200
        wait_for_replay(server)
        pid = replayer_pid(server)
        webhook_nice = os.getpriority(os.PRIO_PROCESS, server.process.pid)
        threads = thread_ids(pid)
        policies = {tid: os.sched_getscheduler(tid) for tid in threads}
        nice = {tid: os.getpriority(os.PRIO_PROCESS, tid) for tid in threads}
        webhook_policy = os.sched_getscheduler(server.process.pid)
    finally:
        server.stop()
    assert len(threads) >= 3, threads  # the replay, its status reporter, the store's writer
    assert set(policies.values()) == {os.SCHED_BATCH}, policies
    assert set(nice.values()) == {min(19, webhook_nice + NICE)}, nice
    assert webhook_policy == os.SCHED_OTHER  # the webhook itself is left as it was
