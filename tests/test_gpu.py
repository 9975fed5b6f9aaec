"""GPU detection: resource names per vendor, MIG and shared names, HAMi attributes, DRA, KAI fractions."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.kube.gpu import GpuCatalog, GpuKind, dra_gpu_claims, names_gpu_resource
from gpupolicy.kube.pod_spec import Container, PodTemplate
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy


def lint(text: str) -> Report:
    """The default policy's report on the objects of `text`."""
    return evaluate(load_text(text, "test.yaml").resources, default_policy())


@pytest.fixture(scope="module")
def catalog() -> GpuCatalog:
    return default_policy().gpu


@pytest.mark.parametrize(
    ("name", "vendor", "kind"),
    [
        ("nvidia.com/gpu", "nvidia", GpuKind.DEVICE),
        ("amd.com/gpu", "amd", GpuKind.DEVICE),
        ("gpu.intel.com/i915", "intel", GpuKind.DEVICE),
        ("gpu.intel.com/xe", "intel", GpuKind.DEVICE),
        ("gpu.intel.com/dxg", "intel", GpuKind.DEVICE),
        ("gpu.intel.com/monitoring", "intel", GpuKind.ATTRIBUTE),
        ("gpu.intel.com/xe_monitoring", "intel", GpuKind.ATTRIBUTE),
        ("nvidia.com/gpu.shared", "nvidia", GpuKind.SHARED),
        ("nvidia.com/mig-1g.5gb", "nvidia", GpuKind.MIG),
        ("nvidia.com/mig-1g.10gb", "nvidia", GpuKind.MIG),
        ("nvidia.com/mig-3g.40gb", "nvidia", GpuKind.MIG),
        ("nvidia.com/mig-7g.80gb", "nvidia", GpuKind.MIG),
        ("nvidia.com/mig-1c.3g.20gb", "nvidia", GpuKind.MIG),
        ("nvidia.com/mig-1g.10gb+me", "nvidia", GpuKind.MIG),
        ("nvidia.com/mig-1g.12gb", "nvidia", GpuKind.MIG),
        ("nvidia.com/gpumem", "nvidia", GpuKind.ATTRIBUTE),
        ("nvidia.com/gpumem-percentage", "nvidia", GpuKind.ATTRIBUTE),
        ("nvidia.com/gpucores", "nvidia", GpuKind.ATTRIBUTE),
        ("nvidia.com/priority", "nvidia", GpuKind.ATTRIBUTE),
        ("gpu.intel.com/millicores", "intel", GpuKind.ATTRIBUTE),
        ("nvidia.com/gpus", "nvidia", GpuKind.UNKNOWN),
        ("nvidia.com/mig-1g", "nvidia", GpuKind.UNKNOWN),
        ("nvidia.com/mig-1g.10gb-me", "nvidia", GpuKind.UNKNOWN),
        ("amd.com/gpus", "amd", GpuKind.UNKNOWN),
        ("nvidia.com/hostdev", "nvidia", GpuKind.UNKNOWN),
    ],
)
def test_classify(catalog: GpuCatalog, name: str, vendor: str, kind: GpuKind) -> None:
    found = catalog.classify(name)
    assert found is not None
    assert (found.name, found.vendor, found.kind) == (name, vendor, kind)
    assert found.counts_gpus is (kind in (GpuKind.DEVICE, GpuKind.SHARED, GpuKind.MIG))


@pytest.mark.parametrize(
    "name",
    [
        "cpu",
        "memory",
        "ephemeral-storage",
        "hugepages-2Mi",
        "example.com/fpga",
        "rdma/hca_shared_devices_a",
        "nvidia.com",
    ],
)
def test_not_gpu_resources(catalog: GpuCatalog, name: str) -> None:
    assert catalog.classify(name) is None


def test_catalog_comes_from_the_policy() -> None:
    catalog = GpuCatalog(
        {"vendors": [{"name": "acme", "domains": ["acme.ai"], "deviceResources": ["acme.ai/npu"]}]}
    )
    npu = catalog.classify("acme.ai/npu")
    assert npu is not None and (npu.vendor, npu.kind) == ("acme", GpuKind.DEVICE)
    typo = catalog.classify("acme.ai/npus")
    assert typo is not None and typo.kind is GpuKind.UNKNOWN
    assert catalog.classify("nvidia.com/gpu") is None


