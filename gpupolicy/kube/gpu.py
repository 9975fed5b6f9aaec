"""GPU detection, in one place: which resource names are GPUs, of which vendor and kind.

Device-plugin resources (https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/), NVIDIA
MIG names under the mixed strategy and renamed time-slicing/MPS resources
(https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-sharing.html), and
Dynamic Resource Allocation claims (https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/).
The names come from the policy (`gpu.vendors`), so a cluster with other vendors can add its own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import field
from decimal import Decimal
from typing import Any

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.core.identity_enum import IdentityEnum
from gpupolicy.core.immutable import immutable
from gpupolicy.core.linear_regex import LinearPattern, compile_linear
from gpupolicy.kube.inventory import Inventory
from gpupolicy.kube.pod_spec import Container, PodTemplate, as_list, as_mapping
from gpupolicy.kube.quantities import quantity_or_none


class GpuKind(IdentityEnum):
    DEVICE = "device"  # a whole GPU (nvidia.com/gpu, amd.com/gpu)
    SHARED = "shared"  # a time-sliced or MPS replica (nvidia.com/gpu.shared)
    MIG = "mig"  # a MIG slice under the mixed strategy (nvidia.com/mig-1g.10gb)
    ATTRIBUTE = "attribute"  # a known vendor resource that is not a GPU count (HAMi gpumem, Intel millicores)
    # A share of one GPU asked by its memory or cores, with no count beside it (Volcano's
    # volcano.sh/gpu-memory): the pod uses a GPU, and counts none.
    FRACTION = "fraction"
    UNKNOWN = "unknown"  # under a vendor domain, but not a name the policy knows


# Kinds whose amount is a count of GPUs (a module constant: rules ask per demand, and each
# `GpuKind.X` is an attribute lookup on the enum class).
_COUNTED_KINDS = (GpuKind.DEVICE, GpuKind.SHARED, GpuKind.MIG)


@immutable
class GpuResource:
    name: str
    vendor: str
    kind: GpuKind

    @property
    def counts_gpus(self) -> bool:
        return self.kind in _COUNTED_KINDS


@immutable
class GpuDemand:
    """One GPU resource named by one container: the amount Kubernetes will allocate."""

    container: Container
    resource: GpuResource
    request: Any  # raw values as written; None when absent
    limit: Any
    # `amount`, parsed on first use (rules read it often); not part of the demand's identity.
    _amount: list[Decimal | None] = field(default_factory=list, compare=False, repr=False)

    @property
    def amount(self) -> Decimal | None:
        """Extended resources: the limit is the allocation; a request alone is invalid."""
        memo = self._amount
        if memo:
            return memo[0]
        raw = self.limit if self.limit is not None else self.request
        amount = quantity_or_none(raw)
        memo.append(amount)
        return amount

    @property
    def section(self) -> str:
        return "limits" if self.limit is not None else "requests"


# What `GpuCatalog.classify` remembers, per catalogue: a cluster's resource names fit many times.
CLASSIFY_CACHE_BYTES = 1 << 20
_UNSEEN: Any = object()


class GpuCatalog:
    """Built once per policy from its `gpu` section."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._exact: dict[str, GpuResource] = {}
        self._patterns: list[tuple[LinearPattern, GpuResource]] = []
        self._domains: dict[str, str] = {}
        vendors = [as_mapping(vendor) for vendor in as_list(config.get("vendors"))]
        for vendor in vendors:
            self._add_vendor(vendor)
        # (vendor name, ((domain, ".domain"), ...)) of each GPU maker: a label's vendor is found by
        # domain. A sharing scheduler or plugin (`sharing: true`: Volcano, AWS's virtual GPUs) runs on
        # another maker's GPUs, and the labels of its domain say nothing of the hardware
        # (k8s.amazonaws.com/accelerator is Cluster Autoscaler's label of NVIDIA nodes).
        self.vendor_domains: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = tuple(
            (
                str(vendor.get("name")),
                tuple((str(known), f".{known}") for known in as_list(vendor.get("domains"))),
            )
            for vendor in vendors
            if vendor.get("sharing") is not True
        )
        # Each vendor's first device resource (what a node of the vendor advertises), by vendor name.
        self.device_resource_of: dict[str, str] = {
            str(vendor["name"]): str(as_list(vendor.get("deviceResources"))[0])
            for vendor in vendors
            if vendor.get("name") and as_list(vendor.get("deviceResources"))
        }
        self._serving_images = tuple(str(item) for item in as_list(config.get("servingImages")))
        # In the policy's order (a cluster snapshot writes them back), and as a set to look up.
        self.dra_device_class_names = tuple(str(item) for item in as_list(config.get("draDeviceClasses")))
        self.dra_device_classes = frozenset(self.dra_device_class_names)
        self.fraction_annotations = frozenset(
            str(item) for item in as_list(config.get("fractionAnnotations"))
        )
        # Resource names come from the objects (any string an API client sends): bounded in bytes.
        self._classified: BoundedCache[str, GpuResource | None] = BoundedCache(max_bytes=CLASSIFY_CACHE_BYTES)
        self._cache_key = f"gpu:{id(self)}"
        self._count_key = self._cache_key + ":count"
        self._uses_key = self._cache_key + ":uses"
        self._counted_key = self._cache_key + ":counted"
        self._containers_key = self._cache_key + ":containers"
        self._pod_totals_key = self._cache_key + ":pod-totals"

    def _add_vendor(self, vendor: Mapping[str, Any]) -> None:
        name = str(vendor.get("name", ""))
        for domain in as_list(vendor.get("domains")):
            self._domains[str(domain)] = name
        for key, kind in (
            ("deviceResources", GpuKind.DEVICE),
            ("sharedResources", GpuKind.SHARED),
            ("otherResources", GpuKind.ATTRIBUTE),
            ("fractionResources", GpuKind.FRACTION),
        ):
            for resource in as_list(vendor.get(key)):
                self._exact[str(resource)] = GpuResource(str(resource), name, kind)
        for pattern in as_list(vendor.get("migResourcePatterns")):
            # RE2: resource names come from objects, the patterns from the policy (linear_regex.py)
            self._patterns.append((compile_linear(str(pattern)), GpuResource("", name, GpuKind.MIG)))

    @property
    def known_resource_names(self) -> list[str]:
        """Every resource name a vendor advertises, in the policy's order (for "did you mean")."""
        return list(self._exact)

    @functools.cached_property
    def serving_images(self) -> tuple[LinearPattern, ...]:
        """gpu.servingImages, compiled on first use (RE2, since the image comes from the object:
        `(?!.*-sdk)` in Python's re took 26 s on a 1.5 MB image; gpupolicy/core/linear_regex.py)."""
        return tuple(compile_linear(item) for item in self._serving_images)

    def classify(self, resource_name: str) -> GpuResource | None:
        """The GPU meaning of a resource name, or None for cpu, memory and other vendors' resources."""
        known = self._classified.get(resource_name, _UNSEEN)
        if known is not _UNSEEN:
            return known  # type: ignore[no-any-return]
        found = self._exact.get(resource_name)
        if found is None:
            for pattern, template in self._patterns:
                if pattern.match(resource_name):
                    found = GpuResource(resource_name, template.vendor, GpuKind.MIG)
                    break
        if found is None and "/" in resource_name:
            vendor = self._domains.get(resource_name.split("/", 1)[0])
            if vendor is not None:
                found = GpuResource(resource_name, vendor, GpuKind.UNKNOWN)
        return self._classified.put(resource_name, found)

    def container_demands(self, container: Container) -> list[GpuDemand]:
        """GPU-vendor resources a container names (memoised on the container, per catalogue)."""
        key = self._cache_key
        cached: list[GpuDemand] | None = container.cache.get(key)
        if cached is None:
            requests, limits = container.requests, container.limits
            cached = []
            for name in dict.fromkeys([*limits, *requests]):
                resource = self.classify(str(name))
                if resource is not None:
                    cached.append(GpuDemand(container, resource, requests.get(name), limits.get(name)))
            container.cache[key] = cached
        return cached

    def template_demands(self, template: PodTemplate) -> list[GpuDemand]:
        """Every GPU-vendor resource named by any container of the template (memoised on it)."""
        key = self._cache_key
        cached = template.cache.get(key)
        if cached is None:
            cached = [
                demand for container in template.containers for demand in self.container_demands(container)
            ]
            template.cache[key] = cached
        return list(cached)

    def counted_demands(self, template: PodTemplate) -> list[GpuDemand]:
        """The demands that count GPUs (memoised on the template; each caller gets its own list)."""
        key = self._counted_key
        cached: tuple[GpuDemand, ...] | None = template.cache.get(key)
        if cached is None:
            cached = tuple(
                demand for demand in self.template_demands(template) if demand.resource.counts_gpus
            )
            template.cache[key] = cached
        return list(cached)

    def container_gpu_count(self, container: Container) -> Decimal:
        key = self._count_key
        total: Decimal | None = container.cache.get(key)
        if total is None:
            total = Decimal(0)
            for demand in self.container_demands(container):
                if demand.resource.counts_gpus and (amount := demand.amount) is not None and amount > 0:
                    total += amount
            container.cache[key] = total
        return total

    def pod_totals(self, template: PodTemplate) -> dict[str, Decimal]:
        """GPUs per resource name for one pod: main containers add up, init containers take the
        max (they run one at a time), as the scheduler computes a pod's effective request.
        Summed once per template (GP108 and GP205 both read it); each caller gets its own dict."""
        totals: dict[str, Decimal] | None = template.cache.get(self._pod_totals_key)
        if totals is None:
            main: dict[str, Decimal] = {}
            init: dict[str, Decimal] = {}
            for demand in self.counted_demands(template):
                amount = demand.amount
                if amount is None or amount <= 0:
                    continue
                name = demand.resource.name
                if demand.container.role == "init":
                    init[name] = max(init.get(name, Decimal(0)), amount)
                elif demand.container.role in ("container", "sidecar"):
                    main[name] = main.get(name, Decimal(0)) + amount
            totals = {
                name: max(main.get(name, Decimal(0)), init.get(name, Decimal(0))) for name in {*main, *init}
            }
            template.cache[self._pod_totals_key] = totals
        return dict(totals)

    def uses_gpus(self, template: PodTemplate) -> bool:
        """Device-plugin GPUs (any positive amount), a DRA claim on a GPU device class, or a
        fraction of a GPU asked of a sharing scheduler by annotation."""
        key = self._uses_key
        uses: bool | None = template.cache.get(key)
        if uses is None:
            uses = (
                any((demand.amount or 0) > 0 for demand in self.counted_demands(template))
                or bool(self.fraction_containers(template))
                or bool(dra_gpu_claims(template))
                or self.uses_gpu_fraction(template)
                or self._dra_class_annotated(template)
            )
            template.cache[key] = uses
        return uses

    def _dra_class_annotated(self, template: PodTemplate) -> bool:
        """KServe's LLMInferenceService asks its controller for DRA claims by annotation
        (`serving.kserve.io/exp-dra-device-class: gpu.nvidia.com`)."""
        return any(
            key.endswith("dra-device-class") and value in self.dra_device_classes
            for key, value in template.annotations.items()
        )

    def fraction_containers(self, template: PodTemplate) -> list[Container]:
        """Containers asking a sharing scheduler for a share of a GPU by a fraction resource."""
        return [
            container
            for container in template.main_containers()
            if any(
                demand.resource.kind is GpuKind.FRACTION and (demand.amount or 0) > 0
                for demand in self.container_demands(container)
            )
        ]

    def uses_gpu_fraction(self, template: PodTemplate) -> bool:
        return any(key in self.fraction_annotations for key in template.annotations)

    def gpu_containers(self, template: PodTemplate) -> list[Container]:
        """Containers with GPUs (memoised on the template; each caller gets its own list)."""
        key = self._containers_key
        cached: tuple[Container, ...] | None = template.cache.get(key)
        if cached is None:
            cached = tuple(
                container for container in template.containers if self.container_gpu_count(container) > 0
            )
            template.cache[key] = cached
        return list(cached)


