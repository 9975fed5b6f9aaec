"""Command-line options that several commands share, spelled once."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_policy_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    """`--policy FILE` (`-p`, repeatable), as every command that loads a policy takes it."""
    parser.add_argument(
        "--policy", "-p", action="append", default=[], type=Path, metavar="FILE", help=help_text
    )
