"""Kubernetes quantities: every suffix, exponents, YAML numbers, and what Kubernetes rejects."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupolicy.kube.quantities import (
    QuantityError,
    format_quantity,
    is_positive_integer,
    parse_quantity,
    quantity_or_none,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Ki", Decimal(1024)),
        ("1Mi", Decimal(1024**2)),
        ("16Gi", Decimal(16 * 1024**3)),
        ("1Ti", Decimal(1024**4)),
        ("1Pi", Decimal(1024**5)),
        ("1Ei", Decimal(1024**6)),
        ("1n", Decimal("0.000000001")),
        ("1u", Decimal("0.000001")),
        ("500m", Decimal("0.5")),
        ("1", Decimal(1)),
        ("2k", Decimal(2000)),
        ("3M", Decimal(3_000_000)),
        ("1G", Decimal(10**9)),
        ("1T", Decimal(10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),
    ],
)
def test_every_suffix(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("5E-2", Decimal("0.05")),
        ("2e+2", Decimal(200)),
        ("1.5Gi", Decimal("1.5") * 1024**3),
        ("0.5", Decimal("0.5")),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("+2", Decimal(2)),
        ("-1", Decimal(-1)),
        ("100m", Decimal("0.1")),
        ("0", Decimal(0)),
        # the API server's JSON decoding trims white space around the text (UnmarshalJSON)
        (" 1", Decimal(1)),
        ("2 ", Decimal(2)),
    ],
)
def test_exponents_decimals_and_signs(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, Decimal(1)),
        (0, Decimal(0)),
        (8, Decimal(8)),
        (-1, Decimal(-1)),
        (0.5, Decimal("0.5")),
        (2.0, Decimal(2)),
    ],
)
def test_yaml_ints_and_floats(value: object, expected: Decimal) -> None:
    assert parse_quantity(value) == expected


def test_float_keeps_its_written_value() -> None:
    # 0.1 as a float is not exactly 1/10; the parse must give the value a person wrote.
    assert parse_quantity(0.1) == Decimal("0.1")


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        None,
        "",
        "1 Gi",
        "1.5.5",
        "Gi",
        "1gi",
        "1KI",
        "1Kb",
        "one",
        "1e",
        "e3",
        "--1",
        "0x10",
        "1_000",
        float("nan"),
        float("inf"),
        [1],
        {"value": 1},
    ],
)
def test_invalid_forms(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)
    assert quantity_or_none(value) is None


def test_quantity_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity("1 Gi")


@pytest.mark.parametrize(
    ("amount", "expected"),
    [
        (Decimal(1), True),
        (Decimal(8), True),
        (Decimal("2.0"), True),
        (Decimal(0), False),
        (Decimal("0.5"), False),
        (Decimal(-1), False),
    ],
)
def test_is_positive_integer(amount: Decimal, expected: bool) -> None:
    assert is_positive_integer(amount) is expected


def test_format_quantity_keeps_text_and_reprs_numbers() -> None:
    assert format_quantity("500m") == "500m"
    assert format_quantity(0.5) == "0.5"
    assert format_quantity(2) == "2"
    assert format_quantity(None) == "None"


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


@given(data=st.data(), suffix=st.sampled_from(sorted(_BINARY)))
def test_round_trip_binary(data: st.DataObject, suffix: str) -> None:
    number = data.draw(st.integers(min_value=0, max_value=min(10**6, (2**63 - 1) // _BINARY[suffix])))
    assert parse_quantity(f"{number}{suffix}") == number * _BINARY[suffix]


@given(data=st.data(), suffix=st.sampled_from(sorted(_DECIMAL)))
def test_round_trip_decimal(data: st.DataObject, suffix: str) -> None:
    bound = min(10**6, (2**63 - 1) // 10 ** max(_DECIMAL[suffix], 0))  # within int64
    number = data.draw(st.integers(min_value=-bound, max_value=bound))
    assert parse_quantity(f"{number}{suffix}") == Decimal(number).scaleb(_DECIMAL[suffix])


@given(data=st.data(), exponent=st.integers(min_value=-9, max_value=18))
def test_round_trip_exponent_equals_decimal_suffix(data: st.DataObject, exponent: int) -> None:
    number = data.draw(st.integers(min_value=0, max_value=min(10**6, (2**63 - 1) // 10 ** max(exponent, 0))))
    assert parse_quantity(f"{number}e{exponent}") == Decimal(number).scaleb(exponent)


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_int_and_its_text_agree(number: int) -> None:
    assert parse_quantity(number) == parse_quantity(str(number))
