"""Kubernetes resource quantities (k8s.io/apimachinery/pkg/api/resource).

Grammar: <signedNumber><suffix>, suffix one of the binary SI (Ki Mi Gi Ti Pi Ei), decimal SI
(n u m "" k M G T P E) or a decimal exponent (e3, E-2). Numbers in YAML may also arrive as
int or float. https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from gpupolicy.bounded_cache import bounded_memo

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """Parse a quantity exactly (Decimal), raising QuantityError for anything Kubernetes rejects."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity")
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    return _parse_text(value)


@bounded_memo(max_bytes=1 << 20)
def _parse_text(value: str) -> Decimal:
    """Memoised: rules parse the same few quantities many times per object (Decimal is immutable);
    bounded in bytes, since the text is whatever a request holds."""
    match = _QUANTITY.match(value.strip())
    if match is None or value != value.strip():
        raise QuantityError(f"{value!r} is not a quantity")
    try:
        number = Decimal(match.group("number"))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid numbers
        raise QuantityError(f"{value!r} is not a quantity") from exc
    suffix = match.group("suffix") or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number.scaleb(int(suffix[1:]))


def quantity_or_none(value: object) -> Decimal | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def is_positive_integer(amount: Decimal) -> bool:
    return amount > 0 and amount == amount.to_integral_value()


def format_quantity(value: object) -> str:
    """How a value reads in a message: quantities as written, everything else via repr."""
    return value if isinstance(value, str) else repr(value)