def container(resources: dict[str, Any], role: str = "container", name: str = "main") -> Container:
    return Container({"name": name, "image": "x", "resources": resources}, ("spec", "containers", 0), role)


def test_container_demands_and_amounts(catalog: GpuCatalog) -> None:
    item = container(
        {
            "requests": {"cpu": "4", "nvidia.com/gpu": "2"},
            "limits": {"memory": "16Gi", "nvidia.com/gpu": 2, "nvidia.com/gpumem": 3000},
        }
    )
    demands = {d.resource.name: d for d in catalog.container_demands(item)}
    assert set(demands) == {"nvidia.com/gpu", "nvidia.com/gpumem"}
    gpu = demands["nvidia.com/gpu"]
    assert (gpu.request, gpu.limit, gpu.amount, gpu.section) == ("2", 2, Decimal(2), "limits")
    assert catalog.container_gpu_count(item) == 2  # gpumem is not a GPU count


def test_request_only_demand_uses_the_request(catalog: GpuCatalog) -> None:
    (demand,) = catalog.container_demands(container({"requests": {"amd.com/gpu": 1}}))
    assert (demand.amount, demand.section, demand.limit) == (Decimal(1), "requests", None)


def test_invalid_amount_is_none(catalog: GpuCatalog) -> None:
    (demand,) = catalog.container_demands(container({"limits": {"nvidia.com/gpu": "one"}}))
    assert demand.amount is None
    assert catalog.container_gpu_count(container({"limits": {"nvidia.com/gpu": "one"}})) == 0


def pod(spec: dict[str, Any], annotations: dict[str, str] | None = None) -> PodTemplate:
    metadata = {"annotations": annotations} if annotations else {}
    return PodTemplate(spec, ("spec", "template", "spec"), metadata=metadata)


def test_uses_gpus_and_gpu_containers(catalog: GpuCatalog) -> None:
    template = pod(
        {
            "containers": [
                {"name": "server", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}},
                {"name": "sidecar", "resources": {"limits": {"nvidia.com/gpu": 0}}},
                {"name": "hami", "resources": {"limits": {"nvidia.com/gpumem": 1000}}},
            ]
        }
    )
    assert catalog.uses_gpus(template)
    assert [c.name for c in catalog.gpu_containers(template)] == ["server"]
    assert [d.resource.name for d in catalog.counted_demands(template)] == [
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/gpu",
    ]
    first = catalog.template_demands(template)
    memo = [value for value in template.cache.values() if isinstance(value, list)]
    assert len(memo) == 1 and len(memo[0]) == 3  # memoised on the template
    template.containers.clear()  # a recomputation would now find nothing
    assert len(catalog.template_demands(template)) == 3
    first.clear()  # callers get a copy: the memo cannot be changed from outside
    assert len(catalog.template_demands(template)) == 3


def test_zero_gpus_is_not_a_gpu_pod(catalog: GpuCatalog) -> None:
    assert not catalog.uses_gpus(
        pod({"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 0}}}]})
    )
    assert not catalog.uses_gpus(pod({"containers": [{"name": "a", "image": "busybox"}]}))


def test_kai_gpu_fraction_annotation_uses_gpus(catalog: GpuCatalog) -> None:
    template = pod({"containers": [{"name": "a"}]}, {"gpu-fraction": "0.5"})
    assert catalog.uses_gpu_fraction(template)
    assert catalog.uses_gpus(template)
    assert catalog.gpu_containers(template) == []  # no device-plugin count
    assert not catalog.uses_gpus(pod({"containers": [{"name": "a"}]}, {"prometheus.io/scrape": "true"}))


@pytest.mark.parametrize(
    ("claim", "is_gpu"),
    [
        ({"name": "gpu", "resourceClaimTemplateName": "single"}, True),
        ({"name": "accel", "resourceClaimTemplateName": "h100-mig-slice"}, True),
        ({"name": "devices", "resourceClaimName": "shared-gpu-claim"}, True),
        ({"name": "x", "source": {"resourceClaimTemplateName": "gpu-template"}}, True),  # v1alpha2 form
        ({"name": "nic", "resourceClaimTemplateName": "rdma-nic"}, False),
        ({"name": "gpus", "resourceClaimTemplateName": "eight-h100"}, True),
        ({"name": "slice", "resourceClaimTemplateName": "mig-1g.10gb"}, True),
        ({"name": "d", "resourceClaimTemplateName": "GPU0"}, True),
        # words, not substrings: a chart rendered as gpupolicy-lint, a migrator's claim
        ({"name": "channel", "resourceClaimTemplateName": "gpupolicy-lint-compute-domain-channel"}, False),
        ({"name": "scratch", "resourceClaimTemplateName": "image-migrator-scratch"}, False),
    ],
)
def test_dra_gpu_claims(claim: dict[str, Any], is_gpu: bool) -> None:
    template = pod({"resourceClaims": [claim], "containers": [{"name": "a"}]})
    assert (dra_gpu_claims(template) == [(0, claim)]) is is_gpu


def test_dra_claim_makes_a_gpu_pod(catalog: GpuCatalog) -> None:
    template = pod(
        {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}], "containers": []}
    )
    assert catalog.uses_gpus(template)
    assert not catalog.uses_gpus(pod({"resourceClaims": "not-a-list", "containers": []}))


