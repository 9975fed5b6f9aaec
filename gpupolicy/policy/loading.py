"""The policy: the shipped default, merged with a repository's `.gpupolicy.yaml` and `--policy`.

Mappings merge key by key; lists and scalars from a later layer replace earlier ones. Every
layer is validated against `policies/schemas/policy.schema.json`, and an error names the key,
the file and the line.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gpupolicy.core.findings import Severity
from gpupolicy.core.packaged import policies_dir as policies_dir
from gpupolicy.kube.gpu import GpuCatalog
from gpupolicy.loading.documents import DEFAULT_LIMITS, LoadLimits, Resource, parse_text
from gpupolicy.policy.exemptions import parse_exemptions
from gpupolicy.policy.node_labels import LabelRegistry
from gpupolicy.policy.node_pools import NodePool, largest_nodes
from gpupolicy.policy.parameters import (
    DECLARED,
    DEFAULT_RULE_SETTINGS,
    Parameter,
    RuleCatalog,
    RuleSettings,
    compile_rule_settings,
)
from gpupolicy.policy.settings import (
    CustomRuleSettings,
    ExperimentSettings,
    HelmSettings,
    InventorySettings,
    PlacementSettings,
    PrioritySettings,
    ProbeSettings,
    SecuritySettings,
    SupplyChainSettings,
    SuppressionSettings,
    WorkloadSettings,
    section_of,
)
from gpupolicy.policy.validation import PolicyError, check_rule_entries, validate_layer

FACTS_SOURCE = "<cluster facts>"


T = TypeVar("T")


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


class Policy:
    """The merged, validated policy, compiled: each section a frozen, typed settings object, and
    what is derived from the policy alone (node pools, the label registry, exemptions, each rule's
    settings) an attribute. Nothing reads the policy by dotted key."""

    def __init__(
        self,
        data: dict[str, Any],
        *,
        sources: Iterable[str] = (),
        layers: Iterable[Mapping[str, Any]] = (),
        origins: Iterable[tuple[str, Resource | None]] = (),
        catalog: RuleCatalog = DECLARED,
    ) -> None:
        self.data = data
        self.sources = tuple(sources)
        # What each source said, in merge order (the shipped default first): `with_facts` slips
        # learned facts in between the default and the files that override it.
        self.layers = tuple(layers)
        # The file and parsed document of each layer, for the position of a bad `rules` entry.
        self.origins = tuple(origins)
        self.catalog = catalog
        # The rules' settings, compiled for this version of the catalog (see `compile_rules`).
        self._compiled_for = -1
        self._rules: dict[str, RuleSettings] = {}
        self._params: dict[Parameter[Any], Any] = {}
        self.gpu = GpuCatalog(section_of(data, "gpu"))
        self.placement = PlacementSettings.of(section_of(data, "placement"))
        self.priority = PrioritySettings.of(section_of(data, "priority"))
        self.probes = ProbeSettings.of(section_of(data, "probes"))
        self.workloads = WorkloadSettings.of(section_of(data, "workloads"))
        self.suppressions = SuppressionSettings.of(section_of(data, "suppressions"))
        self.kubernetes_version = str(data.get("kubernetesVersion", "1.34"))
        self.security = SecuritySettings.of(section_of(data, "security"), self.kubernetes_version)
        self.supply_chain = SupplyChainSettings.of(section_of(data, "supplyChain"))
        self.experiments = ExperimentSettings.of(section_of(data, "experiments"))
        self.inventory = InventorySettings.of(section_of(data, "inventory"))
        self.helm = HelmSettings.of(section_of(data, "helm"))
        self.custom_rules = CustomRuleSettings.of(section_of(data, "customRules"))
        self.exemptions = parse_exemptions(data.get("exemptions") or ())
        self.node_pools = tuple(NodePool.parse(item) for item in data.get("nodePools") or ())
        self.largest_nodes = largest_nodes(self.node_pools)
        self.exclude = [str(item) for item in data.get("exclude") or ()]
        self.fail_on = Severity.parse(str(data.get("failOn", "error")))
        limits = section_of(data, "limits")
        self.limits = LoadLimits(
            max_alias_expansion=int(limits.get("maxAliasExpansion", DEFAULT_LIMITS.max_alias_expansion)),
            max_depth=int(limits.get("maxDepth", DEFAULT_LIMITS.max_depth)),
        )

    def section(self, name: str) -> Mapping[str, Any]:
        """A section as the policy file wrote it, for a shell that compiles its own (the webhook's)."""
        return section_of(self.data, name)

    @functools.cached_property
    def label_registry(self) -> LabelRegistry:
        """nodeLabels, with the node pools' labels (built on first use: most runs need no registry)."""
        return LabelRegistry(section_of(self.data, "nodeLabels"), pools=self.node_pools)

    def compile_rules(self) -> None:
        """Every rule's settings (enabled, severity, the values of its parameters), from `rules`
        entries that name a rule by id or by name, checked against the rules' declarations: done at
        load once the rules are registered (else on first use, and again if rules are declared
        after it). Raises PolicyError for an unknown rule, or a parameter its rule does not declare
        or of another type."""
        layers = self.layers or (self.data,)
        origins = self.origins or tuple(("<policy>", None) for _ in layers)
        for layer, (file, resource) in zip(layers, origins, strict=False):
            check_rule_entries(layer, resource, file, self.catalog)
        self._rules = compile_rule_settings(layers, self.data, self.catalog)
        # Each declared parameter's value, by its declaration: what `param` reads, per object.
        self._params = {
            parameter: settings.params[parameter.name]
            for declaration in self.catalog
            for parameter in declaration.parameters
            if (settings := self._rules.get(declaration.id)) is not None
        }
        self._compiled_for = self.catalog.version

    def rule(self, rule_id: str) -> RuleSettings:
        if self._compiled_for != self.catalog.version:
            self.compile_rules()
        return self._rules.get(rule_id, DEFAULT_RULE_SETTINGS)

    def param(self, parameter: Parameter[T]) -> T:
        """The value of a rule's parameter in this policy (its default for a rule the catalog lacks)."""
        if self._compiled_for != self.catalog.version:
            self.compile_rules()
        value: T = self._params.get(parameter, parameter.default)
        return value

    @functools.cached_property
    def digest(self) -> str:
        """A stable hash of the effective policy, recorded with findings and provenance."""
        canonical = json.dumps(self.data, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def version(self) -> str:
        return str(section_of(self.data, "metadata").get("version", "unversioned"))

    def with_facts(self, facts: Mapping[str, Any], *, source: str = FACTS_SOURCE) -> Policy:
        """This policy with `facts` (a policy fragment, validated here) merged over the shipped
        default and under every file: what a file says wins, facts fill what the default leaves
        unknown (`nodePools: []`, `placement.gpuTaints: null`) — as if each file extended a snapshot.
        The result keeps this policy's layers (facts given again replace, never accumulate)."""
        validate_layer(dict(facts), None, source)
        if not self.layers:  # built from data alone: facts go under all of it
            merged = deep_merge(facts, self.data)
            return Policy(merged, sources=(source, *self.sources), catalog=self.catalog)
        base, *overrides = self.layers
        merged = deep_merge(base, facts)
        for layer in overrides:
            merged = deep_merge(merged, layer)
        sources = (*self.sources[:1], source, *self.sources[1:])
        return Policy(merged, sources=sources, layers=self.layers, origins=self.origins, catalog=self.catalog)


def _load_layer(text: str, file: str) -> tuple[dict[str, Any], Resource | None]:
    loaded = parse_text(text, file)
    if loaded.problems:
        problem = loaded.problems[0]
        raise PolicyError(f"{file}:{problem.line or 1}:{problem.column or 1}: {problem.message}")
    if not loaded.resources:
        return {}, None
    resource = loaded.resources[0]
    if not isinstance(resource.obj, dict):
        raise PolicyError(f"{file}:1:1: a policy must be a mapping")
    if resource.duplicates:
        duplicate = resource.duplicates[0]
        line, column = resource.position_of(duplicate.place)
        raise PolicyError(f"{file}:{line}:{column}: key {duplicate.key!r} appears twice")
    return resource.obj, resource


MAX_EXTENDS_DEPTH = 8


def load_policy(*, repo_policy: Path | None = None, extra: Iterable[Path] = ()) -> Policy:
    layers: list[Path] = [_shipped_default()]
    if repo_policy is not None:
        layers.append(repo_policy)
    layers.extend(extra)
    data: dict[str, Any] = {}
    sources: list[str] = []
    datas: list[dict[str, Any]] = []
    origins: list[tuple[str, Resource | None]] = []
    for layer in layers:
        data = _merge_layer(data, layer, sources, datas, origins, chain=())
    return _compiled(Policy(data, sources=sources, layers=datas, origins=origins))


def _compiled(policy: Policy) -> Policy:
    """The policy with its rule settings checked now, when the rules are registered (a command
    that runs no rule, such as `gpupolicy results`, loads a policy without them)."""
    if policy.catalog:
        policy.compile_rules()
    return policy


def _merge_layer(
    data: dict[str, Any],
    layer: Path,
    sources: list[str],
    datas: list[dict[str, Any]],
    origins: list[tuple[str, Resource | None]],
    *,
    chain: tuple[Path, ...],
) -> dict[str, Any]:
    """Merge one policy file over `data`, after the files it `extends` (paths relative to it), so a
    repository's `.gpupolicy.yaml` can build on a shared cluster policy."""
    try:
        text = layer.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"{layer}: cannot read policy: {exc}") from exc
    layer_data, resource = _load_layer(text, str(layer))
    if layer != _shipped_default():
        validate_layer(layer_data, resource, str(layer))
    bases = layer_data.pop("extends", [])
    for base in [bases] if isinstance(bases, str) else bases:
        target = (layer.parent / base).resolve()
        if target in chain or target == layer.resolve() or len(chain) >= MAX_EXTENDS_DEPTH:
            position = resource.position(("extends",)) if resource else None
            line, column = position or (1, 1)
            raise PolicyError(
                f"{layer}:{line}:{column}: policy key extends: {base} forms a cycle or nests too deep"
            )
        data = _merge_layer(data, target, sources, datas, origins, chain=(*chain, layer.resolve()))
    sources.append(str(layer))
    datas.append(layer_data)
    origins.append((str(layer), resource))
    return deep_merge(data, layer_data)


def _shipped_default() -> Path:
    """The shipped default policy, which is not validated as it loads: it is part of gpupolicy, and
    the tests hold it valid (tests/test_schema_precheck.py, tests/test_policy.py). Building the
    policy schema's validator is then left to the runs with a policy file of their own."""
    return policies_dir() / "default.yaml"


@functools.cache
def default_policy() -> Policy:
    return load_policy()


def policy_from_mapping(overrides: Mapping[str, Any]) -> Policy:
    """The default policy with `overrides` merged in (tests, the webhook's ConfigMap)."""
    validate_layer(dict(overrides), None, "<policy>")
    base = default_policy().data
    return _compiled(
        Policy(
            deep_merge(base, overrides),
            sources=["<default>", "<policy>"],
            layers=[base, dict(overrides)],
            origins=[("<default>", None), ("<policy>", None)],
        )
    )
