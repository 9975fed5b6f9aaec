"""The streaming lint (gpupolicy/lint/streaming.py) reports what `evaluate()` reports over everything
loaded at once, byte for byte in every format, while keeping only what cross-object rules read."""

from __future__ import annotations

import contextlib
import gc
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gpupolicy.engine import context as context_module
from gpupolicy.engine.report import Report
from gpupolicy.formats import RenderOptions, load_formatters
from gpupolicy.lint import packed, streaming
from gpupolicy.lint.packed import PackedResource
from gpupolicy.lint.parallel import in_processes
from gpupolicy.lint.streaming import Fallback, StreamInventory, StreamRun, lint, lint_in_memory, stream
from gpupolicy.loading import documents as documents_module
from gpupolicy.loading import inputs as inputs_module
from gpupolicy.loading.documents import parse_text, split_documents
from gpupolicy.loading.inputs import Source, iter_sources, sources_with_context
from gpupolicy.policy.loading import Policy, default_policy
from gpupolicy.rules.example_files import EXAMPLES_DIR, examples_for

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "corpus"
REAL_CORPUS = REPO.parent / "shared" / "corpus" / "real"
RULE_IDS = sorted(path.name for path in EXAMPLES_DIR.iterdir() if path.is_dir())
FORMATS = ("json", "text", "sarif")


