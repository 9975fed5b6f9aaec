"""GP113: a multi-GPU container needs a RAM-backed /dev/shm larger than the runtime's 64 MiB, in
any of the forms that give one: a memory emptyDir, the node's /dev/shm, the node's IPC namespace."""

from __future__ import annotations

import pytest

from tests.conftest import LintText, rule_ids

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: nccl, namespace: training}
spec:
  restartPolicy: Never
HOST
  containers:
    - name: trainer
      image: nvcr.io/nvidia/pytorch:24.10-py3
      command: [torchrun, --nproc-per-node=8, train.py]
      resources:
        requests: {cpu: "64", memory: 512Gi}
        limits: {memory: 512Gi, nvidia.com/gpu: 8}
MOUNTS
VOLUMES
"""
MOUNT = "      volumeMounts: [{name: shm, mountPath: /dev/shm}]"


def pod(host: str = "", mounts: str = "", volumes: str = "") -> str:
    return POD.replace("HOST\n", host).replace("MOUNTS\n", mounts).replace("VOLUMES\n", volumes)


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        (pod(), True),
        (pod(mounts=MOUNT + "\n", volumes="  volumes: [{name: shm, emptyDir: {medium: Memory}}]\n"), False),
        (pod(mounts=MOUNT + "\n", volumes="  volumes: [{name: shm, hostPath: {path: /dev/shm}}]\n"), False),
        (pod(mounts=MOUNT + "\n", volumes="  volumes: [{name: shm, hostPath: {path: /mnt/shm}}]\n"), True),
        (pod(mounts=MOUNT + "\n", volumes="  volumes: [{name: shm, emptyDir: {}}]\n"), True),  # disk-backed
        (pod(host="  hostIPC: true\n"), False),  # the runtime mounts the node's /dev/shm
    ],
)
def test_ram_backed_shm_in_any_form(lint_text: LintText, text: str, fires: bool) -> None:
    assert ("GP113" in rule_ids(lint_text(text))) is fires
