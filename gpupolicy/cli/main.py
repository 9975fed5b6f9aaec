"""The `gpupolicy` command. A thin shell: parse arguments, load, evaluate, print, pick the exit code.

Exit codes (EXIT_CODES_HELP): 0 clean; 1 findings at or above the failing severity, input findings
such as a YAML syntax error (GP001) included; 2 usage or configuration errors only; 3 an internal
error (a rule that raised, a crash), so that CI can tell a broken manifest from a broken tool.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

from gpupolicy import __version__
from gpupolicy.cli.options import add_policy_option
from gpupolicy.cli.runtime import paused_cyclic_gc
from gpupolicy.core.exit_codes import EXIT_CLEAN as EXIT_CLEAN
from gpupolicy.core.exit_codes import EXIT_FINDINGS as EXIT_FINDINGS
from gpupolicy.core.exit_codes import EXIT_INTERNAL as EXIT_INTERNAL
from gpupolicy.core.exit_codes import EXIT_USAGE as EXIT_USAGE
from gpupolicy.core.exit_codes import UsageError as UsageError
from gpupolicy.core.findings import Severity
from gpupolicy.core.vocabulary import format_help

if TYPE_CHECKING:
    from gpupolicy.engine.baseline import Baseline
    from gpupolicy.engine.report import Report
    from gpupolicy.formats.options import Formatter
    from gpupolicy.lint.changes import Since
    from gpupolicy.loading.inputs import Source
    from gpupolicy.policy.loading import Policy
    from gpupolicy.policy.repo_policies import RepoPolicies

EXIT_CODES_HELP = (
    "exit codes: 0 nothing at or above the failing severity; 1 findings at or above it (input "
    "findings such as a YAML syntax error, GP001, included); 2 usage or configuration errors (bad "
    "arguments, a missing path, an unusable policy or baseline); 3 an internal error (a rule that "
    "raised, a crash: the results are incomplete, please report it)"
)
# Set to print the traceback of an internal error (for a bug report).
DEBUG_ENV = "GPUPOLICY_DEBUG"
T = TypeVar("T")
# Subcommands that need the [webhook] extra (FastAPI, uvicorn, kubernetes, SQLAlchemy...).
WEBHOOK_COMMANDS = frozenset({"serve", "provenance", "results"})


def _add_lint_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lint = commands.add_parser(
        "lint",
        help="lint manifests (files, directories, - for stdin)",
        epilog=EXIT_CODES_HELP,
    )
    lint.add_argument("paths", nargs="*", default=["."], metavar="PATH")
    _add_format_arguments(lint)
    _add_policy_arguments(lint)
    lint.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="skip paths matching GLOB"
    )
    _add_display_arguments(lint)
    lint.add_argument(
        "--no-remote",
        action="store_true",
        help="do not render a kustomization that names a remote base, component or file (GP004 "
        "instead of kubectl fetching it): for pull requests from untrusted authors",
    )
    _add_baseline_arguments(lint)
    _add_scope_arguments(lint)
    lint.add_argument(
        "--jobs",
        "-j",
        metavar="N",
        help="check the files in N processes, with the same output and exit code as in one (default: "
        "one per core for a tree of 8 MB or more, else 1)",
    )
    lint.set_defaults(handler=run_lint, batch=True)


def _add_format_arguments(lint: argparse.ArgumentParser) -> None:
    """What the report is written as, and where."""
    lint.add_argument(
        "--format",
        "-f",
        default="text",
        help=f"{format_help()} (comma-separated for several)",
    )
    lint.add_argument(
        "--output",
        "-o",
        action="append",
        default=[],
        metavar="FILE",
        help="write a format to a file: FORMAT=FILE, or FILE for the first format",
    )


def _add_policy_arguments(lint: argparse.ArgumentParser) -> None:
    """The policy files, and what fails the run."""
    add_policy_option(lint, "a policy file merged over the default and each file's nearest .gpupolicy.yaml")
    lint.add_argument("--no-repo-policy", action="store_true", help="ignore .gpupolicy.yaml files")
    lint.add_argument(
        "--strict", action="store_true", help="fail on warnings too (same as --fail-on warning)"
    )
    lint.add_argument("--fail-on", choices=["error", "warning", "info"], help="lowest severity that fails")


def _add_display_arguments(lint: argparse.ArgumentParser) -> None:
    """How the text report looks, and whether it lists what was suppressed."""
    lint.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour the text format (auto: only on a terminal, never when NO_COLOR is set)",
    )
    lint.add_argument("--show-suppressed", action="store_true", help="also list suppressed findings and why")


def _add_baseline_arguments(lint: argparse.ArgumentParser) -> None:
    """Findings accepted once, so that only new ones count."""
    lint.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="findings in this baseline are accepted (shown as suppressed); only new ones count",
    )
    lint.add_argument(
        "--write-baseline",
        type=Path,
        metavar="FILE",
        help="write the current findings to FILE as the baseline, then exit 0",
    )


def _add_scope_arguments(lint: argparse.ArgumentParser) -> None:
    """What is reported on, and what is read as context only."""
    lint.add_argument(
        "--changed-since",
        metavar="REF",
        help="report only on objects that are new or differ from the git revision REF (charts and "
        "kustomizations compared as rendered), with the whole repository as context: for pull requests",
    )
    context = lint.add_mutually_exclusive_group()
    context.add_argument(
        "--context-root",
        type=Path,
        metavar="DIR",
        help="load DIR as context for cross-object rules, but report only on the given PATHs",
    )
    context.add_argument(
        "--context-from-git",
        action="store_true",
        help="like --context-root with the git top-level of the given files (the pre-commit hook)",
    )


# Further subcommands live in their own modules (gpupolicy/cli/commands/<name>.py), each with
# `register(subparsers) -> None` that adds its parsers and sets `handler=run` on them. Each command
# is listed with the module that registers it, in the order `--help` lists them: a run imports only
# the module of the command it invokes (all of them for `--help` or an unknown command), so that
# `gpupolicy lint` loads neither the provenance store, the results reader nor their dependencies.
COMMAND_OWNERS: dict[str, str] = {
    "provenance": "gpupolicy.cli.commands.provenance",
    "serve": "gpupolicy.cli.commands.serve",
    "experiment": "gpupolicy.cli.commands.experiment",
    "cluster": "gpupolicy.cli.commands.cluster",
    "init": "gpupolicy.cli.commands.cluster",
    "results": "gpupolicy.cli.commands.results",
    "test": "gpupolicy.cli.commands.test",
}
COMMAND_MODULES: tuple[str, ...] = tuple(dict.fromkeys(COMMAND_OWNERS.values()))
BUILT_IN_COMMANDS = frozenset({"lint", "rules", "explain"})


def _modules_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The command modules a run of `argv` needs: the invoked command's only, when the first
    argument names one (the top-level parser has only -h and --version, so it is the command)."""
    first = argv[0] if argv else ""
    if first in BUILT_IN_COMMANDS:
        return ()
    owner = COMMAND_OWNERS.get(first)
    return (owner,) if owner is not None else COMMAND_MODULES


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser with every command; given the `argv` it will parse, only what that run needs."""
    parser = argparse.ArgumentParser(
        prog="gpupolicy",
        description="Policy linter and admission webhook for GPU workloads on Kubernetes.",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("--version", action="version", version=f"gpupolicy {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_lint_parser(commands)
    rules = commands.add_parser("rules", help="list the rules (custom rules of the policy included)")
    rules.add_argument("--format", choices=["table", "json", "markdown"], default="table")
    explain = commands.add_parser("explain", help="explain one rule (GP102 or its name)")
    explain.add_argument("rule")
    for parser_of_rules in (rules, explain):
        add_policy_option(
            parser_of_rules,
            "a policy file merged over the default and the current directory's .gpupolicy.yaml "
            "(its custom rules are listed)",
        )
    rules.set_defaults(handler=run_rules)
    explain.set_defaults(handler=run_explain)
    for module_name in COMMAND_MODULES if argv is None else _modules_for(argv):
        importlib.import_module(module_name).register(commands)
    return parser


def _use_color(choice: str) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


def _parse_outputs(formats: list[str], outputs: list[str]) -> dict[str, str | None]:
    """Map each format to a file (None: stdout)."""
    targets: dict[str, str | None] = dict.fromkeys(formats)
    for item in outputs:
        name, sep, file = item.partition("=")
        if sep:
            if name not in targets:
                raise UsageError(
                    f"--output {item}: format {name!r} is not among --format {','.join(formats)}"
                )
            targets[name] = file
        else:
            targets[formats[0]] = item
    return targets


def run_lint(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as custom_rules:
        return _run_lint(args, custom_rules)


def _run_lint(args: argparse.Namespace, custom_rules: contextlib.ExitStack) -> int:
    formatters, targets = _chosen_outputs(args)
    args.jobs = _processes(args.jobs)
    _check_paths(args)
    anchor = next((Path(raw) for raw in args.paths if raw != "-"), Path.cwd())
    context_root = _context_root(args, anchor)
    since = _changed_since(args, anchor)
    if since is not None:
        context_root = context_root or since.root
    policies, policy = _policies(args, context_root or anchor)
    accepted = _accepted_baseline(args)
    report = _lint(args, policies, policy, context_root, since, custom_rules)
    if args.write_baseline is not None:
        from gpupolicy.engine import baseline as baselines  # here: most runs use no baseline

        count = baselines.write(args.write_baseline, report)
        print(f"gpupolicy: wrote {count} findings to the baseline {args.write_baseline}", file=sys.stderr)
        return EXIT_INTERNAL if report.errors else EXIT_CLEAN
    if accepted is not None:
        from gpupolicy.engine import baseline as baselines

        baselines.apply(report, accepted)
    strict_or_policy = Severity.WARNING if args.strict else policy.fail_on
    threshold = Severity.parse(args.fail_on) if args.fail_on else strict_or_policy
    _write_reports(report, formatters, targets, args, threshold)
    for error in report.errors:
        print(
            f"gpupolicy: internal error in {error.rule_id} on {error.object}: {error.message}",
            file=sys.stderr,
        )
    if report.errors:
        return EXIT_INTERNAL
    return EXIT_FINDINGS if report.fails(threshold) else EXIT_CLEAN


def _chosen_outputs(args: argparse.Namespace) -> tuple[dict[str, Formatter], dict[str, str | None]]:
    """The formatters of --format, and the file each writes to (--output; None: stdout)."""
    from gpupolicy.formats import RENDERERS, load_formatters

    formats = [item.strip() for item in args.format.split(",") if item.strip()]
    unknown = [item for item in formats if item not in RENDERERS]
    if unknown or not formats:
        raise UsageError(
            f"unknown format {', '.join(unknown) or '(none)'}; choose from {', '.join(sorted(RENDERERS))}"
        )
    formatters = load_formatters(formats)
    return formatters, _parse_outputs(formats, args.output)


def _processes(jobs: str | None) -> int | None:
    """-j N as a number of processes (None: not given, the lint decides); checked before anything is read."""
    if jobs is None:
        return None
    try:
        count = int(jobs)
    except ValueError:
        count = 0
    if count < 1:
        raise UsageError(f"-j {jobs}: the number of processes must be a whole number, 1 or more")
    return count


def _check_paths(args: argparse.Namespace) -> None:
    """Every PATH and --policy file exists, before anything is read."""
    for raw in args.paths:
        if raw != "-" and not Path(raw).exists():
            raise UsageError(f"{raw}: no such file or directory")
    for policy_file in args.policy:
        if not policy_file.is_file():
            raise UsageError(f"{policy_file}: no such policy file")


def _policies(args: argparse.Namespace, root: Path) -> tuple[RepoPolicies, Policy]:
    """Each input is judged under its nearest .gpupolicy.yaml (gpupolicy/lint/scopes.py); the lint
    root's (the context root's, else the first path's) decides what is per run: failOn, exclude."""
    import gpupolicy.rules  # noqa: F401  (registers the built-in rules: the policy names them)
    from gpupolicy.policy.repo_policies import RepoPolicies
    from gpupolicy.policy.validation import PolicyError

    policies = RepoPolicies(extra=args.policy, use_repo_policies=not args.no_repo_policy)
    try:
        return policies, policies.policy_for(root)
    except PolicyError as exc:
        raise UsageError(str(exc)) from exc