# A word of a claim's names that says it holds GPUs: `gpu`, `gpus`, `gpu0`, `mig`, `mig-1g`,
# `accelerator`. Words, not substrings: a chart's release name (gpupolicy renders charts as
# `gpupolicy-lint`) or `image-migrator` says nothing about the devices.
_GPU_CLAIM_WORD = re.compile(r"(?:^|[^a-z0-9])(?:gpus?[0-9]*|mig|accelerators?)(?:$|[^a-z])", re.IGNORECASE)


def dra_gpu_claims(template: PodTemplate) -> list[tuple[int, dict[str, Any]]]:
    """Pod-level `resourceClaims` that look like GPU claims.

    Without the ResourceClaimTemplate at hand, the claim's own name or its template's name is the
    only hint; cross-object rules refine this with the inventory's device classes.
    """
    claims = []
    # NVIDIA's NIMService names its claims `draResources` (the operator writes the pod's resourceClaims).
    listed = template.spec.get("resourceClaims") or template.spec.get("draResources")
    for index, claim in enumerate(as_list(listed)):
        claim = as_mapping(claim)
        names = " ".join(
            str(claim.get(key, "")) for key in ("name", "resourceClaimName", "resourceClaimTemplateName")
        )
        source = as_mapping(claim.get("source"))  # v1alpha2-era form
        names += " " + " ".join(str(value) for value in source.values())
        if _GPU_CLAIM_WORD.search(names):
            claims.append((index, claim))
    return claims