@pytest.fixture(autouse=True, params=["kept", "chunks-kept", "read-again"])
def pass_two_reads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test three times: with the inputs pass 1 reads whole kept for pass 2 (as a lint of a
    small tree runs); with every input read apart in pass 1, the documents it read kept and pass 2
    reading only the others (as beyond `KEEP_LOADED_BYTES`); and with every input read again in
    pass 2 (as beyond `KEEP_CHOSEN_BYTES` too)."""
    if request.param != "kept":
        monkeypatch.setattr(streaming, "KEEP_LOADED_BYTES", 0)
    if request.param == "read-again":
        monkeypatch.setattr(streaming, "KEEP_CHOSEN_BYTES", 0)
    return str(request.param)


def rendered(report: Report) -> dict[str, str]:
    formatters = load_formatters()
    options = RenderOptions(show_suppressed=True, tool_version="test")
    return {name: formatters[name](report, options) for name in FORMATS}


def assert_streams_the_same(
    sources: list[Source], policy: Policy, context: list[Source] | None = None
) -> Report:
    streamed = stream(sources, policy, context=context)  # raises Fallback if it cannot stream
    assert rendered(streamed) == rendered(lint_in_memory(sources, policy, context=context))
    return streamed


def test_the_labelled_corpus_as_one_bundle() -> None:
    report = assert_streams_the_same(list(iter_sources([str(CORPUS)])), default_policy())
    assert report.objects > 250 and report.findings  # it did lint something


@pytest.mark.skipif(not REAL_CORPUS.is_dir(), reason="../shared/corpus/real is not checked out here")
def test_the_real_corpus_as_one_bundle() -> None:
    assert_streams_the_same(list(iter_sources([str(REAL_CORPUS)])), default_policy())


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_every_rule_example(rule_id: str) -> None:
    examples = examples_for(rule_id)
    assert examples is not None
    for path in (examples.fires, examples.passes):
        assert_streams_the_same([Source(path.name, path=path)], examples.policy_for())


def test_every_rule_example_as_one_bundle(tmp_path: Path) -> None:
    """Cross-object rules across files: PDBs, HPAs, Namespaces, bindings, experiments and their
    workloads in files before and after one another."""
    for rule_id in RULE_IDS:
        for name in ("fires.yaml", "passes.yaml"):
            shutil.copy(EXAMPLES_DIR / rule_id / name, tmp_path / f"{rule_id}-{name}")
    assert_streams_the_same(list(iter_sources([str(tmp_path)])), default_policy())


CROSS_OBJECT_RULES = [
    rule_id
    for rule_id in RULE_IDS
    if rule_id[:3] in ("GP3", "GP5", "GP8", "GP9") or rule_id in ("GP615", "GP616")
]


@pytest.mark.parametrize("rule_id", CROSS_OBJECT_RULES)
@pytest.mark.parametrize("backwards", [False, True], ids=["in-order", "backwards"])
def test_cross_object_examples_one_document_per_file(rule_id: str, backwards: bool, tmp_path: Path) -> None:
    """Each document in a file of its own, the files in the example's order or the reverse: a
    reader (a PDB, an HPA, a binding) comes before or after the workloads it reads."""
    examples = examples_for(rule_id)
    assert examples is not None
    for example in (examples.fires, examples.passes):
        folder = tmp_path / example.stem
        folder.mkdir()
        chunks = [chunk for _, chunk in split_documents(example.read_text(encoding="utf-8"))]
        for index, chunk in enumerate(chunks):
            order = len(chunks) - index if backwards else index
            (folder / f"{order:03d}.yaml").write_text(chunk, encoding="utf-8")
        assert_streams_the_same(list(iter_sources([str(folder)])), examples.policy_for())


def test_pre_commit_context(tmp_path: Path) -> None:
    """Reported files against the rest of the repository as context (--context-root)."""
    for path in sorted(CORPUS.glob("*.yaml"))[:60]:
        shutil.copy(path, tmp_path / path.name)
    for rule_id in ("GP502", "GP504", "GP506", "GP615", "GP616", "GP806"):
        shutil.copy(EXAMPLES_DIR / rule_id / "fires.yaml", tmp_path / f"{rule_id}.yaml")
    chosen = [
        str(tmp_path / name)
        for name in ("GP502.yaml", "GP616.yaml", sorted(p.name for p in tmp_path.iterdir())[0])
    ]
    sources, context = sources_with_context(chosen, tmp_path)
    assert context
    assert_streams_the_same(sources, default_policy(), context)


def _one_document_a_file(folder: Path) -> tuple[list[str], list[str]]:
    """Every rule example, one document to a file: (workload files without a reader kind, the others)."""
    workloads, others = [], []
    for rule_id in RULE_IDS:
        text = (EXAMPLES_DIR / rule_id / "fires.yaml").read_text(encoding="utf-8")
        for index, (_, chunk) in enumerate(split_documents(text)):
            path = folder / f"{rule_id}-{index}.yaml"
            path.write_text(chunk, encoding="utf-8")
            reader = streaming._READER_KIND.search(chunk) is not None
            (others if reader or "containers:" not in chunk else workloads).append(str(path))
    return workloads, others


def test_the_context_of_reader_free_inputs_is_read_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reported inputs that hold no reader (READER_KINDS): pass 1 parses only the documents of the
    context that may hold an indexed kind, each on its own, and never reads a context file whole;
    the report is the in-memory lint's."""
    for path in sorted(CORPUS.glob("*.yaml"))[:40]:
        shutil.copy(path, tmp_path / path.name)
    workloads, _ = _one_document_a_file(tmp_path)
    (tmp_path / "mixed.yaml").write_text(
        (EXAMPLES_DIR / "GP806" / "fires.yaml").read_text(encoding="utf-8")
        + "---\n"
        + (EXAMPLES_DIR / "GP302" / "fires.yaml").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    readable = [
        path for path in workloads if not parse_text(Path(path).read_text(encoding="utf-8"), path).problems
    ]
    sources, context = sources_with_context(readable[::3], tmp_path)  # (a broken one is parsed in chunks)
    read_whole: list[str] = []
    parsed: list[tuple[str, str]] = []
    iter_load, chunk_documents = Source.iter_load, documents_module._chunk_documents
    monkeypatch.setattr(
        Source,
        "iter_load",
        lambda self, *args, **kwargs: read_whole.append(self.name) or iter_load(self, *args, **kwargs),
    )
    monkeypatch.setattr(
        documents_module,
        "_chunk_documents",
        lambda chunk, file, *args: parsed.append((file, chunk)) or chunk_documents(chunk, file, *args),
    )
    streamed = stream(sources, default_policy(), context=context)
    monkeypatch.undo()
    context_names = {source.name for source in context}
    assert streamed.objects > 30 and not context_names & set(read_whole)
    in_context = [chunk for file, chunk in parsed if file in context_names]
    assert in_context and all(streaming._may_hold_indexed(chunk) for chunk in in_context)
    assert rendered(streamed) == rendered(lint_in_memory(sources, default_policy(), context=context))


def test_with_a_reader_the_context_read_apart_is_read_whole_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reported PDB reads the context's workloads: pass 1 still parses only the context's
    documents that may hold an indexed kind, pass 2 reads the context whole for the reader and finds
    what pass 1 kept of each file by document; the report is the in-memory lint's."""
    workloads, others = _one_document_a_file(tmp_path)
    shutil.copy(EXAMPLES_DIR / "GP502" / "fires.yaml", tmp_path / "workloads-and-pdbs.yaml")
    readers = [
        path for path in others if "kind: PodDisruptionBudget" in Path(path).read_text(encoding="utf-8")
    ]
    sources, context = sources_with_context([*workloads[:5], readers[0]], tmp_path)
    reads = _count_reads(monkeypatch)
    streamed = stream(sources, default_policy(), context=context)
    monkeypatch.undo()
    assert reads[str(tmp_path / "workloads-and-pdbs.yaml")] == 2  # its PDBs apart, then whole
    assert rendered(streamed) == rendered(lint_in_memory(sources, default_policy(), context=context))


def test_suppressions_comments_and_annotations(tmp_path: Path) -> None:
    text = (EXAMPLES_DIR / "GP011" / "fires.yaml").read_text(encoding="utf-8")
    (tmp_path / "a.yaml").write_text(text, encoding="utf-8")
    (tmp_path / "b.yaml").write_text((EXAMPLES_DIR / "GP010" / "fires.yaml").read_text(encoding="utf-8"))
    (tmp_path / "c.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
        '    gpupolicy.io/ignore: "GP601[cuda]: validator needs it"\n'
        "spec:\n  containers:\n    - name: cuda\n      image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        "      securityContext: {privileged: true}  # gpupolicy: ignore GP602 -- hardware test\n",
        encoding="utf-8",
    )
    report = assert_streams_the_same(list(iter_sources([str(tmp_path)])), default_policy())
    assert report.suppressed


def test_a_syntax_error_after_some_documents(tmp_path: Path) -> None:
    text = (EXAMPLES_DIR / "GP502" / "fires.yaml").read_text(encoding="utf-8")
    (tmp_path / "broken.yaml").write_text(text + "\n---\nkind: Pod\nmetadata: {name: [\n---\n" + text)
    report = assert_streams_the_same(list(iter_sources([str(tmp_path)])), default_policy())
    assert any(finding.rule_id == "GP001" for finding in report.findings)


def test_documents_that_read_differently_alone_fall_back(tmp_path: Path) -> None:
    """A %TAG directive after `...` belongs to the next document in the stream, but to the previous
    chunk when the slow path splits the stream at `---`: the stream gives up, lint() does not."""
    text = "kind: Pod\nmetadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\n...\n%TAG !e! tag:e.com,2000:\n---\nkind: Pod\nmetadata: {name: c}\n---\nkind: [\n"
    assert len(parse_text(text, "x.yaml").problems) >= 1
    path = tmp_path / "x.yaml"
    path.write_text(text, encoding="utf-8")
    sources = list(iter_sources([str(path)]))
    for jobs in (1, 2):  # lint -j: a worker reads it in pass 1
        with pytest.raises(Fallback):
            stream(sources, default_policy(), runner=in_processes(jobs) if jobs > 1 else None)
    assert rendered(lint(sources, default_policy())) == rendered(lint_in_memory(sources, default_policy()))


def test_a_kind_the_quick_look_cannot_see_falls_back(tmp_path: Path) -> None:
    """A JSON key written with an escape hides a Service from the quick look; reading shows it."""
    (tmp_path / "a.json").write_text(
        '{"apiVersion": "v1", "\\u006bind": "Service", "metadata": {"name": "s", "namespace": "n"},'
        ' "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}',
        encoding="utf-8",
    )
    shutil.copy(EXAMPLES_DIR / "GP501" / "fires.yaml", tmp_path / "b.yaml")
    sources = list(iter_sources([str(tmp_path)]))
    for jobs in (1, 2):  # lint -j: a worker finds it
        with pytest.raises(Fallback):
            stream(sources, default_policy(), runner=in_processes(jobs) if jobs > 1 else None)
    assert rendered(lint(sources, default_policy())) == rendered(lint_in_memory(sources, default_policy()))


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: llm-{index}, namespace: team}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: llm-{index}}}}}
  template:
    metadata: {{labels: {{app: llm-{index}}}}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""
PDB = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: llm-3, namespace: team}
spec: {minAvailable: 2, selector: {matchLabels: {app: llm-3}}}
"""


@pytest.mark.parametrize("jobs", [1, 2], ids=["one-process", "two-processes"])
def test_only_what_the_readers_read_is_kept(tmp_path: Path, jobs: int) -> None:
    """In the parent too, when workers read the files (lint -j): they send only what readers read."""
    for index in range(20):
        (tmp_path / f"{index:02d}.yaml").write_text(DEPLOYMENT.format(index=index), encoding="utf-8")
    (tmp_path / "pdb.yaml").write_text(PDB, encoding="utf-8")
    sources = list(iter_sources([str(tmp_path)]))
    run = StreamRun(
        default_policy(), default_policy().limits, runner=in_processes(jobs) if jobs > 1 else None
    )
    report = run.run(sources, None)
    inventory: StreamInventory = run.inventory
    assert [resource.name for resource in inventory.list("Deployment")] == ["llm-3"]
    assert all(
        resource.positions is None
        for kind in ("Deployment", "PodDisruptionBudget")
        for resource in inventory.list(kind)
    )
    assert any(finding.rule_id == "GP502" for finding in report.findings)
    assert rendered(report) == rendered(lint_in_memory(sources, default_policy()))


PDB_FOR = """\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: llm-{index}, namespace: team-{team}}}
spec: {{maxUnavailable: 1, selector: {{matchLabels: {{app: llm-{index}}}}}}}
"""


@pytest.mark.parametrize("jobs", [1, 2], ids=["one-process", "two-processes"])
def test_workloads_kept_for_the_readers_are_packed_and_unpacked_within_a_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """A PDB beside every Deployment keeps every workload for the readers: packed, and unpacked only
    within the bound; the report is the same with no room at all to keep values unpacked, and one
    namespace's memos at a time."""
    monkeypatch.setattr(packed, "UNPACKED_BYTES", 0)
    monkeypatch.setattr(context_module, "NAMESPACES_REMEMBERED", 1)
    for index in range(12):
        team = index % 3  # the namespaces interleave: each PDB check unpacks again
        text = DEPLOYMENT.format(index=index).replace("namespace: team", f"namespace: team-{team}")
        (tmp_path / f"{index:02d}.yaml").write_text(text + "---\n" + PDB_FOR.format(index=index, team=team))
    for rule_id in CROSS_OBJECT_RULES:
        for name in ("fires.yaml", "passes.yaml"):
            shutil.copy(EXAMPLES_DIR / rule_id / name, tmp_path / f"{rule_id}-{name}")
    sources = list(iter_sources([str(tmp_path)]))
    run = StreamRun(
        default_policy(), default_policy().limits, runner=in_processes(jobs) if jobs > 1 else None
    )
    report = run.run(sources, None)
    ours = {(f"team-{index % 3}", f"llm-{index}") for index in range(12)}
    kept = [r for r in run.inventory.list("Deployment") if (r.namespace, r.name) in ours]
    assert len(kept) == 12 and all(isinstance(resource, PackedResource) for resource in kept)
    assert run.inventory.unpacked.held == 0
    assert any(finding.rule_id == "GP504" for finding in report.findings)  # the examples' overlap fired
    assert rendered(report) == rendered(lint_in_memory(sources, default_policy()))


