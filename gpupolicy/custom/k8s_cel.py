"""The Kubernetes CEL library, for the CEL engine gpupolicy uses (common-expression-language).

The functions ValidatingAdmissionPolicies and CRD validation rules call beyond standard CEL
(https://kubernetes.io/docs/reference/using-api/cel/#cel-options-language-features-and-libraries):
the quantity, list, string, regex, URL and format libraries. Each is registered as a plain
function: the engine treats `x.f(a)` as `f(x, a)`, so one Python function serves both forms.
docs/custom-rules.md lists them; tests/test_custom_cel.py tests each.

The engine has no opaque types: a Quantity is a map `{"__quantity__": "<exact value>"}` (exact
decimal text, so that `quantity("1Gi") == quantity("1024Mi")` holds) and a URL a map
`{"__url__": "<text>"}`; only these functions read them. Regular expressions run on RE2 (linear
time, gpupolicy/core/linear_regex.py), as Kubernetes runs them.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from gpupolicy.core.linear_regex import PatternError, compile_linear
from gpupolicy.custom.errors import CelFunctionError
from gpupolicy.custom.k8s_cel_format import FORMAT_FUNCTIONS
from gpupolicy.custom.k8s_cel_net import NET_FUNCTIONS
from gpupolicy.kube.quantities import QuantityError, parse_quantity

QUANTITY = "__quantity__"
URL = "__url__"


# -- quantity (k8s.io/apiserver/pkg/cel/library/quantity.go) --------------------------------------


def _exact(amount: Decimal) -> str:
    text = format(amount.normalize(), "f")
    return text if "." not in text else text.rstrip("0").rstrip(".")


def quantity(text: str) -> dict[str, str]:
    try:
        return {QUANTITY: _exact(parse_quantity(text))}
    except (QuantityError, TypeError) as exc:
        raise CelFunctionError(f"quantity({text!r}): {exc}") from None


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except (QuantityError, TypeError):
        return False
    return True


def _amount(value: Any) -> Decimal:
    if isinstance(value, dict) and QUANTITY in value:
        return Decimal(value[QUANTITY])
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    raise CelFunctionError(f"not a quantity: {value!r}")


def q_is_integer(value: Any) -> bool:
    amount = _amount(value)
    return amount == amount.to_integral_value() and abs(amount) < 2**63


def q_as_integer(value: Any) -> int:
    if not q_is_integer(value):
        raise CelFunctionError("asInteger: the quantity is not an integer of 64 bits")
    return int(_amount(value))


def q_as_approximate_float(value: Any) -> float:
    return float(_amount(value))


def q_sign(value: Any) -> int:
    amount = _amount(value)
    return (amount > 0) - (amount < 0)


def q_add(value: Any, other: Any) -> dict[str, str]:
    return {QUANTITY: _exact(_amount(value) + _amount(other))}


def q_sub(value: Any, other: Any) -> dict[str, str]:
    return {QUANTITY: _exact(_amount(value) - _amount(other))}


def q_compare_to(value: Any, other: Any) -> int:
    left, right = _amount(value), _amount(other)
    return (left > right) - (left < right)


def q_is_greater_than(value: Any, other: Any) -> bool:
    return q_compare_to(value, other) > 0


def q_is_less_than(value: Any, other: Any) -> bool:
    return q_compare_to(value, other) < 0


# -- lists (k8s.io/apiserver/pkg/cel/library/lists.go) ---------------------------------------------


def _list(value: Any, function: str) -> list[Any]:
    if not isinstance(value, list):
        raise CelFunctionError(f"{function}: expects a list, got {type(value).__name__}")
    return value


def is_sorted(values: Any) -> bool:
    items = _list(values, "isSorted")
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def list_sum(values: Any) -> Any:
    items = _list(values, "sum")
    if items and all(isinstance(item, dict) and QUANTITY in item for item in items):
        return {QUANTITY: _exact(sum((_amount(item) for item in items), Decimal(0)))}
    return sum(items) if items else 0


def list_min(*args: Any) -> Any:
    items = _list(args[0], "min") if len(args) == 1 else list(args)
    if not items:
        raise CelFunctionError("min: the list is empty")
    return min(items)


def list_max(*args: Any) -> Any:
    items = _list(args[0], "max") if len(args) == 1 else list(args)
    if not items:
        raise CelFunctionError("max: the list is empty")
    return max(items)


def index_of(value: Any, item: Any) -> int:
    """`list.indexOf(x)` and `string.indexOf(substring)` (-1 when absent)."""
    if isinstance(value, str):
        return value.find(str(item))
    items = _list(value, "indexOf")
    return items.index(item) if item in items else -1


def last_index_of(value: Any, item: Any) -> int:
    if isinstance(value, str):
        return value.rfind(str(item))
    items = _list(value, "lastIndexOf")
    return len(items) - 1 - items[::-1].index(item) if item in items else -1


# -- strings (cel-go ext/strings.go, as Kubernetes enables it) ------------------------------------


def _ascii_lower(text: str) -> str:
    return "".join(char.lower() if char.isascii() else char for char in text)


def lower_ascii(text: str) -> str:
    return _ascii_lower(text)


def upper_ascii(text: str) -> str:
    return "".join(char.upper() if char.isascii() else char for char in text)


def char_at(text: str, index: int) -> str:
    if not 0 <= index <= len(text):
        raise CelFunctionError(f"charAt: index {index} out of range")
    return text[index : index + 1]


def substring(text: str, start: int, end: int | None = None) -> str:
    stop = len(text) if end is None else end
    if not 0 <= start <= stop <= len(text):
        raise CelFunctionError(f"substring: range [{start}, {stop}) out of range")
    return text[start:stop]


def replace(text: str, old: str, new: str, limit: int = -1) -> str:
    return text.replace(old, new, limit if limit >= 0 else -1)


def split(text: str, separator: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    return text.split(separator, limit - 1) if limit > 0 else text.split(separator)


def join(values: Any, separator: str = "") -> str:
    items = _list(values, "join")
    return separator.join(str(item) for item in items)


def trim(text: str) -> str:
    return text.strip()


def quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def string_format(template: str, args: Any) -> str:
    """`"%s has %d GPUs".format([name, n])`: verbs %s %d %f %e %b %o %x %X and %%."""
    values = _list(args, "format")
    out: list[str] = []
    index = position = 0
    while index < len(template):
        char = template[index]
        if char != "%" or index + 1 == len(template):
            out.append(char)
            index += 1
            continue
        verb, precision, index = _verb(template, index + 1)
        if verb == "%":
            out.append("%")
            continue
        if position >= len(values):
            raise CelFunctionError(f"format: too few arguments for {template!r}")
        out.append(_formatted(verb, values[position], precision))
        position += 1
    return "".join(out)


def _verb(template: str, index: int) -> tuple[str, int | None, int]:
    precision = None
    if template[index] == ".":
        end = index + 1
        while end < len(template) and template[end].isdigit():
            end += 1
        precision, index = int(template[index + 1 : end] or 0), end
    if index >= len(template):
        raise CelFunctionError("format: a verb is missing after %")
    return template[index], precision, index + 1


def _formatted(verb: str, value: Any, precision: int | None) -> str:
    if verb == "s":
        return _as_text(value)
    if verb == "d" and isinstance(value, int):
        return str(value)
    if verb in "fe" and isinstance(value, int | float):
        return f"{float(value):.{6 if precision is None else precision}{verb}}"
    if verb in "boxX" and isinstance(value, int):
        return format(value, verb)
    raise CelFunctionError(f"format: %{verb} does not take {type(value).__name__}")


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_as_text(item) for item in value) + "]"
    if isinstance(value, dict) and QUANTITY in value:
        return str(value[QUANTITY])
    return str(value)


# -- regex (k8s.io/apiserver/pkg/cel/library/regex.go) --------------------------------------------


def _pattern(pattern: str) -> Any:
    try:
        return compile_linear(pattern)
    except PatternError as exc:
        raise CelFunctionError(f"bad regular expression {pattern!r}: {exc}") from None


def find(text: str, pattern: str) -> str:
    match = _pattern(pattern).search(text)
    return match.group(0) if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [match.group(0) for match in _pattern(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


# -- URLs (k8s.io/apiserver/pkg/cel/library/urls.go) ---------------------------------------------


def _parsed_url(text: str) -> urllib.parse.SplitResult:
    try:
        parsed = urllib.parse.urlsplit(text)
        parsed.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as exc:
        raise CelFunctionError(f"url({text!r}): {exc}") from None
    if not parsed.scheme and not text.startswith("/"):
        raise CelFunctionError(f"url({text!r}): an absolute URI or an absolute path is required")
    return parsed


def url(text: str) -> dict[str, str]:
    _parsed_url(text)
    return {URL: text}


def is_url(text: str) -> bool:
    try:
        _parsed_url(text)
    except CelFunctionError:
        return False
    return True


def _url_of(value: Any) -> urllib.parse.SplitResult:
    if isinstance(value, dict) and URL in value:
        return _parsed_url(str(value[URL]))
    raise CelFunctionError(f"not a URL: {value!r}")


def get_scheme(value: Any) -> str:
    return _url_of(value).scheme


def get_host(value: Any) -> str:
    return _url_of(value).netloc.rpartition("@")[2]


def get_hostname(value: Any) -> str:
    return _url_of(value).hostname or ""


def get_port(value: Any) -> str:
    port = _url_of(value).port
    return "" if port is None else str(port)


def get_escaped_path(value: Any) -> str:
    return _url_of(value).path


def get_query(value: Any) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(_url_of(value).query, keep_blank_values=True)


# -- sets (cel-go's ext.Sets, enabled in Kubernetes) ---------------------------------------------


def sets_contains(values: Any, wanted: Any) -> bool:
    """`sets.contains(list, sublist)`: every element of `sublist` is in `list`."""
    have = _list(values, "sets.contains")
    return all(item in have for item in _list(wanted, "sets.contains"))


def sets_equivalent(values: Any, other: Any) -> bool:
    return sets_contains(values, other) and sets_contains(other, values)


def sets_intersects(values: Any, other: Any) -> bool:
    have = _list(values, "sets.intersects")
    return any(item in have for item in _list(other, "sets.intersects"))


# -- the library -----------------------------------------------------------------------------------

FUNCTIONS: dict[str, Callable[..., Any]] = {
    # quantity
    "quantity": quantity,
    "isQuantity": is_quantity,
    "isInteger": q_is_integer,
    "asInteger": q_as_integer,
    "asApproximateFloat": q_as_approximate_float,
    "sign": q_sign,
    "add": q_add,
    "sub": q_sub,
    "compareTo": q_compare_to,
    "isGreaterThan": q_is_greater_than,
    "isLessThan": q_is_less_than,
    # lists
    "isSorted": is_sorted,
    "sum": list_sum,
    "min": list_min,
    "max": list_max,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    # strings
    "charAt": char_at,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "join": join,
    "trim": trim,
    "strings.quote": quote,
    "format": string_format,
    # regex
    "find": find,
    "findAll": find_all,
    # URLs
    "url": url,
    "isURL": is_url,
    "getScheme": get_scheme,
    "getHost": get_host,
    "getHostname": get_hostname,
    "getPort": get_port,
    "getEscapedPath": get_escaped_path,
    "getQuery": get_query,
    # sets
    "sets.contains": sets_contains,
    "sets.equivalent": sets_equivalent,
    "sets.intersects": sets_intersects,
    # format (gpupolicy/custom/k8s_cel_format.py), IP and CIDR (gpupolicy/custom/k8s_cel_net.py)
    **FORMAT_FUNCTIONS,
    **NET_FUNCTIONS,
}