def _accepted_baseline(args: argparse.Namespace) -> Baseline | None:
    if args.baseline is None:
        return None
    from gpupolicy.engine import baseline as baselines

    try:
        return baselines.load(args.baseline)
    except baselines.BaselineError as exc:
        raise UsageError(str(exc)) from exc


def _lint(
    args: argparse.Namespace,
    policies: RepoPolicies,
    policy: Policy,
    context_root: Path | None,
    since: Since | None,
    custom_rules: contextlib.ExitStack,
) -> Report:
    """Read the inputs (and the context), lint them, and keep what --changed-since asks for."""
    from gpupolicy.lint.scopes import lint_by_policy
    from gpupolicy.loading.inputs import RenderSession, iter_sources, rendered_context, sources_with_context
    from gpupolicy.policy.validation import PolicyError

    exclude, allow_remote = [*policy.exclude, *args.exclude], not args.no_remote
    session = RenderSession(
        helm_values=list(policy.helm.values_files),
        helm_namespace=policy.helm.namespace,
        helm_api_versions=policy.helm.api_versions,
        kube_version=policy.kubernetes_version,
    )
    context = None
    if context_root is None:
        sources = list(iter_sources(args.paths, exclude=exclude, allow_remote=allow_remote, session=session))
        context = rendered_context(sources) or None
    else:
        sources, context = sources_with_context(
            args.paths, context_root, exclude=exclude, allow_remote=allow_remote, session=session
        )
    try:
        # The custom rules of every policy of the run and of the linted tree, registered until the
        # report is written (the formats describe them as they describe built-in rules).
        custom_rules.enter_context(_custom_rules_installed(policies, policy, sources, context))
        report = lint_by_policy(sources, policies, policy, context=context, jobs=args.jobs)
    except PolicyError as exc:  # a nested .gpupolicy.yaml that cannot be used
        raise UsageError(str(exc)) from exc
    if since is None:
        return report
    from gpupolicy.lint.changes import LintRun, restrict

    run = LintRun(
        args.paths,
        context_root or since.root,
        policy,
        exclude,
        allow_remote,
        policy.limits,
        policies,
        session=session,
        jobs=args.jobs,
    )
    return _or_usage_error(lambda: restrict(report, since, run))


