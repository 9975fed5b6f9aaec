"""The command-line shell: argument parsing, the `lint`, `rules` and `explain` commands, and the
subcommands in `commands/`, each imported only when it runs."""
