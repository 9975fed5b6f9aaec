"""The Kubernetes OpenAPI schemas bundled in `kubernetes-validate`, compiled once per kind.

`kubernetes_validate.validate()` re-reads and re-resolves the 1.5 MB definitions file on every
call (about 9 ms per Deployment). Here each kind's schema is read once, the definitions it
reaches are inlined under `$defs`, and the result is compiled with jsonschema-rs.
The "strict" variants forbid unknown fields, which is what catches `resouces:`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs

from gpupolicy.core.bounded_cache import bounded_memo
from gpupolicy.core.findings import JsonPath
from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import built_in_api_group

_REF_PREFIX = "/api/_definitions.json#/$defs/"
_REF = re.compile(r'"\$ref": "(?:/api/_definitions\.json)?#/\$defs/([^"]+)"')


@immutable
class SchemaError:
    path: JsonPath
    message: str


@functools.cache
def _schemas_root() -> Path:
    # Found, not imported: importing kubernetes_validate loads jsonschema (a tenth of a second of
    # every lint's start) for a validate() we do not call; only its data folder is read.
    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("No module named 'kubernetes_validate'", name="kubernetes_validate")
    return Path(spec.origin).resolve().parent / "kubernetes-json-schema"


@functools.cache
def available_versions() -> tuple[str, ...]:
    found = []
    for folder in _schemas_root().iterdir():
        match = re.match(r"^v(\d+\.\d+)\.\d+-local-strict$", folder.name)
        if match:
            found.append(match.group(1))
    return tuple(sorted(set(found), key=lambda version: tuple(int(part) for part in version.split("."))))


# The oldest release the deprecation table (GP006) and the Pod Security checks describe.
OLDEST_SUPPORTED = (1, 16)


@functools.lru_cache(maxsize=64)  # policy values only (kubernetesVersion)
def resolve_version(requested: str) -> str:
    """The newest bundled minor version not newer than `requested` (as kubernetes-validate does)."""
    parts = requested.lstrip("v").split(".")[:2]
    if len(parts) != 2 or not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError(f"{requested!r} is not a Kubernetes minor version such as 1.34")
    wanted = (int(parts[0]), int(parts[1]))
    if wanted < OLDEST_SUPPORTED:
        raise ValueError(
            f"Kubernetes {requested} is older than gpupolicy supports ({OLDEST_SUPPORTED[0]}.{OLDEST_SUPPORTED[1]})"
        )
    versions = available_versions()
    usable = [version for version in versions if tuple(map(int, version.split("."))) <= wanted]
    # A cluster older than the oldest bundled schemas is judged against the oldest (GP005); the
    # rules that know versions (GP006, Pod Security) use the policy's version itself.
    return usable[-1] if usable else versions[0]


class _Definitions:
    """kubernetes-validate's `_definitions.json` (1.5 MB, 730 definitions), each definition
    decoded when a kind's schema first reaches it. Decoding the whole file took 16 ms of every
    lint's start-up for the 118 definitions a Deployment needs. The files are indented
    (`json.dumps(indent=2)`, or 4 for Kubernetes 1.25), so each definition starts on a line of
    its own; a file laid out any other way is decoded whole, as before."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._decoded: dict[str, tuple[Any, str]] = {}  # at most the file's 730 names
        self._starts = _definition_starts(text)
        self._whole: dict[str, Any] | None = None if self._starts else json.loads(text)["$defs"]

    def get(self, name: str) -> tuple[Any, str] | None:
        """The definition and its JSON text (where its own `$ref`s are read), or None."""
        if self._whole is not None:
            found = self._whole.get(name)
            return None if found is None else (found, json.dumps(found))
        found = self._decoded.get(name)
        start = self._starts.get(name)
        if found is None and start is not None:
            value, end = _DECODER.raw_decode(self._text, start)
            found = self._decoded[name] = (value, self._text[start:end])
        return found


_DECODER = json.JSONDecoder()
# The file's first line, `{` then `"$defs": {` on a line of its own: its indent is the file's.
_LAYOUT = re.compile(r'\{\n( {1,4})"\$defs": \{\n')
# A member of "$defs": a line break and twice that indent, then its name. Inside a JSON string a
# line break is always escaped, so this only matches between tokens, at the second level.
_MEMBER = {width: re.compile("\n" + " " * 2 * width + r'"([^"\\]+)": ') for width in range(1, 5)}


def _definition_starts(text: str) -> dict[str, int]:
    """Where each definition's value starts, or {} when the file is not laid out as expected
    (then the caller decodes it whole)."""
    layout = _LAYOUT.match(text)
    end = -1 if layout is None else text.find("\n" + layout.group(1) + "}")
    if layout is None or end == -1:
        return {}
    # "$defs" ends at the first line that closes a top-level value; the members are before it.
    return {match.group(1): match.end() for match in _MEMBER[len(layout.group(1))].finditer(text, 0, end)}


@functools.cache
def _definitions(version: str) -> _Definitions:
    folder = _schemas_root() / f"v{version}.0-local-strict"
    return _Definitions((folder / "_definitions.json").read_text(encoding="utf-8"))


