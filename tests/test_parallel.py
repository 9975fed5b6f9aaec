"""`gpupolicy lint -j N` (gpupolicy/lint/parallel.py): the output of `-j 1` in every format, byte for
byte and in the same order, and its exit code, with the per-file work done in N processes, while
cross-object rules see the whole run; a worker that dies is an internal error, never a partial
report. No timing here: the speed-up is measured by bench/lint_throughput.py and bench/lint_memory.py."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpupolicy.cli.main import EXIT_INTERNAL, EXIT_USAGE, main
from gpupolicy.lint import parallel, streaming
from gpupolicy.lint.streaming import StreamRun
from gpupolicy.loading.inputs import Source
from gpupolicy.rules.example_files import EXAMPLES_DIR
from tests.real_tools import helm_on_path, needs_helm, needs_kubectl

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "corpus"
FORMATS = ("text", "json", "sarif", "junit", "github", "markdown")
JOBS = (2, 3)


@dataclass(frozen=True, slots=True)
class Outcome:
    code: int
    outputs: dict[str, str]  # format -> what it wrote
    stderr: str


@dataclass(slots=True)
class Spies:
    """Whether a run took the path in processes, and whether it fell back to one process."""

    in_processes: int = 0
    chunks: int = 0
    in_memory: int = 0


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> Spies:
    seen = Spies()
    run_in_processes, add_chunk, lint_in_memory = (
        parallel.run_in_processes,
        StreamRun.add_chunk,
        streaming.lint_in_memory,
    )

    def counted_run(*args: Any, **kwargs: Any) -> Any:
        seen.in_processes += 1
        return run_in_processes(*args, **kwargs)

    def counted_chunk(self: StreamRun, *args: Any, **kwargs: Any) -> Any:
        seen.chunks += 1
        return add_chunk(self, *args, **kwargs)

    def counted_memory(*args: Any, **kwargs: Any) -> Any:
        seen.in_memory += 1
        return lint_in_memory(*args, **kwargs)

    monkeypatch.setattr(parallel, "run_in_processes", counted_run)
    monkeypatch.setattr(StreamRun, "add_chunk", counted_chunk)
    monkeypatch.setattr(streaming, "lint_in_memory", counted_memory)
    return seen


Lint = Callable[..., Outcome]


@pytest.fixture
def lint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Lint:
    """`gpupolicy lint -j JOBS ARGS...` in this process, every format written to a file of its own."""
    runs = iter(range(1_000))

    def run(jobs: int, *args: str) -> Outcome:
        folder = tmp_path / f"out-{next(runs)}-j{jobs}"
        outputs = [f"--output={name}={folder / name}" for name in FORMATS]
        code = main(
            ["lint", f"-j{jobs}", "--show-suppressed", f"--format={','.join(FORMATS)}", *outputs, *args]
        )
        captured = capsys.readouterr()
        assert captured.out == ""
        written = {
            name: (folder / name).read_text(encoding="utf-8") for name in FORMATS if (folder / name).exists()
        }
        return Outcome(code, written, captured.err)

    return run


def assert_same_in_processes(lint: Lint, spies: Spies, *args: str) -> Outcome:
    """The run of `args` in one process, then in each of JOBS processes: the same outcome, streamed in
    processes (several chunks), never by the in-memory fallback."""
    alone = lint(1, *args)
    assert set(alone.outputs) == set(FORMATS) and alone.code in (0, 1), alone.stderr
    for jobs in JOBS:
        before = (spies.in_processes, spies.chunks, spies.in_memory)
        assert lint(jobs, *args) == alone, f"-j {jobs} differs from -j 1"
        assert spies.in_processes > before[0] and spies.chunks >= before[1] + 2
        assert spies.in_memory == before[2]
    return alone


def test_the_labelled_corpus(lint: Lint, spies: Spies) -> None:
    outcome = assert_same_in_processes(lint, spies, "--no-repo-policy", str(CORPUS))
    assert outcome.code == 1 and outcome.outputs["text"].count("\n") > 500


# The labels of the labelled corpus: lines of their own at the top of a document, and `# expect:`
# at the end of a line. Without them, each file is the one of ../shared/corpus/real (one line of
# one file aside, whose trailing space the label replaced).
LABEL_LINE = re.compile(r"^# (?:source|licence|forbid):.*\n", re.M)
EXPECT = re.compile(r"[ \t]+# expect:[^\n]*")


def test_the_real_corpus_as_published(tmp_path: Path, lint: Lint, spies: Spies) -> None:
    published = tmp_path / "real"
    published.mkdir()
    for path in sorted(CORPUS.iterdir()):
        if path.suffix in (".yaml", ".yml"):
            text = EXPECT.sub("", LABEL_LINE.sub("", path.read_text(encoding="utf-8")))
            (published / path.name).write_text(text, encoding="utf-8")
    outcome = assert_same_in_processes(lint, spies, "--no-repo-policy", str(published))
    assert "# expect" not in outcome.outputs["json"] and outcome.code == 1


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """Cross-object rules across files and policies: every rule's examples side by side (PDBs, HPAs,
    Services, bindings, experiments and their arms, suppressions, "unknown" facts), the example
    repository (nested `.gpupolicy.yaml` files: groups linted under their own policies, with the
    Rego, Gatekeeper and ValidatingAdmissionPolicy custom rules of one of them)."""
    root = tmp_path / "bundle"
    shutil.copytree(REPO / "examples", root)
    # The example repository leaves its custom-rule example to its own folder: here it is linted too.
    policy = root / ".gpupolicy.yaml"
    policy.write_text(policy.read_text(encoding="utf-8").replace(', "policies/*"', ""), encoding="utf-8")
    rules = root / "rules"
    rules.mkdir()
    for folder in sorted(EXAMPLES_DIR.iterdir()):
        for name in ("fires.yaml", "passes.yaml"):
            if (folder / name).is_file():
                shutil.copy(folder / name, rules / f"{folder.name}-{name}")
    return root


def test_cross_object_rules_policies_and_custom_rules_see_the_whole_run(
    bundle: Path, lint: Lint, spies: Spies
) -> None:
    outcome = assert_same_in_processes(lint, spies, str(bundle))
    text = outcome.outputs["text"]
    cross_object = ("GP302", "GP502", "GP503", "GP504", "GP505", "GP615", "GP616", "GP806", "GP807")
    for rule_id in (*cross_object, "GP010", "GP011", "ACME001", "ACME002", "ACME003"):
        assert f" {rule_id} " in text, rule_id
    assert "suppressed" in text


def test_files_reported_on_with_the_rest_as_context(bundle: Path, lint: Lint, spies: Spies) -> None:
    """pre-commit's run: the changed files reported on, the repository read for what they refer to."""
    chosen = [
        str(bundle / "rules" / name) for name in ("GP502-fires.yaml", "GP616-fires.yaml", "GP806-fires.yaml")
    ]
    outcome = assert_same_in_processes(lint, spies, "--context-root", str(bundle), *chosen)
    assert {"GP502", "GP616", "GP806"} <= set(re.findall(r" (GP\d{3}) ", outcome.outputs["text"]))
    assert "GP504-fires.yaml" not in outcome.outputs["text"]