def _cyclic_garbage(run: Callable[[], object]) -> int:
    """Objects in reference cycles that `run` leaves behind with the cyclic collector paused."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        run()
        return gc.collect()
    finally:
        if was_enabled:
            gc.enable()


def test_a_stream_leaves_no_pile_of_cyclic_garbage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI pauses the cyclic collector: cycles the rules make per object (gpu.GpuDemand and
    its container) are collected with the young generation every COLLECT_EVERY objects."""
    for index in range(40):
        (tmp_path / f"{index:02d}.yaml").write_text(DEPLOYMENT.format(index=index), encoding="utf-8")
    sources = list(iter_sources([str(tmp_path)]))
    policy = default_policy()
    stream(sources, policy)  # warm-up: caches of the policy and the rules
    monkeypatch.setattr(streaming, "COLLECT_EVERY", 5)
    every_object = _cyclic_garbage(lambda: lint_in_memory(sources, policy))
    streamed = _cyclic_garbage(lambda: stream(sources, policy))
    assert streamed <= every_object * 6 // 40  # what the last five objects or so left


def test_a_stream_of_workloads_makes_no_cyclic_garbage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reference counting frees each object as the stream passes it, without a collection: the
    loader's builders empty their cells, and the views' memos (a GPU demand names its container)
    are emptied once the object is done with (pod_spec.release_views)."""
    for index in range(40):
        (tmp_path / f"{index:02d}.yaml").write_text(DEPLOYMENT.format(index=index), encoding="utf-8")
    sources = list(iter_sources([str(tmp_path)]))
    policy = default_policy()
    stream(sources, policy)  # warm-up: caches of the policy and the rules
    monkeypatch.setattr(streaming, "COLLECT_EVERY", 10**9)
    assert _cyclic_garbage(lambda: stream(sources, policy)) == 0


class _YoungGenerationAtCollections:
    """The `gc` module as the stream sees it, noting how many objects each collection walks."""

    def __init__(self) -> None:
        self.walked: list[int] = []

    def __getattr__(self, name: str) -> object:
        return getattr(gc, name)

    def collect(self, *generation: int) -> int:
        self.walked.append(len(gc.get_objects(0)))
        return gc.collect(*generation)


def _young_generation_walked(
    sources: list[Source], monkeypatch: pytest.MonkeyPatch, *, frozen: bool
) -> list[int]:
    seen = _YoungGenerationAtCollections()
    with monkeypatch.context() as patched:
        patched.setattr(streaming, "gc", seen)
        patched.setattr(streaming, "COLLECT_EVERY", 5)
        if not frozen:
            patched.setattr(streaming, "_out_of_young_collections", contextlib.nullcontext)
        _cyclic_garbage(lambda: stream(sources, default_policy()))
    return seen.walked


def test_pass_two_collections_do_not_walk_what_pass_one_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pass_two_reads: str
) -> None:
    """With the collector paused, what pass 1 keeps (inputs holding indexed kinds, read whole) sits
    in the youngest generation: pass 2 freezes it, so that its collections walk only what pass 2
    makes, and thaws it after."""
    for index in range(30):
        text = DEPLOYMENT.format(index=index) + "---\n" + PDB.replace("llm-3", f"llm-{index}")
        (tmp_path / f"{index:02d}.yaml").write_text(text, encoding="utf-8")
    sources = list(iter_sources([str(tmp_path)]))
    stream(sources, default_policy())  # warm-up: caches of the policy and the rules
    walked = _young_generation_walked(sources, monkeypatch, frozen=True)
    unfrozen = _young_generation_walked(sources, monkeypatch, frozen=False)
    assert len(walked) == len(unfrozen) >= 5
    if pass_two_reads == "kept":  # the first collection walked all that pass 1 kept
        assert walked[0] * 3 < unfrozen[0]
    assert max(walked) <= max(unfrozen)
    assert gc.get_freeze_count() == 0  # thawed after the stream


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not on PATH")
@pytest.mark.parametrize("as_context", [False, True], ids=["reported", "context"])
def test_a_kustomization_is_rendered_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_context: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "overlays" / "prod"
    folder.mkdir(parents=True)
    shutil.copy(EXAMPLES_DIR / "GP502" / "fires.yaml", folder / "all.yaml")
    (folder / "kustomization.yaml").write_text(
        "resources:\n  - all.yaml\nnamePrefix: prod-\n", encoding="utf-8"
    )
    shutil.copy(EXAMPLES_DIR / "GP506" / "fires.yaml", tmp_path / "plain.yaml")
    if as_context:
        sources, context = sources_with_context(["plain.yaml"], tmp_path)
        assert [source.name for source in context] == ["overlays/prod"]
        assert_streams_the_same(sources, default_policy(), context)
    else:
        report = assert_streams_the_same(list(iter_sources(["."])), default_policy())
        assert any(finding.file == "overlays/prod/all.yaml" for finding in report.findings)


def test_stdin_text() -> None:
    text = (EXAMPLES_DIR / "GP503" / "fires.yaml").read_text(encoding="utf-8")
    assert_streams_the_same([Source("<stdin>", text=text)], default_policy())


def test_documents_are_taken_in_batches_of_whole_documents() -> None:
    """The stream reads a few objects before checking them (streaming.BATCH_OBJECTS): the documents
    in order, none split, one without objects (comments, problems) kept with the next."""
    text = "---\n".join(DEPLOYMENT.format(index=index) for index in range(5))
    documents = list(Source("five.yaml", text=text).iter_load())
    sizes = [len(document.resources) for document in documents]
    assert sum(sizes) == 5
    for objects in (1, 2, 5, 100):
        batches = list(streaming.batches(documents, objects))
        assert [document for batch in batches for document in batch] == documents
        assert all(sum(len(d.resources) for d in batch) >= objects for batch in batches[:-1])
        assert all(batch[-1].resources for batch in batches[:-1])


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times each input is read one document at a time (`Source.iter_load`), or only its
    documents that may hold an indexed kind (`Source.iter_load_chosen`)."""
    reads: dict[str, int] = {}
    iter_load, iter_load_chosen = Source.iter_load, Source.iter_load_chosen

    def counted(source: Source, *args: object, **kwargs: object) -> object:
        reads[source.name] = reads.get(source.name, 0) + 1
        return iter_load(source, *args, **kwargs)  # type: ignore[arg-type]

    def counted_chosen(source: Source, *args: object, **kwargs: object) -> object:
        documents = iter_load_chosen(source, *args, **kwargs)  # type: ignore[arg-type]
        if documents is not None:  # else `iter_load` reads it
            reads[source.name] = reads.get(source.name, 0) + 1
        return documents

    monkeypatch.setattr(Source, "iter_load", counted)
    monkeypatch.setattr(Source, "iter_load_chosen", counted_chosen)
    return reads


