"""`gpupolicy test DIR`: run each custom rule of DIR against its own examples (docs/custom-rules.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpupolicy.core.exit_codes import EXIT_CLEAN, EXIT_FINDINGS, UsageError


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    test = commands.add_parser(
        "test",
        help="test custom rules against their examples",
        description="Load the custom rules of DIR (Rego, Gatekeeper, ValidatingAdmissionPolicy, CEL) and "
        "run each against its examples/<RULE-ID>/fires.yaml and passes.yaml (`# expect: RULE-ID` marks "
        "the lines that must get a finding). Exit 0 when every rule passes, 1 when one fails.",
    )
    test.add_argument("folder", type=Path, metavar="DIR")
    test.set_defaults(handler=run, batch=True)


def run(args: argparse.Namespace) -> int:
    import gpupolicy.rules  # noqa: F401  (registers the built-in rules: custom ids must not clash)
    from gpupolicy.custom.errors import CustomRuleError
    from gpupolicy.custom.testing import render, run_tests

    if not args.folder.is_dir():
        raise UsageError(f"{args.folder}: not a directory")
    try:
        outcomes = run_tests(args.folder)
    except CustomRuleError as exc:
        raise UsageError(str(exc)) from exc
    if not outcomes:
        raise UsageError(f"{args.folder}: no custom rules found")
    sys.stdout.write(render(outcomes))
    return EXIT_CLEAN if all(outcome.passed for outcome in outcomes) else EXIT_FINDINGS
