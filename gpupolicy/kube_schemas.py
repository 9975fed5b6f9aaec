"""The Kubernetes OpenAPI schemas bundled in `kubernetes-validate`, compiled once per kind.

`kubernetes_validate.validate()` re-reads and re-resolves the 1.5 MB definitions file on every
call (about 9 ms per Deployment). Here each kind's schema is read once, the definitions it
reaches are inlined under `$defs`, and the result is compiled with jsonschema-rs.
The "strict" variants forbid unknown fields, which is what catches `resouces:`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema_rs

from gpupolicy.bounded_cache import bounded_memo
from gpupolicy.findings import JsonPath

_REF_PREFIX = "/api/_definitions.json#/$defs/"
_REF = re.compile(r'"\$ref": "(?:/api/_definitions\.json)?#/\$defs/([^"]+)"')


@dataclass(frozen=True, slots=True)
class SchemaError:
    path: JsonPath
    message: str


@functools.cache
def _schemas_root() -> Path:
    import kubernetes_validate

    return Path(kubernetes_validate.__file__).resolve().parent / "kubernetes-json-schema"


@functools.cache
def available_versions() -> tuple[str, ...]:
    found = []
    for folder in _schemas_root().iterdir():
        match = re.match(r"^v(\d+\.\d+)\.\d+-local-strict$", folder.name)
        if match:
            found.append(match.group(1))
    return tuple(sorted(set(found), key=lambda version: tuple(int(part) for part in version.split("."))))


def resolve_version(requested: str) -> str:
    """The newest bundled minor version not newer than `requested` (as kubernetes-validate does)."""
    wanted = tuple(int(part) for part in requested.lstrip("v").split(".")[:2])
    usable = [version for version in available_versions() if tuple(map(int, version.split("."))) <= wanted]
    if not usable:
        raise ValueError(
            f"no bundled Kubernetes schemas for version {requested} (have {', '.join(available_versions())})"
        )
    return usable[-1]


@functools.cache
def _definitions(version: str) -> dict[str, Any]:
    folder = _schemas_root() / f"v{version}.0-local-strict"
    loaded: dict[str, Any] = json.loads((folder / "_definitions.json").read_text(encoding="utf-8"))["$defs"]
    return loaded


# The bundled files do not change while running; apiVersion and kind are whatever an object
# says, so what is remembered is bounded in bytes.
@bounded_memo(max_bytes=256 << 10)
def _schema_file(version: str, api_version: str, kind: str) -> Path | None:
    group, _, ver = api_version.rpartition("/")
    if group and "." in group and not group.endswith(".k8s.io"):
        return None  # a CRD group: no bundled schema, and a same-named built-in kind must not match
    prefix = group.split(".", 1)[0] if group else ""
    name = f"{kind.lower()}-{prefix + '-' if prefix else ''}{ver}.json"
    candidate = _schemas_root() / f"v{version}.0-local-strict" / name
    return candidate if candidate.is_file() else None


def compiled_validator(version: str, api_version: str, kind: str) -> Any | None:
    """A compiled validator for the kind, or None when it is not a built-in kind."""
    schema_file = _schema_file(version, api_version, kind)
    return None if schema_file is None else _compiled_validator(version, schema_file)


@functools.cache  # keyed by the bundled file: at most one entry per built-in kind and version
def _compiled_validator(version: str, schema_file: Path) -> Any:
    text = schema_file.read_text(encoding="utf-8")
    definitions = _definitions(version)
    needed: set[str] = set()
    pending = set(_REF.findall(text))
    while pending:
        name = pending.pop()
        if name in needed or name not in definitions:
            continue
        needed.add(name)
        pending.update(_REF.findall(json.dumps(definitions[name])))
    schema = json.loads(text.replace(_REF_PREFIX, "#/$defs/"))
    schema["$defs"] = {name: definitions[name] for name in needed}
    return jsonschema_rs.Draft202012Validator(schema)


def schema_errors(obj: dict[str, Any], version: str) -> Iterator[SchemaError]:
    validator = compiled_validator(version, obj.get("apiVersion", ""), obj.get("kind", ""))
    if validator is None or validator.is_valid(obj):
        return
    for error in validator.iter_errors(obj):
        path: JsonPath = tuple(error.instance_path)
        kind = error.kind
        unexpected = getattr(kind, "unexpected", None)
        if unexpected:  # point at the unknown key itself
            for key in unexpected:
                yield SchemaError((*path, str(key)), f"unknown field {key!r}{_near(path)}")
            continue
        yield SchemaError(path, error.message)


def has_schema(api_version: str, kind: str, version: str) -> bool:
    return _schema_file(version, api_version, kind) is not None


def _near(path: JsonPath) -> str:
    if not path:
        return " at the top level"
    last = path[-1]
    return (
        f" in {last!r}"
        if isinstance(last, str)
        else f" in item {last} of {path[-2]!r}"
        if len(path) > 1
        else ""
    )