def _write_reports(
    report: Report,
    formatters: dict[str, Formatter],
    targets: dict[str, str | None],
    args: argparse.Namespace,
    threshold: Severity,
) -> None:
    from gpupolicy.formats import RenderOptions

    for name, target in targets.items():
        options = RenderOptions(
            color=_use_color(args.color) if target is None else False,
            show_suppressed=args.show_suppressed,
            tool_version=__version__,
            fail_on=threshold,
        )
        rendered = formatters[name](report, options)
        if target is None:
            sys.stdout.write(rendered)
        else:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).write_text(rendered, encoding="utf-8")


@contextlib.contextmanager
def _custom_rules_installed(
    policies: RepoPolicies, run_policy: Policy, sources: Sequence[Source], context: Sequence[Source] | None
) -> Iterator[None]:
    """Custom rules (gpupolicy/custom/) for the run, each under the policy of the scope that
    defines it: none configured or found, nothing imported."""
    from gpupolicy.custom.errors import CustomRuleError
    from gpupolicy.custom.loading import rules_for_scopes
    from gpupolicy.lint.scopes import location_of, scopes_of

    try:
        groups = {
            id(scope.policy): (scope.policy, [sources[i] for i in scope.inputs])
            for scope in scopes_of(sources, policies)
        }
        groups.setdefault(id(run_policy), (run_policy, []))
        for source in context or ():
            governing = groups.get(id(policies.policy_for(location_of(source))))
            if governing is not None:
                governing[1].append(source)
        found = rules_for_scopes(list(groups.values()))
        if not found:
            yield
            return
        from gpupolicy.custom.rules import installed

        with installed(found):
            yield
    except CustomRuleError as exc:
        raise UsageError(str(exc)) from exc


