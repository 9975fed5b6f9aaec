"""Webhook latency and throughput: POST /validate over TLS on loopback, beside a no-op endpoint on
the same server, in the same run.

    .venv/bin/python bench/webhook_latency.py [--rate 500] [--duration 20] [--no-provenance | --db URL]

The server is `gpupolicy serve` as shipped (TLS, policy loaded once, a synced cluster inventory
from the test suite's fake API server, provenance in SQLite unless --no-provenance, or in the
database `--db` names, e.g. postgresql://postgres@127.0.0.1:5432/bench) with one
extra routes: `POST /noop` reads the body and returns a fixed AdmissionReview response, and
`POST /parse-only` (measured saturated only) also parses the review and answers with its uid,
as any webhook must: the cost of the HTTP exchange plus JSON, without a decision.
Bodies are realistic AdmissionReviews: GPU Deployments of about 10 KB (managedFields included),
each with its own uid and name, one in ten of them denied.

Two measurements per endpoint:
- fixed rate (open loop): requests are scheduled at `--rate` per second whatever the answers
  do, on a pool of keep-alive connections; latency counts from the scheduled time, so a stall
  shows up in the percentiles (no coordinated omission);
- saturation: `wrk` (16 connections, one thread) when installed, else a closed-loop asyncio client.

`--repeat N` runs the measurements N times on the same server and prints each round and
the medians (this is how to quote figures on a machine whose speed wanders from run to run).
The server logs as shipped (`--log-level info`: one JSON line per admission, to the server log
file). After the run the bench counts the records this run's request uids left in the store.
The last column is the server's CPU time per request (user + system of the whole process, read
from /proc), which stays meaningful when other work shares the machine.
`--server-arg=--review-in-threadpool` runs `review()` in the threadpool instead of the event loop;
`BENCH_GC=trace` logs collector pauses over 2 ms to the server log, `BENCH_GC=off` disables it.

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi import Request, Response  # module level: FastAPI resolves the route's annotations here

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

NOOP_RESPONSE = (
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}'
)
UID_MARK = "00000000-0000-4000-8000-000000000000"
# Request uids are `<run>-0000-4000-8000-<counter>`: unique to this run (records of an earlier run
# in the same database never turn this run's inserts into conflicts), the length of a UUID.
RUN = uuid.uuid4().hex[:8]


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
    if os.environ.get("BENCH_GC") == "trace":  # log collections that take over 2 ms
        import gc

        started: dict[str, float] = {}

        def trace(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                started["t"] = time.perf_counter()
                started["n"] = len(gc.get_objects(info["generation"]))
            elif (pause := time.perf_counter() - started["t"]) > 0.002:
                print(f"gc gen{info['generation']} {pause * 1000:.1f} ms, {started['n']} objects, "
                      f"{info['collected']} collected", file=sys.stderr, flush=True)  # fmt: skip

        gc.callbacks.append(trace)

    @server.config.app.post("/noop")
    async def noop(request: Request) -> Response:
        await request.body()
        return Response(NOOP_RESPONSE, media_type="application/json")

    import orjson

    @server.config.app.post("/parse-only")
    async def parse_only(request: Request) -> Response:
        review = orjson.loads(await request.body())
        answer = {
            "apiVersion": review["apiVersion"],
            "kind": review["kind"],
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return Response(orjson.dumps(answer), media_type="application/json")

    try:
        server.run()
    finally:
        cleanup()


# -- bodies --------------------------------------------------------------------------------------


def make_bodies(count: int) -> list[bytes]:
    from tests.webhook.reviews import admission_review, gpu_deployment

    bodies = []
    for index in range(count):
        obj = gpu_deployment()
        obj["metadata"]["name"] = f"llm-{index:04d}"
        obj["metadata"]["uid"] = str(uuid.UUID(int=index + 1))
        obj["spec"]["replicas"] = 2 + index % 3
        container = obj["spec"]["template"]["spec"]["containers"][0]
        container["image"] = f"vllm/vllm-openai:v0.6.{index % 7}@sha256:{index:064x}"
        if index % 10 == 9:  # denied: privileged
            container["securityContext"]["privileged"] = True
        body = admission_review(obj, uid=UID_MARK)
        bodies.append(json.dumps(body, separators=(",", ":")).encode())
    return bodies


# -- a minimal HTTP/1.1 keep-alive client over asyncio TLS streams ----------------------------


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, context: ssl.SSLContext) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        return cls(reader, writer)

    async def post(self, path: str, body: bytes) -> int:
        return (await self.exchange(path, body))[0]

    async def exchange(
        self, path: str, body: bytes, content_type: str = "application/json"
    ) -> tuple[int, bytes, bool]:
        """One POST: the status, the response body, and whether the server keeps the connection."""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionResetError("the server closed the connection without an answer")
        length = 0
        keep_alive = True
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            elif name.strip().lower() == b"connection" and value.strip().lower() == b"close":
                keep_alive = False
        answer = await self.reader.readexactly(length)
        return int(status_line.split()[1]), answer, keep_alive

    def close(self) -> None:
        self.writer.close()


def with_uid(body: bytes, number: int) -> bytes:
    return body.replace(UID_MARK.encode(), f"{RUN}-0000-4000-8000-{number:012d}".encode(), 1)


async def fixed_rate(
    port: int,
    context: ssl.SSLContext,
    path: str,
    bodies: list[bytes],
    rate: float,
    duration: float,
    start: int,
) -> dict[str, Any]:
    """Open loop: request i is due at t0 + i / rate; latency is measured from that moment."""
    pool: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(32):
        pool.put_nowait(await Connection.open(port, context))
    latencies: list[float] = []
    failures = 0
    total = int(rate * duration)
    clock = time.perf_counter  # uvloop's loop.time() counts whole milliseconds
    t0 = clock() + 0.05

    async def one(index: int, due: float) -> None:
        nonlocal failures
        connection = await pool.get()
        try:
            status = await connection.post(path, with_uid(bodies[index % len(bodies)], start + index))
            if status != 200:
                failures += 1
        finally:
            pool.put_nowait(connection)
        latencies.append(clock() - due)

    tasks = []
    for index in range(total):
        due = t0 + index / rate
        delay = due - clock()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(index, due)))
    await asyncio.gather(*tasks)
    elapsed = clock() - t0
    while not pool.empty():
        pool.get_nowait().close()
    return summarise(latencies, elapsed, failures)


async def closed_loop(
    port: int,
    context: ssl.SSLContext,
    path: str,
    bodies: list[bytes],
    connections: int,
    duration: float,
    start: int,
) -> dict[str, Any]:
    latencies: list[float] = []
    failures = 0
    clock = time.perf_counter
    deadline = clock() + duration
    counter = start

    async def worker() -> None:
        nonlocal failures, counter
        connection = await Connection.open(port, context)
        while clock() < deadline:
            counter += 1
            begun = clock()
            if await connection.post(path, with_uid(bodies[counter % len(bodies)], counter)) != 200:
                failures += 1
            latencies.append(clock() - begun)
        connection.close()

    began = clock()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return summarise(latencies, clock() - began, failures)


def summarise(latencies: list[float], elapsed: float, failures: int) -> dict[str, Any]:
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000 if ordered else float("nan")

    return {
        "requests": len(ordered),
        "throughput": len(ordered) / elapsed if elapsed else 0.0,
        "p50_ms": pct(50),
        "p95_ms": pct(95),
        "p99_ms": pct(99),
        "max_ms": ordered[-1] * 1000 if ordered else float("nan"),
        "mean_ms": statistics.fmean(ordered) * 1000 if ordered else float("nan"),
        "non_200": failures,
    }


WRK_SCRIPT = """
local bodies = {}
for line in io.lines(os.getenv("BODIES")) do bodies[#bodies + 1] = line end
local counter = tonumber(os.getenv("UID_START"))
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  counter = counter + 1
  local body = bodies[(counter % #bodies) + 1]
  body = body:gsub("00000000%-0000%-4000%-8000%-000000000000", string.format(os.getenv("RUN") .. "-0000-4000-8000-%012d", counter), 1)
  return wrk.format(nil, nil, nil, body)
end
done = function(summary, latency, requests)
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout
  io.write(string.format('WRKJSON {"requests": %d, "seconds": %f, "p50_ms": %f, "p95_ms": %f, "p99_ms": %f, "max_ms": %f, "mean_ms": %f, "errors": %d}\\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1000, latency:percentile(95) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, latency.mean / 1000, errors))
end
"""


def wrk(port: int, path: str, bodies_file: Path, script: Path, duration: float, start: int) -> dict[str, Any]:
    command = [
        "wrk",
        "-t1",
        "-c16",
        f"-d{int(duration)}s",
        "-s",
        str(script),
        f"https://127.0.0.1:{port}{path}",
    ]
    env = {**os.environ, "BODIES": str(bodies_file), "UID_START": str(start), "RUN": RUN}
    output = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    line = next(item for item in output.splitlines() if item.startswith("WRKJSON "))
    raw = json.loads(line[len("WRKJSON ") :])
    return {
        "requests": raw["requests"],
        "throughput": raw["requests"] / raw["seconds"],
        "p50_ms": raw["p50_ms"],
        "p95_ms": raw["p95_ms"],
        "p99_ms": raw["p99_ms"],
        "max_ms": raw["max_ms"],
        "mean_ms": raw["mean_ms"],
        "non_200": raw["errors"],
    }


# -- the run ------------------------------------------------------------------------------------


def start(
    folder: Path, provenance: bool, kubeconfig: Path, extra: list[str]
) -> tuple[subprocess.Popen[bytes], int, ssl.SSLContext]:
    import socket

    import trustme

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
        "--data-dir", str(folder / "data"), "--kubeconfig", str(kubeconfig),
    ]  # fmt: skip
    if not provenance:
        argv.append("--no-provenance")
    argv.extend(extra)
    log = (folder / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", *argv], stdout=log, stderr=subprocess.STDOUT, cwd=REPO
    )
    context = ssl.create_default_context()
    ca.configure_trust(context)
    import httpx

    deadline = time.monotonic() + 60
    with httpx.Client(verify=context) as http:
        while time.monotonic() < deadline:
            try:
                if http.get(f"https://127.0.0.1:{port}/readyz").status_code == 200:
                    return process, port, context
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the server did not become ready:\n{(folder / 'server.log').read_text()}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the server process (all threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def row(name: str, result: dict[str, Any]) -> str:
    cpu = result.get("server_cpu_ms_per_request", float("nan"))
    return (
        f"{name:<28} {result['throughput']:>9.0f} {result['p50_ms']:>8.2f} {result['p95_ms']:>8.2f} "
        f"{result['p99_ms']:>8.2f} {result['max_ms']:>8.2f} {result['requests']:>8d} {result['non_200']:>6d} {cpu:>9.3f}"
    )


def measured(pid: int, action: Any) -> dict[str, Any]:
    before = cpu_seconds(pid)
    result: dict[str, Any] = action()
    used = cpu_seconds(pid) - before
    result["server_cpu_ms_per_request"] = (
        used / result["requests"] * 1000 if result["requests"] else float("nan")
    )
    return result


def run(coroutine: Any) -> Any:
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def store_name(options: argparse.Namespace) -> str:
    if options.no_provenance:
        return "off"
    if not options.db:
        return "SQLite"
    from sqlalchemy.engine import make_url

    return f"{make_url(options.db).get_backend_name()} ({make_url(options.db).render_as_string(hide_password=True)})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=500.0, help="fixed request rate (default 500/s)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per measurement (default 20)")
    parser.add_argument(
        "--no-provenance", action="store_true", help="run the server without a provenance store"
    )
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
        "--repeat",
        type=int,
        default=1,
        help="rounds of the measurements (default 1); with more, each round's table and the medians",
    )
    parser.add_argument(
        "--server-arg", action="append", default=[], help="extra `gpupolicy serve` argument (repeatable)"
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the server's log level (default info, as shipped: one JSON line per admission, to the server log)",
    )
    options = parser.parse_args()
    if options.db and options.no_provenance:
        parser.error("--db and --no-provenance exclude each other")

    from tests.webhook.fake_apiserver import FakeApiServer
    from tests.webhook.server_process import write_kubeconfig

    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    bodies = make_bodies(options.bodies)
    sizes = [len(body) for body in bodies]
    fake = FakeApiServer().start()
    folder = Path(tempfile.mkdtemp(prefix="gpupolicy-bench-"))
    process, port, context = start(
        folder,
        not options.no_provenance,
        write_kubeconfig(folder / "kubeconfig", fake.url),
        [
            *(["--db", options.db] if options.db else []),
            "--log-level",
            options.log_level,
            *options.server_arg,
        ],
    )
    bodies_file = folder / "bodies.jsonl"
    bodies_file.write_bytes(b"\n".join(bodies) + b"\n")
    script = folder / "bench.lua"
    script.write_text(WRK_SCRIPT, encoding="utf-8")
    use_wrk = shutil.which("wrk") is not None and not options.no_wrk
    rounds: list[dict[str, dict[str, Any]]] = []
    try:
        # warm up both endpoints (first evaluations, connection set-up, SQLite schema)
        run(closed_loop(port, context, "/validate", bodies, 4, 2.0, 10_000_000))
        run(closed_loop(port, context, "/noop", bodies, 4, 1.0, 20_000_000))
        for index in range(options.repeat):
            rounds.append(
                measure_round(
                    options, process.pid, port, context, bodies, (bodies_file, script), use_wrk,
                    uid=(index + 1) * 100_000_000,
                )
            )  # fmt: skip
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        fake.stop()

    print(
        f"gpupolicy webhook latency, TLS on loopback, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print(
        f"bodies: {len(bodies)} GPU Deployment AdmissionReviews, {min(sizes)}-{max(sizes)} bytes "
        f"(mean {statistics.fmean(sizes):.0f}); provenance: {store_name(options)}; "
        "cluster inventory: synced (fake API server)"
        + (f"; server args: {' '.join(options.server_arg)}" if options.server_arg else "")
    )
    print(f"load average before/after: {load_before} / {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for index, results in enumerate(rounds, start=1):
        if len(rounds) > 1:
            print(f"round {index} of {len(rounds)}")
        print_table(results)
    if len(rounds) > 1:
        print(f"median of {len(rounds)} rounds")
        print_table({name: median_result([results[name] for results in rounds]) for name in rounds[0]})
        ratios = [ratio for results in rounds if (ratio := saturated_ratio(results)) is not None]
        if ratios:
            shown = " ".join(f"{ratio:.2f}" for ratio in ratios)
            print(f"(the ratio round by round: {shown}; median {statistics.median(ratios):.2f})")
    if not options.no_provenance:
        answered = sum(
            result["requests"]
            for results in rounds
            for name, result in results.items()
            if name.startswith("/validate")
        )
        print(
            f"provenance: {stored_records(options, folder)} records stored by this run, for {answered} "
            "measured /validate answers (and the warm-up's); one review in ten is a denial, never recorded"
        )
    print(f"(server log: {folder / 'server.log'}; log level {options.log_level})")


def measure_round(
    options: argparse.Namespace,
    pid: int,
    port: int,
    context: ssl.SSLContext,
    bodies: list[bytes],
    wrk_files: tuple[Path, Path],
    use_wrk: bool,
    *,
    uid: int,
) -> dict[str, dict[str, Any]]:
    """One round: both endpoints at the fixed rate, then both saturated."""
    results: dict[str, dict[str, Any]] = {}
    for path in ("/noop", "/validate"):
        results[f"{path} @ {options.rate:.0f}/s"] = measured(
            pid,
            lambda path=path, uid=uid: run(
                fixed_rate(port, context, path, bodies, options.rate, options.duration, uid)
            ),
        )
        uid += 1_000_000
    for path in ("/noop", "/parse-only", "/validate"):
        if use_wrk:
            results[f"{path} saturated (wrk)"] = measured(
                pid, lambda path=path, uid=uid: wrk(port, path, *wrk_files, options.duration, uid)
            )
        else:
            results[f"{path} saturated (asyncio)"] = measured(
                pid,
                lambda path=path, uid=uid: run(
                    closed_loop(port, context, path, bodies, 16, options.duration, uid)
                ),
            )
        uid += 10_000_000
    return results


def print_table(results: dict[str, dict[str, Any]]) -> None:
    print(
        f"{'endpoint':<28} {'req/s':>9} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} {'n':>8} {'!200':>6}"
        f" {'cpu ms/req':>10}"
    )
    for name, result in results.items():
        print(row(name, result))
    ratio = saturated_ratio(results)
    if ratio is not None:
        print(f"saturated throughput /validate : /noop = {ratio:.2f}")
    ratio = saturated_ratio(results, "/parse-only")
    if ratio is not None:
        print(f"saturated throughput /validate : /parse-only = {ratio:.2f}")


def saturated_ratio(results: dict[str, dict[str, Any]], baseline: str = "/noop") -> float | None:
    """Saturated throughput of /validate over the baseline endpoint's."""
    saturated = {name.split()[0]: result for name, result in results.items() if "saturated" in name}
    if baseline in saturated and "/validate" in saturated and saturated[baseline]["throughput"]:
        return float(saturated["/validate"]["throughput"] / saturated[baseline]["throughput"])
    return None


def median_result(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (requests and failures summed)."""
    merged: dict[str, Any] = {
        key: statistics.median(result[key] for result in results)
        for key in ("throughput", "p50_ms", "p95_ms", "p99_ms", "max_ms", "server_cpu_ms_per_request")
    }
    merged["requests"] = sum(result["requests"] for result in results)
    merged["non_200"] = sum(result["non_200"] for result in results)
    return merged


def stored_records(options: argparse.Namespace, folder: Path) -> int:
    """Records of this run's request uids in the store the server wrote (a check that the
    measured admissions really were recorded)."""
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
