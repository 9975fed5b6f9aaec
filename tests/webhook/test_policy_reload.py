"""An invalid policy swapped in while serving keeps the last good one, and says so.

In-process (`ReloadingPolicy` on files laid out as the kubelet lays out a ConfigMap volume), and
through the real server over TLS: a valid change changes the decisions, an invalid one does
not, and the log, /readyz and /metrics say which policy decides."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpupolicy.engine.report import InternalError
from gpupolicy.policy.loading import load_policy
from gpupolicy.webhook.cluster_inventory import ClusterInventory
from gpupolicy.webhook.policy_reload import ReloadingPolicy
from gpupolicy.webhook.review import Decision, ReviewEngine
from gpupolicy.webhook.server import warm_up
from tests.webhook.reviews import admission_review, gpu_deployment
from tests.webhook.server_process import start_server

ENFORCE = "metadata: {version: v1}\nwebhook: {mode: enforce}\n"
WARN = "metadata: {version: v2}\nwebhook: {mode: warn}\n"
BAD_YAML = "metadata: {version: v3\nwebhook: [\n"
BAD_SCHEMA = "metadata: {version: v3}\nwebhook: {mode: sometimes}\n"
# Ten times more values at each of nine levels: refused by the loader's alias limit, not built.
ALIAS_BOMB = "metadata:\n  version: v3\n  anchors:\n    l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"    l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 10)}]\n" for level in range(1, 9)
)


class ConfigMapVolume:
    """A folder as the kubelet writes a ConfigMap volume: `policy.yaml -> ..data/policy.yaml`,
    `..data -> ..<timestamp>`; an update writes a new timestamped folder and swaps `..data`
    with one rename (pkg/volume/util/atomic_writer.go)."""

    def __init__(self, folder: Path, text: str) -> None:
        self.folder = folder
        self.generation = 0
        folder.mkdir(parents=True)
        self._write(text)
        (folder / "policy.yaml").symlink_to("..data/policy.yaml")

    @property
    def file(self) -> Path:
        return self.folder / "policy.yaml"

    def _write(self, text: str) -> None:
        self.generation += 1
        payload = self.folder / f"..2026_11_30_02_00_{self.generation:02d}.000000001"
        payload.mkdir()
        (payload / "policy.yaml").write_text(text, encoding="utf-8")
        temporary = self.folder / "..data_tmp"
        temporary.symlink_to(payload.name)
        temporary.replace(self.folder / "..data")  # one rename: readers see the old or the new

    def update(self, text: str) -> None:
        self._write(text)


NO_CLUSTER = ClusterInventory(None, no_client_reason="no Kubernetes configuration: test")


def reloading(
    volume: ConfigMapVolume, trial: Callable[[ReviewEngine], Decision] | None = None
) -> ReloadingPolicy:
    engine = ReviewEngine.from_policy(load_policy(extra=[volume.file]))
    return ReloadingPolicy(
        [volume.file], engine, mode=None, trial=trial or (lambda candidate: warm_up(candidate, NO_CLUSTER))
    )


def test_a_valid_change_replaces_the_policy(tmp_path: Path) -> None:
    volume = ConfigMapVolume(tmp_path / "policy", ENFORCE)
    reload = reloading(volume)
    assert reload.check() is None  # nothing changed
    volume.update(WARN)
    assert reload.check() == "reloaded"
    assert reload.engine.settings.default_mode.value == "warn" and reload.engine.policy.version == "v2"
    assert reload.status() == {"status": "current", "reloads": 1}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (BAD_YAML, "policy.yaml:"),
        (BAD_SCHEMA, "sometimes"),
        ("webhook: {maxBodyBytes: -1}\n", "maxBodyBytes"),
        (ALIAS_BOMB, "aliases expand to more than"),
        ("rules: {replicas-without-spread: {params: {minReplicas: two}}}\n", "must be an integer"),
    ],
)  # fmt: skip
def test_an_invalid_change_keeps_the_last_good_policy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str, reason: str
) -> None:
    volume = ConfigMapVolume(tmp_path / "policy", ENFORCE)
    reload = reloading(volume)
    good = reload.engine
    volume.update(text)
    assert reload.check() == "refused"
    assert reload.engine is good
    status = reload.status()
    assert status["status"] == "refused" and reason in status["reason"] and len(status["reason"]) <= 500
    assert "new policy refused; the last good policy stays in use" in caplog.text
    assert reload.check() is None  # the same bad files are not tried (and logged) again
    volume.update(WARN)  # fixed: taken at the next change
    assert reload.check() == "reloaded" and reload.status()["status"] == "current"


def test_a_policy_under_which_rules_fail_is_refused(tmp_path: Path) -> None:
    def failing_trial(candidate: ReviewEngine) -> Decision:
        decision = warm_up(candidate, NO_CLUSTER)
        assert decision.report is not None
        decision.report.errors.append(
            InternalError("GP601", "Deployment default/gpupolicy-warm-up", "KeyError: 'x'")
        )
        return decision

    volume = ConfigMapVolume(tmp_path / "policy", ENFORCE)
    reload = reloading(volume, trial=failing_trial)
    good = reload.engine
    volume.update(WARN)
    assert reload.check() == "refused" and reload.engine is good
    assert "GP601" in reload.status()["reason"]


def test_a_deleted_file_keeps_the_policy_and_the_same_content_is_no_reload(tmp_path: Path) -> None:
    volume = ConfigMapVolume(tmp_path / "policy", ENFORCE)
    reload = reloading(volume)
    good = reload.engine
    volume.update(ENFORCE)  # a re-sync that writes the same policy
    assert reload.check() is None and reload.engine is good and reload.reloads == 0
    (tmp_path / "policy" / "..data").unlink()
    assert reload.check() == "refused" and "cannot read policy" in reload.status()["reason"]
    assert reload.engine is good


# -- through the real server ---------------------------------------------------------------------


def broken() -> dict[str, Any]:
    obj = gpu_deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    return obj


def allowed(client: httpx.Client) -> bool:
    response = client.post("/validate", json=admission_review(broken()))
    assert response.status_code == 200, response.text
    return bool(response.json()["response"]["allowed"])


def wait_for(condition: Callable[[], bool], seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_server_reloads_a_valid_policy_and_keeps_it_over_an_invalid_one(tmp_path: Path) -> None:
    volume = ConfigMapVolume(tmp_path / "policy", ENFORCE)
    server = start_server(
        tmp_path,
        "--no-cluster",
        "--no-provenance",
        "--policy",
        str(volume.file),
        "--policy-check-seconds",
        "0.2",
    )
    try:
        with server.client() as client:
            assert allowed(client) is False  # enforce: a privileged container is denied
            volume.update(WARN)
            assert wait_for(lambda: allowed(client)), server.logs()  # warn: allowed, with warnings
            policy = client.get("/readyz").json()["policy"]
            assert policy["version"] == "v2" and policy["reload"] == {"status": "current", "reloads": 1}

            volume.update(BAD_SCHEMA)
            assert wait_for(lambda: client.get("/readyz").json()["policy"]["reload"]["status"] == "refused")
            readyz = client.get("/readyz").json()
            assert readyz["policy"]["version"] == "v2"  # the last good policy decides
            assert "sometimes" in readyz["policy"]["reload"]["reason"]
            assert allowed(client) is True
            metrics = client.get("/metrics").text
            assert "gpupolicy_policy_reload_failing 1.0" in metrics
            assert 'gpupolicy_policy_reloads_total{outcome="refused"} 1.0' in metrics

            volume.update(ENFORCE)  # fixed
            assert wait_for(lambda: not allowed(client))
            assert "gpupolicy_policy_reload_failing 0.0" in client.get("/metrics").text
    finally:
        server.stop()
    logs = server.logs()
    assert logs.count('"message":"policy reloaded"') == 2
    assert logs.count('"message":"new policy refused; the last good policy stays in use"') == 1
