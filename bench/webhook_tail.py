"""The webhook's tail at a fixed rate, window by window: the p99 of `/validate` with provenance,
and what each thread of the server and of its replayer spent on it.

    .venv/bin/python bench/webhook_tail.py [--rate 200] [--duration 10] [--windows 3] [--rounds 4]
        [--mix realistic|distinct] [--against DIR ...] [--threads]

One 10-second window's p99 at 200/s is its 20 slowest admissions: a single stall of the disk or
of the hypervisor moves it by milliseconds, and bench/webhook_latency.py measures one such window
per round, among its saturated measurements. This bench measures only that figure, many times: a
round starts a provenance server (as bench/webhook_latency.py starts it: TLS, SQLite provenance,
a synced cluster inventory from the test suite's fake API server), warms it up, then runs
`--windows` windows of `--duration` seconds of `/validate` at `--rate` (open loop, latency from the
scheduled time: bench/admission_load.py's `fixed_rate`), waiting before each until the store has
caught up; then the server stops. With `--against`, every round runs each checkout (an unpacked
`git archive` of another commit, with this environment's interpreter and dependencies) in turn,
the first one changing from round to round, so that both sides see the same stretch of the
machine.

Printed per checkout: every window's p99 (sorted), their median and range, the median p50, and
the CPU per admission of the server and of its replayer (user + system from /proc). `--threads`
also prints, per window, every thread of both processes: CPU, and the voluntary and involuntary
context switches (how often a thread slept, and how often it was taken off its CPU), read from
/proc/PID/task/TID/{stat,status}; threads are numbered in the order they started (the event loop
and the replayer's main thread first).

This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from admission_load import MIXES, closed_loop, fixed_rate, make_bodies, run  # noqa: E402
from webhook_latency import Server, children_of, settle, start, stop  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ThreadReading:
    cpu_seconds: float
    voluntary: int
    involuntary: int


def threads_of(pid: int) -> dict[int, ThreadReading]:
    """Each live thread of `pid`: its CPU and context switches so far."""
    readings: dict[int, ThreadReading] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            status = (task / "status").read_text()
        except OSError:  # ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        counts = dict(line.split(":\t") for line in status.splitlines() if "ctxt_switches" in line)
        readings[int(task.name)] = ThreadReading(
            (int(fields[11]) + int(fields[12])) / TICKS,
            int(counts["voluntary_ctxt_switches"]),
            int(counts["nonvoluntary_ctxt_switches"]),
        )
    return readings


def processes(server: Server) -> dict[str, int]:
    """The server's process and its replayer's (when it runs one)."""
    found = {"webhook": server.process.pid}
    for child in children_of(server.process.pid):
        found["replayer"] = child
    return found


def read_threads(server: Server) -> dict[tuple[str, int], ThreadReading]:
    return {
        (name, tid): reading
        for name, pid in processes(server).items()
        for tid, reading in threads_of(pid).items()
    }


@dataclass
class Window:
    p50_ms: float
    p99_ms: float
    requests: int
    threads: dict[tuple[str, int], ThreadReading]  # what each spent over the window
    replayer_policy: str


@dataclass
class Checkout:
    path: Path
    windows: list[Window] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "this checkout" if self.path == REPO else str(self.path)


def difference(after: ThreadReading, before: ThreadReading | None) -> ThreadReading:
    if before is None:
        return after
    return ThreadReading(
        after.cpu_seconds - before.cpu_seconds,
        after.voluntary - before.voluntary,
        after.involuntary - before.involuntary,
    )


def measure_window(server: Server, options: argparse.Namespace, bodies: list[bytes], uid: int) -> Window:
    settle(server)
    before = read_threads(server)
    result = run(
        fixed_rate(server.port, server.context, "/validate", bodies, options.rate, options.duration, uid)
    )
    after = read_threads(server)
    spent = {key: difference(reading, before.get(key)) for key, reading in after.items()}
    return Window(result["p50_ms"], result["p99_ms"], result["requests"], spent, scheduling(server))


def scheduling(server: Server) -> str:
    """The replayer's scheduling policy and nice value, as the kernel has them."""
    pid = processes(server).get("replayer")
    if pid is None:
        return "no replayer"
    names = {os.SCHED_OTHER: "SCHED_OTHER", os.SCHED_BATCH: "SCHED_BATCH", os.SCHED_IDLE: "SCHED_IDLE"}
    try:
        policy, nice = os.sched_getscheduler(pid), os.getpriority(os.PRIO_PROCESS, pid)
    except OSError:
        return "a replayer that ended"
    return f"{names.get(policy, str(policy))}, nice {nice}"


