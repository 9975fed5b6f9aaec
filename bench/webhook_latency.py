"""Webhook latency and throughput: POST /validate over TLS on loopback, beside a no-op endpoint, in
one run, with provenance off and on:

    .venv/bin/python bench/webhook_latency.py [--rate 200] [--duration 20] [--mix realistic|distinct]
        [--db URL] [--repeat N] [--floor] [--provenance-arg=--provenance-writes=direct]

Two servers run side by side, both `gpupolicy serve` as shipped (TLS, policy loaded once, a
synced cluster inventory from the test suite's fake API server): one with `--no-provenance`,
one recording provenance (SQLite in its data directory unless `--db` names a database, e.g.
postgresql://postgres@127.0.0.1:5432/bench; `--provenance-arg` passes arguments to it alone).
The provenance server has two extra routes: `POST /noop` reads the body and returns a fixed
AdmissionReview response, and `POST /parse-only` (measured saturated only) also parses the
review and answers with its uid, as any webhook must: the cost of the HTTP exchange plus JSON,
without a decision. Bodies: see `admission_load.py` (`--mix`).

Two measurements per endpoint, each on an idle machine as far as the run goes (before each
one, the bench waits until the provenance server has replayed what it owes to the database:
its /readyz says nothing is pending; how long that took is printed):
- fixed rate (open loop): requests are scheduled at `--rate` per second whatever the answers
  do, on a pool of keep-alive connections; latency counts from the scheduled time, so a stall
  shows up in the percentiles (no coordinated omission);
- saturation: `wrk` (16 connections, one thread) when installed, else a closed-loop asyncio client.

The ratios printed are saturated throughputs: /validate without provenance over /noop, and
/validate with provenance over /noop. `--floor` starts a third server, recording provenance as
the second does, under a policy that enables no rule (every registered rule `enabled: false`), and
measures its /validate saturated: what the webhook's own work costs (the body read and parsed, the
admitted object's view, the decision cache, the admission line and metrics, the journal and its
replayer) when no rule runs; its ratio to /noop is the most any rule set could reach. `--repeat N` runs the measurements N times on the same
servers and prints each round and the medians (this is how to quote figures on a machine whose
speed wanders from run to run). The servers log as shipped (`--log-level info`: one JSON line
per admission, to the server log file). After the run the bench counts the records this run's
request uids left in the store. The last column is the server's CPU time per request (user +
system of the server process and its children, read from /proc), which stays meaningful when
other work shares the machine.
For each fixed-rate /validate measurement the bench also prints the admissions as the server
timed them (its log's `duration_ms`), split by provenance outcome (recorded ones waited for the
journal; denials did not), and with provenance, where each recorded admission's wait for the
journal went (`ack_split` in /readyz: queued, written, fdatasync, handed back to the event loop,
total; bucketed, so the figures are bucket bounds).
`--server-arg=--review-in-threadpool` runs `review()` in the threadpool instead of the event loop;
`BENCH_GC=trace` logs collector pauses over 2 ms to the server log and prints each server's
collections (count, total and longest pause per generation), `BENCH_GC=off` disables it.

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from admission_load import (  # noqa: E402  (bench/ is not a package: put on the path above)
    MIXES,
    RUN,
    WRK_SCRIPT,
    add_baseline_routes,
    closed_loop,
    fixed_rate,
    make_bodies,
    run,
    wrk,
)

from gpupolicy.provenance.journal.ack_timings import BOUNDS_MS, PHASES, percentile  # noqa: E402

SETTLE_SECONDS = 600  # the longest wait for the provenance server to catch up


# -- the server (run in a child process) ----------------------------------------------------------


def serve(argv: list[str]) -> None:
    """`gpupolicy serve` with the same arguments, plus POST /noop."""
    from gpupolicy.cli.main import build_parser
    from gpupolicy.webhook.server import build_server

    args = build_parser().parse_args(["serve", *argv])
    server, cleanup = build_server(args)
    if os.environ.get("BENCH_GC") == "off":  # experiment: is the collector behind the p99?
        import gc

        gc.disable()
    if os.environ.get("BENCH_GC") == "trace":  # log collections over 2 ms, and every one's sum at exit
        trace_collections()

    add_baseline_routes(server.config.app)

    try:
        server.run()
    finally:
        cleanup()


GC_SUMMARY = "gc summary"


def trace_collections() -> None:
    """Log each collection that takes over 2 ms (generation, pause, objects walked), and at exit
    the count, total and longest pause of each generation (`GC_SUMMARY`, read by `report`)."""
    import atexit
    import gc

    started: dict[str, float] = {}
    totals = {generation: [0, 0.0, 0.0] for generation in range(3)}  # count, seconds, longest

    def trace(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started["t"] = time.perf_counter()
            started["n"] = len(gc.get_objects(info["generation"]))
            return
        pause = time.perf_counter() - started["t"]
        total = totals[info["generation"]]
        total[0], total[1], total[2] = total[0] + 1, total[1] + pause, max(total[2], pause)
        if pause > 0.002:
            print(f"gc gen{info['generation']} {pause * 1000:.1f} ms, {started['n']} objects, "
                  f"{info['collected']} collected", file=sys.stderr, flush=True)  # fmt: skip

    def summary() -> None:
        shown = ", ".join(
            f"gen{generation} {count} x, {seconds * 1000:.0f} ms, longest {longest * 1000:.1f} ms"
            for generation, (count, seconds, longest) in totals.items()
        )
        print(f"{GC_SUMMARY} (whole run, warm-up included): {shown}", file=sys.stderr, flush=True)

    gc.callbacks.append(trace)
    atexit.register(summary)


# -- the servers ----------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    context: ssl.SSLContext
    folder: Path


def start(folder: Path, name: str, kubeconfig: Path, extra: list[str], *, checkout: Path = REPO) -> Server:
    """`gpupolicy serve` of `checkout` (this one, or an unpacked `git archive` of another commit,
    run with this environment's interpreter and dependencies) in a child process, once ready."""
    import socket

    import trustme

    folder.mkdir(parents=True)
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key = folder / "tls.crt", folder / "tls.key"
    issued.cert_chain_pems[0].write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [
        "--host", "127.0.0.1", "--port", str(port), "--tls-cert", str(cert), "--tls-key", str(key),
        "--data-dir", str(folder / "data"), "--kubeconfig", str(kubeconfig), *extra,
    ]  # fmt: skip
    log = (folder / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(checkout / "bench" / "webhook_latency.py"), "--serve", *argv],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=checkout,  # the replayer's `python -m gpupolicy...` then imports the checkout's code
        env={**os.environ, "PYTHONPATH": str(checkout)},
    )
    context = ssl.create_default_context()
    ca.configure_trust(context)
    server = Server(name, process, port, context, folder)
    if readyz(server, wait=60) is None:
        process.kill()
        raise SystemExit(f"the server did not become ready:\n{(folder / 'server.log').read_text()}")
    return server


