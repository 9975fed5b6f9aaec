"""`gpupolicy lint -j N`: the streaming lint (gpupolicy/lint/streaming.py) in N processes, with the
report of one process, byte for byte, and its exit code.

The workers are forked (multiprocessing's "fork" start method, so POSIX only: elsewhere the lint
runs in one process). Each starts with the parent's memory as it was at the fork — the policy, the
registered rules (custom ones included), the rendered charts and overlays, the inventory — and
loads nothing again; it shares those pages with the parent until it writes to them.

1. The index. The parent renders the charts and kustomizations (their renderer runs once, and their
   objects stay for pass 2); the workers read the other inputs, a chunk of inputs at a time, and
   send back the values of the objects that rules look up (`streaming.INDEX_KINDS`, experiment
   arms). The parent builds the inventory of the whole run from them.
2. The stream. Workers forked afresh, now with the whole inventory, read chunks of inputs, check
   each object and release it as one process does, and send back what the chunk added to the run
   (`streaming.StreamedChunk`): findings, roles, internal errors, input problems, comments, what
   the suppressions need, the objects of `streaming.READER_KINDS` (PDBs, HPAs, ...) with their
   position tables and the workloads those may read (values only, packed: gpupolicy/lint/packed.py).
3. The parent adds the chunks in the inputs' order (what is said once per run is said by the first
   finding in that order, as in one process), checks the deferred objects with every workload they
   may read in the inventory, and makes the report as one process does: suppressions, baselines,
   `--changed-since` and the formats see one report.

Nothing here decides a finding. A worker that dies (killed, out of memory, a crash in a C
extension) ends the run with an internal error (exit 3), never with a report that lacks its
chunk. A chunk the stream cannot vouch for (`streaming.Fallback`, raised in the worker and again
here) makes the lint fall back to the in-memory path, in one process, as without -j.
"""

from __future__ import annotations

import gc
import multiprocessing
import sys
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

from gpupolicy.core.immutable import immutable
from gpupolicy.engine.report import Report
from gpupolicy.lint.streaming import (
    Key,
    Places,
    StreamedChunk,
    StreamRun,
    StreamRunner,
    Units,
    Values,
    documents_to_index,
    indexed_objects,
    input_bytes,
)
from gpupolicy.loading.documents import LoadedText, Resource

T = TypeVar("T")
Chunk = tuple[int, ...]  # consecutive inputs of those a pass reads, by their index in the run
# Chunks per process: the last chunk to finish keeps the others waiting for at most about 1/8 of a
# process's share of the run.
CHUNKS_PER_PROCESS = 8
# A chunk's findings and deferred objects are held in its worker until the chunk is sent: a bound
# on a worker's memory beyond what it shares with the parent.
MAX_CHUNK_BYTES = 2_000_000


class WorkerDied(RuntimeError):
    """A worker process ended without sending its chunk: the report would be incomplete."""


