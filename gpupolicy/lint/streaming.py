"""`gpupolicy lint` in bounded memory: each object is released once its findings are made.

An object's positions (kept for its findings) weigh about as much as its values, and a run that
keeps every object until the end grows by about 45 KB per object (86 KB when the loader kept each
document's node graph; docs/performance.md, "Loader"). Here an object's rules run as its file is
read, and nothing of it outlives them but its findings, unless a rule of another object reads it.
Rules read other objects through the inventory (a workload's PDB, its Services, its PriorityClass,
its experiment's ConfigMap ...), so the inventory must hold them before the first object is
checked. Two passes over the inputs:

1. The index. An input whose text may hold an object of a kind rules look up (`INDEX_KINDS`,
   seen by a quick look at its `kind:` lines) or an experiment arm (whose rules compare it with
   the other arms) is read, and those objects are kept, values only.
2. The stream. Every input is read again one document at a time (but those pass 1 read whole and
   kept, as read, within `KEEP_LOADED_BYTES`: in one process, a small tree is read once; and past
   it, the documents pass 1 read apart and kept within `KEEP_CHOSEN_BYTES`, which pass 2 takes
   back among the file's other documents, which alone it parses). Each
   object is checked (an indexed one gets its positions back for that time), what the
   suppressions need of it is noted (`SuppressionSubject`), and it is released.

The rules of a few kinds read plain workloads of any file: the PDB rules (the workloads a PDB
selects), GP506 (the HPA's target), GP615 (a Namespace's GPU workloads), GP616 (the workloads
that run as a service account a binding names). Objects of those kinds (`READER_KINDS`) are
checked after the stream, and each workload the stream passes that one of them may read is kept,
values only and packed (`_Readers`, gpupolicy/lint/packed.py).

The report is the one `evaluate()` gives over everything loaded at once, byte for byte
(tests/test_streaming.py compares them on the labelled corpus and every rule example). Where the
stream cannot vouch for that, it stops (`Fallback`) and `lint()` runs the in-memory path:
an input the quick look passed over holds an indexed object (a kind written through an alias or an
escape); a rule of an object checked in the stream asks the inventory for a kind that is not
indexed; an input changed between the passes; a syntax error after documents that read
differently on their own (documents.iter_parse); rules of bundle scope (there are none today).
An input read only as context (pre-commit's repository) and not read again in the second pass
is trusted to the quick look: an indexed object whose `kind` key itself is written with escapes
would be missed there.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any, NamedTuple

from gpupolicy.core.findings import Finding
from gpupolicy.core.immutable import mutable
from gpupolicy.core.vocabulary import EXPERIMENT_LABEL, IGNORE_ANNOTATION
from gpupolicy.engine.context import Context
from gpupolicy.engine.evaluation import Evaluation, complete_kinds, evaluate
from gpupolicy.engine.report import InternalError, Report, WorkloadRole
from gpupolicy.engine.suppressions import SuppressionSubject
from gpupolicy.kube.disruption import HPA, PDB, pdb_selects
from gpupolicy.kube.experiment_arms import arm_link
from gpupolicy.kube.inventory import Bundle, namespace_of
from gpupolicy.kube.pod_spec import as_list, as_mapping, release_views, workload_of
from gpupolicy.lint.packed import PackedResource, Unpacked, place_of
from gpupolicy.loading.directives import InlineDirective
from gpupolicy.loading.documents import (
    DEFAULT_LIMITS,
    ChunkRead,
    DuplicateKey,
    LoadedText,
    LoadLimits,
    LoadProblem,
    Resource,
    Skipped,
    StreamReadsDifferently,
)
from gpupolicy.loading.inputs import Loaded, Source
from gpupolicy.loading.positions import LineStarts, PositionTable
from gpupolicy.loading.rendering import merge_unbuilt_overlays
from gpupolicy.policy.loading import Policy

# Kinds whose rules read plain workloads of any file: checked after the stream.
READER_KINDS = frozenset({PDB, HPA, "Namespace", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})
# Every kind a rule asks the inventory for (besides workloads, which only the readers and the
# experiment arms ask for): every object of these kinds is kept for the whole run.
INDEX_KINDS = READER_KINDS | frozenset(
    {
        "Service", "ConfigMap", "ServiceAccount", "NetworkPolicy", "PriorityClass", "WorkloadPriorityClass",
        "RuntimeClass", "AnalysisTemplate", "ClusterAnalysisTemplate", "Canary", "Rollout", "ResourceClaim",
        "ResourceClaimTemplate", "ComputeDomain", "DeviceClass",
    }
)  # fmt: skip
# `kind: Service`, `"kind": "Service"`, `kind: !!str 'Service'`, `kind:\n  Service`; or a kind
# written through an alias or with an escape, which only reading tells.


def _kind_among(kinds: frozenset[str]) -> re.Pattern[str]:
    names = "|".join(sorted(kinds, key=len, reverse=True))
    return re.compile(rf"""kind["']?\s*:\s*(?:[!&]\S*\s+)*(?:\*|"[^"\n]*\\|["']?(?:{names})\b)""")


_INDEXED_KIND = _kind_among(INDEX_KINDS)
_READER_KIND = _kind_among(READER_KINDS)

Key = tuple[int, int]  # (input, object): the order of evaluate()'s list
Units = list[tuple[Source, bool]]  # the inputs of a run, each with whether it is reported on
# What runs a stream's passes somewhere else than in this process (gpupolicy/lint/parallel.py).
StreamRunner = Callable[["StreamRun", Units], Report]
# Objects released between two collections of the youngest generation. Batch runs pause the cyclic
# collector (runtime.paused_cyclic_gc); the cycles known to form per object (a GPU demand memoised on
# the container it names; the loader's builders) are broken when the object is done with, and this
# collection is the backstop for any other. It walks only what was made since the last one and is
# still alive: with nothing left to free, a small cost (bench/stream_collections.py: 0.012 s per
# 10,000 Deployments, from 1.0-1.2 s when the cycles were left to it).
COLLECT_EVERY = 500


# Objects read before the first of them is checked. Reading a few documents, then checking them,
# leaves the parser's and the rules' code and data in the CPU's caches for several objects each;
# alternating them at every document cost the stream 1-2 % more CPU on 10,000 GPU Deployments, ten
# to a file (docs/performance.md, 6 December 2026: near the noise of a shared machine). A few
# objects' values and positions (about 45 KB each) are held at once instead of one's.
BATCH_OBJECTS = 16


# A run in processes (-j not given: `processes_for`) from this many bytes of input. -j 2 costs about
# 0.1 s more than -j 1 and saves up to half of 0.33 s of CPU per MB: on 2 idle cores it breaks even
# at about 1 MB and gains 1.3x at 2.6 MB, 1.55x at 5 MB, 1.8x at 26 MB; on cores busy with other
# work it may gain nothing (docs/performance.md). From 8 MB it pays where a core is free.
PROCESSES_FROM_BYTES = 8_000_000
# What a rendered input (a chart, a kustomization) counts for, in bytes, before it is rendered.
RENDERED_INPUT_BYTES = 64_000
# Reported inputs that pass 1 reads whole (those a quick look finds an indexed kind in: a Service or
# a PDB beside a Deployment, in most repositories every file) are kept as read, positions included, for
# pass 2 rather than read again, up to this many bytes of their text in all. Reading them again was
# about a quarter of the lint of a tree with a PDB beside every Deployment: 2,000 objects in 2.8 MB
# took 1.23 s with -j 1, 0.86 s kept, and its peak memory went from 66 to 82 MB; 10,000 in 14.2 MB
# 5.2 s, 3.8 s kept, peak 159 to 242 MB (docs/performance.md, "Inputs read once"). Twice
# PROCESSES_FROM_BYTES: every tree that one process lints by default, on a machine with several
# cores, is read once. Past the budget, inputs are read again: memory stays bounded.
KEEP_LOADED_BYTES = 2 * PROCESSES_FROM_BYTES
# Of the reported inputs past KEEP_LOADED_BYTES, pass 1 reads only the documents that may hold an
# indexed kind, each apart (`documents_to_index`); those it keeps as read, positions included, up to
# this many bytes of their text in all, and pass 2 reads only the file's other documents
# (`Source.iter_load`'s `given`). Read again, they were the part of a large tree's lint that grew
# with its size: in bench/lint_throughput.py's bundle, 16.5 of 143 MB (a PDB beside each
# Deployment), parsed in both passes past 16 MB (docs/performance.md, "Linear from 10,000 to
# 100,000 objects"). A PDB (a kind the deferred readers check) keeps its positions until the end
# of the run anyway.
KEEP_CHOSEN_BYTES = 2 * KEEP_LOADED_BYTES
# What a byte of pre-commit's context weighs for `processes_for` when pass 2 does not read it
# (`context_read_once`): pass 1 parses only its documents that may hold an indexed kind
# (`documents_to_index`), about a tenth of the work of reading it whole. The hook in a repository of
# 14 MB (1,000 files of bench/lint_throughput.py's bundle) took 0.4 s of CPU past its start so,
# 1.5 s reading each file whole.
CONTEXT_APART_SHARE = 0.1


def input_bytes(source: Source) -> int:
    """About how much reading and checking an input takes, in bytes of text."""
    if source.text is not None:
        return len(source.text)
    if source.path is None:
        return 0
    if source.rendered:
        return RENDERED_INPUT_BYTES
    try:
        return source.path.stat().st_size
    except OSError:
        return 0


def available_cores() -> int:
    """The cores this process may run on (a container's CPU set, not the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def processes_for(sources: Sequence[Source], context: Sequence[Source] | None = None) -> int:
    """Processes for a run that -j does not size: every core once the inputs are large enough."""
    cores = available_cores()
    if cores < 2 or len(sources) + len(context or ()) < 2:
        return 1
    share = CONTEXT_APART_SHARE if context is not None and context_read_once(sources) else 1.0
    weighed = [(source, 1.0) for source in sources] + [(source, share) for source in context or ()]
    total = 0.0
    for source, weight in weighed:
        total += input_bytes(source) * weight
        if total >= PROCESSES_FROM_BYTES:
            return cores
    return 1


def context_read_once(sources: Sequence[Source]) -> bool:
    """Whether pass 2 leaves the context unread: no reported input may hold a reader (READER_KINDS),
    whose rules would read the context's workloads (a quick look: a reader it misses is found by
    pass 1 all the same, and the context read again, at a cost -j's default did not weigh)."""
    return not any(_may_hold_reader(source) for source in sources)


class Fallback(Exception):
    """The stream cannot vouch for its report: `lint()` runs the in-memory path instead."""


def lint(
    sources: Sequence[Source],
    policy: Policy,
    *,
    context: Sequence[Source] | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
    said: set[Hashable] | None = None,
    runner: StreamRunner | None = None,
) -> Report:
    """Lint `sources`; `context` inputs are read only for what cross-object rules look up (pre-commit's
    repository) and never reported on. Streams when it can, else loads everything at once. `said`:
    what the run has said once already (`engine.Context.said`), updated with what this lint says.
    `runner`: what runs the stream's passes instead of this process (gpupolicy/lint/parallel.py);
    the in-memory path runs here."""
    before = None if said is None else set(said)
    try:
        report = stream(sources, policy, context=context, limits=limits, said=said, runner=runner)
    except Fallback:
        if said is not None and before is not None:  # the stream may have said some before it stopped
            said.intersection_update(before)
        report = lint_in_memory(sources, policy, context=context, limits=limits, said=said)
    merge_overlay_findings(report, sources)
    return report


def merge_overlay_findings(report: Report, sources: Iterable[Source]) -> None:
    """One finding for the same field of a shared base object, naming the overlays that render it
    (rendering.OverlayFindings); the sources of one run share their session."""
    sessions = {id(source.session): source.session for source in sources if source.session is not None}
    for session in sessions.values():
        if session.overlays:
            report.findings = session.overlays.merge(report.findings)
            report.suppressed = session.overlays.merge_pairs(report.suppressed)
    report.findings = merge_unbuilt_overlays(report.findings)


def lint_in_memory(
    sources: Sequence[Source],
    policy: Policy,
    *,
    context: Sequence[Source] | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
    said: set[Hashable] | None = None,
) -> Report:
    """Every input loaded at once and `evaluate()`d: the reference the stream must match."""
    loaded = Loaded()
    for source in sources:
        if source.problem is None:
            loaded.extend(source.load(limits), source.name)
        else:
            loaded.problems.append(source.problem)
    if context is None:
        report = evaluate(
            loaded.resources, policy, problems=loaded.problems, directives=loaded.directives, said=said
        )
    else:
        given = set(loaded.files) | {resource.file for resource in loaded.resources}
        others = [
            resource
            for source in context
            if source.problem is None
            for resource in source.load(limits).resources
            if resource.file not in given
        ]
        chosen = {resource.file for resource in loaded.resources}
        report = evaluate(
            [*loaded.resources, *others],
            policy,
            problems=loaded.problems,
            directives=loaded.directives,
            report_on=lambda resource: resource.file in chosen,
            said=said,
        )
        report.objects = len(loaded.resources)
    report.skipped = loaded.skipped
    report.files = len(loaded.files) - report.skipped_files
    return report


def stream(
    sources: Sequence[Source],
    policy: Policy,
    *,
    context: Sequence[Source] | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
    said: set[Hashable] | None = None,
    runner: StreamRunner | None = None,
) -> Report:
    """The streaming lint (its passes run by `runner` when given); raises Fallback where it cannot
    vouch for its report."""
    try:
        return StreamRun(policy, limits, said, runner=runner).run(sources, context)
    except StreamReadsDifferently as exc:
        raise Fallback(str(exc)) from exc


class Values(NamedTuple):
    """An object's values, without its positions (nor the lines of its text, which only they
    read): what another process sends of an object kept for the inventory (values only, as a
    stream keeps it)."""

    obj: Any
    file: str
    doc_index: int
    rendered_from: str | None
    line_offset: int
    in_list: bool

    @classmethod
    def of(cls, resource: Resource) -> Values:
        return cls(resource.obj, *place_of(resource))

    def rebuilt(self) -> Resource:
        return Resource(
            self.obj,
            file=self.file,
            doc_index=self.doc_index,
            rendered_from=self.rendered_from,
            line_offset=self.line_offset,
            in_list=self.in_list,
        )


class Positions(NamedTuple):
    """What pass 2 gives an indexed object for its rules to run (`_take`): its position table and
    the lines of its text, which turn the table's places into lines and columns."""

    table: PositionTable | None
    lines: LineStarts | None
    duplicates: list[DuplicateKey]
    line_offset: int
    text_marks: frozenset[str] | None

    @classmethod
    def of(cls, resource: Resource) -> Positions:
        return cls(
            resource.positions, resource.lines, resource.duplicates, resource.line_offset, resource.text_marks
        )

    def restore(self, resource: Resource) -> None:
        resource.positions, resource.lines, resource.duplicates = self.table, self.lines, self.duplicates
        resource.line_offset, resource.text_marks = self.line_offset, self.text_marks


@mutable
class StreamedChunk:
    """What pass 2 over a chunk of inputs adds to a run, made in a worker process and added to the
    run in the parent (`StreamRun.take_chunk`, `StreamRun.add_chunk`). `once`: the key of each finding
    said once per run, by its index in `findings`."""

    findings: list[Finding]
    once: dict[int, Hashable]
    roles: list[WorkloadRole]
    errors: list[InternalError]
    error_keys: list[Key]
    problems: list[LoadProblem]
    directives: list[InlineDirective]
    skipped: list[Skipped]
    subjects: list[tuple[Key, SuppressionSubject]]
    deferred: list[tuple[Key, Positions]]  # objects of READER_KINDS, checked after the stream
    kept_for_readers: list[tuple[Key, PackedResource]]
    chosen: set[tuple[str, int]] | None
    objects: int
    files: int


class StreamInventory(Bundle):
    """The bundle's answers from the objects kept: every object of INDEX_KINDS and of experiment
    arms (values only), and the workloads the deferred readers may read (packed), in the inputs' order.

    While `watching`, a question about a kind that is not indexed is noted in `overreached`: the
    answer would lack the objects the stream has released or not read yet."""

    def __init__(self, *, complete_kinds: Iterable[str] = ()) -> None:
        super().__init__((), complete_kinds=complete_kinds)
        self.watching = False
        self.overreached: str | None = None
        self.unpacked = Unpacked()

    def add(self, key: Key, resource: Resource) -> None:
        self._add(key, resource)

    def add_packed(self, key: Key, resource: Resource) -> PackedResource:
        """Keep a workload for the deferred readers, packed."""
        packed = PackedResource.of(resource, self.unpacked)
        self._add(key, packed)
        return packed

    def adopt(self, key: Key, packed: PackedResource) -> None:
        """A workload a worker kept packed for the readers (StreamedChunk.kept_for_readers)."""
        packed.unpacked = self.unpacked
        self._add(key, packed)

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        if self.watching and kind not in INDEX_KINDS and self.overreached is None:
            self.overreached = kind
        # Bundle.list, named: rules ask about six times per object, and super() makes an object and
        # walks the classes at each call (Python 3.11).
        return Bundle.list(self, kind, namespace)


def batches(documents: Iterable[LoadedText], objects: int) -> Iterator[list[LoadedText]]:
    """The documents in order, in lists that hold `objects` objects or more (the last one fewer), a
    document never split; documents without objects join the next list."""
    batch: list[LoadedText] = []
    held = 0
    for document in documents:
        batch.append(document)
        held += len(document.resources)
        if held >= objects:
            yield batch
            batch, held = [], 0
    if batch:
        yield batch


def documents_to_index(
    source: Source, limits: LoadLimits, *, apart: bool = False, chunks: dict[int, ChunkRead] | None = None
) -> Iterator[LoadedText] | None:
    """The documents of a plain input (not rendered) that pass 1 reads: None when a quick look at
    its text finds no indexed kind (an unreadable file is reported in pass 2). `apart`: only its
    documents whose own text may hold one, each parsed on its own, for an input that pass 1 does
    not keep for pass 2 (pre-commit's context, and reported inputs past `KEEP_LOADED_BYTES`): a
    repository's manifests hold a PDB or a Service beside each workload, and pass 1 parsed every
    workload of them to keep a few objects' values. Pass 2 finds what pass 1 kept by document
    (`Places`), however many of a file's documents pass 1 read. `chunks`: filled with the chunks
    read apart, for pass 2 not to read them again (`Source.iter_load_chosen`)."""
    text = source.peek()
    if text is None or not _may_hold_indexed(text):
        return None
    del text
    if apart and (documents := source.iter_load_chosen(_may_hold_indexed, limits, chunks=chunks)) is not None:
        return documents
    return source.iter_load(limits)


def _may_hold_reader(source: Source) -> bool:
    text = source.peek()
    return text is None or _READER_KIND.search(text) is not None


def indexed_objects(documents: Iterable[LoadedText], places: Places) -> Iterator[tuple[int, Resource]]:
    """The indexed objects of an input's documents, with their places (`Places`)."""
    for document in documents:
        for resource in document.resources:
            place = places.next(resource)
            if _indexed(resource):
                yield place, resource


# Room for a document's objects (a List's items) in a place (`Places`).
_OBJECTS_PER_DOCUMENT = 1 << 32


class Places:
    """The places of an input's objects, in their order: a key's second half, by which pass 2 finds
    what pass 1 kept of each. In a file, an object's document and its index among that document's
    objects (a List's items), as one number: pass 1 may read only some of a file's documents
    (`documents_to_index`), and a count of the objects before would not be pass 2's. In a rendered
    input (`by_document` False), whose objects come from several files, numbered alike, its index
    among the input's objects."""

    __slots__ = ("_by_document", "_document", "_item")

    def __init__(self, *, by_document: bool) -> None:
        self._by_document = by_document
        self._document, self._item = -1, -1

    def next(self, resource: Resource) -> int:
        """The place of the input's next object."""
        if not self._by_document:
            self._item += 1
            return self._item
        if resource.doc_index == self._document:
            self._item += 1
        else:
            self._document, self._item = resource.doc_index, 0
        return self._document * _OBJECTS_PER_DOCUMENT + self._item


@contextmanager
def _out_of_young_collections() -> Iterator[None]:
    """Pass 2 with what is alive before it (what pass 1 kept: indexed objects, inputs read whole)
    frozen: out of the collector's sight, still freed by reference counting as pass 2 is done with
    each object. Made while batch runs pause the collector, all of it sat in the youngest
    generation, and the first of pass 2's collections (`COLLECT_EVERY`) walked it: 700,000 objects
    for bench/lint_throughput.py's 14 MB bundle, a third of a second of CPU
    (bench/stream_collections.py --bundle). `gc.unfreeze` thaws what a caller froze before as well:
    gpupolicy freezes only at the end of a batch run and around -j's fork, never around a stream."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _may_hold_indexed(text: str) -> bool:
    return EXPERIMENT_LABEL in text or _INDEXED_KIND.search(text) is not None


def _is_arm(resource: Resource) -> bool:
    workload = workload_of(resource)
    return workload is not None and arm_link(workload) is not None


def _indexed(resource: Resource) -> bool:
    return resource.kind in INDEX_KINDS or _is_arm(resource)


def _release(resource: Resource) -> None:
    """Keep the values, drop the positions (only needed while its rules run) and the lines of its
    text (which only they read: kept, they would keep each text's)."""
    resource.positions = resource.lines = None
    resource.duplicates = []


class _Readers:
    """Which plain workloads the deferred rules (READER_KINDS) may read, from the indexed objects.
    Each test mirrors the lookup of its rules, and may keep more than they read, never less."""

    def __init__(self, inventory: StreamInventory, ctx: Context) -> None:
        self.ctx = ctx
        self.pdbs: dict[str, list[Resource]] = {}
        for pdb in inventory.list(PDB):
            self.pdbs.setdefault(namespace_of(pdb), []).append(pdb)
        # GP506: inventory.get(kind, name, namespace of the HPA), which also answers with objects
        # that name no namespace.
        self.targets: set[tuple[str, str, str]] = set()
        for hpa in inventory.list(HPA):
            ref = as_mapping(as_mapping(as_mapping(hpa.obj).get("spec")).get("scaleTargetRef"))
            kind, name = ref.get("kind"), ref.get("name")
            if isinstance(kind, str) and isinstance(name, str):
                self.targets.add((kind, name, namespace_of(hpa)))
        self.target_names = {(kind, name) for kind, name, _ in self.targets}
        # GP615 (security.gpu_workloads_in): GPU workloads that name the Namespace.
        self.namespaces = {namespace.name for namespace in inventory.list("Namespace")}
        # GP616 (security.bound_workloads): service accounts, or namespaces of them ("" for all).
        self.accounts: set[tuple[str, str]] = set()
        self.account_scopes: set[str] = set()
        for kind in ("RoleBinding", "ClusterRoleBinding"):
            for binding in inventory.list(kind):
                for subject in as_list(as_mapping(binding.obj).get("subjects")):
                    subject = as_mapping(subject)
                    kind, name = subject.get("kind"), str(subject.get("name", ""))
                    if kind == "ServiceAccount":
                        self.accounts.add((str(subject.get("namespace") or namespace_of(binding)), name))
                    elif kind == "Group" and name.startswith("system:serviceaccounts"):
                        self.account_scopes.add(name.removeprefix("system:serviceaccounts").lstrip(":"))

    def want(self, resource: Resource) -> bool:
        kind, name = resource.kind, resource.name
        if (kind, name) in self.target_names and (
            resource.namespace is None or (kind, name, namespace_of(resource)) in self.targets
        ):
            return True
        workload = workload_of(resource)
        if workload is None:
            return False
        namespace = namespace_of(resource)
        if any(pdb_selects(pdb, workload) for pdb in self.pdbs.get(namespace, ())):
            return True
        if resource.namespace in self.namespaces and self.ctx.uses_gpus(workload):
            return True
        if "" in self.account_scopes or namespace in self.account_scopes:
            return True
        if self.accounts:
            from gpupolicy.rules.access import service_account_of

            return any(
                (namespace, service_account_of(template)) in self.accounts for template in workload.templates
            )
        return False


class StreamRun:
    """One streaming run: pass 1 (`_index`), pass 2 (`_read` of each input), the deferred readers.
    A `runner` runs the two passes elsewhere (gpupolicy/lint/parallel.py: in processes, in chunks of
    inputs that are added back here in the inputs' order: `take_chunk`, `add_chunk`)."""

    def __init__(
        self,
        policy: Policy,
        limits: LoadLimits,
        said: set[Hashable] | None = None,
        *,
        runner: StreamRunner | None = None,
    ) -> None:
        self.limits = limits
        self.runner = runner
        self.inventory = StreamInventory(complete_kinds=complete_kinds(policy))
        self.evaluation = Evaluation(policy, self.inventory, said=said)
        if self.evaluation.plan.bundle_rules:
            raise Fallback("rules of bundle scope read every object")
        self.readers: _Readers | None = None
        self.problems: list[LoadProblem] = []
        self.directives: list[InlineDirective] = []
        self.skipped: list[Skipped] = []
        self.subjects: list[tuple[Key, SuppressionSubject]] = []
        self.deferred: list[tuple[Key, Resource]] = []
        self.chosen: set[tuple[str, int]] | None = None  # (file, document) reported on, with context
        self.error_keys: list[Key] = []  # the object of each internal error, to list them in order
        self.objects = self.files = 0
        self._uncollected = 0
        # Inputs pass 1 read whole and kept for pass 2 (KEEP_LOADED_BYTES), in one process only.
        self._loaded: dict[int, list[LoadedText]] = {}
        # The chunks of inputs past that budget that pass 1 read apart and kept (KEEP_CHOSEN_BYTES).
        self._chunks: dict[int, dict[int, ChunkRead]] = {}
        # In a worker process: the workloads kept for the readers in this chunk, for the parent's inventory.
        self.kept_for_readers: list[tuple[Key, PackedResource]] | None = None

    def run(self, sources: Sequence[Source], context: Sequence[Source] | None) -> Report:
        units = [(source, True) for source in sources] + [(source, False) for source in context or ()]
        if context is not None:
            self.chosen = set()
        if self.runner is not None:
            return self.runner(self, units)
        indexed, rendered = self._index(units)
        self.choose_readers(units, indexed, rendered)
        with _out_of_young_collections():
            self.read_units(units, indexed, rendered, range(len(units)))
        return self.finish_run()

    def choose_readers(
        self, units: Units, indexed: dict[int, dict[int, Resource]], rendered: dict[int, LoadedText]
    ) -> None:
        """Readers when a reported input holds an object of READER_KINDS; else the context inputs
        will not be read again, and only their indexed objects' values stay."""
        if any(
            units[unit][1] and r.kind in READER_KINDS for unit, kept in indexed.items() for r in kept.values()
        ):
            self.readers = _Readers(self.inventory, self.evaluation.ctx)
            return
        for unit in [unit for unit in rendered if not units[unit][1]]:
            del rendered[unit]
            for resource in indexed.pop(unit, {}).values():
                _release(resource)

    def read_units(
        self,
        units: Units,
        indexed: dict[int, dict[int, Resource]],
        rendered: dict[int, LoadedText],
        chosen: Iterable[int],
    ) -> None:
        """Pass 2 over the `chosen` inputs."""
        for unit in chosen:
            source, reported = units[unit]
            if reported or self.readers is not None:  # context matters only for what readers read
                self._read(unit, source, reported, indexed.pop(unit, {}), rendered.pop(unit, None))

    def finish_run(self) -> Report:
        """After the stream: the deferred readers, then the report."""
        for key, resource in self.deferred:
            self._check(key, resource, watch=False)
            _release(resource)
        self.evaluation.check_bundle()
        report = self.evaluation.finish(
            problems=self.problems,
            subjects=[subject for _, subject in sorted(self.subjects, key=itemgetter(0))],
            directives=self.directives,
            chosen=self.chosen,
        )
        if self.deferred and report.errors:  # in the order of the inputs, as evaluate() lists them
            order = sorted(range(len(report.errors)), key=self.error_keys.__getitem__)
            report.errors = [report.errors[index] for index in order]
        report.skipped = self.skipped
        report.objects, report.files = self.objects, self.files - report.skipped_files
        return report

    def _index(self, units: Units) -> tuple[dict[int, dict[int, Resource]], dict[int, LoadedText]]:
        """Pass 1: the indexed objects of every input (values only, except in rendered inputs,
        which are kept whole for pass 2: their renderer is not run twice)."""
        indexed: dict[int, dict[int, Resource]] = {}
        rendered: dict[int, LoadedText] = {}
        budget, chosen_budget = KEEP_LOADED_BYTES, KEEP_CHOSEN_BYTES
        for unit, (source, reported) in enumerate(units):
            chunks: dict[int, ChunkRead] | None = None
            if source.rendered:
                documents: Iterable[LoadedText] = [rendered.setdefault(unit, source.load(self.limits))]
            else:
                # Only reported inputs are kept: the context (pre-commit's repository) is read
                # again only when a reader needs its workloads, which is rare, and kept it would
                # weigh on the peak of every hook run. What is not kept is read for its indexed
                # objects' values alone: only its documents that may hold one, each apart.
                size = input_bytes(source) if reported else 0
                keep = reported and size <= budget
                chunks = {} if reported and not keep and chosen_budget > 0 else None
                read = documents_to_index(source, self.limits, apart=not keep, chunks=chunks)
                documents = () if read is None else read
                if read is not None and keep:
                    documents = self._loaded[unit] = list(read)
                    budget -= size
            places = Places(by_document=not source.rendered)
            found = list(indexed_objects(documents, places))
            if chunks and (chosen := sum(chunk.length for chunk in chunks.values())) <= chosen_budget:
                self._chunks[unit] = chunks
                chosen_budget -= chosen
            # What pass 2 takes back as read keeps its positions; the rest its values only.
            as_read = unit in rendered or unit in self._loaded or unit in self._chunks
            for position, resource in found:
                self.keep_indexed((unit, position), resource, indexed, release=not as_read)
        return indexed, rendered

    def keep_indexed(
        self, key: Key, resource: Resource, indexed: dict[int, dict[int, Resource]], *, release: bool
    ) -> None:
        unit, position = key
        indexed.setdefault(unit, {})[position] = resource
        self.inventory.add(key, resource)
        if release:
            _release(resource)

    # -- chunks of pass 2, in worker processes (gpupolicy/lint/parallel.py) ---------------------
    def begin_chunk(self, said: frozenset[Hashable]) -> None:
        """In a worker: start a chunk of inputs afresh, from what the run had said when it forked
        (every chunk is then the same whichever worker runs it, and after whichever other)."""
        evaluation = self.evaluation
        evaluation.findings, evaluation.once = [], {}
        evaluation.report.roles, evaluation.report.errors = [], []
        evaluation.ctx.said = set(said)
        self.problems, self.directives, self.skipped, self.subjects = [], [], [], []
        self.deferred, self.error_keys, self.kept_for_readers = [], [], []
        self.chosen = None if self.chosen is None else set()
        self.objects = self.files = 0

    def take_chunk(self) -> StreamedChunk:
        """In a worker: what the chunk added, to send to the parent."""
        evaluation = self.evaluation
        return StreamedChunk(
            findings=evaluation.findings,
            once=evaluation.once,
            roles=evaluation.report.roles,
            errors=evaluation.report.errors,
            error_keys=self.error_keys,
            problems=self.problems,
            directives=self.directives,
            skipped=self.skipped,
            subjects=self.subjects,
            deferred=[(key, Positions.of(resource)) for key, resource in self.deferred],
            kept_for_readers=self.kept_for_readers or [],
            chosen=self.chosen,
            objects=self.objects,
            files=self.files,
        )

    def add_chunk(self, chunk: StreamedChunk, indexed: dict[int, dict[int, Resource]]) -> None:
        """In the parent: a chunk's results, chunks taken in the inputs' order. What is said once
        per run is said by the first finding in that order, as in one process."""
        evaluation = self.evaluation
        findings, said = evaluation.findings, evaluation.ctx.said
        for index, finding in enumerate(chunk.findings):
            key = chunk.once.get(index)
            if key is not None:
                if key in said:
                    continue
                said.add(key)
                evaluation.once[len(findings)] = key
            findings.append(finding)
        evaluation.report.roles.extend(chunk.roles)
        evaluation.report.errors.extend(chunk.errors)
        self.error_keys.extend(chunk.error_keys)
        self.problems.extend(chunk.problems)
        self.directives.extend(chunk.directives)
        self.skipped.extend(chunk.skipped)
        self.subjects.extend(chunk.subjects)
        self._add_chunk_objects(chunk, indexed)

    def _add_chunk_objects(self, chunk: StreamedChunk, indexed: dict[int, dict[int, Resource]]) -> None:
        for (unit, position), positions in chunk.deferred:  # an indexed object: its values are here
            resource = indexed[unit][position]
            positions.restore(resource)
            self.deferred.append(((unit, position), resource))
        for key, packed in chunk.kept_for_readers:
            self.inventory.adopt(key, packed)
        if self.chosen is not None and chunk.chosen is not None:
            self.chosen |= chunk.chosen
        self.objects += chunk.objects
        self.files += chunk.files

    def _read(
        self,
        unit: int,
        source: Source,
        reported: bool,
        kept: dict[int, Resource],
        rendered: LoadedText | None,
    ) -> None:
        """Pass 2 over one input: each object checked (when reported on) and released."""
        loaded = self._loaded.pop(unit, None)
        documents: Iterable[LoadedText]
        if rendered is not None:
            documents = [rendered]
        elif loaded is not None:
            documents = loaded
        else:
            documents = source.iter_load(self.limits, given=self._chunks.pop(unit, None))
        if reported and source.is_file:
            self.files += 1
        directive_files: set[str] = set()
        places = Places(by_document=not source.rendered)  # as pass 1 placed them
        for batch in batches(documents, BATCH_OBJECTS):
            self._collect_now_and_then()  # here no local refers to an object of the last batch
            for document in batch:
                if reported:
                    self.problems.extend(document.problems)
                    self.directives.extend(document.directives)
                    self.skipped.extend(document.skipped)
                    directive_files.update(directive.file for directive in document.directives)
                self._take_document(unit, places, document, kept, reported, directive_files)
        if kept:
            raise Fallback(f"{source.name} holds fewer objects than when it was indexed")

    def _take_document(
        self,
        unit: int,
        places: Places,
        document: LoadedText,
        kept: dict[int, Resource],
        reported: bool,
        directive_files: set[str],
    ) -> None:
        for fresh in document.resources:
            position = places.next(fresh)
            key = (unit, position)
            indexed_copy = kept.pop(position, None)
            resource = _take(indexed_copy, fresh)
            if reported:
                self._take_reported(
                    key, resource, indexed=indexed_copy is not None, directive_files=directive_files
                )
            elif indexed_copy is None:
                self._keep_if_read(key, resource)
            else:  # context indexed in pass 1: its values stay in the inventory, its positions go
                _release(resource)
        self._uncollected += len(document.resources)

    def _take_reported(
        self, key: Key, resource: Resource, *, indexed: bool, directive_files: set[str]
    ) -> None:
        self.objects += 1
        if self.chosen is not None:
            self.chosen.add((resource.file, resource.doc_index))
        if IGNORE_ANNOTATION in resource.annotations or resource.file in directive_files:
            self.subjects.append((key, SuppressionSubject(resource)))
        if resource.kind in READER_KINDS:
            resource.keep_own_lines()
            self.deferred.append((key, resource))  # checked once the stream has passed every workload
            return
        self._check(key, resource, watch=not indexed or not _is_arm(resource))
        if indexed:
            _release(resource)  # its values stay in the inventory
        else:
            self._keep_if_read(key, resource)

    def _keep_if_read(self, key: Key, resource: Resource) -> None:
        """A workload a deferred reader may read stays in the inventory, values only, packed; the
        object itself is done with."""
        if self.readers is not None and self.readers.want(resource):
            packed = self.inventory.add_packed(key, resource)
            if self.kept_for_readers is not None:
                self.kept_for_readers.append((key, packed))
        release_views(resource)

    def _collect_now_and_then(self) -> None:
        if self._uncollected >= COLLECT_EVERY:
            self._uncollected = 0
            gc.collect(0)

    def _check(self, key: Key, resource: Resource, *, watch: bool) -> None:
        """Run its rules; a streamed object's rules must ask only for indexed kinds (an experiment
        arm's rules also list the other arms, which are indexed)."""
        report, inventory, findings = self.evaluation.report, self.inventory, self.evaluation.findings
        errors, made = len(report.errors), len(findings)
        inventory.watching = watch
        try:
            self.evaluation.check(resource)
        finally:
            inventory.watching = False
        if inventory.overreached is not None:
            raise Fallback(
                f"a rule of {resource.ref} asked for {inventory.overreached}, which is not indexed"
            )
        where = (resource.file, resource.doc_index)
        if any((finding.file, finding.doc_index) != where for finding in findings[made:]):
            # Violation.target: the other object's positions may be released (no rule does it today)
            raise Fallback(f"a rule of {resource.ref} made a finding about another object")
        self.error_keys.extend([key] * (len(report.errors) - errors))
        inventory.unpacked.trim()  # between two objects' checks: no rule holds an unpacked value


def _take(kept: Resource | None, fresh: Resource) -> Resource:
    """The object to check: the indexed copy with the positions just read, or the fresh object."""
    if kept is None:
        if _indexed(fresh):
            raise Fallback(f"{fresh.file}: {fresh.ref} was missed by the quick look")
        return fresh
    if kept is fresh:
        return kept  # an input kept whole (rendered, or KEEP_LOADED_BYTES) or its chunks (KEEP_CHOSEN_BYTES)
    if kept.obj != fresh.obj or kept.doc_index != fresh.doc_index:
        raise Fallback(f"{fresh.file} changed between the passes")
    Positions.of(fresh).restore(kept)
    return kept
