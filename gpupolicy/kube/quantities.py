"""Kubernetes resource quantities, parsed once and as the API server parses them.

The grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go):

    <quantity>     ::= <signedNumber><suffix>
    <signedNumber> ::= <number> | <sign><number>        <sign> ::= "+" | "-"
    <number>       ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <digit>        ::= 0 | 1 | ... | 9                  (ASCII only: "١" is no digit)
    <suffix>       ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>     ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>    ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>   (an int64)

What the API server does beyond the grammar, and we do too: JSON decoding trims white space
around the text (`UnmarshalJSON` calls `strings.TrimSpace`); a non-zero amount is rounded away
from zero to a whole number of nano units (`amount.Round(amount, Nano.infScale(), inf.RoundUp)`).
https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/

Where we are stricter, on purpose, and report the value (GP103 for GPU counts) instead:
- a number without any digit: apimachinery's scanner reads "Gi", "-", "." and "e3" as zero,
  though its own grammar has no such number;
- amounts beyond 2^63-1: apimachinery keeps them as big decimals, but its integer accessors
  (`Value`, `MilliValue`, used by validation and the scheduler) overflow, and it casts an
  exponent to int32, so that "1e4294967296" wraps around to 1;
- numbers of more than MAX_DIGITS significant digits, which no one writes (and whose exact
  value would cost time proportional to their length squared).

The scanner reads the text once, left to right (the only regular expression is a run of
digits): a 3 MB string costs one pass, and is never memoised.
"""

from __future__ import annotations

import re
from decimal import Decimal

from gpupolicy.core.bounded_cache import bounded_memo
from gpupolicy.core.findings import excerpt

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}  # powers of 2
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}  # of 10
_DIGITS = frozenset("0123456789")
_DIGIT_RUN = re.compile("[0-9]*")  # a run of ASCII digits: one pass, in C
# Go's unicode.IsSpace, which strings.TrimSpace trims (Python's str.strip also trims \x1c-\x1f).
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
MAX_AMOUNT = 2**63 - 1  # int64, what Quantity.Value() can return
_NANO = 10**9
_MAX_NANOS = MAX_AMOUNT * _NANO
MAX_DIGITS = 1000
_INT64_DIGITS = 19  # 2^63-1 has 19 digits
_CACHED_TEXT_CHARS = 32  # real quantities are short; longer texts are parsed each time, never kept


class QuantityError(ValueError):
    """The value is not a Kubernetes quantity, or is one no Kubernetes field can hold."""


