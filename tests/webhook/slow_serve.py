"""`gpupolicy serve` whose review of an object takes as long as the object asks — for the
shutdown tests only (run as `python -m tests.webhook.slow_serve serve …`).

An object annotated `test.gpupolicy.io/busy-seconds: "3"` is reviewed after 3 s of busy work in
the event loop's thread, as a CPU-bound review is: the loop serves nothing else meanwhile."""

from __future__ import annotations

import sys
import time
from typing import Any

import gpupolicy.webhook.app as app
from gpupolicy.cli.main import main

BUSY_ANNOTATION = "test.gpupolicy.io/busy-seconds"
_review = app.review


def busy_review(admission_review: Any, *args: Any, **options: Any) -> Any:
    request = admission_review.get("request") if isinstance(admission_review, dict) else None
    obj = (request or {}).get("object") or {}
    seconds = float(((obj.get("metadata") or {}).get("annotations") or {}).get(BUSY_ANNOTATION, 0))
    if seconds:
        print("busy review started", file=sys.stderr, flush=True)  # what the tests wait for
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # busy, holding the GIL between bytecodes as a review does
        pass
    return _review(admission_review, *args, **options)


if __name__ == "__main__":  # only the served process is slowed: a test importing BUSY_ANNOTATION is not
    app.review = busy_review  # type: ignore[assignment]
    raise SystemExit(main(sys.argv[1:]))
