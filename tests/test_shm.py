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


DRA_POD = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: decode-gpus, namespace: serving}
spec:
  spec:
    devices:
      requests:
        - REQUEST
---
apiVersion: v1
kind: Pod
metadata: {name: decode, namespace: serving}
spec:
  resourceClaims: [{name: gpus, resourceClaimTemplateName: decode-gpus}]
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.9.0
      args: [--tensor-parallel-size, "2"]
      resources:
        requests: {cpu: "16", memory: 64Gi}
        limits: {memory: 64Gi}
        claims: [{name: gpus}]
"""


@pytest.mark.parametrize(
    ("request_", "fires"),
    [
        # llm-d's heterogeneous example: two GPUs by a DRA claim, tensor parallel, no /dev/shm.
        ("{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}", True),
        ("{name: gpu, deviceClassName: gpu.nvidia.com, count: 4}", True),  # resource.k8s.io/v1beta1
        ("{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}", False),  # one GPU: count unsaid
        ("{name: gpu, exactly: {deviceClassName: mig.nvidia.com, count: 2}}", False),  # slices of one GPU
        ("{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}}", False),  # no count
        ("{name: nic, exactly: {deviceClassName: rdma.example.com, count: 2}}", False),
    ],
)
def test_gpus_a_container_claims_through_dra_count(lint_text: LintText, request_: str, fires: bool) -> None:
    text = DRA_POD.replace("REQUEST", request_)
    assert ("GP113" in rule_ids(lint_text(text))) is fires
    # The claim's template not at hand (another repository): its GPUs are not counted.
    alone = text.split("---\n", 1)[1]
    assert "GP113" not in rule_ids(lint_text(alone))
