"""The Kubernetes CEL format library: named string validators, `format.dns1123Label()` and the
others, and `format.named(name)`; `<format>.validate(s)` is `optional.none()` for a valid string,
else `optional.of(<the errors>)`.

As in k8s.io/apiserver/pkg/cel/library/format.go (Kubernetes 1.31 and later), with the messages of
k8s.io/apimachinery/pkg/util/validation (a policy's `messageExpression` joins them). The regular
expressions are RE2 (linear time, gpupolicy/core/linear_regex.py); `uri`, `date` and `datetime`
follow Go's `url.ParseRequestURI` and go-openapi's `strfmt` in what they accept, not in every
message. A format is the map `{"__format__": "<name>"}` (the engine has no opaque types).
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Callable
from typing import Any

from gpupolicy.core.linear_regex import compile_linear
from gpupolicy.custom.errors import CelFunctionError

FORMAT = "__format__"

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL = compile_linear(f"^{DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = compile_linear(f"^{DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL = compile_linear(f"^{DNS1035_LABEL_FMT}$")
_QUALIFIED_NAME = compile_linear(f"^{QUALIFIED_NAME_FMT}$")
_LABEL_VALUE = compile_linear(f"^{LABEL_VALUE_FMT}$")
_UUID = compile_linear("(?i)^(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})$")
_DATE = compile_linear("^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
_DATETIME = compile_linear(
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\\.[0-9]+)?)?([Zz]|[+-][0-9]{2}:?[0-9]{2})?$"
)
_SCHEME = compile_linear("^[A-Za-z][A-Za-z0-9+.-]*:")

LABEL_MAX = 63
SUBDOMAIN_MAX = 253

DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def regex_error(message: str, fmt: str, *examples: str) -> str:
    """apimachinery's `RegexError`: the message, its examples and the regular expression."""
    shown = "".join(f"{' or ' if index else ''}'{example}', " for index, example in enumerate(examples))
    return f"{message} ({'e.g. ' + shown if examples else ''}regex used for validation is '{fmt}')"


def max_length_error(length: int) -> str:
    return f"must be no more than {length} characters"


def dns1123_label(value: str) -> list[str]:
    errors = [max_length_error(LABEL_MAX)] if len(value) > LABEL_MAX else []
    if not _DNS1123_LABEL.search(value):
        if _DNS1123_SUBDOMAIN.search(value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = [max_length_error(SUBDOMAIN_MAX)] if len(value) > SUBDOMAIN_MAX else []
    if not _DNS1123_SUBDOMAIN.search(value):
        errors.append(regex_error(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def dns1035_label(value: str) -> list[str]:
    errors = [max_length_error(LABEL_MAX)] if len(value) > LABEL_MAX else []
    if not _DNS1035_LABEL.search(value):
        errors.append(regex_error(DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errors


def _mask_trailing_dash(name: str) -> str:
    """apimachinery's `maskTrailingDash`: a generateName prefix may end with '-'."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def qualified_name(value: str) -> list[str]:
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) > 2:
        return [
            "a qualified name "
            + regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend(f"prefix part {message}" for message in dns1123_subdomain(prefix))
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > LABEL_MAX:
        errors.append(f"name part {max_length_error(LABEL_MAX)}")
    if not _QUALIFIED_NAME.search(name):
        errors.append(
            "name part " + regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value(value: str) -> list[str]:
    errors = [max_length_error(LABEL_MAX)] if len(value) > LABEL_MAX else []
    if not _LABEL_VALUE.search(value):
        errors.append(regex_error(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def uri(value: str) -> list[str]:
    """Go's `url.ParseRequestURI`: an absolute URI or an absolute path, no control characters."""
    if not value:
        return ['parse "": empty url']
    if any(ord(character) < 0x20 or ord(character) == 0x7F for character in value):
        return [f"parse {value!r}: net/url: invalid control character in URL"]
    if not value.startswith("/") and not _SCHEME.search(value):
        return [f"parse {value!r}: invalid URI for request"]
    return []


def uuid(value: str) -> list[str]:
    return [] if _UUID.search(value) else ["does not match the UUID format"]


def byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def date(value: str) -> list[str]:
    if _DATE.search(value):
        try:
            datetime.date.fromisoformat(value)
            return []
        except ValueError:
            pass
    return ["invalid date"]


def date_time(value: str) -> list[str]:
    if _DATETIME.search(value):
        text = value.replace("t", "T").replace(" ", "T").replace("z", "Z").replace("Z", "+00:00")
        try:
            datetime.datetime.fromisoformat(text)
            return []
        except ValueError:
            pass
    return ["invalid datetime"]


VALIDATORS: dict[str, Callable[[str], list[str]]] = {
    "dns1123Label": dns1123_label,
    "dns1123Subdomain": dns1123_subdomain,
    "dns1035Label": dns1035_label,
    "qualifiedName": qualified_name,
    "dns1123LabelPrefix": lambda value: dns1123_label(_mask_trailing_dash(value)),
    "dns1123SubdomainPrefix": lambda value: dns1123_subdomain(_mask_trailing_dash(value)),
    "dns1035LabelPrefix": lambda value: dns1035_label(_mask_trailing_dash(value)),
    "labelValue": label_value,
    "uri": uri,
    "uuid": uuid,
    "byte": byte,
    "date": date,
    "datetime": date_time,
}


def _optional() -> Any:
    from cel import OptionalValue

    return OptionalValue


def named(name: str) -> Any:
    """`format.named(name)`: the format, or `optional.none()` for a name that is none."""
    optional = _optional()
    return optional.of({FORMAT: name}) if name in VALIDATORS else optional.none()


def validate(value: Any, text: Any) -> Any:
    """`<format>.validate(s)`: `optional.none()` when `s` is valid, else its errors."""
    if not (isinstance(value, dict) and value.get(FORMAT) in VALIDATORS):
        raise CelFunctionError(f"not a format: {value!r}")
    if not isinstance(text, str):
        raise CelFunctionError(f"validate() takes a string, not {type(text).__name__}")
    errors = VALIDATORS[value[FORMAT]](text)
    optional = _optional()
    return optional.of(errors) if errors else optional.none()


def _constant(name: str) -> Callable[[], dict[str, str]]:
    def format_of() -> dict[str, str]:
        return {FORMAT: name}

    return format_of


FORMAT_FUNCTIONS: dict[str, Callable[..., Any]] = {
    **{f"format.{name}": _constant(name) for name in VALIDATORS},
    "format.named": named,
    "validate": validate,
}
