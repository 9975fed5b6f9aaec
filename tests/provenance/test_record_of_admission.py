"""The replayer's record of a journal entry (gpupolicy/webhook/records.py)."""

from __future__ import annotations

import gc

from gpupolicy.policy.loading import Policy
from gpupolicy.provenance.journal import frames
from gpupolicy.provenance.journal.entries import Admission, decode
from gpupolicy.webhook.records import record_of_admission
from tests.provenance.journal_samples import admission_frame


def _entry(uid: str, policy: Policy) -> Admission:
    entry = decode(frames.decode(admission_frame(uid, policy, time_ns=1_796_000_000_123_456_789), 0))
    assert isinstance(entry, Admission)
    return entry


def test_a_record_leaves_no_garbage_for_the_collector(gpu_policy: Policy) -> None:
    """The workload view's memos (GPU demands that name their container) are cycles; the record
    releases them, so what it parsed is freed by reference counting as soon as it is built."""
    entries = [_entry(f"req-{index}", gpu_policy) for index in range(20)]
    record_of_admission(entries[0], gpu_policy).body_json()  # memos and imports warm
    gc.collect()
    gc.disable()
    try:
        records = [record_of_admission(entry, gpu_policy) for entry in entries]
        assert gc.collect() == 0
    finally:
        gc.enable()
    assert [record.uid for record in records] == [f"req-{index}" for index in range(20)]
    assert records[1].time.endswith(".123456Z")