def readyz(server: Server, *, wait: float = 0.0) -> dict[str, Any] | None:
    """The server's /readyz detail once it answers 200 (None if it does not within `wait`)."""
    import httpx

    deadline = time.monotonic() + wait
    with httpx.Client(verify=server.context) as http:
        while True:
            try:
                response = http.get(f"https://127.0.0.1:{server.port}/readyz")
                if response.status_code == 200:
                    detail: dict[str, Any] = response.json()
                    return detail
            except httpx.TransportError:
                pass
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)


def pending(detail: dict[str, Any] | None) -> int:
    """What the provenance server still owes to its store, as /readyz reports it (0 when it
    writes in the request, or reports nothing pending)."""
    journal = ((detail or {}).get("provenance") or {}).get("journal") or {}
    return int(journal.get("backlog_bytes") or 0)


def settle(server: Server) -> float:
    """Wait until the server has replayed what it owes; how long that took."""
    began = time.monotonic()
    while pending(readyz(server, wait=5)) and time.monotonic() - began < SETTLE_SECONDS:
        time.sleep(0.1)
    return time.monotonic() - began


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all threads) and of its live children, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:  # gone meanwhile
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(cpu_seconds(child) for child in children_of(pid))


def children_of(pid: int) -> list[int]:
    """The live children of a process (those of every thread of it), from /proc."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(child) for child in task.read_text().split()]
    return found


def journal_counts(server: Server) -> dict[str, Any]:
    """The provenance server's journal counters (frames appended, fsyncs, seconds in them) and
    where each admission's wait for the journal went (`ack_split`, cumulative bucket counts)."""
    journal = (((readyz(server, wait=5) or {}).get("provenance") or {}).get("journal")) or {}
    counts: dict[str, Any] = {
        key: float(journal.get(key) or 0)
        for key in ("appended", "fsyncs", "fsync_seconds", "fsync_longest_seconds")
    }
    counts["ack_split"] = journal.get("ack_split") or {}
    return counts