def requested_device_classes(claim: Any) -> set[str]:
    """The device classes a ResourceClaim (`spec.devices`) or a ResourceClaimTemplate
    (`spec.spec.devices`) requests: each request's `exactly` (resource.k8s.io/v1), the request
    itself (v1beta1), and every `firstAvailable` alternative."""
    obj = as_mapping(claim)
    spec = as_mapping(obj.get("spec"))
    if obj.get("kind") == "ResourceClaimTemplate":
        spec = as_mapping(spec.get("spec"))
    found: set[str] = set()
    for request in as_list(as_mapping(spec.get("devices")).get("requests")):
        request = as_mapping(request)
        alternatives = [request, as_mapping(request.get("exactly"))]
        alternatives.extend(as_mapping(item) for item in as_list(request.get("firstAvailable")))
        for choice in alternatives:
            named = choice.get("deviceClassName")
            if isinstance(named, str):
                found.add(named)
    return found


def claimed_whole_gpus(claim: Any, gpu_classes: frozenset[str]) -> int:
    """The whole GPUs a ResourceClaim (`spec.devices`) or ResourceClaimTemplate (`spec.spec.devices`)
    asks for: each request of a GPU device class, `exactly` (resource.k8s.io/v1) or the request
    itself (v1beta1), counts its `count` (1 when unsaid: allocationMode ExactCount). A MIG class's
    devices are slices of one GPU, and a request for all of a class's devices (`allocationMode:
    All`) or for one of several alternatives (`firstAvailable`) states no count: none of those
    counts. https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/"""
    obj = as_mapping(claim)
    spec = as_mapping(obj.get("spec"))
    if obj.get("kind") == "ResourceClaimTemplate":
        spec = as_mapping(spec.get("spec"))
    total = 0
    for request in as_list(as_mapping(spec.get("devices")).get("requests")):
        request = as_mapping(request)
        exact = as_mapping(request.get("exactly")) or request
        named = exact.get("deviceClassName")
        if named not in gpu_classes or str(named).startswith("mig.") or exact.get("allocationMode") == "All":
            continue
        count = exact.get("count", 1)
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            total += count
    return total


