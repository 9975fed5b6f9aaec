"""`gpupolicy lint` in bounded memory: each object is released once its findings are made.

A document's node tree (kept for the positions of findings) weighs about four times its values,
and a run that keeps every object until the end grows by about 100 KB per object. Here an object's
rules run as its file is read, and nothing of it outlives them but its findings, unless a rule of
another object reads it. Rules read other objects through the inventory (a workload's PDB, its
Services, its PriorityClass, its experiment's ConfigMap ...), so the inventory must hold them
before the first object is checked. Two passes over the inputs:

1. The index. An input whose text may hold an object of a kind rules look up (`INDEX_KINDS`,
   seen by a quick look at its `kind:` lines) or an experiment arm (whose rules compare it with
   the other arms) is read, and those objects are kept, values only.
2. The stream. Every input is read again one document at a time. Each object is checked (an
   indexed one gets its node tree back for that time), what the suppressions need of it is noted
   (`SuppressionSubject`), and it is released.

The rules of a few kinds read plain workloads of any file: the PDB rules (the workloads a PDB
selects), GP506 (the HPA's target), GP615 (a Namespace's GPU workloads), GP616 (the workloads
that run as a service account a binding names). Objects of those kinds (`READER_KINDS`) are
checked after the stream, and each workload the stream passes that one of them may read is kept,
values only (`_Readers`).

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
import re
from collections.abc import Hashable, Iterable, Sequence
from operator import itemgetter

from gpupolicy.core.vocabulary import EXPERIMENT_LABEL, IGNORE_ANNOTATION
from gpupolicy.engine.context import Context
from gpupolicy.engine.evaluation import Evaluation, complete_kinds, evaluate
from gpupolicy.engine.report import Report
from gpupolicy.engine.suppressions import SuppressionSubject
from gpupolicy.kube.disruption import HPA, PDB, pdb_selects
from gpupolicy.kube.experiment_arms import arm_link
from gpupolicy.kube.inventory import Bundle, namespace_of
from gpupolicy.kube.pod_spec import as_list, as_mapping, workload_of
from gpupolicy.loading.directives import InlineDirective
from gpupolicy.loading.documents import (
    DEFAULT_LIMITS,
    LoadedText,
    LoadLimits,
    LoadProblem,
    Resource,
    Skipped,
    StreamReadsDifferently,
)
from gpupolicy.loading.inputs import Loaded, Source
from gpupolicy.policy.loading import Policy

# Kinds whose rules read plain workloads of any file: checked after the stream.
READER_KINDS = frozenset({PDB, HPA, "Namespace", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"})
# Every kind a rule asks the inventory for (besides workloads, which only the readers and the
# experiment arms ask for): every object of these kinds is kept for the whole run.
INDEX_KINDS = READER_KINDS | frozenset(
    {
        "Service", "ConfigMap", "ServiceAccount", "NetworkPolicy", "PriorityClass", "WorkloadPriorityClass",
        "RuntimeClass", "AnalysisTemplate", "ClusterAnalysisTemplate", "Canary", "Rollout",
    }
)  # fmt: skip
# `kind: Service`, `"kind": "Service"`, `kind: !!str 'Service'`, `kind:\n  Service`; or a kind
# written through an alias or with an escape, which only reading tells.
_KIND_NAMES = "|".join(sorted(INDEX_KINDS, key=len, reverse=True))
_INDEXED_KIND = re.compile(rf"""kind["']?\s*:\s*(?:[!&]\S*\s+)*(?:\*|"[^"\n]*\\|["']?(?:{_KIND_NAMES})\b)""")

Key = tuple[int, int]  # (input, object): the order of evaluate()'s list
# Objects released between two collections of the youngest generation. Some facts memoised on an
# object refer back to it (gpu.GpuDemand on its pod_spec.Container): small cycles that reference
# counting cannot free, while batch runs pause the cyclic collector (runtime.paused_cyclic_gc), so
# that young objects pile up. A young collection walks only what was made since the last one.
COLLECT_EVERY = 500


class Fallback(Exception):
    """The stream cannot vouch for its report: `lint()` runs the in-memory path instead."""


def lint(
    sources: Sequence[Source],
    policy: Policy,
    *,
    context: Sequence[Source] | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
    said: set[Hashable] | None = None,
) -> Report:
    """Lint `sources`; `context` inputs are read only for what cross-object rules look up (pre-commit's
    repository) and never reported on. Streams when it can, else loads everything at once. `said`:
    what the run has said once already (`engine.Context.said`), updated with what this lint says."""
    before = None if said is None else set(said)
    try:
        report = stream(sources, policy, context=context, limits=limits, said=said)
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
) -> Report:
    """The streaming lint; raises Fallback where it cannot vouch for its report."""
    try:
        return _Stream(policy, limits, said).run(sources, context)
    except StreamReadsDifferently as exc:
        raise Fallback(str(exc)) from exc


class StreamInventory(Bundle):
    """The bundle's answers from the objects kept: every object of INDEX_KINDS and of experiment
    arms (values only), and the workloads the deferred readers may read, in the inputs' order.

    While `watching`, a question about a kind that is not indexed is noted in `overreached`: the
    answer would lack the objects the stream has released or not read yet."""

    def __init__(self, *, complete_kinds: Iterable[str] = ()) -> None:
        super().__init__((), complete_kinds=complete_kinds)
        self.watching = False
        self.overreached: str | None = None

    def add(self, key: Key, resource: Resource) -> None:
        self._add(key, resource)

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        if self.watching and kind not in INDEX_KINDS and self.overreached is None:
            self.overreached = kind
        return super().list(kind, namespace)


def _may_hold_indexed(text: str) -> bool:
    return EXPERIMENT_LABEL in text or _INDEXED_KIND.search(text) is not None


def _is_arm(resource: Resource) -> bool:
    workload = workload_of(resource)
    return workload is not None and arm_link(workload) is not None


def _indexed(resource: Resource) -> bool:
    return resource.kind in INDEX_KINDS or _is_arm(resource)


def _release(resource: Resource) -> None:
    """Keep the values, drop the node tree (positions are only needed while its rules run)."""
    resource.node = None
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


class _Stream:
    """One streaming run: pass 1 (`_index`), pass 2 (`_read` of each input), the deferred readers."""

    def __init__(self, policy: Policy, limits: LoadLimits, said: set[Hashable] | None = None) -> None:
        self.limits = limits
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

    def run(self, sources: Sequence[Source], context: Sequence[Source] | None) -> Report:
        units = [(source, True) for source in sources] + [(source, False) for source in context or ()]
        if context is not None:
            self.chosen = set()
        indexed, rendered = self._index(units)
        if any(
            units[unit][1] and r.kind in READER_KINDS for unit, kept in indexed.items() for r in kept.values()
        ):
            self.readers = _Readers(self.inventory, self.evaluation.ctx)
        else:  # context inputs are not read again: their indexed objects stay, values only
            for unit in [unit for unit in rendered if not units[unit][1]]:
                del rendered[unit]
                for resource in indexed.pop(unit, {}).values():
                    _release(resource)
        for unit, (source, reported) in enumerate(units):
            if reported or self.readers is not None:  # context matters only for what readers read
                self._read(unit, source, reported, indexed.pop(unit, {}), rendered.pop(unit, None))
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

    def _index(
        self, units: list[tuple[Source, bool]]
    ) -> tuple[dict[int, dict[int, Resource]], dict[int, LoadedText]]:
        """Pass 1: the indexed objects of every input (values only, except in rendered inputs,
        which are kept whole for pass 2: their renderer is not run twice)."""
        indexed: dict[int, dict[int, Resource]] = {}
        rendered: dict[int, LoadedText] = {}
        for unit, (source, _) in enumerate(units):
            documents: Iterable[LoadedText]
            if source.rendered:
                documents = [rendered.setdefault(unit, source.load(self.limits))]
            else:
                text = source.peek()
                if text is None or not _may_hold_indexed(text):
                    continue  # an unreadable file is reported in pass 2
                del text
                documents = source.iter_load(self.limits)
            position = 0
            for document in documents:
                for resource in document.resources:
                    if _indexed(resource):
                        indexed.setdefault(unit, {})[position] = resource
                        self.inventory.add((unit, position), resource)
                        if unit not in rendered:
                            _release(resource)
                    position += 1
        return indexed, rendered

    def _read(
        self,
        unit: int,
        source: Source,
        reported: bool,
        kept: dict[int, Resource],
        rendered: LoadedText | None,
    ) -> None:
        """Pass 2 over one input: each object checked (when reported on) and released."""
        documents = [rendered] if rendered is not None else source.iter_load(self.limits)
        if reported and source.is_file:
            self.files += 1
        directive_files: set[str] = set()
        position = 0
        for document in documents:
            self._collect_now_and_then()  # here no local refers to an object of the last document
            if reported:
                self.problems.extend(document.problems)
                self.directives.extend(document.directives)
                self.skipped.extend(document.skipped)
                directive_files.update(directive.file for directive in document.directives)
            position = self._take_document(unit, position, document, kept, reported, directive_files)
        if kept:
            raise Fallback(f"{source.name} holds fewer objects than when it was indexed")

    def _take_document(
        self,
        unit: int,
        position: int,
        document: LoadedText,
        kept: dict[int, Resource],
        reported: bool,
        directive_files: set[str],
    ) -> int:
        for fresh in document.resources:
            key = (unit, position)
            indexed_copy = kept.pop(position, None)
            resource = _take(indexed_copy, fresh)
            position += 1
            if reported:
                self._take_reported(
                    key, resource, indexed=indexed_copy is not None, directive_files=directive_files
                )
            elif indexed_copy is None:
                self._keep_if_read(key, resource)
        self._uncollected += len(document.resources)
        return position

    def _take_reported(
        self, key: Key, resource: Resource, *, indexed: bool, directive_files: set[str]
    ) -> None:
        self.objects += 1
        if self.chosen is not None:
            self.chosen.add((resource.file, resource.doc_index))
        if IGNORE_ANNOTATION in resource.annotations or resource.file in directive_files:
            self.subjects.append((key, SuppressionSubject(resource)))
        if resource.kind in READER_KINDS:
            self.deferred.append((key, resource))  # checked once the stream has passed every workload
            return
        self._check(key, resource, watch=not indexed or not _is_arm(resource))
        if indexed:
            _release(resource)  # its values stay in the inventory
        else:
            self._keep_if_read(key, resource)

    def _keep_if_read(self, key: Key, resource: Resource) -> None:
        """A workload a deferred reader may read stays in the inventory, values only."""
        if self.readers is not None and self.readers.want(resource):
            _release(resource)
            self.inventory.add(key, resource)

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
            # Violation.target: the other object's node tree may be released (no rule does it today)
            raise Fallback(f"a rule of {resource.ref} made a finding about another object")
        self.error_keys.extend([key] * (len(report.errors) - errors))


def _take(kept: Resource | None, fresh: Resource) -> Resource:
    """The object to check: the indexed copy with the node tree just read, or the fresh object."""
    if kept is None:
        if _indexed(fresh):
            raise Fallback(f"{fresh.file}: {fresh.ref} was missed by the quick look")
        return fresh
    if kept is fresh:
        return kept  # a rendered input, kept whole
    if kept.obj != fresh.obj or kept.doc_index != fresh.doc_index:
        raise Fallback(f"{fresh.file} changed between the passes")
    kept.node, kept.duplicates, kept.line_offset = fresh.node, fresh.duplicates, fresh.line_offset
    return kept