# What the API server accepts as a kind and an apiVersion (a group is a DNS subdomain, a version
# v<N>[alpha|beta<M>]): https://kubernetes.io/docs/reference/using-api/#api-versioning and
# k8s.io/apimachinery/pkg/util/validation (IsDNS1123Subdomain). Anything else names no built-in
# schema; the schema's file name is then looked up among the shipped ones, never opened from a
# path built out of the object (`kind: ../../x` once compiled any *-v1.json on disk as a schema).
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_VERSION = re.compile(r"v[0-9]{1,4}(?:(?:alpha|beta)[0-9]{1,4})?")
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_GROUP = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
_GROUP_MAX_CHARS = 253


def schema_name(api_version: str, kind: str) -> str | None:
    """The bundled schema file name for a built-in kind (`deployment-apps-v1.json`), or None when
    the object's kind or apiVersion is not of the form Kubernetes allows, or names a CRD group."""
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    group, _, version = api_version.rpartition("/")
    if len(group) > _GROUP_MAX_CHARS or not _KIND.fullmatch(kind) or not _VERSION.fullmatch(version):
        return None
    if group and not _GROUP.fullmatch(group):
        return None
    if not built_in_api_group(api_version):
        return None  # a CRD group: no bundled schema, and a same-named built-in kind must not match
    prefix = group.split(".", 1)[0] if group else ""
    return f"{kind.lower()}-{prefix + '-' if prefix else ''}{version}.json"


@functools.cache
def shipped_schemas(version: str) -> frozenset[str]:
    """The schema file names kubernetes-validate ships for a Kubernetes minor version (the index
    every lookup goes through), read once."""
    folder = _schemas_root() / f"v{version}.0-local-strict"
    return frozenset(entry.name for entry in folder.iterdir() if entry.name.endswith(".json"))


def _schema_file(version: str, api_version: str, kind: str) -> str | None:
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None  # not a key a memo can hold, and no schema's name either
    return _shipped_schema_file(version, api_version, kind)


# Asked twice per object (GP003, GP005), with the same few kinds over and over; keyed by the
# object's apiVersion and kind, so bounded in bytes.
@bounded_memo(max_bytes=1 << 18)
def _shipped_schema_file(version: str, api_version: str, kind: str) -> str | None:
    name = schema_name(api_version, kind)
    return name if name is not None and name in shipped_schemas(version) else None


def compiled_validator(version: str, api_version: str, kind: str) -> Any | None:
    """A compiled validator for the kind, or None when it is not a built-in kind."""
    name = _schema_file(version, api_version, kind)
    return _compiled(version, name) if name is not None else None


@functools.cache  # keyed by shipped names only: bounded, whatever objects come in
def _compiled(version: str, name: str) -> Any:
    return jsonschema_rs.Draft202012Validator(schema_document(version, name))


def schema_document(version: str, name: str) -> dict[str, Any]:
    """The shipped schema `name` with every definition it reaches inlined under `$defs`."""
    folder = _schemas_root() / f"v{version}.0-local-strict"
    text = (folder / name).read_text(encoding="utf-8")
    definitions = _definitions(version)
    needed: dict[str, Any] = {}
    pending = set(_REF.findall(text))
    while pending:
        ref = pending.pop()
        if ref in needed:
            continue
        found = definitions.get(ref)
        if found is None:
            continue
        needed[ref], written = found
        pending.update(_REF.findall(written))
    schema: dict[str, Any] = json.loads(text.replace(_REF_PREFIX, "#/$defs/"))
    schema["$defs"] = dict(sorted(needed.items()))
    return schema


def schema_errors(obj: dict[str, Any], version: str) -> Iterator[SchemaError]:
    validator = compiled_validator(version, obj.get("apiVersion", ""), obj.get("kind", ""))
    if validator is None:
        return
    try:
        valid = validator.is_valid(obj)
    except ValueError:  # a key that is not a string (`1:`, `true:`, `~:`), which JSON cannot hold
        obj = _with_json_keys(obj)
        valid = validator.is_valid(obj)
    if valid:
        return
    # The required fields one mapping lacks are one problem: said once, at the mapping, naming all.
    missing: dict[JsonPath, list[str]] = {}
    for error in validator.iter_errors(obj):
        path: JsonPath = tuple(error.instance_path)
        kind = error.kind
        name = getattr(kind, "property", None) if type(kind).__name__ == "Required" else None
        if isinstance(name, str):
            # A status is the server's and its controllers' to write (a KWOK Node's nodeInfo without
            # its machineID): what the OpenAPI schema lists as required there, no manifest must hold.
            if path[:1] != ("status",):
                missing.setdefault(path, []).append(name)
            continue
        unexpected = getattr(kind, "unexpected", None)
        if unexpected:  # point at the unknown key itself
            for key in unexpected:
                yield SchemaError((*path, str(key)), f"unknown field {key!r}{_near(path)}")
            continue
        if error.instance is None and type(kind).__name__ in ("OneOfMultipleValid", "Type"):
            # `storage:` or `volumeHandle:` left empty (a chart value still to supply): null passes
            # every nullable branch of a quantity, which jsonschema words as the schema's own riddle,
            # and fails a string as "null is not of type".
            yield SchemaError(path, _empty_value(path))
            continue
        if type(kind).__name__ == "Type" and _go_number(error.instance) and _wants_a_number(error.message):
            continue  # Helm's `1e+07`: a number for the API server's YAML decoder (below)
        placeholder = _braced_word(error.instance)
        if placeholder is not None and type(kind).__name__ == "Type":
            yield SchemaError(path, _braced_value(path, placeholder))
            continue
        yield SchemaError(path, error.message)
    for path, names in missing.items():
        yield SchemaError(path, _required_message(names))


