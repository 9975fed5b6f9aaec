"""A policy layer checked before it is merged: against `policies/schemas/policy.schema.json` (a
jsonschema-rs precheck that can only say "no errors", then Python jsonschema for the wording of
errors), its `kubernetesVersion`, and its `rules` entries against the rules' declarations. Every
error names the file, the line and the key.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from gpupolicy.core.findings import excerpt
from gpupolicy.core.linear_regex import PatternError, check_pattern
from gpupolicy.core.packaged import policies_dir
from gpupolicy.core.schema_precheck import schema_precheck
from gpupolicy.kube.pod_spec import as_mapping
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.parameters import (
    RuleCatalog,
    entry_problems,
)

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


# `format: regex` in the schemas: checked (jsonschema checks no format unless given a checker),
# and with the engine the patterns will run on (RE2, gpupolicy.core.linear_regex), so that a pattern
# the policy loads is one that can run, in linear time, on every object.
@functools.cache
def _format_checker() -> Any:
    import jsonschema  # only for a layer the precheck does not pass: see gpupolicy.core.schema_precheck

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
