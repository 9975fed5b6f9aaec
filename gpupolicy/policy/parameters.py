"""What a rule declares about its settings, and their values in one policy.

A rule owns its parameters (as yamllint's rules own `CONF` and `DEFAULT`): each has a name, a
default, a type (that of its default) and a one-line doc, and is set per policy as
`rules: {GP208: {params: {minReplicas: 3}}}` (the rule named by id or by name). A parameter that
older policies set in a section (`placement.spread.minReplicas`) names that key as its `setting`:
the section still sets it, `params` wins over it, and the shipped policy holds the declared default
there (tests/test_policy_settings.py keeps the two equal).

Rules register their declarations in a catalog (`DECLARED` for the built-in registry); a policy
checks its `rules` section against the catalog once, and a rule reads a value by its declaration
(`policy.param(MIN_REPLICAS)`), never by a dotted key.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from gpupolicy.core.findings import Severity
from gpupolicy.core.immutable import immutable

T = TypeVar("T")

# The types a parameter may have, by the Python type of its default, and their names in docs and errors.
_TYPE_NAMES: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    tuple: "list of strings",
    # a custom rule's parameters (gpupolicy/custom/) take any JSON value of their default's type
    list: "list",
    dict: "object",
}


@dataclass(frozen=True, eq=False)  # compared by identity: two rules may declare the same name
class Parameter(Generic[T]):
    """A setting a rule owns. `default` fixes the type (a tuple is a list of strings)."""

    name: str  # the key under rules.<rule>.params
    default: T
    doc: str
    setting: str | None = None  # the section key that also sets it, e.g. "placement.spread.minReplicas"

    def __post_init__(self) -> None:
        if type(self.default) not in _TYPE_NAMES:
            raise TypeError(f"parameter {self.name}: a default of type {type(self.default).__name__}")

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES[type(self.default)]

    def accepts(self, value: Any) -> bool:
        """Whether `value` (as a policy file gives it) is of this parameter's type."""
        kind = type(self.default)
        if kind is tuple:
            return isinstance(value, list) and all(isinstance(item, str) for item in value)
        if kind is float:
            return isinstance(value, (int, float)) and not isinstance(value, bool)
        if kind is int:
            return isinstance(value, int) and not isinstance(value, bool)
        return isinstance(value, kind)

    def coerce(self, value: Any) -> T:
        """An accepted value as the rule reads it (a YAML list as a tuple, an integer as a float)."""
        kind = type(self.default)
        converted: Any = tuple(value) if kind is tuple else float(value) if kind is float else value
        return converted  # type: ignore[no-any-return]


@immutable
class RuleDeclaration:
    """What the policy needs to know of a rule: how it may be named and the parameters it owns."""

    id: str
    name: str
    parameters: tuple[Parameter[Any], ...] = ()


class RuleCatalog:
    """The rules a policy may name (by id or by name), with their parameters."""

    def __init__(self) -> None:
        self._by_id: dict[str, RuleDeclaration] = {}
        self._by_key: dict[str, RuleDeclaration] = {}  # by id and by name
        self._owner: dict[Parameter[Any], str] = {}
        self.version = 0  # bumped by every declaration: rule settings compiled before it are stale
        # Set once every built-in rule is declared (gpupolicy.rules): from then on a policy that
        # names a rule the catalog lacks is refused, rather than waiting for a module to register it.
        self.complete = False

    def declare(self, declaration: RuleDeclaration) -> None:
        self._by_id[declaration.id] = declaration
        self._by_key[declaration.id] = self._by_key[declaration.name] = declaration
        for parameter in declaration.parameters:
            owner = self._owner.setdefault(parameter, declaration.id)
            if owner != declaration.id:  # one value per policy: which rule's `params` would set it?
                raise ValueError(f"parameter {parameter.name} of {owner} declared again by {declaration.id}")
        self.version += 1

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def get(self, key: str) -> RuleDeclaration | None:
        return self._by_key.get(key)

    def owner_of(self, parameter: Parameter[Any]) -> str | None:
        return self._owner.get(parameter)

    def names(self) -> list[str]:
        return sorted(self._by_key)

    def __iter__(self) -> Iterator[RuleDeclaration]:
        return iter(self._by_id.values())


