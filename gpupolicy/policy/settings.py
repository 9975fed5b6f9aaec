"""The policy's sections as frozen, typed settings: one dataclass per section of
`policies/default.yaml` (and of `policies/schemas/sections/`), compiled once from the merged,
validated policy. Rules read attributes (`policy.placement.gpu_taints`), never dotted keys, and
never defend against shapes the schema has ruled out.

The gpu section is `GpuCatalog` (gpupolicy/kube/gpu.py), node pools are `NodePool`s, exemptions
`Exemption`s; a setting a single rule owns is that rule's parameter (gpupolicy/policy/parameters.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.kube import pod_security_levels as levels
from gpupolicy.kube.experiments import MetricVocabulary, vocabulary_for
from gpupolicy.kube.tolerations import Taint


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in value or ())


@immutable
class GpuTaint:
    """An entry of placement.gpuTaints: its value is matched only when an entry of its key gives
    one, and a `vendor` (of the first entry of its key and effect that names one) limits the taint
    to that vendor's GPU nodes."""

    taint: Taint
    value_given: bool
    vendor: str | None

    @staticmethod
    def all_of(entries: Sequence[Mapping[str, Any]]) -> tuple[GpuTaint, ...]:
        def vendor_of(key: Any, effect: Any) -> str | None:
            for entry in entries:
                vendor = entry.get("vendor")
                if entry.get("key") == key and entry.get("effect") == effect and isinstance(vendor, str):
                    return vendor
            return None

        return tuple(
            GpuTaint(
                Taint(str(entry.get("key", "")), str(entry.get("effect", "")), str(entry.get("value", ""))),
                value_given=any(
                    other.get("key") == entry.get("key") and "value" in other for other in entries
                ),
                vendor=vendor_of(entry.get("key"), entry.get("effect")),
            )
            for entry in entries
        )


@immutable
class PlacementSettings:
    # None: the cluster's GPU taints are unknown (placement.gpuTaints: null); (): untainted.
    gpu_taints: tuple[GpuTaint, ...] | None
    extended_resource_toleration: bool
    runtime_class_names: frozenset[str]

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> PlacementSettings:
        raw = section.get("gpuTaints")
        return cls(
            gpu_taints=GpuTaint.all_of(raw) if isinstance(raw, list) else None,
            extended_resource_toleration=section.get("extendedResourceToleration") is True,
            runtime_class_names=frozenset(_strings((section.get("runtimeClass") or {}).get("names"))),
        )


@immutable
class PrioritySettings:
    cluster_classes: frozenset[str]
    global_default: str | None
    kueue_classes: frozenset[str]
    tiers: Mapping[str, tuple[str, ...]]  # workload class -> the PriorityClasses it may use
    high_classes: frozenset[str]
    high_value: int | None
    system_namespaces: tuple[str, ...]

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> PrioritySettings:
        default = section.get("globalDefault")
        high_value = section.get("highValue")
        return cls(
            cluster_classes=frozenset(_strings(section.get("clusterClasses"))),
            global_default=default if isinstance(default, str) and default else None,
            kueue_classes=frozenset(_strings(section.get("kueueClasses"))),
            tiers={str(name): _strings(classes) for name, classes in (section.get("tiers") or {}).items()},
            high_classes=frozenset(_strings(section.get("highClasses"))),
            high_value=high_value if isinstance(high_value, int) else None,
            system_namespaces=_strings(section.get("systemNamespaces")),
        )


@immutable
class ProbeSettings:
    model_load_seconds: int
    controller_managed_kinds: frozenset[str]

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> ProbeSettings:
        return cls(
            model_load_seconds=int(section.get("modelLoadSeconds", 300)),
            controller_managed_kinds=frozenset(_strings(section.get("controllerManagedKinds"))),
        )


@immutable
class WorkloadSettings:
    serving_kinds: tuple[str, ...]
    serving_classes: tuple[str, ...]
    batch_kinds: frozenset[str]
    batch_classes: frozenset[str]

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> WorkloadSettings:
        return cls(
            serving_kinds=_strings(section.get("servingKinds")),
            serving_classes=_strings(section.get("servingClasses")),
            batch_kinds=frozenset(_strings(section.get("batchKinds"))),
            batch_classes=frozenset(_strings(section.get("batchClasses"))),
        )


@immutable
class SuppressionSettings:
    annotations: bool
    comments: bool
    forbidden: tuple[str, ...]  # rule ids or names

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> SuppressionSettings:
        return cls(
            annotations=section.get("annotations", True) is not False,
            comments=section.get("comments", True) is not False,
            forbidden=_strings(section.get("forbidden")),
        )


@immutable
class SecuritySettings:
    level: levels.Level  # the Pod Security Standards level: baseline or restricted
    # The Pod Security checks in force for that level at the policy's kubernetesVersion.
    standard: levels.Standard

    @classmethod
    def of(cls, section: Mapping[str, Any], kubernetes_version: str) -> SecuritySettings:
        level = levels.Level.parse(section.get("level", "baseline"))
        return cls(level=level, standard=levels.standard_for(level, levels.parse_version(kubernetes_version)))


@immutable
class SupplyChainSettings:
    allowed_registries: tuple[str, ...]

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> SupplyChainSettings:
        return cls(allowed_registries=_strings(section.get("allowedRegistries")))


@immutable
class ExperimentSettings:
    metric_words: Mapping[str, str]  # extra metric word -> its category
    vocabulary: MetricVocabulary  # the built-in words and these

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> ExperimentSettings:
        words = {str(word): str(category) for word, category in (section.get("metricWords") or {}).items()}
        return cls(metric_words=words, vocabulary=vocabulary_for(words))


@immutable
class InventorySettings:
    complete_kinds: tuple[str, ...]  # kinds the repository holds in full

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> InventorySettings:
        return cls(complete_kinds=_strings(section.get("completeKinds")))


@immutable
class CustomRuleSettings:
    time_budget_ms: int  # the webhook's budget per custom rule and object (0: none)
    inventory_kinds: tuple[str, ...]  # the kinds `data.inventory` holds (Gatekeeper's syncOnly)

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> CustomRuleSettings:
        budget = section.get("timeBudgetMs", 0)
        return cls(
            time_budget_ms=budget if isinstance(budget, int) else 0,
            inventory_kinds=_strings(section.get("inventoryKinds")),
        )


@immutable
class HelmSettings:
    values_files: tuple[str, ...]
    namespace: str | None = None  # the release namespace (helm template --namespace); None: Helm's
    api_versions: tuple[str, ...] = ()  # helm template --api-versions (the schema's pattern: no option)

    @classmethod
    def of(cls, section: Mapping[str, Any]) -> HelmSettings:
        namespace = section.get("namespace")
        return cls(
            values_files=_strings(section.get("valuesFiles")),
            namespace=namespace if isinstance(namespace, str) and namespace else None,
            api_versions=_strings(section.get("apiVersions")),
        )


# `(dict, Mapping)`: a loaded policy holds dicts, which the tuple's first type answers at once;
# an ABC check alone goes through ABCMeta.__instancecheck__ in Python on every call.
def section_of(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A top-level section of the merged policy (every one is in the shipped default)."""
    found = data.get(name)
    return found if isinstance(found, (dict, Mapping)) else {}