DRA_SERVER = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: decode-devices
spec:
  spec:
    devices:
      requests:
        - name: accelerators
          exactly:
            deviceClassName: {device_class}
            count: 1
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: decode
spec:
  replicas: 3
  selector: {{matchLabels: {{app: decode}}}}
  template:
    metadata: {{labels: {{app: decode}}}}
    spec:
      resourceClaims:
        - name: decode-claim
          resourceClaimTemplateName: decode-devices
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.10.0
          command: [vllm, serve, Qwen/Qwen3-8B]
          ports: [{{containerPort: 8000}}]
          resources:
            claims: [{{name: decode-claim}}]
"""


@pytest.mark.parametrize(
    ("device_class", "gpu_rules"),
    [
        # llm-d's XPU guide: a claim named for its role, of Intel's GPU class.
        ("gpu.intel.com", {"GP401", "GP501", "GP208", "GP901"}),
        ("gpu.nvidia.com", {"GP401", "GP501", "GP208", "GP901"}),
        ("rdma.example.com", set()),  # a NIC: no GPU, so no GPU server rules
    ],
)
def test_a_claim_of_a_repository_template_of_a_gpu_class_makes_a_gpu_workload_for_every_rule(
    device_class: str, gpu_rules: set[str]
) -> None:
    """Whatever the claim is called, the device class of the ResourceClaimTemplate it names
    decides whether the pod has GPUs: the probe, disruption, spread and rollback rules see the
    GPU server GP105 already saw."""
    report = lint(DRA_SERVER.format(device_class=device_class))
    fired = {finding.rule_id for finding in report.findings}
    assert fired & {"GP401", "GP501", "GP208", "GP901"} == gpu_rules


DRA_JOB_WITH_SIDECAR = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: dra-train
spec:
  template:
    {annotations}
    spec:
      restartPolicy: Never
      resourceClaims:
        - name: gpu
          resourceClaimTemplateName: single-gpu
      containers:
        - name: trainer
          image: ghcr.io/x/train:1.0
          command: [python, train.py]
          resources:
            claims: {claims}
        - name: log-shipper
          image: fluent/fluent-bit:3.2.2
"""


@pytest.mark.parametrize(
    ("annotations", "claims", "judged"),
    [
        # Kubernetes gives the claimed devices to the containers that name the claim.
        ("", "[{name: gpu}]", {"trainer"}),
        # No container names it: which gets the GPU is not written, so every main container may.
        ("", "[]", {"trainer", "log-shipper"}),
        # KServe's managed DRA routes the claim to the container its annotation names.
        ("metadata: {annotations: {serving.kserve.io/exp-dra-container-name: log-shipper}}", "[]", {"log-shipper"}),
    ],
)  # fmt: skip
def test_the_gpu_containers_of_a_dra_pod_are_those_the_claim_goes_to(
    annotations: str, claims: str, judged: set[str]
) -> None:
    text = DRA_JOB_WITH_SIDECAR.format(annotations=annotations, claims=claims)
    report = lint(text)
    assert {f.container for f in report.findings if f.rule_id == "GP106"} == judged