def in_processes(jobs: int) -> StreamRunner | None:
    """What runs a stream in `jobs` processes; None where processes cannot be forked (Windows)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    return lambda run, units: run_in_processes(run, units, jobs)


@immutable
class _Work:
    """What forked workers work on: the run as the parent had it at the fork."""

    run: StreamRun
    units: Units
    indexed: dict[int, dict[int, Resource]]
    rendered: dict[int, LoadedText]
    said: frozenset[Hashable]  # what the run had said at the fork (each chunk starts from it)


_work: _Work | None = None  # set in the parent for the workers it is about to fork


def run_in_processes(run: StreamRun, units: Units, jobs: int) -> Report:
    """The stream of `run` over `units`, its two passes in `jobs` processes."""
    indexed, rendered = _index(run, units, jobs)
    run.choose_readers(units, indexed, rendered)
    work = _Work(run, units, indexed, rendered, frozenset(run.evaluation.ctx.said))
    read = [unit for unit, (_, reported) in enumerate(units) if reported or run.readers is not None]
    for chunk in _in_processes(_read_chunk, _chunks(units, read, jobs), work, jobs):
        run.add_chunk(chunk, indexed)
    return run.finish_run()


def _index(
    run: StreamRun, units: Units, jobs: int
) -> tuple[dict[int, dict[int, Resource]], dict[int, LoadedText]]:
    """Pass 1: rendered inputs here (kept whole for pass 2), the others' indexed objects in workers."""
    indexed: dict[int, dict[int, Resource]] = {}
    rendered: dict[int, LoadedText] = {}
    plain = []
    for unit, (source, _) in enumerate(units):
        if not source.rendered:
            plain.append(unit)
            continue
        loaded = rendered.setdefault(unit, source.load(run.limits))
        for position, resource in indexed_objects([loaded], Places(by_document=False)):
            run.keep_indexed((unit, position), resource, indexed, release=False)
    work = _Work(run, units, {}, {}, frozenset())
    for found in _in_processes(_index_chunk, _chunks(units, plain, jobs), work, jobs):
        for key, values in found:
            run.keep_indexed(key, values.rebuilt(), indexed, release=False)
    return indexed, rendered


def _index_chunk(chunk: Chunk) -> list[tuple[Key, Values]]:
    """In a worker: the indexed objects of the chunk's inputs (plain ones), values only."""
    assert _work is not None
    run, units = _work.run, _work.units
    found: list[tuple[Key, Values]] = []
    for unit in chunk:
        # Workers keep nothing for pass 2: the indexed objects' values alone, read apart.
        documents = documents_to_index(units[unit][0], run.limits, apart=True) or ()
        found.extend(
            ((unit, position), Values.of(resource))
            for position, resource in indexed_objects(documents, Places(by_document=True))
        )
    return found


def _read_chunk(chunk: Chunk) -> StreamedChunk:
    """In a worker: pass 2 over the chunk's inputs."""
    assert _work is not None
    run = _work.run
    run.begin_chunk(_work.said)
    run.read_units(_work.units, _work.indexed, _work.rendered, chunk)
    return run.take_chunk()


def _chunks(units: Units, chosen: Sequence[int], jobs: int) -> list[Chunk]:
    """The `chosen` inputs in order, about CHUNKS_PER_PROCESS chunks per process of about equal bytes."""
    sizes = [input_bytes(units[unit][0]) for unit in chosen]
    target = min(max(sum(sizes) / (jobs * CHUNKS_PER_PROCESS), 1), MAX_CHUNK_BYTES)
    chunks: list[Chunk] = []
    start, size = 0, 0
    for index, weight in enumerate(sizes):
        size += weight
        if size >= target:
            chunks.append(tuple(chosen[start : index + 1]))
            start, size = index + 1, 0
    if start < len(chosen):
        chunks.append(tuple(chosen[start:]))
    return chunks


def _in_processes(
    function: Callable[[Chunk], T], chunks: Sequence[Chunk], work: _Work, jobs: int
) -> Iterator[T]:
    """`function` of each chunk in forked workers, the results in the chunks' order."""
    global _work
    if not chunks:
        return
    # A forked worker flushes the standard streams it inherited when it ends: nothing may be pending.
    sys.stdout.flush()
    sys.stderr.flush()
    _work = work
    # Objects that exist at the fork stay out of the workers' collections, so that a collection does
    # not write to (and so copy) every page the worker shares with the parent (the gc docs' advice).
    gc.freeze()
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(chunks)), mp_context=multiprocessing.get_context("fork")
    )
    try:
        yield from pool.map(function, chunks)
    except BrokenProcessPool as exc:
        raise WorkerDied(
            f"a lint worker process (-j {jobs}) ended abruptly (killed, out of memory or crashed): "
            "no report, as it would lack that worker's files"
        ) from exc
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        gc.unfreeze()
        _work = None