def measure_round(
    checkout: Checkout, options: argparse.Namespace, bodies: list[bytes], kubeconfig: Path, uid: int
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="gpupolicy-tail-"))
    server = start(folder / "on", "on", kubeconfig, ["--log-level", "info"], checkout=checkout.path)
    try:
        run(closed_loop(server.port, server.context, "/validate", bodies, 4, 2.0, uid))  # warm-up
        for window in range(options.windows):
            checkout.windows.append(measure_window(server, options, bodies, uid + (window + 1) * 100_000))
            if options.threads:
                print_threads(checkout, checkout.windows[-1])
    finally:
        stop(server)


def print_threads(checkout: Checkout, window: Window) -> None:
    print(
        f"{checkout.name}: window p50 {window.p50_ms:.2f} ms, p99 {window.p99_ms:.2f} ms; "
        f"the replayer runs under {window.replayer_policy}"
    )
    print("  process   thread  CPU ms  voluntary  involuntary")
    for process in ("webhook", "replayer"):
        tids = sorted(tid for name, tid in window.threads if name == process)
        for index, tid in enumerate(tids):
            spent = window.threads[(process, tid)]
            if spent.cpu_seconds or spent.voluntary or spent.involuntary:
                print(
                    f"  {process:9} {index:6} {spent.cpu_seconds * 1000:7.0f} "
                    f"{spent.voluntary:10} {spent.involuntary:12}"
                )


def cpu_ms_per_admission(checkout: Checkout, process: str) -> float:
    values = [
        sum(spent.cpu_seconds for (name, _), spent in window.threads.items() if name == process)
        / window.requests
        * 1000
        for window in checkout.windows
        if window.requests
    ]
    return statistics.median(values) if values else float("nan")


def report(checkouts: list[Checkout], options: argparse.Namespace) -> None:
    print(
        f"\n/validate with provenance at {options.rate:.0f}/s, {options.mix} mix, windows of "
        f"{options.duration:.0f} s ({options.windows} a round, {options.rounds} rounds)"
    )
    for checkout in checkouts:
        p99s = sorted(window.p99_ms for window in checkout.windows)
        p50 = statistics.median(window.p50_ms for window in checkout.windows)
        print(
            f"{checkout.name}: p99 median {statistics.median(p99s):.2f} ms "
            f"(range {p99s[0]:.2f}-{p99s[-1]:.2f}), p50 median {p50:.2f} ms; CPU ms per admission: "
            f"webhook {cpu_ms_per_admission(checkout, 'webhook'):.3f}, "
            f"replayer {cpu_ms_per_admission(checkout, 'replayer'):.3f}"
        )
        print("  p99s: " + " ".join(f"{value:.2f}" for value in p99s))


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=200.0, help="admissions a second (default 200)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds a window (default 10)")
    parser.add_argument("--windows", type=int, default=3, help="windows a round (default 3)")
    parser.add_argument("--rounds", type=int, default=4, help="servers started per checkout (default 4)")
    parser.add_argument("--bodies", type=int, default=500, help="distinct review bodies (default 500)")
    parser.add_argument("--mix", choices=MIXES, default="realistic", help="see admission_load.py")
    parser.add_argument("--against", type=Path, nargs="*", default=[], help="other checkouts to compare")
    parser.add_argument("--threads", action="store_true", help="print each window's threads")
    return parser.parse_args()


def main() -> None:
    options = parse_options()
    from tests.webhook.fake_apiserver import FakeApiServer
    from tests.webhook.server_process import write_kubeconfig

    checkouts = [Checkout(REPO), *(Checkout(path.resolve()) for path in options.against)]
    bodies = make_bodies(options.bodies, options.mix)
    fake = FakeApiServer().start()
    try:
        kubeconfig = write_kubeconfig(
            Path(tempfile.mkdtemp(prefix="gpupolicy-tail-")) / "kubeconfig", fake.url
        )
        for round_number in range(options.rounds):
            shift = round_number % len(checkouts)
            for index, checkout in enumerate(checkouts[shift:] + checkouts[:shift]):
                uid = (round_number * len(checkouts) + index + 1) * 10_000_000
                measure_round(checkout, options, bodies, kubeconfig, uid)
            print(f"round {round_number + 1} of {options.rounds} done", flush=True)
    finally:
        fake.stop()
    report(checkouts, options)


if __name__ == "__main__":
    main()
