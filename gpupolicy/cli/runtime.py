"""Process-level settings for batch runs (the CLI and the benchmarks that measure it)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch of manifests is loaded and evaluated.

    Loading keeps every document's values and positions alive, and each gen-2 collection walks
    all of them again: with 10,000 objects that is most of the run. They hold no reference
    cycles, and reference counting still frees everything else. The few small cycles
    that rules make per object are freed by the streaming lint, which collects the young
    generation every `streaming.COLLECT_EVERY` objects.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # Everything allocated during the pause is still in the youngest generation; re-enabling
        # as is would make the next allocation walk all of it. Freezing moves it out of the
        # collector's sight (reference counting still frees it).
        gc.freeze()
        if was_enabled:
            gc.enable()