def _changed_since(args: argparse.Namespace, anchor: Path) -> Since | None:
    """--changed-since REF, checked before anything is linted."""
    if args.changed_since is None:
        return None
    if "-" in args.paths:
        raise UsageError("--changed-since compares files with git: it cannot read stdin")
    from gpupolicy.lint.changes import Since

    return _or_usage_error(lambda: Since.resolve(args.changed_since, anchor))


def _or_usage_error(call: Callable[[], T]) -> T:
    from gpupolicy.lint.git_tree import ChangeError

    try:
        return call()
    except ChangeError as exc:
        raise UsageError(str(exc)) from exc


def _context_root(args: argparse.Namespace, anchor: Path) -> Path | None:
    if args.context_root is not None:
        if not args.context_root.is_dir():
            raise UsageError(f"--context-root {args.context_root}: not a directory")
        return Path(args.context_root)
    if not args.context_from_git:
        return None
    # lint.git_tree, not lint.changes: the pre-commit hook's run needs only the tree's top.
    from gpupolicy.lint.git_tree import git_toplevel

    folder = anchor.resolve() if anchor.is_dir() else anchor.resolve().parent
    return _or_usage_error(lambda: git_toplevel(folder, what="--context-from-git"))


def run_rules(args: argparse.Namespace) -> int:
    from gpupolicy.rules.docs import render_rule_list

    with _policy_custom_rules(args.policy):
        sys.stdout.write(render_rule_list(args.format))
    return EXIT_CLEAN