def split_difference(after: dict[str, list[int]], before: dict[str, list[int]]) -> dict[str, list[int]]:
    """What each phase of `ack_split` counted between two snapshots (an older server: none)."""
    return {
        phase: [now - then for now, then in zip(after[phase], before[phase], strict=True)]
        for phase in PHASES
        if phase in after and phase in before
    }


def measured(server: Server, action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    journal = journal_counts(server) if server.name in RECORDING else None
    before = cpu_seconds(server.process.pid)
    result = action()
    used = cpu_seconds(server.process.pid) - before
    result["server_cpu_ms_per_request"] = (
        used / result["requests"] * 1000 if result["requests"] else float("nan")
    )
    if journal is not None:  # the disk's share: how many frames each fsync took, and how long it took
        after = journal_counts(server)
        result["journal"] = {key: after[key] - journal[key] for key in after if key != "ack_split"}
        result["journal"]["fsync_longest_seconds"] = after["fsync_longest_seconds"]  # since start
        result["ack_split"] = split_difference(after["ack_split"], journal["ack_split"])
    return result


# -- the measurements -------------------------------------------------------------------------------


@dataclass
class Load:
    """What every measurement sends, and how."""

    options: argparse.Namespace
    bodies: list[bytes]
    wrk_files: tuple[Path, Path] | None  # (bodies file, script) when wrk is used

    def fixed(self, server: Server, path: str, uid: int) -> dict[str, Any]:
        options = self.options
        result = measured(
            server,
            lambda: run(
                fixed_rate(
                    server.port, server.context, path, self.bodies, options.rate, options.duration, uid
                )
            ),
        )
        result["server"] = server.name
        result["uid_range"] = (uid, uid + int(options.rate * options.duration))  # read in the log later
        return result

    def saturated(self, server: Server, path: str, uid: int) -> dict[str, Any]:
        if self.wrk_files is not None:
            files = self.wrk_files
            return measured(server, lambda: wrk(server.port, path, *files, self.options.duration, uid))
        return measured(
            server,
            lambda: run(
                closed_loop(server.port, server.context, path, self.bodies, 16, self.options.duration, uid)
            ),
        )


RECORDING = ("on", "floor")  # the servers that record provenance (--floor starts the second)
FLOOR_LABEL = "/validate on, no rule"

# (label, server name, path) in the order measured
FIXED = (("/noop", "on", "/noop"), ("/validate off", "off", "/validate"), ("/validate on", "on", "/validate"))
SATURATED = (
    ("/noop", "on", "/noop"),
    ("/parse-only", "on", "/parse-only"),
    ("/validate off", "off", "/validate"),
    ("/validate on", "on", "/validate"),
)


def measure_round(
    load: Load, servers: dict[str, Server], *, uid: int
) -> tuple[dict[str, dict[str, Any]], float]:
    """One round: each endpoint at the fixed rate, then each saturated. Returns the results and
    the longest wait for the provenance server to catch up after one of them."""
    results: dict[str, dict[str, Any]] = {}
    caught_up = 0.0
    kind = "wrk" if load.wrk_files is not None else "asyncio"
    for label, name, path in FIXED:
        caught_up = max(caught_up, settle_all(servers))
        results[f"{label} @ {load.options.rate:.0f}/s"] = load.fixed(servers[name], path, uid)
        uid += 1_000_000
    floor = ((FLOOR_LABEL, "floor", "/validate"),) if "floor" in servers else ()
    for label, name, path in (*SATURATED, *floor):
        caught_up = max(caught_up, settle_all(servers))
        results[f"{label} saturated ({kind})"] = load.saturated(servers[name], path, uid)
        uid += 10_000_000
    caught_up = max(caught_up, settle_all(servers))
    return results, caught_up


def settle_all(servers: dict[str, Server]) -> float:
    """Wait until every server that records has replayed what it owes; the longest wait."""
    return max(settle(server) for name, server in servers.items() if name in RECORDING)


# -- the run ------------------------------------------------------------------------------------


def store_name(options: argparse.Namespace) -> str:
    if not options.db:
        return "SQLite"
    from sqlalchemy.engine import make_url

    return f"{make_url(options.db).get_backend_name()} ({make_url(options.db).render_as_string(hide_password=True)})"


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=200.0, help="fixed request rate (default 200/s)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per measurement (default 20)")
    parser.add_argument(
        "--db",
        help="provenance database URL (default: SQLite in the server's data directory); "
        "postgresql://… needs a database the server may create its tables in",
    )
    parser.add_argument(
        "--no-wrk", action="store_true", help="saturate with the asyncio client even if wrk exists"
    )
    parser.add_argument("--bodies", type=int, default=500, help="distinct review bodies (default 500)")
    parser.add_argument(
        "--mix", choices=MIXES, default="realistic", help="see admission_load.py (default realistic)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of the measurements (default 1); with more, each round's table and the medians",
    )
    parser.add_argument(
        "--server-arg", action="append", default=[], help="extra `gpupolicy serve` argument of both servers"
    )
    parser.add_argument(
        "--provenance-arg", action="append", default=[], help="extra argument of the provenance server alone"
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure, saturated, a provenance server under a policy that enables no rule",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the servers' log level (default info, as shipped: one JSON line per admission, to the server log)",
    )
    return parser.parse_args()