def _required_message(names: list[str]) -> str:
    """`"group" is a required property`, or `"group", "names" and "scope" are required properties`."""
    quoted = [f'"{name}"' for name in dict.fromkeys(names)]
    if len(quoted) == 1:
        return f"{quoted[0]} is a required property"
    return f"{', '.join(quoted[:-1])} and {quoted[-1]} are required properties"


# A float in exponent form without a dot, as Helm prints a large number of its values (`1e+07`):
# YAML 1.1 (PyYAML) reads it as a string, go-yaml (sigs.k8s.io/yaml, kubectl and the API server) as
# the number 10000000. A literal pattern of one line, searched whole: linear.
_GO_EXPONENT_NUMBER = re.compile(r"[-+]?[0-9]{1,30}(?:\.[0-9]{0,30})?[eE][-+]?[0-9]{1,3}")


def _go_number(value: Any) -> bool:
    return isinstance(value, str) and _GO_EXPONENT_NUMBER.fullmatch(value) is not None


def _wants_a_number(message: str) -> bool:
    return '"integer"' in message or '"number"' in message


def _braced_word(value: Any) -> str | None:
    """`{volume-id}` as YAML reads it — a one-key flow mapping without a value — as written."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, item),) = value.items()
        if item is None and isinstance(key, str) and len(key) <= 80:
            return f"{{{key}}}"
    return None


def _braced_value(path: JsonPath, placeholder: str) -> str:
    field = f"{path[-1]!r}" if path and isinstance(path[-1], str) else "a value"
    return (
        f"{field} is {placeholder}, which YAML reads as a mapping{_near(path[:-1] if path else path)}: "
        "a placeholder to fill in (or quote it)"
    )


def _empty_value(path: JsonPath) -> str:
    if path and isinstance(path[-1], str):
        return f"{path[-1]!r} is empty (null){_near(path[:-1])}: give it a value"
    return f"a value is empty (null){_near(path)}: give it a value"


def _with_json_keys(value: Any) -> Any:
    """`value` with every mapping key as the text kubectl sends for it: YAML's `1:` and `true:`
    become the keys "1" and "true" when sigs.k8s.io/yaml converts a manifest to JSON
    (https://github.com/kubernetes-sigs/yaml, yaml.go, convertToJSONableObject); a null key as
    "null". The schema then sees the object as the API server would."""
    if isinstance(value, dict):
        return {_json_key(key): _with_json_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_json_keys(item) for item in value]
    return value


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return json.dumps(key)
    return str(key)


def has_schema(api_version: str, kind: str, version: str) -> bool:
    """Whether a built-in schema exists; `version` as the policy writes it (resolved here)."""
    try:
        resolved = resolve_version(version)
    except ValueError:
        return False
    return _schema_file(resolved, api_version, kind) is not None


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


# API versions a group's kinds are served under, newest first: what replaces a removed one.
_VERSION_ORDER = (
    "v2",
    "v1",
    "v2beta2",
    "v2beta1",
    "v1beta3",
    "v1beta2",
    "v1beta1",
    "v1alpha3",
    "v1alpha2",
    "v1alpha1",
)


@immutable
class SchemaRemoval:
    """An apiVersion of a built-in kind the bundled schemas of an earlier release have and the
    policy's release has not (DRA's resource.k8s.io/v1alpha2, gone from 1.31): the last release
    that served it, and the version of the kind the policy's release serves."""

    last_served: str
    replacement: str | None


# Asked of every built-in object (GP006), with the same few apiVersions and kinds: bounded in bytes.
@bounded_memo(max_bytes=1 << 16)
def removed_by_schemas(api_version: str, kind: str, version: str) -> SchemaRemoval | None:
    """How the bundled schemas say `api_version` `kind` left Kubernetes before `version`, if it did;
    None when `version` serves it, or no bundled release did (a custom resource)."""
    try:
        resolved = resolve_version(version)
    except ValueError:
        return None
    if _schema_file(resolved, api_version, kind) is not None:
        return None
    earlier = [v for v in available_versions() if _minor(v) < _minor(resolved)]
    served = [v for v in earlier if _schema_file(v, api_version, kind) is not None]
    if not served:
        return None
    group = api_version.rpartition("/")[0]
    prefix = f"{group}/" if group else ""
    replacement = next(
        (
            f"{prefix}{name}"
            for name in _VERSION_ORDER
            if _schema_file(resolved, f"{prefix}{name}", kind) is not None
        ),
        None,
    )
    return SchemaRemoval(served[-1], replacement)


def _minor(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