def parse_quantity(value: object) -> Decimal:
    """The amount of a quantity, exactly as the API server reads it (rounded up to nano units),
    raising QuantityError for anything it rejects or that is out of range."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{excerpt(value)} is not a quantity")
    if isinstance(value, int):
        if abs(value) > MAX_AMOUNT:
            raise QuantityError(f"{excerpt(value)} is out of range (more than 2^63-1)")
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity")
        return _parse_text(repr(value))  # the number as written: 0.1, 1e-07, 1e+300
    if not isinstance(value, str):
        raise QuantityError(f"{excerpt(value)} is not a quantity")
    if len(value) <= _CACHED_TEXT_CHARS:
        return _parse_cached(value)
    return _parse_text(value)


@bounded_memo(max_bytes=1 << 20)  # request content: bounded in bytes, and only short texts
def _parse_cached(text: str) -> Decimal:
    """Memoised: rules read the same few quantities many times per object (Decimal is immutable)."""
    return _parse_text(text)


def _parse_text(raw: str) -> Decimal:
    text = raw.strip(_GO_SPACE)
    negative, integer, fraction, suffix = _scan(text, raw)
    base, exponent = _suffix_value(suffix, raw)
    return _amount(negative, integer, fraction, base, exponent, raw)


def _scan(text: str, raw: str) -> tuple[bool, str, str, str]:
    """Sign, integer digits, fraction digits and suffix of `text`."""
    pos = 1 if text[:1] in ("+", "-") else 0
    negative = text[:1] == "-"
    end = _DIGIT_RUN.match(text, pos).end()  # type: ignore[union-attr]  # `*` always matches
    integer = text[pos:end]
    fraction = ""
    if text[end : end + 1] == ".":
        pos = end + 1
        end = _DIGIT_RUN.match(text, pos).end()  # type: ignore[union-attr]
        fraction = text[pos:end]
    if not integer and not fraction:
        raise QuantityError(f"{excerpt(raw)} is not a quantity (no digits before the unit)")
    return negative, integer, fraction, text[end:]


def _suffix_value(suffix: str, raw: str) -> tuple[int, int]:
    """(base, exponent) of a suffix: Ki -> (2, 10), k -> (10, 3), e-2 -> (10, -2)."""
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix]
    if suffix in _BINARY:
        return 2, _BINARY[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[2:] if suffix[1] in "+-" else suffix[1:]
        if digits and all(character in _DIGITS for character in digits):
            significant = digits.lstrip("0")
            # strconv.ParseInt(…, 10, 64): anything past int64 is no exponent at all
            if len(significant) > _INT64_DIGITS or int(significant or "0") > MAX_AMOUNT:
                raise QuantityError(f"{excerpt(raw)} is out of range (its exponent is not an int64)")
            return 10, -int(significant or "0") if suffix[1] == "-" else int(significant or "0")
    raise QuantityError(
        f"{excerpt(raw)} is not a quantity (unit {excerpt(suffix)} is none of "
        "Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)"
    )


def _amount(negative: bool, integer: str, fraction: str, base: int, exponent: int, raw: str) -> Decimal:
    """The exact amount, rounded away from zero to nano units, within ±(2^63-1)."""
    digits = (integer + fraction).lstrip("0")
    point = len(integer) - (len(integer) + len(fraction) - len(digits))  # digits before the point
    digits = digits.rstrip("0")  # trailing zeros of the fraction change nothing
    if not digits:
        return Decimal(0)
    if base == 10:
        point += exponent
    # The amount is at least 10^(point-1): past 19 digits it is past 2^63-1 (before a binary suffix).
    if point > _INT64_DIGITS:
        raise QuantityError(f"{excerpt(raw)} is out of range (more than 2^63-1)")
    if point < -30:  # below 10^-30, times at most 2^60 < 10^19: far below one nano unit, rounded up to it
        nanos = 1
    else:
        if len(digits) > MAX_DIGITS:
            raise QuantityError(f"{excerpt(raw)} has more than {MAX_DIGITS} significant digits")
        numerator = int(digits) * (2**exponent if base == 2 else 1)
        shift = 9 - (len(digits) - point)  # amount * 10^9 = numerator * 10^shift
        nanos = numerator * 10**shift if shift >= 0 else -(-numerator // 10**-shift)
    if nanos > _MAX_NANOS:
        raise QuantityError(f"{excerpt(raw)} is out of range (more than 2^63-1)")
    amount = Decimal(nanos // _NANO) if nanos % _NANO == 0 else Decimal(f"{nanos}E-9").normalize()
    return -amount if negative else amount


_INT64 = re.compile("[+-]?[0-9]{1,19}")


def parse_int64(text: str) -> int | None:
    """An integer as Go's strconv.ParseInt(text, 10, 64) reads one (label values compared with
    Gt/Lt, IntOrString fields): ASCII digits with an optional sign, within int64; None otherwise.
    Python's int() also takes Unicode digits ("١"), " 5" and "1_0": never call it on input."""
    if _INT64.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -MAX_AMOUNT - 1 <= value <= MAX_AMOUNT else None


def quantity_or_none(value: object) -> Decimal | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def quantity_problem(value: object) -> str | None:
    """Why `value` is no quantity (for a message), or None when it is one."""
    try:
        parse_quantity(value)
    except QuantityError as exc:
        return str(exc)
    return None


def is_positive_integer(amount: Decimal) -> bool:
    return amount > 0 and amount == amount.to_integral_value()


def format_quantity(value: object) -> str:
    """How a value reads in a message: short quantities as written, anything else as an excerpt."""
    if isinstance(value, str) and len(value) <= 40:
        return value
    return excerpt(value, 40)
