"""The load the webhook benchmarks send: AdmissionReview bodies, a minimal HTTP/1.1 keep-alive
client over asyncio TLS streams, an open-loop (fixed rate) and a closed-loop (saturating) driver,
and `wrk` when installed, and the baseline routes served beside `/validate`. Used by
`webhook_latency.py`, `review_cpu.py` and `app_cpu.py`; not a test.

Bodies are AdmissionReviews as the API server sends them, in three mixes:
- `realistic`: what a cluster sends while teams roll out GPU workloads: for each Deployment (of
  about 10 KB, managedFields included, one in ten denied), its CREATE, the CREATE of its
  ReplicaSet and of the ReplicaSet's Pods (each its name generated from `generateName`, as a
  validating webhook sees it, its own uid, resourceVersion, creation time and managedFields), UPDATEs that change only `replicas` (a scale) or only
  annotations tools write (a re-apply by kubectl, a revision bump), and the Pod the scale adds;
  for each Job, its CREATE and its Pods (every other Job Indexed: each Pod its completion index).
  A pass over the mix is one generation of rollouts: the next pass renames every workload, so a
  long run does not replay the same objects;
- `distinct`: every request a body never sent before (GPU Deployments): its name, object uid,
  image tag, an env value, a label and the model annotation carry the request's number, so
  nothing remembered of an earlier body (decisions, the redaction's memo of clean strings, the
  rules' caches) serves it;
- `reapplied`: `count` Deployments sent round robin, as a GitOps controller re-applies the same
  objects.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import ssl
import statistics
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

UID_MARK = "00000000-0000-4000-8000-000000000000"
# Replaced by the request's number (8 hex digits) in a `distinct` body.
DISTINCT_MARK = "d15t1nc7"
# Replaced by the pass over the bodies (8 hex digits) in a `realistic` body: each pass a new generation.
GENERATION_MARK = "9e7e7a71"
# Request uids are `<run>-0000-4000-8000-<counter>`: unique to this run (records of an earlier run
# in the same database never turn this run's inserts into conflicts), the length of a UUID.
RUN = uuid.uuid4().hex[:8]
MIXES = ("realistic", "distinct", "reapplied")


# -- the baselines served beside /validate ---------------------------------------------------------

NOOP_ANSWER = (
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":true}}'
)


def add_baseline_routes(app: Any) -> None:
    """`POST /noop` (reads the body, answers a fixed AdmissionReview) and `POST /parse-only` (also
    parses the review and answers with its uid, as any webhook must), as plain Starlette routes of
    `app`, served as `/validate` is (before 6 December 2026 all three were FastAPI routes, whose
    per-request handling cost about 20 µs more each)."""
    from starlette.requests import Request
    from starlette.responses import Response

    try:
        import orjson

        loads: Any = orjson.loads
        dumps: Any = orjson.dumps
    except ImportError:  # pragma: no cover - depends on the install
        loads = json.loads

        def dumps(value: Any) -> bytes:
            return json.dumps(value).encode()

    async def noop(request: Request) -> Response:
        await request.body()
        return Response(NOOP_ANSWER, media_type="application/json")

    async def parse_only(request: Request) -> Response:
        review = loads(await request.body())
        answer = {
            "apiVersion": review["apiVersion"],
            "kind": review["kind"],
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return Response(dumps(answer), media_type="application/json")

    app.add_route("/noop", noop, methods=["POST"])
    app.add_route("/parse-only", parse_only, methods=["POST"])


# -- bodies --------------------------------------------------------------------------------------


def _reviews() -> Any:
    """The test suite's AdmissionReview builders (imported when bodies are made: the repository
    must be on the path by then, as the benchmarks put it)."""
    import tests.webhook.reviews as reviews

    return reviews


def make_bodies(count: int, mix: str = "realistic") -> list[bytes]:
    if mix == "realistic":
        return _rollouts(count)
    bodies = []
    for index in range(count):
        obj = _deployment(index)
        if mix == "distinct":
            _mark_distinct(obj, obj["spec"]["template"]["spec"]["containers"][0])
        bodies.append(_encode(_reviews().admission_review(obj, uid=UID_MARK)))
    return bodies


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _deployment(index: int) -> dict[str, Any]:
    obj = _reviews().gpu_deployment()
    obj["metadata"]["name"] = f"llm-{index:04d}"
    obj["metadata"]["uid"] = str(uuid.UUID(int=index + 1))
    obj["spec"]["replicas"] = 2 + index % 3
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["image"] = f"vllm/vllm-openai:v0.6.{index % 7}@sha256:{index:064x}"
    if index % 10 == 9:  # denied: privileged
        container["securityContext"]["privileged"] = True
    return obj


def _mark_distinct(obj: dict[str, Any], container: dict[str, Any]) -> None:
    metadata = obj["metadata"]
    metadata["name"] += f"-{DISTINCT_MARK}"
    metadata["uid"] = metadata["uid"][:-8] + DISTINCT_MARK
    metadata["labels"]["app.kubernetes.io/instance"] = f"run-{DISTINCT_MARK}"
    metadata["annotations"]["gpupolicy.io/model"] += f"-{DISTINCT_MARK}"
    container["image"] = container["image"].replace("@sha256:", f"-{DISTINCT_MARK}@sha256:")
    container["env"].append({"name": "RUN_ID", "value": f"run-{DISTINCT_MARK}"})


def _server_metadata(metadata: dict[str, Any], serial: int) -> None:
    """What the API server writes on every object it stores."""
    metadata["uid"] = str(uuid.UUID(int=(1 << 64) + serial))
    metadata["resourceVersion"] = str(100_000 + serial)
    metadata["creationTimestamp"] = (
        f"2026-11-20T{serial // 3600 % 24:02d}:{serial // 60 % 60:02d}:{serial % 60:02d}Z"
    )
    metadata["managedFields"] = [
        {
            "manager": "kube-controller-manager",
            "operation": "Update",
            "apiVersion": "v1",
            "time": metadata["creationTimestamp"],
        }
    ]


def _owned(owner: dict[str, Any], kind: str, api_version: str, suffix: str, serial: int) -> dict[str, Any]:
    """A ReplicaSet or Pod made by `owner` from its pod template."""
    template = owner["spec"]["template"]
    metadata = copy.deepcopy(template["metadata"])
    metadata["namespace"] = owner["metadata"]["namespace"]
    metadata["ownerReferences"] = [
        {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
         "uid": owner["metadata"].get("uid", ""), "controller": True}
    ]  # fmt: skip
    metadata["labels"] = {**metadata.get("labels", {}), "pod-template-hash": suffix}
    _server_metadata(metadata, serial)
    if kind == "Pod":
        metadata["generateName"] = f"{owner['metadata']['name']}-{suffix}-"
        metadata["name"] = _generated_name(metadata["generateName"], serial)
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": copy.deepcopy(template["spec"]),
        }
    metadata["name"] = f"{owner['metadata']['name']}-{suffix}"
    spec = {
        "replicas": owner["spec"]["replicas"],
        "selector": owner["spec"]["selector"],
        "template": template,
    }
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


# k8s.io/apimachinery's rand alphabet: the API server names an object `generateName` (cut to 58
# characters) and five of these, before validating admission, so a validating webhook sees it.
NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _generated_name(prefix: str, serial: int) -> str:
    """The name the API server would give `prefix`, its random part made from `serial`."""
    mixed = serial * 2_654_435_761 % 2**32  # Knuth's multiplicative hash: neighbours look unrelated
    base = len(NAME_SUFFIX_ALPHABET)
    suffix = "".join(NAME_SUFFIX_ALPHABET[mixed // base**place % base] for place in range(5))
    return prefix[:58] + suffix


def _rollout(index: int, serial: int) -> list[dict[str, Any]]:
    """The admissions of one Deployment's life: create, ReplicaSet, Pods, a scale, re-applies."""
    deployment = _deployment(index)
    deployment["metadata"]["name"] += f"-{GENERATION_MARK}"
    suffix = f"{index:05x}b7d"
    replica_set = _owned(deployment, "ReplicaSet", "apps/v1", suffix, serial)
    reviews = [
        _reviews().admission_review(deployment, uid=UID_MARK),
        _reviews().admission_review(replica_set, uid=UID_MARK),
    ]
    replicas = deployment["spec"]["replicas"]
    reviews += [
        _reviews().admission_review(_owned(deployment, "Pod", "v1", suffix, serial + 1 + n), uid=UID_MARK)
        for n in range(replicas)
    ]
    scaled = copy.deepcopy(deployment)
    scaled["spec"]["replicas"] = replicas + 1
    scaled["metadata"]["generation"] = 4
    reviews.append(
        _reviews().admission_review(scaled, operation="UPDATE", old_object=deployment, uid=UID_MARK)
    )
    reviews.append(
        _reviews().admission_review(_owned(scaled, "Pod", "v1", suffix, serial + 20), uid=UID_MARK)
    )
    reapplied = copy.deepcopy(scaled)
    annotations = reapplied["metadata"]["annotations"]
    annotations["kubectl.kubernetes.io/last-applied-configuration"] = json.dumps(deployment["spec"])[:2000]
    annotations["deployment.kubernetes.io/revision"] = "2"
    reapplied["metadata"]["resourceVersion"] = str(200_000 + serial)
    reviews.append(
        _reviews().admission_review(reapplied, operation="UPDATE", old_object=scaled, uid=UID_MARK)
    )
    return reviews


