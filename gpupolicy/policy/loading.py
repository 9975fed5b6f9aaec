"""The policy: the shipped default, merged with a repository's `.gpupolicy.yaml` and `--policy`.

Mappings merge key by key; lists and scalars from a later layer replace earlier ones. Every
layer is validated against `policies/schemas/policy.schema.json`, and an error names the key,
the file and the line.
"""

from __future__ import annotations

import copy
import difflib
import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gpupolicy.core.findings import Severity, excerpt
from gpupolicy.core.linear_regex import PatternError, check_pattern
from gpupolicy.core.packaged import policies_dir as policies_dir
from gpupolicy.kube.gpu import GpuCatalog
from gpupolicy.kube.pod_spec import as_mapping
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
    entry_problems,
)
from gpupolicy.policy.schema_precheck import schema_precheck
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

REPO_POLICY_NAMES = (".gpupolicy.yaml", ".gpupolicy.yml")
FACTS_SOURCE = "<cluster facts>"


_ABSENT: Any = object()
T = TypeVar("T")
MESSAGE_MAX_CHARS = 300


class PolicyError(Exception):
    """A policy file that cannot be used; the message names file, line and key."""


@functools.cache
def _schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((policies_dir() / "schemas" / name).read_text(encoding="utf-8"))
    return loaded


@functools.cache
def policy_schema() -> dict[str, Any]:
    """The top-level schema with every section schema (`schemas/sections/<key>.json`) under its key."""
    schema = copy.deepcopy(_schema("policy.schema.json"))
    for section in sorted((policies_dir() / "schemas" / "sections").glob("*.json")):
        section_schema = json.loads(section.read_text(encoding="utf-8"))
        # Its own `$id` makes a section's `#/$defs/...` references resolve inside the section.
        section_schema.setdefault("$id", f"https://gpupolicy.io/schemas/sections/{section.name}")
        schema["properties"][section.stem] = section_schema
    return schema


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
        line, column = resource.node_position(duplicate.node)
        raise PolicyError(f"{file}:{line}:{column}: key {duplicate.key!r} appears twice")
    return resource.obj, resource


# `format: regex` in the schemas: checked (jsonschema checks no format unless given a checker),
# and with the engine the patterns will run on (RE2, gpupolicy.core.linear_regex), so that a pattern
# the policy loads is one that can run, in linear time, on every object.
@functools.cache
def _format_checker() -> Any:
    import jsonschema  # only for a layer the precheck does not pass: see gpupolicy.policy.schema_precheck

    checker = jsonschema.FormatChecker()
    checker.checks("regex", raises=PatternError)(check_pattern)
    return checker


def _runnable_pattern(pattern: str) -> bool:
    try:
        return check_pattern(pattern)
    except PatternError:
        return False


@functools.cache
def _valid_layer_precheck() -> Callable[[Any], bool]:
    return schema_precheck(policy_schema(), formats={"regex": _runnable_pattern})


def validate_layer(data: dict[str, Any], resource: Resource | None, file: str) -> None:
    if _valid_layer_precheck()(data):
        _check_kubernetes_version(data, resource, file)
        return
    import jsonschema

    validator = jsonschema.Draft202012Validator(policy_schema(), format_checker=_format_checker())
    errors = sorted(validator.iter_errors(data), key=lambda error: list(error.absolute_path))
    if not errors:
        _check_kubernetes_version(data, resource, file)
        return
    messages = []
    for error in errors[:10]:
        for path, message in _located_errors(error):
            key = ".".join(str(step) for step in path) or "(top level)"
            line, column = resource.position(path) or (1, 1) if resource else (1, 1)
            if len(message) > MESSAGE_MAX_CHARS:  # jsonschema's messages quote the whole value
                message = message[:MESSAGE_MAX_CHARS] + "…"
            messages.append(f"{file}:{line}:{column}: policy key {key}: {message}")
    raise PolicyError("\n".join(messages))


def _check_kubernetes_version(data: dict[str, Any], resource: Resource | None, file: str) -> None:
    """A version the schema's pattern allows may still have no bundled schemas (`1.0`): refused
    here, once, rather than as an internal error of GP005 on every object."""
    version = data.get("kubernetesVersion")
    if not isinstance(version, str):
        return
    # imported here: it loads jsonschema-rs, which `gpupolicy --help` does without
    from gpupolicy.kube.kube_schemas import resolve_version

    try:
        resolve_version(version)
    except ValueError as exc:
        line, column = (resource.position(("kubernetesVersion",)) if resource else None) or (1, 1)
        raise PolicyError(f"{file}:{line}:{column}: policy key kubernetesVersion: {exc}") from None


def check_rule_entries(
    layer: Mapping[str, Any], resource: Resource | None, file: str, catalog: RuleCatalog
) -> None:
    """The `rules` entries of one policy file against the rules' declarations: an unknown rule,
    an unknown parameter or one of the wrong type is an error at its line."""
    if not catalog:
        return
    messages = []
    for key, entry in (layer.get("rules") or {}).items():
        for problem in entry_problems(key, entry, catalog):
            line, column = (resource.position(problem.path) if resource else None) or (1, 1)
            messages.append(f"{file}:{line}:{column}: policy key {'.'.join(problem.path)}: {problem.message}")
    if messages:
        raise PolicyError("\n".join(messages))