def repository_claim_classes(entry: Any, namespace: str | None, inventory: Inventory) -> set[str] | None:
    """The device classes a pod's `resourceClaims` entry asks for, read from the ResourceClaim or
    ResourceClaimTemplate it names when the repository (or the cluster's inventory) holds it; None
    when it does not."""
    entry = as_mapping(entry)
    for key, kind in (
        ("resourceClaimTemplateName", "ResourceClaimTemplate"),
        ("resourceClaimName", "ResourceClaim"),
    ):
        name = entry.get(key)
        if isinstance(name, str):
            found = inventory.get(kind, name, namespace)
            if found is not None:
                return requested_device_classes(found.obj)
            if kind == "ResourceClaimTemplate" and _compute_domain_channel(name, namespace, inventory):
                return {COMPUTE_DOMAIN_CHANNEL_CLASS}
            return None
    return None


# NVIDIA's ComputeDomain (resource.nvidia.com) makes the ResourceClaimTemplate its
# `spec.channel.resourceClaimTemplate.name` names, in its namespace: each pod's claim of the IMEX
# channel of a multi-node NVLink domain, in this device class, never a GPU.
# https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/dra-cds.html
COMPUTE_DOMAIN_CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"


def _compute_domain_channel(template_name: str, namespace: str | None, inventory: Inventory) -> bool:
    for domain in inventory.list("ComputeDomain", namespace):
        channel = as_mapping(as_mapping(domain.obj).get("spec")).get("channel")
        if as_mapping(as_mapping(channel).get("resourceClaimTemplate")).get("name") == template_name:
            return True
    return False


