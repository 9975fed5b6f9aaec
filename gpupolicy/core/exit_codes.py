"""How a gpupolicy command ends, shared by the CLI and every subcommand: the exit codes and the
one error a command raises to end with a usage message. It sits below both, so that a command
imports nothing of the CLI that registers it (the CLI and its commands form a tree, not a cycle)."""

EXIT_CLEAN = 0
EXIT_FINDINGS = 1  # findings at or above the failing severity (input findings included)
EXIT_USAGE = 2  # usage or configuration errors only
EXIT_INTERNAL = 3  # a rule that raised, a crash


class UsageError(Exception):
    """Bad arguments or an unusable policy: one line on stderr, exit 2."""