def _pdb_beside_each_deployment(folder: Path, files: int) -> list[Source]:
    """Files that each hold a GPU server and its PDB (an indexed kind: pass 1 reads every file)."""
    text = (EXAMPLES_DIR / "GP502" / "fires.yaml").read_text(encoding="utf-8")
    for number in range(files):
        (folder / f"app-{number:02d}.yaml").write_text(
            text.replace("name: ", f"name: a{number}-"), encoding="utf-8"
        )
    return list(iter_sources([str(folder)]))


def test_an_input_read_whole_in_pass_one_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pass_two_reads: str
) -> None:
    sources = _pdb_beside_each_deployment(tmp_path, 6)
    reads = _count_reads(monkeypatch)
    report = assert_streams_the_same(sources, default_policy())
    assert report.objects >= 12 and report.findings
    assert sorted(reads) == sorted(source.name for source in sources)  # (the in-memory lint uses `load`)
    assert set(reads.values()) == ({1} if pass_two_reads == "kept" else {2})


def test_inputs_past_the_budget_are_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The budget counts the inputs' bytes in the order they are read: those that fit are kept
    whole, the rest read again in pass 2, and the report is the same."""
    sources = _pdb_beside_each_deployment(tmp_path, 6)
    size = streaming.input_bytes(sources[0])
    monkeypatch.setattr(streaming, "KEEP_LOADED_BYTES", 2 * size)
    reads = _count_reads(monkeypatch)
    assert_streams_the_same(sources, default_policy())
    assert [reads[source.name] for source in sources] == [1, 1, 2, 2, 2, 2]


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """How many times each input is parsed whole (`documents.iter_parse`), and each chunk of it on
    its own (`documents._chunk_documents`)."""
    whole: dict[str, int] = {}
    chunks: dict[tuple[str, str], int] = {}
    iter_parse, chunk_documents = inputs_module.iter_parse, documents_module._chunk_documents

    def counted_whole(text: str, file: str, **kwargs: object) -> object:
        whole[file] = whole.get(file, 0) + 1
        return iter_parse(text, file, **kwargs)  # type: ignore[arg-type]

    def counted_chunk(chunk: str, file: str, *args: object) -> object:
        chunks[(file, chunk)] = chunks.get((file, chunk), 0) + 1
        return chunk_documents(chunk, file, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs_module, "iter_parse", counted_whole)
    monkeypatch.setattr(documents_module, "_chunk_documents", counted_chunk)
    return whole, chunks


def test_past_the_budget_no_document_is_parsed_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs past KEEP_LOADED_BYTES: pass 1 parses the documents that may hold an indexed kind,
    each apart, and keeps them as read; pass 2 parses the others only. Past KEEP_CHOSEN_BYTES (the
    bytes of those documents kept), pass 2 reads the file whole again, as before."""
    sources = _pdb_beside_each_deployment(tmp_path, 6)
    expected = rendered(lint_in_memory(sources, default_policy()))
    monkeypatch.setattr(streaming, "KEEP_LOADED_BYTES", 0)
    monkeypatch.setattr(streaming, "KEEP_CHOSEN_BYTES", 1 << 20)
    whole, chunks = _count_parses(monkeypatch)
    assert rendered(stream(sources, default_policy())) == expected
    assert not whole and set(chunks.values()) == {1}
    assert {file for file, _ in chunks} == {source.name for source in sources}
    assert any(not streaming._may_hold_indexed(chunk) for _, chunk in chunks)  # the Deployments, in pass 2

    first = sources[0].peek() or ""
    chosen = [chunk for _, chunk in split_documents(first) if streaming._may_hold_indexed(chunk)]
    monkeypatch.setattr(streaming, "KEEP_CHOSEN_BYTES", 2 * sum(len(chunk) for chunk in chosen))
    whole.clear()
    chunks.clear()
    assert rendered(stream(sources, default_policy())) == expected
    assert sorted(whole) == sorted(source.name for source in sources[2:])
    assert set(whole.values()) == {1}