def claims_gpus_in_repository(
    template: PodTemplate, namespace: str | None, inventory: Inventory, gpu_classes: frozenset[str]
) -> bool:
    """Whether one of the template's DRA claims names a ResourceClaim or ResourceClaimTemplate of
    the repository that asks for a GPU device class, whatever the claim is called (`uses_gpus`
    sees only claims named for GPUs, `gpu`, `mig`; NVIDIA's DRA quickstart names its `a100`)."""
    return any(
        not gpu_classes.isdisjoint(repository_claim_classes(entry, namespace, inventory) or ())
        for entry in as_list(template.spec.get("resourceClaims"))
    )


# Values of NVIDIA_VISIBLE_DEVICES that give the container no GPU at all (the toolkit then behaves
# like runc, or mounts only driver libraries): they narrow access, as the GPU operator's own driver
# pods use them. https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NO_GPU_VALUES = frozenset({"void", "none", ""})


def hides_every_gpu(value: object) -> bool:
    """Whether an NVIDIA_VISIBLE_DEVICES value gives the container no GPU."""
    return isinstance(value, str) and value.strip().lower() in NO_GPU_VALUES


def names_gpu_resource(template: PodTemplate) -> bool:
    """Whether a container asks for an extended resource whose name says it is a GPU or a share of
    one, known to the policy or not (another sharing plugin's `…/gpu-slice`, `…/vcuda-core`), or a
    GPU passed through by its PCI product name (`nvidia.com/GH100_H100_PCIE`, `nvidia.com/GRID_T4-1Q`:
    NVIDIA's sandbox device plugin for Kata and KubeVirt; the stack's other resources, such as
    `nvidia.com/hostdev`, are lowercase)."""
    return any(
        _names_a_gpu(str(name))
        for container in template.containers
        for name in (*container.limits, *container.requests)
    )


def _names_a_gpu(name: str) -> bool:
    domain, slash, resource = name.rpartition("/")
    if not slash:
        return False
    if any(word in resource.lower() for word in ("gpu", "vcuda")):
        return True
    return domain == "nvidia.com" and not resource.islower()
