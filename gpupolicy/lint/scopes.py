"""Each input of a lint run judged under its own policy: the nearest `.gpupolicy.yaml` above it.

pre-commit passes the changed files one by one, CI lints the whole tree: for the two to agree, a
file's policy must not depend on what else the run holds. Every input (a manifest file, a Helm
chart or kustomization rendered as one unit, stdin: the policy of the current directory) gets
the policy `RepoPolicies` finds for it. The inputs are grouped by that policy; each group is
linted with its policy and with the run's other inputs (and `--context-root`'s) as context, so
that cross-object rules see everything, and the group reports are merged into one.

With one policy for every input (the common case) the run is one `streaming.lint` call, as
before. With several, each group reads the others as context: quick looks at their text, and a
second rendering of charts and kustomizations of other groups.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from pathlib import Path

from gpupolicy.core.findings import Finding
from gpupolicy.core.immutable import immutable
from gpupolicy.engine.report import Report
from gpupolicy.lint.streaming import lint, processes_for
from gpupolicy.loading.documents import DEFAULT_LIMITS, LoadLimits
from gpupolicy.loading.inputs import Source, is_excluded
from gpupolicy.policy.loading import Policy
from gpupolicy.policy.repo_policies import RepoPolicies


@immutable
class PolicyScope:
    """The inputs of a run (their indices, in the run's order) that one policy governs."""

    policy: Policy
    file: Path | None  # the nearest .gpupolicy.yaml (None: the default and --policy only)
    inputs: tuple[int, ...]


def location_of(source: Source) -> Path:
    """Where an input sits, for finding its policy: stdin and problems met outside any file sit in the
    current directory."""
    if source.path is not None:
        return source.path
    if source.problem is not None and source.problem.file and not source.problem.file.startswith("<"):
        return Path(source.problem.file)  # a folder that could not be listed
    return Path.cwd()


def scopes_of(sources: Sequence[Source], policies: RepoPolicies) -> list[PolicyScope]:
    """The inputs grouped by their effective policy, groups in the order of their first input.

    The `exclude` globs of a `.gpupolicy.yaml` drop the inputs it governs that they match, relative
    to its folder, so that they hold in every mode: for a nested policy when a folder above is
    linted, and for the files pre-commit names (the walk of a linted directory has applied the lint
    root's globs already, relative to that directory, and prunes excluded folders)."""
    grouped: dict[Path | None, list[int]] = {}
    for index, source in enumerate(sources):
        grouped.setdefault(policies.file_for(location_of(source)), []).append(index)
    scopes = []
    for file, inputs in grouped.items():
        policy = policies.load(file)
        if file is not None and policy.exclude:
            inputs = [index for index in inputs if not _excluded(sources[index], file.parent, policy.exclude)]
        if inputs:
            scopes.append(PolicyScope(policy, file, tuple(inputs)))
    return scopes


def _excluded(source: Source, folder: Path, patterns: list[str]) -> bool:
    return source.path is not None and is_excluded(source.path, folder, patterns)


def lint_by_policy(
    sources: Sequence[Source],
    policies: RepoPolicies,
    run_policy: Policy,
    *,
    context: Sequence[Source] | None = None,
    jobs: int | None = 1,
) -> Report:
    """Lint every input under its nearest policy; `run_policy` (the lint root's) serves a run with no
    input. `context` inputs are read for cross-object rules only, as `streaming.lint` reads them.
    `jobs`: processes for each group's lint (`lint_with_jobs`)."""
    scopes = scopes_of(sources, policies)
    if not scopes:  # no input, or every input excluded
        return lint_with_jobs(jobs, [], run_policy, context=context, limits=run_policy.limits)
    if len(scopes) == 1:  # the common case: one policy, one lint as before
        (scope,) = scopes
        chosen = sources if len(scope.inputs) == len(sources) else [sources[i] for i in scope.inputs]
        return lint_with_jobs(jobs, chosen, scope.policy, context=context, limits=scope.policy.limits)
    said: set[Hashable] = set()  # "unknown" and once-per-namespace findings: once per run, not per group
    reports = []
    for scope in scopes:
        others = [sources[index] for other in scopes if other is not scope for index in other.inputs]
        reports.append(
            lint_with_jobs(
                jobs,
                [sources[index] for index in scope.inputs],
                scope.policy,
                context=[*others, *(context or ())],
                limits=scope.policy.limits,
                said=said,
            )
        )
    return merge_reports(reports, [source.name for source in sources])


def lint_with_jobs(
    jobs: int | None,
    sources: Sequence[Source],
    policy: Policy,
    *,
    context: Sequence[Source] | None = None,
    limits: LoadLimits = DEFAULT_LIMITS,
    said: set[Hashable] | None = None,
) -> Report:
    """`streaming.lint`, its stream in `jobs` processes (None: as many as `processes_for` the inputs
    says) where processes can be forked (gpupolicy/lint/parallel.py)."""
    count = processes_for(sources, context) if jobs is None else jobs
    runner = None
    if count > 1:
        from gpupolicy.lint.parallel import in_processes  # multiprocessing only for a run in processes

        runner = in_processes(count)
    return lint(sources, policy, context=context, limits=limits, said=said, runner=runner)


def merge_reports(reports: Sequence[Report], order: Sequence[str]) -> Report:
    """One report of the groups' reports, as one run would list it: findings and suppressed findings
    sorted by position, workloads and skipped documents in the order of the inputs (`order`: the
    names of the run's inputs), the counts summed, the policy files of every group, and a digest of
    the group digests. A field added to `Report` that a lint fills must be merged here too."""
    rank = {name: index for index, name in enumerate(order)}
    merged = Report(
        findings=sorted((f for report in reports for f in report.findings), key=Finding.sort_key),
        roles=sorted((r for report in reports for r in report.roles), key=lambda r: rank.get(r.file, -1)),
        suppressed=sorted(
            (item for report in reports for item in report.suppressed), key=lambda item: item[0].sort_key()
        ),
        errors=[error for report in reports for error in report.errors],
        objects=sum(report.objects for report in reports),
        files=sum(report.files for report in reports),
        policy_digest=hashlib.sha256(
            "\n".join(report.policy_digest for report in reports).encode()
        ).hexdigest(),
        policy_sources=tuple(dict.fromkeys(source for report in reports for source in report.policy_sources)),
        skipped=sorted(
            (item for report in reports for item in report.skipped), key=lambda s: rank.get(s.file, -1)
        ),
    )
    return merged
