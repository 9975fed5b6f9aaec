"""Subcommands beyond lint/rules/explain, one module each, registered by `gpupolicy/cli/main.py`."""