def start_servers(options: argparse.Namespace, folder: Path, kubeconfig: Path) -> dict[str, Server]:
    common = ["--log-level", options.log_level, *options.server_arg]
    servers = {"off": start(folder / "off", "off", kubeconfig, [*common, "--no-provenance"])}
    try:
        provenance = [*(["--db", options.db] if options.db else []), *options.provenance_arg]
        servers["on"] = start(folder / "on", "on", kubeconfig, [*common, *provenance])
        if options.floor:
            no_rules = ["--policy", str(write_no_rule_policy(folder / "no-rules.yaml"))]
            servers["floor"] = start(folder / "floor", "floor", kubeconfig, [*common, *provenance, *no_rules])
    except BaseException:
        for server in servers.values():
            stop(server)
        raise
    return servers


def write_no_rule_policy(path: Path) -> Path:
    """A policy file that disables every registered rule (written from the registry, so a rule
    added later is disabled too)."""
    import gpupolicy.rules  # noqa: F401  (registers the rules)
    from gpupolicy.engine.registry import REGISTRY

    disabled = "".join(f"  {rule.id}: {{enabled: false}}\n" for rule in REGISTRY)
    path.write_text(
        "apiVersion: gpupolicy.io/v1alpha1\nkind: Policy\nmetadata: {name: no-rules}\nrules:\n" + disabled,
        encoding="utf-8",
    )
    return path


def stop(server: Server) -> None:
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(60)


def main() -> None:
    options = parse_options()
    from tests.webhook.fake_apiserver import FakeApiServer
    from tests.webhook.server_process import write_kubeconfig

    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    bodies = make_bodies(options.bodies, options.mix)
    fake = FakeApiServer().start()
    folder = Path(tempfile.mkdtemp(prefix="gpupolicy-bench-"))
    servers = start_servers(options, folder, write_kubeconfig(folder / "kubeconfig", fake.url))
    wrk_files = None
    if shutil.which("wrk") is not None and not options.no_wrk:
        wrk_files = (folder / "bodies.jsonl", folder / "bench.lua")
        wrk_files[0].write_bytes(b"\n".join(bodies) + b"\n")
        wrk_files[1].write_text(WRK_SCRIPT, encoding="utf-8")
    load = Load(options, bodies, wrk_files)
    rounds: list[tuple[dict[str, dict[str, Any]], float]] = []
    try:
        for server in servers.values():  # warm up (first evaluations, connection set-up, SQLite schema)
            run(closed_loop(server.port, server.context, "/validate", bodies, 4, 2.0, 10_000_000))
        run(closed_loop(servers["on"].port, servers["on"].context, "/noop", bodies, 4, 1.0, 20_000_000))
        for index in range(options.repeat):
            rounds.append(measure_round(load, servers, uid=(index + 1) * 100_000_000))
    finally:
        for server in servers.values():
            stop(server)
        fake.stop()
    for results, _ in rounds:
        add_durations_inside(results, folder)
    report(options, bodies, rounds, servers["on"], load_before)


