"""CPU of the webhook's application per request, in process: the part of a `/validate` answer
that gpupolicy's code decides, without TLS, uvicorn and the socket.

    .venv/bin/python bench/app_cpu.py [--runs 7] [--bodies 500] [--mix realistic distinct]
        [--repo PATH ...]

Builds the application as `gpupolicy serve --no-provenance` builds it (`build_server`: the
policy, the cluster facts learned from a synced inventory of the test suite's fake API server,
the collector's settings of the server, logging at info, one JSON line per admission written to
a file as a served log is), then calls it over ASGI in a loop, with `time.process_time()`:

- `/noop`: a route that reads the body and answers a fixed AdmissionReview, served the way
  `/validate` is (a plain route of the same application, added with `add_route` and called
  straight from it, as `/validate` is: `WebhookApplication` in gpupolicy/webhook/app.py);
- `/parse-only`: also parses the review as JSON and answers with its uid;
- `/validate`: the webhook's route (body, JSON, `review()`, the admission log line, metrics), with
  a new review engine (an empty decision cache) at the start of each run.

Each run sends every body of the mix once to each route, interleaved. Prints the median CPU
microseconds per request of each route and the ratios /noop ÷ /validate and /parse-only ÷
/validate (the in-process counterpart of bench/webhook_latency.py's saturated ratios, which add
what TLS, HTTP and the socket cost to both sides). `--repo` runs the same in another checkout (an
unpacked `git archive` of an older commit) in a child process per checkout, the rounds
interleaved, for a before and after from one sitting.

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ROUTES = ("/noop", "/parse-only", "/validate")

Message = dict[str, Any]
App = Callable[
    [Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="timed runs (default 7)")
    parser.add_argument("--bodies", type=int, default=500, help="review bodies per mix (default 500)")
    parser.add_argument("--mix", nargs="+", default=["realistic", "distinct"], help="admission mixes")
    parser.add_argument(
        "--repo", type=Path, nargs="+", default=[REPO], help="checkouts to import gpupolicy from"
    )
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # one run of one checkout
    options = parser.parse_args()
    if options.child is not None:
        print(json.dumps(measure(options.child, options.mix, options.bodies)))
        return
    rounds: dict[Path, list[dict[str, dict[str, float]]]] = {repo.resolve(): [] for repo in options.repo}
    for _ in range(options.runs):
        for repo in rounds:  # interleaved: a slower moment costs every checkout
            rounds[repo].append(_child(repo, options))
    report(rounds, options.mix)


def _child(repo: Path, options: argparse.Namespace) -> dict[str, dict[str, float]]:
    """One run in a fresh interpreter importing gpupolicy from `repo`."""
    command = [
        sys.executable,
        __file__,
        "--child",
        str(repo),
        "--bodies",
        str(options.bodies),
        "--mix",
        *options.mix,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run in {repo} failed:\n{done.stderr}")
    result: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def report(rounds: dict[Path, list[dict[str, dict[str, float]]]], mixes: list[str]) -> None:
    print("webhook application CPU per request, in process (µs; median of the runs)")
    print(
        f"{'checkout':<28} {'mix':<10} "
        + " ".join(f"{route:>11}" for route in ROUTES)
        + "  noop÷validate  parse÷validate"
    )
    for repo, runs in rounds.items():
        for mix in mixes:
            medians = {route: statistics.median(run[mix][route] for run in runs) for route in ROUTES}
            print(
                f"{str(repo)[-28:]:<28} {mix:<10} "
                + " ".join(f"{medians[route]:>11.1f}" for route in ROUTES)
                + f"  {medians['/noop'] / medians['/validate']:>13.3f}"
                + f"  {medians['/parse-only'] / medians['/validate']:>14.3f}"
            )
    print(f"runs: {len(next(iter(rounds.values())))} per checkout, interleaved; CPU time of the process")


def measure(repo: Path, mixes: list[str], count: int) -> dict[str, dict[str, float]]:
    """CPU µs per request of each route over each mix's bodies, gpupolicy imported from `repo`."""
    sys.path.insert(0, str(REPO / "bench"))
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(repo))  # first: gpupolicy and the fake API server of that checkout
    from admission_load import make_bodies, with_uid  # this checkout's bodies, the same for every repo

    from tests.webhook.fake_apiserver import FakeApiServer
    from tests.webhook.server_process import write_kubeconfig

    bodies = {mix: [with_uid(body, n) for n, body in enumerate(make_bodies(count, mix))] for mix in mixes}
    fake = FakeApiServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-") as folder:
            app, state, stop = _application(
                Path(folder), write_kubeconfig(Path(folder) / "kubeconfig", fake.url)
            )
            try:
                return asyncio.run(_timed(app, state, bodies))
            finally:
                stop()
    finally:
        fake.stop()


def _application(folder: Path, kubeconfig: Path) -> tuple[App, Any, Callable[[], None]]:
    """The served application with the two baseline routes, and what stops its inventory."""
    from admission_load import add_baseline_routes

    from gpupolicy.cli.main import build_parser
    from gpupolicy.webhook.server import build_server

    log = (folder / "server.log").open("w")
    os.dup2(log.fileno(), 2)  # the log lines go where a served log goes: a file, a write each
    argv = [
        "serve",
        "--no-provenance",
        "--kubeconfig",
        str(kubeconfig),
        "--data-dir",
        str(folder),
        "--port",
        "0",
    ]
    server, cleanup = build_server(build_parser().parse_args(argv))
    app = server.config.app

    add_baseline_routes(app)
    state = app.state.webhook
    state.inventory.start()
    if not state.inventory.wait_synced(30):
        raise SystemExit("the cluster inventory did not sync")

    def stop() -> None:
        state.inventory.stop()
        cleanup()

    return app, state, stop


async def _timed(app: App, state: Any, bodies: dict[str, list[bytes]]) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
        while not getattr(state.live_facts, "settled", True):  # the facts learned, as /readyz waits
            await asyncio.sleep(0.05)
        for body in next(iter(bodies.values()))[:100]:  # warm-up: first evaluations, lazy imports
            await _post(app, "/validate", body)
        gc.collect()
        gc.freeze()  # as the server does once the caches have synced
        for mix, sent in bodies.items():
            results[mix] = {}
            for route in ROUTES:
                if route == "/validate":  # an empty decision cache: what the mix remembers is its own
                    state.engine = dataclasses.replace(state.engine)  # the same policy, facts and rules
                started = time.process_time()
                for body in sent:
                    await _post(app, route, body)
                results[mix][route] = (time.process_time() - started) / len(sent) * 1e6
    return results


async def _post(app: App, path: str, body: bytes) -> None:
    """One POST over ASGI, its answer read and dropped."""
    scope: Message = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8443),
        "state": {},
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if messages:
            return messages.pop()
        await asyncio.Event().wait()  # the client stays: never a disconnect
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] != 200:
            raise SystemExit(f"{path} answered HTTP {message['status']}")

    await app(scope, receive, send)


if __name__ == "__main__":
    main()