def _job(index: int, serial: int) -> list[dict[str, Any]]:
    """A training Job of four Pods: every other one Indexed (each Pod its completion index)."""
    deployment = _deployment(index)
    template = copy.deepcopy(deployment["spec"]["template"])
    template["spec"]["restartPolicy"] = "Never"
    container = template["spec"]["containers"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        container.pop(probe, None)
    container.pop("ports", None)
    container["args"] = ["--train", f"--seed={index}"]
    template["metadata"]["labels"] = {
        "app.kubernetes.io/name": f"train-{index}",
        "gpupolicy.io/workload-class": "training",
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"train-{index:04d}",
            "namespace": "ai-lab",
            "uid": str(uuid.UUID(int=(2 << 64) + index)),
        },
        "spec": {"completions": 4, "parallelism": 4, "template": template},
    }
    indexed = index % 8 == 3
    if indexed:
        job["spec"]["completionMode"] = "Indexed"
    reviews = [_reviews().admission_review(job, uid=UID_MARK)]
    for completion in range(4):
        pod = _owned(
            {**job, "spec": {**job["spec"], "replicas": 4, "selector": {}}},
            "Pod",
            "v1",
            f"j{index:04d}",
            serial + completion,
        )
        pod["metadata"]["labels"].pop("pod-template-hash", None)
        pod["metadata"]["labels"]["batch.kubernetes.io/job-name"] = job["metadata"]["name"]
        if indexed:
            pod["metadata"]["generateName"] = f"{job['metadata']['name']}-{completion}-"
            pod["metadata"].setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = str(
                completion
            )
        else:
            pod["metadata"]["generateName"] = f"{job['metadata']['name']}-"
        pod["metadata"]["name"] = _generated_name(pod["metadata"]["generateName"], serial + completion)
        reviews.append(_reviews().admission_review(pod, uid=UID_MARK))
    return reviews


