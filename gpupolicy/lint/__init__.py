"""A lint run: streaming files through the engine in bounded memory, per-directory policy scopes,
`--changed-since`, and the labelled-corpus precision check."""
