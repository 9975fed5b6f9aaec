"""The admission journal: a local write-ahead log between the webhook's answer and the store.

The route appends the admitted body and its decision (`entries.encode_admission`) and answers
once the append is on disk (`appender.JournalAppender`: one write and one fsync for every
admission queued meanwhile, two such flushes in flight at most; `acknowledgements.py` says which
written batches a flush acknowledges). A separate process (`replayer.JournalReplayer`, run by
`gpupolicy.webhook.provenance_replayer`) reads the journal in order (`reader.JournalReader`),
builds each record, has the store make it durable (committed, or spooled when the database is
down), then moves its checkpoint past it and deletes the segments it has finished. A crash
between the store's commit and the checkpoint replays those entries again: the request uid is
the store's primary key, so they add no row. Layout and locks: `segments.py`; framing: `frames.py`.
"""