def _rollouts(count: int) -> list[bytes]:
    """About `count` admissions: Deployments' lives and Jobs, three to one."""
    bodies: list[bytes] = []
    index = 0
    while len(bodies) < count:
        maker = _job if index % 4 == 3 else _rollout
        bodies.extend(_encode(review) for review in maker(index, index * 100))
        index += 1
    return bodies[:count]


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


def with_uid(body: bytes, number: int, period: int = 0) -> bytes:
    """The body as request `number` sends it: its own uid (in a `distinct` body, its number
    wherever the body is marked; in a `realistic` one, the pass over the `period` bodies)."""
    body = body.replace(UID_MARK.encode(), f"{RUN}-0000-4000-8000-{number:012d}".encode(), 1)
    body = body.replace(DISTINCT_MARK.encode(), f"{number & 0xFFFFFFFF:08x}".encode())
    generation = number // period if period else 0
    return body.replace(GENERATION_MARK.encode(), f"{generation & 0xFFFFFFFF:08x}".encode())


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
            status = await connection.post(
                path, with_uid(bodies[index % len(bodies)], start + index, len(bodies))
            )
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
            if (
                await connection.post(path, with_uid(bodies[counter % len(bodies)], counter, len(bodies)))
                != 200
            ):
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
  body = body:gsub("d15t1nc7", string.format("%08x", counter % 4294967296))
  body = body:gsub("9e7e7a71", string.format("%08x", math.floor(counter / #bodies) % 4294967296))
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
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    line = next((item for item in done.stdout.splitlines() if item.startswith("WRKJSON ")), None)
    if line is None:
        raise SystemExit(f"wrk gave no figures:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
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


def run(coroutine: Any) -> Any:
    """Run a driver on uvloop when installed (the client then costs less of the machine)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)