@pytest.mark.parametrize(
    ("limits", "uses", "counted"),
    [
        ({"volcano.sh/gpu-number": 1}, True, Decimal(1)),
        ({"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 3000, "volcano.sh/vgpu-cores": 50}, True, Decimal(2)),
        # Volcano's gpu-share: a share of one GPU by its memory, in MiB: a GPU pod that counts none.
        ({"volcano.sh/gpu-memory": 1024}, True, Decimal(0)),
        ({"volcano.sh/gpu-memory": 0}, False, Decimal(0)),
        # Koordinator's DeviceShare: half of one GPU's cores and memory; its overcommit CPU is no GPU's.
        ({"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50}, True, Decimal(0)),
        ({"koordinator.sh/gpu-memory": 4294967296, "koordinator.sh/gpu-core": 10}, True, Decimal(0)),
        ({"koordinator.sh/batch-cpu": 4000, "koordinator.sh/batch-memory": "8Gi"}, False, Decimal(0)),
    ],
)  # fmt: skip
def test_gpu_sharing_schedulers_resources(
    catalog: GpuCatalog, limits: dict[str, int], uses: bool, counted: Decimal
) -> None:
    template = pod({"containers": [{"name": "cuda", "resources": {"limits": limits}}]})
    assert catalog.uses_gpus(template) is uses
    assert catalog.container_gpu_count(template.containers[0]) == counted
    assert bool(catalog.fraction_containers(template)) is (uses and counted == 0)


@pytest.mark.parametrize(
    ("image", "fires"),
    [
        # Hugging Face's TGI for Xeon (OPEA's default TGI image), and a CPU tag of any serving image.
        ("ghcr.io/huggingface/text-generation-inference:2.4.0-intel-cpu", False),
        ("ghcr.io/huggingface/text-generation-inference:latest-intel-cpu", False),
        ("${REGISTRY}/huggingface/text-generation-inference:cpu-3.0", False),
        ("lmsysorg/sglang:v0.4.9-cpu", False),
        # `cpu` as part of another word is no CPU build; a ROCm or XPU build is still a GPU's.
        ("ghcr.io/huggingface/text-generation-inference:2.4.0-cpuset", True),
        ("ghcr.io/huggingface/text-generation-inference:2.4.0-rocm", True),
        ("ghcr.io/huggingface/text-generation-inference:2.4.0-intel-xpu", True),
        ("ghcr.io/huggingface/text-generation-inference:2.4.0", True),
    ],
)
def test_gp105_takes_a_cpu_build_of_a_serving_image_for_a_cpu_image(image: str, fires: bool) -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - "
        + json.dumps({"name": "tgi", "image": image})
        + "\n"
    )
    assert any(f.rule_id == "GP105" for f in lint(text).findings) is fires


@pytest.mark.parametrize(
    ("image", "command", "fires"),
    [
        ("vllm/vllm-openai:v0.9.0", None, True),  # the image's entrypoint serves
        ("vllm/vllm-openai:v0.9.0", ["vllm", "serve", "x/y"], True),
        ("lmsysorg/sglang:v0.4.9", ["python3", "-m", "sglang.launch_server", "--model-path", "x/y"], True),
        # SGLang's prefill/decode router and vLLM's benchmark client run on a CPU.
        (
            "lmsysorg/sglang:v0.4.9",
            ["python3", "-m", "sglang_router.launch_router", "--worker-urls", "h"],
            False,
        ),
        ("vllm/vllm-openai:v0.9.0", ["vllm", "bench", "serve", "--base-url", "http://a:8000"], False),
        # A CUDA base image runs the program it was built for: a GPU program.
        ("nvidia/cuda:12.4.1-devel-ubuntu22.04", ["python", "train.py"], True),
    ],
)
def test_gp105_judges_a_serving_image_by_the_program_its_command_runs(
    image: str, command: list[str] | None, fires: bool
) -> None:
    container = {"name": "c", "image": image, **({"command": command} if command else {})}
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - "
        + json.dumps(container)
        + "\n"
    )
    report = lint(text)
    assert any(f.rule_id == "GP105" for f in report.findings) is fires


@pytest.mark.parametrize(
    ("limits", "fires"),
    [
        ("{nvidia.com/gpu: 1}", True),  # two whole GPUs, one idle
        # HAMi: a slice of a card each (nvidia.com/gpu counts vGPUs; gpumem sizes the slice).
        ("{nvidia.com/gpu: 1, nvidia.com/gpumem: 3000}", False),
        ("{metax-tech.com/sgpu: 1, metax-tech.com/vcore: 30, metax-tech.com/vmemory: 4}", False),
    ],
)
def test_gp111_leaves_containers_that_each_ask_for_a_slice(limits: str, fires: bool) -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        f"    - {{name: a, image: 'x:1', resources: {{limits: {limits}}}}}\n"
        f"    - {{name: b, image: 'x:1', resources: {{limits: {limits}}}}}\n"
    )
    report = lint(text)
    assert any(f.rule_id == "GP111" for f in report.findings) is fires


def test_gp104_says_the_zero_hides_no_gpu_and_is_quiet_where_they_are_hidden() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "    - {name: c, image: 'ollama/ollama:0.32.4', resources: {limits: {nvidia.com/gpu: 0}}ENV}\n"
    )
    report = lint(text.replace("ENV", ""))
    (message,) = [f.message for f in report.findings if f.rule_id == "GP104"]
    assert "the zero hides none" in message
    hidden = text.replace("ENV", ", env: [{name: NVIDIA_VISIBLE_DEVICES, value: void}]")
    report = lint(hidden)
    assert not [f for f in report.findings if f.rule_id == "GP104"]


