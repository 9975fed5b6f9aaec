"""`gpupolicy lint --changed-since REF`: report only on what a pull request changes.

Objects are compared, not files: both sides are loaded by the same machinery (`inputs.Source`,
charts and kustomizations rendered), each object is keyed by its identity (API group, kind,
namespace, name) and compared by its parsed value, so a comment, a reformatting, a reordering of
documents or a move to another file changes nothing, while a values.yaml edit changes the objects
the chart renders differently. The "before" side is the tree of REF exported by `git archive`
into a temporary folder; the "after" side is the working tree as it is (uncommitted and untracked
files count as changes, as `git diff REF` and `git ls-files --others` list them).

The whole repository is context on both sides, and every rule runs; a finding is kept when

- its object is new or its value differs from REF (every finding of a changed object, old or new);
- it is about no object (a syntax error, a render failure) and its file changed;
- or it did not exist at REF (same rule, object, field and container: `baseline.fingerprint`):
  a finding that a change elsewhere made on an unchanged object, such as GP501 on a Deployment
  whose PodDisruptionBudget was deleted. An "unknown" (info, said once per run on whichever
  object needs the fact first) counts as known when REF's tree said the same.

Findings that existed at REF on unchanged objects, such as those on objects a changed object
merely refers to, are not reported: they are not the change being judged.

Cost: REF's tree is linted too, and the rendered inputs of both sides are rendered once more to
compare their objects; plain files that git does not list as changed are not read again.
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from gpupolicy.core.findings import Finding, ObjectRef, Severity
from gpupolicy.core.immutable import immutable, mutable, replace
from gpupolicy.engine.baseline import fingerprint
from gpupolicy.engine.report import Report
from gpupolicy.lint.git_tree import GIT_TIMEOUT_SECONDS, ChangeError, git_toplevel, run_git
from gpupolicy.loading.documents import DEFAULT_LIMITS, LoadLimits, Resource
from gpupolicy.loading.inputs import RenderSession, Source, display_path, sources_with_context
from gpupolicy.policy.loading import Policy
from gpupolicy.policy.repo_policies import RepoPolicies

# What a CI job must do for REF to exist in its clone (a shallow clone has no base commit).
SHALLOW_HINT = (
    "fetch it first (a shallow clone lacks it: actions/checkout with fetch-depth: 0, "
    "GIT_DEPTH: 0 in GitLab CI, or git fetch origin BRANCH)"
)

ObjectKey = tuple[str, str, str, str]  # (API group, kind, namespace, name)


@immutable
class Since:
    """The commit a lint compares the working tree with, and the repository it belongs to."""

    ref: str  # as given on the command line, for messages
    commit: str
    root: Path

    @classmethod
    def resolve(cls, ref: str, anchor: Path) -> Since:
        """Check REF names a commit (`git rev-parse --verify REF^{commit}`, see
        https://git-scm.com/docs/git-rev-parse) in the repository of `anchor`."""
        what = f"--changed-since {ref}"
        if not ref or ref.startswith("-"):  # git would read it as an option
            raise ChangeError(f"{what}: not a revision")
        folder = anchor.resolve() if anchor.is_dir() else anchor.resolve().parent
        root = git_toplevel(folder, what=what)
        completed = run_git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root, what=what)
        if completed.returncode != 0:
            raise ChangeError(f"{what}: no such commit in the repository at {root}; {SHALLOW_HINT}")
        return cls(ref, completed.stdout.decode("ascii").strip(), root)

    def changed_files(self) -> frozenset[str]:
        """Files (relative to the top, '/'-separated) that differ between REF and the working tree,
        deleted and untracked ones included; a rename is its two names (--no-renames)."""
        what = f"--changed-since {self.ref}"
        diff = run_git(["diff", "--name-only", "--no-renames", "-z", self.commit, "--"], self.root, what=what)
        others = run_git(["ls-files", "--others", "--exclude-standard", "-z"], self.root, what=what)
        for completed in (diff, others):
            if completed.returncode != 0:
                detail = completed.stderr.decode("utf-8", "replace").strip().splitlines()
                raise ChangeError(f"{what}: git failed: {detail[-1] if detail else completed.returncode}")
        names = diff.stdout.split(b"\0") + others.stdout.split(b"\0")
        return frozenset(name.decode("utf-8", "surrogateescape") for name in names if name)

    def export(self, folder: Path) -> None:
        """The tree of REF, written below `folder` by `git archive` (https://git-scm.com/docs/git-archive).
        Members are extracted with tarfile's "data" filter, which refuses absolute paths, paths
        out of `folder` and links leading out of it: such a member is skipped, not followed."""
        what = f"--changed-since {self.ref}"
        with tempfile.TemporaryFile() as errors:  # a file, not a pipe: nothing waits on it
            try:
                process = subprocess.Popen(
                    ["git", "archive", "--format=tar", self.commit],
                    cwd=self.root,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                )
            except OSError as exc:
                raise ChangeError(f"{what}: cannot run git: {exc}") from exc
            assert process.stdout is not None
            failure = None
            try:
                _extract(process.stdout, folder)
            except (tarfile.TarError, OSError) as exc:
                failure = f"cannot unpack REF's tree: {exc}"
            finally:
                process.stdout.close()
                try:
                    code = process.wait(timeout=GIT_TIMEOUT_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    code = process.wait()
            if code != 0:
                errors.seek(0)
                detail = errors.read().decode("utf-8", "replace").strip().splitlines()
                raise ChangeError(f"{what}: git archive failed: {detail[-1] if detail else code}")
        if failure is not None:
            raise ChangeError(f"{what}: {failure}")


def _safe_member(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    try:
        return tarfile.data_filter(member, path)
    except tarfile.FilterError:
        return None


def _extract(stream: IO[bytes], folder: Path) -> None:
    with tarfile.open(fileobj=stream, mode="r|") as archive:
        archive.extractall(folder, filter=_safe_member)


def _digest(value: Any) -> bytes:
    """A digest of a parsed value: mappings compared as sets of entries (key order does not count,
    as it does not for the API server), types told apart (`1`, `"1"`, `true` differ)."""
    if isinstance(value, dict):
        entries = sorted(_digest(key) + _digest(item) for key, item in value.items())
        return hashlib.blake2b(b"{" + b"".join(entries), digest_size=16).digest()
    if isinstance(value, list):
        return hashlib.blake2b(b"[" + b"".join(_digest(item) for item in value), digest_size=16).digest()
    return hashlib.blake2b(f"{type(value).__name__}:{value!r}".encode(), digest_size=16).digest()


def _relative(name: str, top: Path) -> str | None:
    """`name` (a path as findings and sources show it) relative to `top`, or None when outside."""
    try:
        return Path(name).resolve().relative_to(top.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):
        return None


def _identity(resource: Resource) -> ObjectKey:
    return (resource.group, resource.kind, resource.namespace or "", resource.name)


def _values(sources: Iterable[Source], limits: LoadLimits) -> dict[ObjectKey, Counter[bytes]]:
    """The objects of `sources`: identity -> how many objects of each value."""
    values: dict[ObjectKey, Counter[bytes]] = {}
    for source in sources:
        for resource in source.load(limits).resources:
            values.setdefault(_identity(resource), Counter())[_digest(resource.obj)] += 1
    return values


def _worth_loading(source: Source, top: Path, changed: frozenset[str]) -> bool:
    """A rendered folder may change through any file (a values file, a kustomize base elsewhere);
    a plain file holds the same objects on both sides unless git lists it."""
    if not source.is_file:
        return False
    if source.rendered:
        return True
    return _relative(source.name, top) in changed


def _changed_objects(
    after: Sequence[Source], before: dict[ObjectKey, Counter[bytes]], limits: LoadLimits
) -> tuple[set[ObjectRef], int]:
    """The identities of the objects of `after` that are new or differ from `before` (which is
    used up), and how many such objects there are."""
    refs: set[ObjectRef] = set()
    count = 0
    for source in after:
        for resource in source.load(limits).resources:
            left = before.get(_identity(resource))
            digest = _digest(resource.obj)
            if left is not None and left[digest] > 0:
                left[digest] -= 1
                continue
            refs.add(resource.ref)
            count += 1
    return refs, count


@immutable
class LintRun:
    """How the working tree was linted, to lint REF's tree the same way."""

    paths: Sequence[str]
    context_root: Path
    policy: Policy
    exclude: Sequence[str] = ()
    allow_remote: bool = True
    limits: LoadLimits = DEFAULT_LIMITS
    # Each file's nearest .gpupolicy.yaml (None: `policy` for every file); REF's files are judged
    # under the working tree's policies, as the working tree's are.
    policies: RepoPolicies | None = None
    # The run's renderings (reused for the working tree's side) and the policy's Helm values files.
    session: RenderSession | None = None
    jobs: int | None = 1  # processes (`lint -j`)

    def ref_session(self) -> RenderSession:
        """A session of REF's own (its charts are other files), rendering with the same values files."""
        return RenderSession(
            helm_values=self.session.helm_values if self.session else (),
            helm_namespace=self.session.helm_namespace if self.session else None,
            helm_api_versions=self.session.helm_api_versions if self.session else (),
            kube_version=self.session.kube_version if self.session else None,
        )


@mutable
class _AtRef:
    """What REF's tree holds: its objects (of the inputs that may differ), its findings
    (fingerprints, counted) and the facts its "unknown" findings said."""

    values: dict[ObjectKey, Counter[bytes]]
    findings: Counter[str]
    facts: set[tuple[str, str]]

    @classmethod
    def lint(cls, since: Since, run: LintRun, changed: frozenset[str]) -> _AtRef:
        from gpupolicy.lint.scopes import lint_with_jobs

        with tempfile.TemporaryDirectory(prefix="gpupolicy-base-") as folder:
            top = Path(folder)
            since.export(top)
            paths = [str(top / rel) for rel in _inside(run.paths, since.root) if (top / rel).exists()]
            context_rel = _relative(str(run.context_root), since.root)
            context_root = top / context_rel if context_rel is not None else run.context_root
            sources, context = sources_with_context(
                paths,
                context_root,
                exclude=run.exclude,
                allow_remote=run.allow_remote,
                session=run.ref_session(),
            )
            if run.policies is None:
                report = lint_with_jobs(run.jobs, sources, run.policy, context=context, limits=run.limits)
            else:
                from gpupolicy.lint.scopes import lint_by_policy

                policies = run.policies.read_as(top, since.root)
                report = lint_by_policy(sources, policies, run.policy, context=context, jobs=run.jobs)
            loaded = [source for source in [*sources, *context] if _worth_loading(source, top, changed)]
            values = _values(loaded, run.limits)
            said = [*report.findings, *(finding for finding, _ in report.suppressed)]
            findings = Counter(fingerprint(_as_after(finding, top, since.root)) for finding in said)
        facts = {(finding.rule_id, finding.message) for finding in said if finding.severity is Severity.INFO}
        return cls(values, findings, facts)

    def knew(self, finding: Finding) -> bool:
        """Whether REF's tree had this finding (each finding of REF matches one of the working tree)."""
        key = fingerprint(finding)
        if self.findings[key] > 0:
            self.findings[key] -= 1
            return True
        # An "unknown" is said once per run, on whichever object needs the fact first: that object
        # may differ between the two sides, the fact does not (Violation.once).
        return finding.severity is Severity.INFO and (finding.rule_id, finding.message) in self.facts


def restrict(report: Report, since: Since, run: LintRun) -> Report:
    """Keep the findings of `report` (the working tree, linted as `run` says) that the change
    since REF is answerable for (see the module's doc), and count the objects left out."""
    changed = since.changed_files()
    at_ref = _AtRef.lint(since, run, changed)
    after_sources, _ = sources_with_context(
        run.paths, run.context_root, exclude=run.exclude, allow_remote=run.allow_remote, session=run.session
    )
    after = [source for source in after_sources if _worth_loading(source, since.root, changed)]
    refs, count = _changed_objects(after, at_ref.values, run.limits)

    def answerable(finding: Finding) -> bool:
        if finding.object is not None:
            return finding.object in refs or not at_ref.knew(finding)
        changed_file = finding.file is not None and _file_changed(finding.file, since.root, changed)
        return changed_file or not at_ref.knew(finding)

    report.findings = [finding for finding in report.findings if answerable(finding)]
    report.suppressed = [(finding, reason) for finding, reason in report.suppressed if answerable(finding)]
    report.roles = [role for role in report.roles if role.object in refs]
    report.unchanged = max(report.objects - count, 0)
    report.objects = min(count, report.objects)
    report.changed_since = since.ref
    return report


def _inside(paths: Iterable[str], root: Path) -> list[str]:
    """The command line's paths relative to the repository top (those outside it are dropped)."""
    found = []
    for raw in paths:
        rel = _relative(raw, root)
        if rel is not None:
            found.append(rel)
    return found


def _as_after(finding: Finding, top: Path, root: Path) -> Finding:
    """A finding of REF's tree named as the same file of the working tree would be."""
    if finding.file is None:
        return finding
    rel = _relative(finding.file, top)
    return finding if rel is None else replace(finding, file=display_path(root / rel))


def _file_changed(name: str, root: Path, changed: frozenset[str]) -> bool:
    """Whether the file (or, for a rendered folder, any file below it) differs from REF."""
    rel = _relative(name, root)
    if rel is None:
        return False
    if rel in changed:
        return True
    prefix = "" if rel == "." else rel + "/"
    return any(name.startswith(prefix) for name in changed)