# The built-in rules' declarations: filled as gpupolicy.rules registers them in the engine.
DECLARED = RuleCatalog()


@immutable
class RuleSettings:
    """One rule's settings in one policy: the values of all its parameters, defaults included."""

    enabled: bool = True
    severity: Severity | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


DEFAULT_RULE_SETTINGS = RuleSettings()


@immutable
class RuleEntryProblem:
    """Something wrong in one `rules` entry: the path under the layer, and the message."""

    path: tuple[str, ...]
    message: str


def entry_problems(key: str, entry: Mapping[str, Any], catalog: RuleCatalog) -> list[RuleEntryProblem]:
    """What is wrong with `rules.<key>` of one policy file: an unknown rule, an unknown parameter,
    a value of the wrong type (the schema has checked the rest of its shape)."""
    declaration = catalog.get(key)
    if declaration is None:
        if not catalog.complete:
            return []
        return [RuleEntryProblem(("rules", key), _unknown("rule", key, catalog.names()))]
    declared = {parameter.name: parameter for parameter in declaration.parameters}
    problems = []
    for name, value in (entry.get("params") or {}).items():
        parameter = declared.get(name)
        path = ("rules", key, "params", name)
        if parameter is None:
            allowed = ", ".join(sorted(declared)) or "none"
            problems.append(
                RuleEntryProblem(path, f"{declaration.id} has no parameter {name!r} (parameters: {allowed})")
            )
        elif not parameter.accepts(value):
            problems.append(
                RuleEntryProblem(
                    path,
                    f"{declaration.id} parameter {name} must be {_article(parameter.type_name)} {parameter.type_name}",
                )
            )
    return problems


def _article(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


def _unknown(what: str, key: str, known: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown {what} {key!r}{hint}"


def compile_rule_settings(
    layers: Sequence[Mapping[str, Any]], data: Mapping[str, Any], catalog: RuleCatalog
) -> dict[str, RuleSettings]:
    """The settings of every declared rule that has an entry or parameters (any other has
    DEFAULT_RULE_SETTINGS): the `rules` entries of the layers merged in order (a rule named by id
    in one file and by name in another is one rule), over the parameters' sections and defaults.
    Entries must have passed `entry_problems`."""
    entries: dict[str, dict[str, Any]] = {}
    for layer in layers:
        for key, entry in (layer.get("rules") or {}).items():
            declaration = catalog.get(key)
            rule_id = declaration.id if declaration is not None else key
            merged = entries.setdefault(rule_id, {})
            for field_name, value in entry.items():
                if field_name == "params":
                    merged["params"] = {**merged.get("params", {}), **value}
                else:
                    merged[field_name] = value
    compiled: dict[str, RuleSettings] = {}
    for declaration in catalog:
        entry = entries.pop(declaration.id, None)
        if entry is not None or declaration.parameters:  # the others keep DEFAULT_RULE_SETTINGS
            compiled[declaration.id] = _settings_of(declaration, entry or {}, data)
    for rule_id, entry in entries.items():  # rules of another registry (tests): as given
        compiled[rule_id] = _settings_of(RuleDeclaration(rule_id, rule_id), entry, data)
    return compiled


def _settings_of(
    declaration: RuleDeclaration, entry: Mapping[str, Any], data: Mapping[str, Any]
) -> RuleSettings:
    given = entry.get("params") or {}
    params = {}
    for parameter in declaration.parameters:
        if parameter.name in given:
            params[parameter.name] = parameter.coerce(given[parameter.name])
        else:
            params[parameter.name] = _from_setting(parameter, data)
    severity = entry.get("severity")
    return RuleSettings(
        enabled=entry.get("enabled", True) is not False,
        severity=Severity.parse(severity) if isinstance(severity, str) else None,
        params=params,
    )


def _from_setting(parameter: Parameter[T], data: Mapping[str, Any]) -> T:
    """The parameter's value from its section key, else its default."""
    if parameter.setting is None:
        return parameter.default
    value: Any = data
    for step in parameter.setting.split("."):
        if not isinstance(value, Mapping) or step not in value:
            return parameter.default
        value = value[step]
    return parameter.coerce(value) if parameter.accepts(value) else parameter.default