def test_a_file_changed_between_the_passes_is_read_as_pass_two_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document pass 1 read and kept, changed before pass 2 reads its file: pass 2 parses it
    again, and the stream sees the change (it falls back to the in-memory lint, which reads the
    new text)."""
    sources = _pdb_beside_each_deployment(tmp_path, 2)
    monkeypatch.setattr(streaming, "KEEP_LOADED_BYTES", 0)
    monkeypatch.setattr(streaming, "KEEP_CHOSEN_BYTES", 1 << 20)
    index = streaming.StreamRun._index

    def changed_after_pass_one(run: streaming.StreamRun, units: streaming.Units) -> object:
        found = index(run, units)
        path = tmp_path / "app-01.yaml"
        path.write_text(
            path.read_text(encoding="utf-8").replace("minAvailable: 2", "minAvailable: 1"), encoding="utf-8"
        )
        return found

    monkeypatch.setattr(streaming.StreamRun, "_index", changed_after_pass_one)
    with pytest.raises(streaming.Fallback, match="changed between the passes"):
        stream(sources, default_policy())


def test_the_context_is_never_kept_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pre-commit's repository: pass 1 reads the context for its indexed objects and keeps their
    values only; pass 2 reads a context input again only when a reader among the reported inputs
    needs its workloads (an HPA here), while the reported input is read once."""
    sources = _pdb_beside_each_deployment(tmp_path, 3)
    (tmp_path / "chosen.yaml").write_text(
        (EXAMPLES_DIR / "GP601" / "fires.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    shutil.copy(EXAMPLES_DIR / "GP506" / "fires.yaml", tmp_path / "hpa.yaml")
    reads = _count_reads(monkeypatch)
    for chosen_name, reads_of_context in (("chosen.yaml", 1), ("hpa.yaml", 2)):
        reads.clear()
        chosen, context = sources_with_context([str(tmp_path / chosen_name)], tmp_path)
        assert {source.name for source in sources} <= {source.name for source in context}
        stream(chosen, default_policy(), context=context)
        assert [reads.get(source.name, 0) for source in sources] == [reads_of_context] * len(sources)


def test_the_indexed_objects_of_the_context_keep_no_positions_after_the_stream(tmp_path: Path) -> None:
    """Pre-commit's repository with a reader among the reported inputs: the context is read again
    for the readers, and its indexed objects (never checked) keep their values, not positions."""
    sources = _pdb_beside_each_deployment(tmp_path, 3)
    shutil.copy(EXAMPLES_DIR / "GP506" / "fires.yaml", tmp_path / "hpa.yaml")
    chosen, context = sources_with_context([str(tmp_path / "hpa.yaml")], tmp_path)
    assert len(context) == len(sources)
    run = StreamRun(default_policy(), streaming.DEFAULT_LIMITS)
    run.run(chosen, context)
    assert run.readers is not None  # the HPA reads workloads: the context was read again
    pdbs = run.inventory.list("PodDisruptionBudget")
    from_context = [pdb for pdb in pdbs if Path(pdb.file).name.startswith("app-")]
    assert from_context and all(pdb.positions is None for pdb in from_context)
