"""CPU time of the provenance replayer's work per record, on two admission mixes.

    .venv/bin/python bench/record_cpu.py [--runs 7] [--bodies 500] [--repo PATH]

What the replayer's process does for each admission the webhook journaled, in a loop, without
the journal's files or the store: each run reviews the bodies of a mix (bench/admission_load.py)
as `gpupolicy serve` does (no cluster inventory), keeps the journal frame of each admission the
webhook records, decodes it, and then times `record_of_admission` (parse the body again, build
the record: redaction, template hash) and `body_json()` (what the store writes) over them once
each, in order, with `time.process_time()`:

- all-distinct: GPU Deployments of about 10 KB, each of its own content;
- realistic: Deployments with their ReplicaSets and Pods, scales and re-applies, Jobs and their
  Pods, each run a new generation of them (new names), so that nothing a run remembers serves
  the next.

Prints the CPU microseconds per record of every run and their median. `--repo` imports gpupolicy
from another checkout (e.g. an unpacked `git archive` of an older commit) to compare; run both
in one sitting, interleaved, on a machine shared with other work.

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MIXES = {"all-distinct": "distinct", "realistic": "realistic"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs (default 7)")
    parser.add_argument("--bodies", type=int, default=500, help="review bodies per mix (default 500)")
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to import gpupolicy from")
    options = parser.parse_args()
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "bench"))
    from admission_load import make_bodies  # this checkout's bodies

    sys.path.insert(0, str(options.repo.resolve()))  # so --repo goes before it

    import gpupolicy.rules  # registers the rules, as the server does at start-up
    from gpupolicy.policy.loading import load_policy

    policy = load_policy()
    bodies = {name: make_bodies(options.bodies, mix) for name, mix in MIXES.items()}
    _time_records(_entries(bodies["all-distinct"][:100], policy, 900_000_000), policy)  # warm-up
    gc.collect()
    gc.freeze()  # as the replayer does after start-up
    results: dict[str, list[float]] = {name: [] for name in MIXES}
    for run in range(options.runs):
        for name in MIXES:  # interleaved: a slower moment costs both mixes
            entries = _entries(bodies[name], policy, (run + 1) * 10_000_000)
            results[name].append(_time_records(entries, policy))
            del entries
    print(f"provenance record CPU per admission, gpupolicy from {Path(gpupolicy.rules.__file__).parents[2]}")
    for name, runs in results.items():
        print(f"{name:>12}: runs (us) " + " ".join(f"{value:.0f}" for value in runs))
        print(f"{'':>12}  median {statistics.median(runs):.1f} us, min {min(runs):.1f} us per record")


def _entries(bodies: list[bytes], policy: Any, first: int) -> list[Any]:
    """The decoded journal entries of the admissions the webhook records, as the replayer reads
    them: request numbers from `first` on (a realistic mix's generation is the number over the
    count of bodies)."""
    import orjson
    from admission_load import with_uid

    from gpupolicy.provenance.journal import frames
    from gpupolicy.provenance.journal.entries import decode
    from gpupolicy.webhook.records import journal_frame, should_record
    from gpupolicy.webhook.review import ReviewEngine, review

    engine = ReviewEngine.from_policy(policy)
    found = []
    for index, body in enumerate(bodies):
        sent = with_uid(body, first + index, len(bodies))
        decision = review(orjson.loads(sent), engine, None)
        if should_record(decision):
            frame = journal_frame(decision, policy, None, sent, now_ns=time.time_ns())
            found.append(decode(frames.decode(frame, 0)))
    return found


def _time_records(entries: list[Any], policy: Any) -> float:
    """CPU microseconds per record: built as the replayer builds it, and serialised for the store."""
    from gpupolicy.webhook.records import record_of_admission

    started = time.process_time()
    for entry in entries:
        record_of_admission(entry, policy).body_json()
    return (time.process_time() - started) / max(len(entries), 1) * 1e6


if __name__ == "__main__":
    main()