def test_a_baseline_written_and_applied(
    bundle: Path, lint: Lint, spies: Spies, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written = {}
    for jobs in (1, *JOBS):
        baseline = tmp_path / f"baseline-j{jobs}.json"
        assert main(["lint", f"-j{jobs}", "--write-baseline", str(baseline), str(bundle)]) == 0
        written[jobs] = baseline.read_text(encoding="utf-8")
        assert capsys.readouterr().err.startswith("gpupolicy: wrote 2")
    assert len(set(written.values())) == 1
    (bundle / "rules" / "GP102-fires.yaml").unlink()  # fewer findings than the baseline accepts
    outcome = assert_same_in_processes(
        lint, spies, "--baseline", str(tmp_path / "baseline-j1.json"), str(bundle)
    )
    assert outcome.code == 0


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_changed_since(bundle: Path, lint: Lint, spies: Spies, monkeypatch: pytest.MonkeyPatch) -> None:
    git(bundle, "init", "-q", "-b", "main")
    git(bundle, "add", ".")
    git(bundle, "commit", "-q", "-m", "before")
    (bundle / "rules" / "GP503-passes.yaml").unlink()  # a PDB's workload gone: GP503 on an unchanged PDB
    changed = bundle / "rules" / "GP102-fires.yaml"
    changed.write_text(changed.read_text(encoding="utf-8").replace("nvidia.com/gpu: 2", "nvidia.com/gpu: 3"))
    monkeypatch.chdir(bundle)
    outcome = assert_same_in_processes(lint, spies, "--changed-since", "HEAD", ".")
    assert outcome.code == 1 and "GP102" in outcome.outputs["text"]


@needs_helm
@needs_kubectl
def test_charts_and_overlays_rendered_once(
    tmp_path: Path, lint: Lint, spies: Spies, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Helm chart and a kustomize base with two overlays (findings on the base said once, naming
    both overlays), beside plain files that select their objects."""
    helm_on_path(monkeypatch)
    root = tmp_path / "gitops"
    shutil.copytree(REPO / "tests" / "data" / "gitops", root)
    for rule_id in ("GP501", "GP502", "GP506"):
        shutil.copy(EXAMPLES_DIR / rule_id / "fires.yaml", root / f"{rule_id}.yaml")
    monkeypatch.chdir(root)
    outcome = assert_same_in_processes(lint, spies, ".")
    assert "charts/llm/templates/deployment.yaml" in outcome.outputs["text"]
    assert "training/base/finetune-job.yaml" in outcome.outputs["text"]


@pytest.mark.parametrize("given", ["0", "-1", "abc", "2.5", ""])
def test_a_number_of_processes_that_is_not_one_is_a_usage_error(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", f"--jobs={given}", str(CORPUS)]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"gpupolicy: -j {given}: ")


def die(how: str) -> Callable[..., Any]:
    """What replaces a worker's chunk: kills it (the OOM killer's signal), or raises (a bug)."""
    parent = os.getpid()

    def chunk(self: StreamRun) -> Any:
        if os.getpid() == parent:
            raise AssertionError("the parent took a chunk")
        if how == "killed":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("a bug in a worker")

    return chunk


@pytest.mark.parametrize("how", ["killed", "raises"])
def test_a_worker_that_dies_is_an_internal_error_and_no_report(
    how: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(StreamRun, "take_chunk", die(how))
    assert main(["lint", "-j", "2", "--no-repo-policy", str(CORPUS)]) == EXIT_INTERNAL
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("gpupolicy: internal error: ")
    assert ("ended abruptly" in captured.err) == (how == "killed")


def test_a_chunk_the_stream_cannot_vouch_for_makes_the_lint_fall_back(
    tmp_path: Path, lint: Lint, spies: Spies
) -> None:
    """A Service only reading shows (its `kind` key written with an escape): a worker finds it in pass 2,
    and the whole lint runs in memory, in one process, as without -j."""
    (tmp_path / "a.json").write_text(
        '{"apiVersion": "v1", "\\u006bind": "Service", "metadata": {"name": "s", "namespace": "n"},'
        ' "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}',
        encoding="utf-8",
    )
    for index in range(8):
        shutil.copy(EXAMPLES_DIR / "GP501" / "fires.yaml", tmp_path / f"b{index}.yaml")
    alone = lint(1, "--no-repo-policy", str(tmp_path))
    assert spies.in_memory == 1
    assert lint(2, "--no-repo-policy", str(tmp_path)) == alone
    assert spies.in_processes == 1 and spies.in_memory == 2


def sources_of(folder: Path, count: int, size: int) -> Iterator[Source]:
    for index in range(count):
        path = folder / f"{index}.yaml"
        path.write_text("#" * size, encoding="utf-8")
        yield Source(path.name, path=path)


def test_without_j_a_small_tree_runs_in_one_process_and_a_large_one_on_every_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streaming, "available_cores", lambda: 4)
    monkeypatch.setattr(streaming, "PROCESSES_FROM_BYTES", 1_000)
    assert streaming.processes_for(list(sources_of(tmp_path, 3, 100))) == 1
    assert streaming.processes_for(list(sources_of(tmp_path, 3, 400))) == 4
    assert streaming.processes_for(list(sources_of(tmp_path, 1, 4_000))) == 1  # one file: one process
    monkeypatch.setattr(streaming, "available_cores", lambda: 1)
    assert streaming.processes_for(list(sources_of(tmp_path, 3, 400))) == 1


def test_a_context_read_apart_weighs_a_tenth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pre-commit's context counts a tenth of its bytes when pass 1 reads only its documents that may
    hold an indexed kind (no reported input may hold a reader), all of them otherwise."""
    monkeypatch.setattr(streaming, "available_cores", lambda: 4)
    monkeypatch.setattr(streaming, "PROCESSES_FROM_BYTES", 1_000)
    reported = tmp_path / "reported"
    reported.mkdir()
    (reported / "app.yaml").write_text("kind: Deployment\n", encoding="utf-8")
    sources = [Source("app.yaml", path=reported / "app.yaml")]
    assert streaming.processes_for(sources, list(sources_of(tmp_path, 3, 3_000))) == 1
    assert streaming.processes_for(sources, list(sources_of(tmp_path, 4, 3_000))) == 4
    (reported / "app.yaml").write_text("kind: PodDisruptionBudget\n", encoding="utf-8")  # a reader
    assert streaming.processes_for(sources, list(sources_of(tmp_path, 1, 1_000))) == 4