def run_explain(args: argparse.Namespace) -> int:
    from gpupolicy.engine.registry import REGISTRY
    from gpupolicy.rules.docs import render_rule_page

    with _policy_custom_rules(args.policy):
        found = REGISTRY.get(args.rule)
        if found is None:
            raise UsageError(f"no rule {args.rule!r}; `gpupolicy rules` lists them")
        sys.stdout.write(render_rule_page(found))
    return EXIT_CLEAN


@contextlib.contextmanager
def _policy_custom_rules(policy_files: Sequence[Path]) -> Iterator[None]:
    """The built-in rules and the custom rules of the current directory's policy, registered."""
    import gpupolicy.rules  # noqa: F401  (registers the built-in rules)
    from gpupolicy.custom.errors import CustomRuleError
    from gpupolicy.custom.loading import rules_for
    from gpupolicy.policy.repo_policies import RepoPolicies
    from gpupolicy.policy.validation import PolicyError

    for policy_file in policy_files:
        if not policy_file.is_file():
            raise UsageError(f"{policy_file}: no such policy file")
    try:
        found = rules_for([RepoPolicies(extra=policy_files).policy_for(Path.cwd())])
        if not found:
            yield
            return
        from gpupolicy.custom.rules import installed

        with installed(found):
            yield
    except (CustomRuleError, PolicyError) as exc:
        raise UsageError(str(exc)) from exc


def main(argv: Sequence[str] | None = None, *, exit_when_done: bool = False) -> int:
    """Run one command. With `exit_when_done` (the program itself, not a caller in Python), a batch
    command ends the process once its output is flushed (`_exit_now`)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        if getattr(args, "batch", False):  # a one-shot run over many manifests, not a server
            with paused_cyclic_gc():
                result: int = args.handler(args)
                if exit_when_done:
                    _exit_now(result)
        else:
            result = args.handler(args)
        return result
    except UsageError as exc:
        print(f"gpupolicy: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:  # an install without a dependency (or without the extra)
        extra = " (the webhook needs the [webhook] extra)" if args.command in WEBHOOK_COMMANDS else ""
        print(
            f"gpupolicy: the package {exc.name!r} is not installed{extra}; reinstall: "
            f"pip install 'gpupolicy{'[webhook]' if extra else ''}'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except BrokenPipeError:  # `gpupolicy lint | head`
        return EXIT_CLEAN
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug in gpupolicy, not in the input: say so, exit 3
        return _internal_error(exc)


def _internal_error(exc: Exception) -> int:
    """One line for the user (a traceback only on request: it is for the bug report), exit 3."""
    if os.environ.get(DEBUG_ENV):
        import traceback  # here: a run that does not crash does without it

        traceback.print_exc()
    else:
        print(
            f"gpupolicy: internal error: {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for the "
            "traceback; please report it)",
            file=sys.stderr,
        )
    return EXIT_INTERNAL


def _exit_now(code: int) -> NoReturn:
    """End the process without freeing its heap: the report's findings, the policy and the rules
    would otherwise be released object by object, which takes a noticeable share of a large run
    and changes nothing once the output is out. Only what is flushed here is written."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `gpupolicy lint | head`: the reader has what it wanted
        code = EXIT_CLEAN
    os._exit(code)


def entry() -> int:
    """The `gpupolicy` program (console script and `python -m gpupolicy`)."""
    return main(exit_when_done=True)


if __name__ == "__main__":
    raise SystemExit(entry())
