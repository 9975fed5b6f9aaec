"""How often the cyclic garbage collector runs in the webhook's processes.

Almost everything an admission makes is freed by reference counting the moment it is done
with; the collector's passes only walk what is alive at the time (the bodies of the admissions
in flight, the replayer's batch of records) and find little garbage. Fewer passes, each walking
what is alive then, cost less in all. `BENCH_GC=trace bench/webhook_latency.py` prints what the
collector cost each server.
"""

from __future__ import annotations

import gc

# Objects made (less those freed) between two young collections (CPython's default: 700), and
# passes of the middle generation between two full collections (default: 10).
YOUNG_COLLECTION_EVERY = 2_000
FULL_COLLECTION_EVERY = 100


def fewer_collections() -> None:
    """Set for a process that serves admissions (the webhook, and its provenance replayer).

    A full collection walks every object made since start-up (the remembered decisions, the
    inventory's objects, the redaction's memo): under load, 30-90 ms each, one every 100 or so
    admissions at CPython's default, a third of the collector's time and the worst pauses the
    fixed-rate p99 saw. Almost everything an admission makes is freed by reference counting
    (about 20 objects a review are cyclic garbage), so ten times fewer full passes leave little
    more garbage in memory.

    The young passes are fewer too. Every 700 objects, they ran in the middle of parsing an
    AdmissionReview (its 400 mappings and lists are made at once) and walked the bodies of every
    admission in flight, all freed by reference counting moments later. Every 2,000 (CPython
    3.13's default), a third as many passes walk those bodies; a pass walks up to 2,000 young
    objects (1-2 ms). One every 10,000 halved the collector's time in a saturated run (gen0 567
    ms over 6,756 passes against 266 ms over 52) but each pass took 5 ms, a pause that the p99
    at 200 admissions a second would see every second; 2,000 keeps passes short."""
    gc.set_threshold(YOUNG_COLLECTION_EVERY, gc.get_threshold()[1], FULL_COLLECTION_EVERY)