@pytest.mark.parametrize(
    "limits", [{"k8s.amazonaws.com/vgpu": 1}, {"aliyun.com/gpu-mem": 4}, {"tencent.com/vcuda-core": 50}]
)
def test_other_gpu_sharing_plugins_resources_make_gpu_pods(
    catalog: GpuCatalog, limits: dict[str, int]
) -> None:
    """AWS's virtual GPU plugin, Alibaba's gpushare and Tencent's GPU manager: a share of a GPU,
    no whole GPU counted (GP105 said such a Triton pod requested no GPU)."""
    template = pod({"containers": [{"name": "triton", "resources": {"limits": limits}}]})
    assert catalog.uses_gpus(template)
    assert catalog.container_gpu_count(template.containers[0]) == 0


def test_gp105_does_not_say_no_gpu_beside_an_unknown_gpu_resource() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "    - {name: t, image: 'nvcr.io/nvidia/tritonserver:24.05-py3', resources: {limits: {LIMIT}}}\n"
    )
    unknown = lint(text.replace("LIMIT", "example.com/gpu-slice: 1"))
    assert not [f for f in unknown.findings if f.rule_id == "GP105"]
    cpu = lint(text.replace("LIMIT", "cpu: 1"))
    assert [f.rule_id for f in cpu.findings if f.rule_id == "GP105"] == ["GP105"]


def test_a_gpu_only_in_an_init_container_is_gp112s_alone() -> None:
    """aws-do-eks' Stable Diffusion downloads its model in an init container that asks for the GPU:
    GP112 says so; GP106 does not also ask to size it, and the server is not called a GPU container."""
    text = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: sd}
spec:
  selector: {matchLabels: {app: sd}}
  template:
    metadata: {labels: {app: sd}}
    spec:
      initContainers:
        - {name: download, image: 'x:1', resources: {limits: {nvidia.com/gpu: 1}}}
      containers:
        - {name: server, image: 'x:1', ports: [{containerPort: 8080}], resources: {}}
"""
    findings = lint(text).findings
    assert [(f.rule_id, f.container) for f in findings if f.rule_id in ("GP106", "GP107", "GP112")] == [
        ("GP112", "download")
    ]
    for finding in findings:
        assert "GPU container 'server'" not in finding.message, finding.message


@pytest.mark.parametrize(
    ("name", "gpu"),
    [("nvidia.com/GH100_H100_PCIE", True), ("nvidia.com/GRID_T4-1Q", True), ("nvidia.com/hostdev", False),
     ("nvidia.com/rdma_shared_device_a", False), ("example.com/gpu-slice", True)],
)  # fmt: skip
def test_a_gpu_passed_through_by_its_pci_name_names_a_gpu(name: str, gpu: bool) -> None:
    """NVIDIA's sandbox device plugin (Kata) and KubeVirt ask for GPUs by PCI product or GRID profile:
    GP105 said a pod asking nvidia.com/GP102GL_Tesla_P40 requests no GPU."""
    container = Container(
        {"name": "c", "image": "x", "resources": {"limits": {name: 1}}}, ("spec",), "container"
    )
    template = PodTemplate({"containers": [container.spec]}, ("spec",), containers=[container])
    assert names_gpu_resource(template) is gpu