def _located_errors(error: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """A schema error as (path, message): an unknown key is reported at the key itself (its own
    line), with the keys allowed there, rather than at the mapping that holds it."""
    path = tuple(error.absolute_path)
    instance, schema = error.instance, error.schema
    if error.validator == "format" and error.validator_value == "regex" and error.cause is not None:
        return [(path, f"{excerpt(instance)} is not a regular expression gpupolicy can run: {error.cause}")]
    if (
        error.validator != "additionalProperties"
        or not isinstance(instance, dict)
        or not isinstance(schema, dict)
    ):
        return [(path, error.message)]
    allowed = sorted(str(key) for key in as_mapping(schema.get("properties")))
    unknown = [key for key in instance if key not in allowed]
    if not unknown or schema.get("patternProperties"):
        return [(path, error.message)]
    found = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        found.append(((*path, key), f"unknown key {key!r} ({hint}allowed: {', '.join(allowed)})"))
    return found


def find_repo_policy(start: Path) -> Path | None:
    """The nearest `.gpupolicy.yaml` (or `.yml`) above a linted path (a file, or a directory
    itself), walking up no further than the top-level of the git work tree that holds it."""
    return RepoPolicies().file_for(start)


# The top-level of a git work tree holds `.git`: a directory, or a file in a linked worktree and a
# submodule (https://git-scm.com/docs/gitrepository-layout). black's find_project_root stops its
# walk for settings there too.
GIT_MARKER = ".git"


def _holds(test: Callable[[], bool]) -> bool:
    """A test of the filesystem that may meet a folder it cannot enter (Path.is_file raises
    PermissionError there): what cannot be seen is not there."""
    try:
        return test()
    except OSError:
        return False


def _repo_policy_in(folder: Path) -> Path | None:
    for name in REPO_POLICY_NAMES:
        candidate = folder / name
        if _holds(candidate.is_file):
            return candidate
    return None


class RepoPolicies:
    """The policy of each linted path, for one run: the shipped default, the nearest `.gpupolicy.yaml`
    above the path, and `extra` (`--policy`) merged over it; only `extra` with `use_repo_policies`
    False (`--no-repo-policy`).

    The nearest file wins, with no implicit merging of the files above it (as ruff finds its
    settings: https://docs.astral.sh/ruff/configuration/#config-file-discovery): a nested policy
    that builds on its parent says `extends: ../.gpupolicy.yaml`.
    The walk stops at the top-level of the git work tree (a policy above the repository is not
    the repository's), or at the filesystem root outside one. Each folder is looked at once and
    each policy file loaded once per run (both bounded by the folders of the run's inputs)."""

    def __init__(self, *, extra: Iterable[Path] = (), use_repo_policies: bool = True) -> None:
        self.extra = tuple(extra)
        self.use_repo_policies = use_repo_policies
        self._nearest: dict[Path, Path | None] = {}  # a folder (resolved) -> its nearest policy file
        self._resolved: dict[Path, Path] = {}  # a folder as given -> resolved
        self._policies: dict[Path | None, Policy] = {}
        self._read_as: tuple[Path, Path] | None = None

    def read_as(self, exported: Path, tree: Path) -> RepoPolicies:
        """These policies for a copy of `tree` exported to `exported` (REF's tree, for lint
        --changed-since): a path below `exported` gets the policy of the same path below `tree`."""
        view = RepoPolicies(extra=self.extra, use_repo_policies=self.use_repo_policies)
        view._policies = self._policies  # each file loaded once in the run
        view._read_as = (exported, tree)
        return view

    def file_for(self, path: Path) -> Path | None:
        """The nearest policy file of a file, or of a directory linted as one unit (a Helm chart, a
        kustomization) or walked (the directory itself may hold the policy)."""
        if not self.use_repo_policies:
            return None
        if self._read_as is not None:
            exported, tree = self._read_as
            if path.is_relative_to(exported):
                path = tree / path.relative_to(exported)
        folder = path if _holds(path.is_dir) else path.parent
        resolved = self._resolved.get(folder)
        if resolved is None:
            try:
                resolved = folder.resolve()
            except (OSError, RuntimeError):  # a symlink loop (RuntimeError in 3.11)
                resolved = folder.absolute()
            self._resolved[folder] = resolved
        return self._nearest_from(resolved)

    def _nearest_from(self, folder: Path) -> Path | None:
        walked: list[Path] = []
        found: Path | None = None
        here = folder
        while True:
            known = self._nearest.get(here, _ABSENT)
            if known is not _ABSENT:
                found = known
                break
            walked.append(here)
            found = _repo_policy_in(here)
            if found is not None or _holds((here / GIT_MARKER).exists) or here.parent == here:
                break
            here = here.parent
        for folder_walked in walked:
            self._nearest[folder_walked] = found
        return found

    def policy_for(self, path: Path) -> Policy:
        """The effective policy of `path` (raises PolicyError for a file that cannot be used)."""
        return self.load(self.file_for(path))

    def load(self, repo_policy: Path | None) -> Policy:
        policy = self._policies.get(repo_policy)
        if policy is None:
            policy = self._policies[repo_policy] = load_policy(repo_policy=repo_policy, extra=self.extra)
        return policy


def display_source(source: str) -> str:
    """A policy source as reports name it: `<default>` for the shipped policy, a path relative to the
    current directory where it lies below it (files found walking up are absolute)."""
    path = Path(source)
    if not path.is_absolute():
        return source  # `<policy>`, `<cluster facts>`, a --policy path as given
    if path == policies_dir().resolve() / "default.yaml":
        return "<default>"
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return source


MAX_EXTENDS_DEPTH = 8


def load_policy(*, repo_policy: Path | None = None, extra: Iterable[Path] = ()) -> Policy:
    default_file = policies_dir() / "default.yaml"
    layers: list[Path] = [default_file]
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
