"""Soak: the webhook under a steady mixed admission load, its memory and file descriptors sampled.

    .venv/bin/python bench/soak.py [--rate 100] [--duration 1800] [--sample-seconds 60]

The server is `gpupolicy serve` as shipped, started as `bench/webhook_latency.py` starts it
(TLS on loopback, a synced cluster inventory from the test suite's fake API server, provenance
in SQLite in a temporary data directory, `--log-level info`). The load is open loop at `--rate`
requests per second on a pool of keep-alive connections, drawn with a fixed seed from a mix:

- GPU Deployments (CREATE, each with its own name and image tag; some privileged, so denied),
  UPDATEs with the old object, GPU Pods and Jobs, dry-runs (evaluated, never recorded);
- odd but well-formed reviews: unicode names and labels, quantities and numbers of any size,
  an alias bomb in the rollback annotation, deep nesting, fields of the wrong type, missing
  metadata, objects without GPUs, DELETEs;
- large bodies (about 1 MB of managedFields), and bad requests: malformed and truncated JSON,
  a wrong Content-Type (415), a body that is not an AdmissionReview (400), one over the body
  limit (413).

Every `--sample-seconds` the server's RSS, peak RSS, threads (from /proc/<pid>/status) and open
file descriptors (entries of /proc/<pid>/fd) are sampled; a row per sample shows them with the
answers of that interval. At the end: the first, last and peak figures and the least-squares
slope of RSS and descriptors per minute, over the whole run and after the first fifth (warm-up).

Bounded: loopback only, `--rate` x `--duration` requests at most, at most `--max-in-flight`
outstanding (the rest are counted as skipped), each answer awaited at most 30 s, and the run
stops by itself after the duration plus a minute of drain; the server is then stopped with
SIGTERM. This is a benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import random
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from admission_load import UID_MARK, Connection, run, with_uid  # noqa: E402
from webhook_latency import cpu_seconds, start  # noqa: E402

VARY = "soakvary0000"  # replaced by each request's number: names and image tags never repeat
JSON = "application/json"
ANSWER_TIMEOUT = 30.0
DRAIN_SECONDS = 60.0


# -- the mix ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    name: str
    weight: int
    body: bytes
    content_type: str = JSON


def _review(obj: dict[str, Any] | None, **options: Any) -> bytes:
    from tests.webhook.reviews import admission_review

    return json.dumps(admission_review(obj, uid=UID_MARK, **options), separators=(",", ":")).encode()


def _deployment(**changes: Any) -> dict[str, Any]:
    from tests.webhook.reviews import gpu_deployment

    obj = gpu_deployment(**changes)
    obj["metadata"]["name"] = f"llm-{VARY}"
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = f"vllm/vllm-openai:v0.6.{VARY}"
    return obj


def _pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = copy.deepcopy(_deployment()["spec"]["template"]["spec"])
    return spec


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"train-{VARY}", "namespace": "ai-lab", "labels": {"app": "train"}},
        "spec": {**_pod_spec(), "restartPolicy": "Never"},
    }


def _job() -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "batch"}}, "spec": {**_pod_spec(), "restartPolicy": "Never"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"eval-{VARY}", "namespace": "ai-lab"},
        "spec": {"backoffLimit": 2, "template": template},
    }


def _container(obj: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return container


def _odd_objects() -> list[tuple[str, dict[str, Any]]]:
    """Well-formed reviews of objects no real client sends, each one change from a GPU Deployment."""
    odd: list[tuple[str, dict[str, Any]]] = []

    unicode = _deployment()
    unicode["metadata"]["labels"]["team"] = "ümlaut-团队-🚀"
    unicode["metadata"]["annotations"]["note"] = "ت" * 2000 + "\u202e\u0000"
    odd.append(("unicode", unicode))

    huge_quantity = _deployment()
    _container(huge_quantity)["resources"]["limits"]["nvidia.com/gpu"] = "1e1000000"
    _container(huge_quantity)["resources"]["requests"]["nvidia.com/gpu"] = "1e1000000"
    odd.append(("huge-quantity", huge_quantity))

    huge_number = _deployment()
    # The largest integers JSON from the API server carries (int64); longer ones cannot reach a
    # webhook (the API server's decoder refuses them).
    huge_number["spec"]["replicas"] = 2**63 - 1
    _container(huge_number)["startupProbe"]["periodSeconds"] = 2**62
    _container(huge_number)["startupProbe"]["failureThreshold"] = -(2**63)
    odd.append(("huge-number", huge_number))

    arabic_digit = _deployment()
    _container(arabic_digit)["resources"]["limits"]["nvidia.com/gpu"] = "١"
    odd.append(("arabic-digit", arabic_digit))

    alias_bomb = _deployment()
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    alias_bomb["metadata"]["annotations"]["gpupolicy.io/rollback-criteria"] = "\n".join(levels)
    odd.append(("alias-bomb", alias_bomb))

    deep = _deployment()
    nested: Any = "bottom"
    for _ in range(400):
        nested = {"n": [nested]}
    deep["spec"]["template"]["metadata"]["annotations"]["deep"] = json.dumps(nested)
    deep["spec"]["template"]["spec"]["x-deep"] = nested
    odd.append(("deep", deep))

    wrong_types = _deployment()
    wrong_types["spec"]["template"]["spec"]["tolerations"] = "nvidia.com/gpu"
    _container(wrong_types)["ports"] = {"http": 8000}
    _container(wrong_types)["startupProbe"]["failureThreshold"] = "sixty"
    wrong_types["metadata"]["labels"] = ["not", "a", "map"]
    odd.append(("wrong-types", wrong_types))

    no_metadata = _deployment()
    del no_metadata["metadata"]
    odd.append(("no-metadata", no_metadata))

    cpu_only = _deployment()
    del _container(cpu_only)["resources"]["limits"]["nvidia.com/gpu"]
    del _container(cpu_only)["resources"]["requests"]["nvidia.com/gpu"]
    odd.append(("no-gpus", cpu_only))
    return odd


def templates() -> list[Template]:
    denied = _deployment()
    _container(denied)["securityContext"]["privileged"] = True
    old = _deployment()
    old["spec"]["replicas"] = 1
    mix = [
        Template("deployment", 300, _review(_deployment())),
        Template("denied", 60, _review(denied)),
        Template("update", 60, _review(_deployment(), operation="UPDATE", old_object=old)),
        Template("pod", 120, _review(_pod())),
        Template("job", 100, _review(_job())),
        Template("dry-run", 100, _review(_deployment(), dry_run=True)),
        Template("delete", 20, _review(None, operation="DELETE", old_object=_deployment())),
        Template("large", 10, _review(_deployment(managed_fields=40_000))),
    ]
    mix += [Template(f"odd:{name}", 20, _review(obj)) for name, obj in _odd_objects()]
    mix += [
        Template("bad:malformed", 15, b'{"apiVersion": "admission.k8s.io/v1", "kind": '),
        Template("bad:truncated", 10, _review(_deployment())[:5000]),
        Template("bad:content-type", 10, _review(_deployment()), "text/plain"),
        Template("bad:not-a-review", 10, json.dumps({"kind": "Pod", "uid": UID_MARK}).encode()),
        Template("bad:too-large", 1, b'{"pad": "' + b"x" * (8 * 1024 * 1024) + b'"}'),
    ]
    return mix


def render(template: Template, number: int) -> bytes:
    return with_uid(template.body, number).replace(VARY.encode(), f"{number:012d}".encode())


# -- samples ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    minute: float
    rss_kib: int
    peak_rss_kib: int
    threads: int
    fds: int
    cpu_seconds: float
    store_bytes: int


def sample(pid: int, began: float, data_dir: Path) -> Sample:
    status: dict[str, str] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        status[key] = value.strip()
    store = sum(item.stat().st_size for item in data_dir.rglob("*") if item.is_file())
    return Sample(
        minute=(time.monotonic() - began) / 60,
        rss_kib=int(status["VmRSS"].split()[0]),
        peak_rss_kib=int(status["VmHWM"].split()[0]),
        threads=int(status["Threads"]),
        fds=sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir()),
        cpu_seconds=cpu_seconds(pid),
        store_bytes=store,
    )


@dataclass
class Interval:
    """What came back between two samples."""

    outcomes: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)

    def add(self, outcome: str, latency: float | None) -> None:
        self.outcomes[outcome] += 1
        if latency is not None:
            self.latencies.append(latency)


HEADER = (
    f"{'min':>5} {'sent':>6} {'allow':>6} {'deny':>6} {'4xx':>5} {'5xx':>4} {'fail':>4} {'skip':>4} "
    f"{'p50 ms':>7} {'p99 ms':>7} {'RSS MiB':>8} {'peak':>7} {'fds':>4} {'thr':>4} {'cpu %':>6} {'store MiB':>9}"
)


def table_row(current: Sample, previous: Sample | None, interval: Interval, sent: int) -> str:
    ordered = sorted(interval.latencies)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000 if ordered else float("nan")

    outcomes = interval.outcomes
    four = sum(count for name, count in outcomes.items() if name.startswith("4"))
    five = sum(count for name, count in outcomes.items() if name.startswith("5"))
    cpu = (
        (current.cpu_seconds - previous.cpu_seconds) / ((current.minute - previous.minute) * 60) * 100
        if previous and current.minute > previous.minute
        else float("nan")
    )
    return (
        f"{current.minute:>5.1f} {sent:>6d} {outcomes['allowed']:>6d} {outcomes['denied']:>6d} {four:>5d} "
        f"{five:>4d} {outcomes['failed']:>4d} {outcomes['skipped']:>4d} {pct(50):>7.1f} {pct(99):>7.1f} "
        f"{current.rss_kib / 1024:>8.1f} {current.peak_rss_kib / 1024:>7.1f} {current.fds:>4d} "
        f"{current.threads:>4d} {cpu:>6.1f} {current.store_bytes / 2**20:>9.1f}"
    )


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x (per minute here); 0 with fewer than two points."""
    if len(points) < 2:
        return 0.0
    xs, ys = [x for x, _ in points], [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0


def summary(samples: list[Sample]) -> list[str]:
    first, last = samples[0], samples[-1]
    settled = [item for item in samples if item.minute >= last.minute / 5] or samples
    lines = []
    for label, value, unit, scale in (
        ("RSS", lambda item: item.rss_kib, "MiB", 1024),
        ("open fds", lambda item: item.fds, "", 1),
        ("threads", lambda item: item.threads, "", 1),
    ):
        peak = max(samples, key=value)
        whole = slope([(item.minute, value(item) / scale) for item in samples])
        after = slope([(item.minute, value(item) / scale) for item in settled])
        lines.append(
            f"{label:<9} first {value(first) / scale:8.1f} {unit:<3} last {value(last) / scale:8.1f} "
            f"peak {value(peak) / scale:8.1f} (minute {peak.minute:.1f}); slope {whole:+.3f}/min over the "
            f"run, {after:+.3f}/min after minute {settled[0].minute:.1f}"
        )
    return lines


# -- the load --------------------------------------------------------------------------------------


class Pool:
    """Keep-alive connections; a connection the server closed (or that failed) is replaced."""

    def __init__(self, port: int, context: ssl.SSLContext, size: int) -> None:
        self.port, self.context, self.size = port, context, size
        self.idle: asyncio.Queue[Connection | None] = asyncio.Queue()
        for _ in range(size):
            self.idle.put_nowait(None)  # opened on first use

    async def exchange(self, body: bytes, content_type: str) -> tuple[int, bytes]:
        connection = await self.idle.get()
        keep = False
        try:
            if connection is None:
                connection = await Connection.open(self.port, self.context)
            status, answer, keep = await asyncio.wait_for(
                connection.exchange("/validate", body, content_type), ANSWER_TIMEOUT
            )
            return status, answer
        finally:
            if not keep and connection is not None:
                connection.close()
            self.idle.put_nowait(connection if keep else None)

    def close(self) -> None:
        while not self.idle.empty():
            if (connection := self.idle.get_nowait()) is not None:
                connection.close()


def outcome_of(status: int, answer: bytes) -> str:
    if status != 200:
        return str(status)
    return "allowed" if b'"allowed":true' in answer else "denied"


async def load(
    options: argparse.Namespace, pid: int, port: int, context: ssl.SSLContext, data_dir: Path
) -> list[Sample]:
    mix = templates()
    chooser = random.Random(options.seed)
    pool = Pool(port, context, options.connections)
    clock = time.perf_counter
    began = time.monotonic()
    interval, sent_in_interval, in_flight = Interval(), 0, 0
    tasks: set[asyncio.Task[None]] = set()
    kinds: Counter[str] = Counter()

    async def one(template: Template, number: int, due: float) -> None:
        nonlocal in_flight
        try:
            status, answer = await pool.exchange(render(template, number), template.content_type)
            interval.add(outcome_of(status, answer), clock() - due)
        except (TimeoutError, OSError, EOFError, asyncio.IncompleteReadError, ValueError):
            interval.add("failed", None)
        finally:
            in_flight -= 1

    samples = [sample(pid, began, data_dir)]
    print(HEADER)
    print(table_row(samples[0], None, interval, 0), flush=True)
    total = int(options.rate * options.duration)
    t0 = clock()
    next_sample = t0 + options.sample_seconds
    for index in range(total):
        due = t0 + index / options.rate
        if (delay := due - clock()) > 0:
            await asyncio.sleep(delay)
        if clock() >= next_sample:
            samples.append(sample(pid, began, data_dir))
            print(table_row(samples[-1], samples[-2], interval, sent_in_interval), flush=True)
            interval, sent_in_interval = Interval(), 0
            next_sample += options.sample_seconds
        template = chooser.choices(mix, weights=[item.weight for item in mix])[0]
        kinds[template.name] += 1
        sent_in_interval += 1
        if in_flight >= options.max_in_flight:
            interval.add("skipped", None)
            continue
        in_flight += 1
        task = asyncio.create_task(one(template, options.uid_start + index, due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=DRAIN_SECONDS)
        for task in pending:
            task.cancel()
    pool.close()
    samples.append(sample(pid, began, data_dir))
    print(table_row(samples[-1], samples[-2], interval, sent_in_interval), flush=True)
    print("mix sent: " + ", ".join(f"{name} {count}" for name, count in kinds.most_common()))
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=100.0, help="requests per second (default 100)")
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds of load (default 1800)")
    parser.add_argument("--sample-seconds", type=float, default=60.0, help="sampling interval (default 60)")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections (default 16)")
    parser.add_argument("--max-in-flight", type=int, default=500, help="outstanding requests at most")
    parser.add_argument("--seed", type=int, default=12, help="seed of the mix (default 12)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument(
        "--server-arg", action="append", default=[], help="extra `gpupolicy serve` argument (repeatable)"
    )
    options = parser.parse_args()
    if not (0 < options.rate <= 2000 and 0 < options.duration <= 6 * 3600 and options.sample_seconds > 0):
        parser.error("--rate must be in (0, 2000], --duration in (0, 21600] seconds")
    options.uid_start = 1

    from tests.webhook.fake_apiserver import FakeApiServer
    from tests.webhook.server_process import write_kubeconfig

    fake = FakeApiServer().start()
    folder = Path(tempfile.mkdtemp(prefix="gpupolicy-soak-"))
    extra = ["--log-level", options.log_level, *options.server_arg]
    server = start(folder / "server", "on", write_kubeconfig(folder / "kubeconfig", fake.url), extra)
    process, port, context = server.process, server.port, server.context
    print(
        f"gpupolicy soak: {options.rate:.0f} requests/s for {options.duration:.0f} s, TLS on loopback, "
        f"provenance in SQLite, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, server pid "
        f"{process.pid}, data {folder}",
        flush=True,
    )
    started = time.monotonic()
    try:
        samples = run(load(options, process.pid, port, context, server.folder / "data"))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        fake.stop()
    # -15 after a clean shutdown: uvicorn re-raises the SIGTERM it handled.
    print(f"wall time {time.monotonic() - started:.0f} s; server exit code {process.returncode}")
    for line in summary(samples):
        print(line)
    print(f"(server log: {server.folder / 'server.log'})")


if __name__ == "__main__":
    main()
