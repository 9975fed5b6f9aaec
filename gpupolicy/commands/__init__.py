"""Subcommands beyond lint/rules/explain, one module each, listed in `cli.COMMAND_MODULES`."""