def add_durations_inside(results: dict[str, dict[str, Any]], folder: Path) -> None:
    """Each fixed-rate /validate measurement's admissions as the server timed them (its log's
    `duration_ms`, from the body read to the answer), by provenance outcome: recorded ones
    waited for the journal, the others (denials, one in ten) did not."""
    logged = {name: logged_durations(folder / name / "server.log") for name in ("off", "on")}
    for result in results.values():
        if "uid_range" not in result:
            continue
        first, end = result["uid_range"]
        inside: dict[str, list[float]] = {}
        for number in range(first, end):
            entry = logged[result["server"]].get(number)
            if entry is not None:
                inside.setdefault(entry[1], []).append(entry[0])
        result["inside"] = inside


def logged_durations(log: Path) -> dict[int, tuple[float, str]]:
    """Request number -> (duration_ms, provenance outcome) of this run's admissions in a log."""
    import json

    found: dict[int, tuple[float, str]] = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if '"admission reviewed"' not in line or RUN not in line:
            continue
        entry = json.loads(line)
        number = int(str(entry["uid"]).rsplit("-", 1)[1])
        found[number] = (float(entry["duration_ms"]), str(entry.get("provenance") or "none"))
    return found


def report(
    options: argparse.Namespace,
    bodies: list[bytes],
    rounds: list[tuple[dict[str, dict[str, Any]], float]],
    provenance: Server,
    load_before: str,
) -> None:
    sizes = [len(body) for body in bodies]
    print(
        f"gpupolicy webhook latency, TLS on loopback, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print(
        f"bodies: {len(bodies)} GPU Deployment AdmissionReviews, {min(sizes)}-{max(sizes)} bytes "
        f"(mean {statistics.fmean(sizes):.0f}), mix {options.mix}; provenance: {store_name(options)}"
        + (f" {' '.join(options.provenance_arg)}" if options.provenance_arg else "")
        + "; cluster inventory: synced (fake API server)"
        + (f"; server args: {' '.join(options.server_arg)}" if options.server_arg else "")
    )
    print(f"load average before/after: {load_before} / {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for index, (results, caught_up) in enumerate(rounds, start=1):
        if len(rounds) > 1:
            print(f"round {index} of {len(rounds)}")
        print_table(results)
        print(
            f"the provenance server caught up with its store within {caught_up:.1f} s of a measurement's end"
        )
    if len(rounds) > 1:
        print(f"median of {len(rounds)} rounds")
        print_table({name: median_result([results[name] for results, _ in rounds]) for name in rounds[0][0]})
        for label, baseline in ratio_pairs(rounds[0][0]):
            ratios = [saturated_ratio(results, label, baseline) for results, _ in rounds]
            shown = " ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"({label} : {baseline} round by round: {shown}; median {statistics.median(ratios):.2f})")
    answered = sum(
        result["requests"]
        for results, _ in rounds
        for name, result in results.items()
        if name.startswith("/validate on") and not name.startswith(FLOOR_LABEL)  # its own store
    )
    print(
        f"provenance: {stored_records(options, provenance.folder)} records stored by this run, for {answered} "
        "measured /validate answers (and the warm-up's); one review in ten is a denial, never recorded"
    )
    names = "off,on,floor" if options.floor else "off,on"
    print(f"(server logs: {provenance.folder.parent}/{{{names}}}/server.log; log level {options.log_level})")
    for name in ("off", "on"):  # BENCH_GC=trace: what the collector cost each server
        log = provenance.folder.parent / name / "server.log"
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(GC_SUMMARY):
                print(f"{name}: {line}")


def row(name: str, result: dict[str, Any]) -> str:
    cpu = result.get("server_cpu_ms_per_request", float("nan"))
    return (
        f"{name:<38} {result['throughput']:>9.0f} {result['p50_ms']:>8.2f} {result['p95_ms']:>8.2f} "
        f"{result['p99_ms']:>8.2f} {result['max_ms']:>8.2f} {result['requests']:>8d} {result['non_200']:>6d} {cpu:>9.3f}"
    )


def print_table(results: dict[str, dict[str, Any]]) -> None:
    print(
        f"{'endpoint (off/on: provenance)':<38} {'req/s':>9} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
        f"{'max ms':>8} {'n':>8} {'!200':>6} {'cpu ms/req':>10}"
    )
    for name, result in results.items():
        print(row(name, result))
    for name, result in results.items():
        journal = result.get("journal") or {}
        if journal.get("fsyncs"):
            print(
                f"journal during {name}: {journal['appended']:.0f} frames in {journal['fsyncs']:.0f} fsyncs "
                f"({journal['appended'] / journal['fsyncs']:.1f} a batch), fdatasync "
                f"{journal['fsync_seconds'] / journal['fsyncs'] * 1000:.2f} ms on average "
                f"(the longest since the server started: {journal['fsync_longest_seconds'] * 1000:.1f} ms)"
            )
        if sum((result.get("ack_split") or {}).get("total", [])):  # admissions that waited for it
            print(f"journal wait during {name}, per admission: {describe_split(result['ack_split'])}")
        if result.get("inside"):
            print(f"inside the server during {name}: {describe_inside(result['inside'])}")
    for label, baseline in (*ratio_pairs(results), ("/validate on", "/validate off")):
        print(f"saturated throughput {label} : {baseline} = {saturated_ratio(results, label, baseline):.2f}")


def ratio_pairs(results: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    """The saturated ratios to /noop a round has: /validate off and on, and with --floor the
    provenance server that runs no rule."""
    pairs = [("/validate off", "/noop"), ("/validate on", "/noop")]
    if any(name.startswith(FLOOR_LABEL) for name in results):
        pairs.append((FLOOR_LABEL, "/noop"))
    return pairs


def describe_split(split: dict[str, list[int]]) -> str:
    """Each phase of the wait for the journal as p50/p99/longest (ms, the upper bounds of the
    buckets they fall in; `>1000` past the last)."""

    def shown(value: float) -> str:
        return f">{BOUNDS_MS[-1]:g}" if value == float("inf") else f"{value:g}"

    return (
        "; ".join(
            f"{phase} {shown(percentile(counts, 0.5))}/{shown(percentile(counts, 0.99))}/"
            f"{shown(percentile(counts, 1.0))}"
            for phase, counts in split.items()
        )
        + " ms (p50/p99/longest)"
    )


def describe_inside(inside: dict[str, list[float]]) -> str:
    def quantile(values: list[float], fraction: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]

    return "; ".join(
        f"provenance {outcome}: {len(values)}, p50 {quantile(values, 0.5):.2f} p99 "
        f"{quantile(values, 0.99):.2f} max {max(values):.2f} ms"
        for outcome, values in sorted(inside.items())
    )


def saturated_ratio(results: dict[str, dict[str, Any]], label: str, baseline: str) -> float:
    """Saturated throughput of one endpoint over another's."""
    saturated = {
        name.split(" saturated")[0]: result for name, result in results.items() if "saturated" in name
    }
    return float(saturated[label]["throughput"] / saturated[baseline]["throughput"])


def median_result(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (requests and failures summed)."""
    merged: dict[str, Any] = {
        key: statistics.median(result[key] for result in results)
        for key in ("throughput", "p50_ms", "p95_ms", "p99_ms", "max_ms", "server_cpu_ms_per_request")
    }
    merged["requests"] = sum(result["requests"] for result in results)
    merged["non_200"] = sum(result["non_200"] for result in results)
    insides = [result["inside"] for result in results if result.get("inside")]
    if insides:  # every round's admissions together
        merged["inside"] = {
            outcome: [value for inside in insides for value in inside.get(outcome, [])]
            for outcome in {outcome for inside in insides for outcome in inside}
        }
    splits = [result["ack_split"] for result in results if result.get("ack_split")]
    if splits:  # every round's admissions together
        merged["ack_split"] = {
            phase: [sum(counts) for counts in zip(*(split[phase] for split in splits), strict=True)]
            for phase in splits[0]
        }
    journals = [result["journal"] for result in results if "journal" in result]
    if journals:  # summed over the rounds
        merged["journal"] = {key: sum(journal[key] for journal in journals) for key in journals[0]}
        merged["journal"]["fsync_longest_seconds"] = max(j["fsync_longest_seconds"] for j in journals)
    return merged


def stored_records(options: argparse.Namespace, folder: Path) -> int:
    """Records of this run's request uids in the store the provenance server wrote (a check that
    the measured admissions really were recorded)."""
    from sqlalchemy import func, select

    from gpupolicy.provenance.locations import DB_FILE
    from gpupolicy.provenance.schema import records
    from gpupolicy.provenance.store import open_reader

    reader = open_reader(options.db or f"sqlite:///{folder / 'data' / DB_FILE}")
    try:
        with reader.engine.connect() as conn:
            query = select(func.count()).select_from(records).where(records.c.uid.like(f"{RUN}-%"))
            return int(conn.execute(query).scalar_one())
    finally:
        reader.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2:])
    else:
        main()
