"""Quantities exactly as the API server reads them (k8s.io/apimachinery resource.ParseQuantity),
checked against a model written from its grammar; and what hostile quantities and numbers do to
the rules: a finding (GP103, GP405), never an exception that switches other rules off."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.report import Report
from gpupolicy.kube.quantities import MAX_AMOUNT, QuantityError, parse_int64, parse_quantity
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy

BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
NON_ASCII_DIGITS = st.characters(categories=["Nd"]).filter(lambda character: not character.isascii())


@st.composite
def quantity_texts(draw: st.DrawFn) -> tuple[str, Fraction]:
    """A text of the grammar <signedNumber><suffix>, and its exact value (before rounding)."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    integer = draw(st.text("0123456789", max_size=22))
    fraction = draw(st.text("0123456789", max_size=14))
    dot = draw(st.booleans()) if integer and not fraction else bool(fraction)
    if not integer and not fraction:
        integer = "0"
    kind = draw(st.sampled_from(["binary", "decimal", "exponent"]))
    number = Fraction(int(integer or "0") * 10 ** len(fraction) + int(fraction or "0"), 10 ** len(fraction))
    if kind == "binary":
        suffix = draw(st.sampled_from(sorted(BINARY)))
        value = number * 2 ** BINARY[suffix]
    elif kind == "decimal":
        suffix = draw(st.sampled_from(sorted(DECIMAL)))
        value = number * Fraction(10) ** DECIMAL[suffix]
    else:
        exponent = draw(st.integers(min_value=-40, max_value=40))
        letter = draw(st.sampled_from("eE"))
        explicit = "+" if exponent >= 0 and draw(st.booleans()) else ""
        suffix = f"{letter}{explicit}{exponent}"
        value = number * Fraction(10) ** exponent
    text = f"{sign}{integer}{'.' if dot else ''}{fraction}{suffix}"
    return text, -value if sign == "-" else value


def api_server_amount(value: Fraction) -> Fraction:
    """ParseQuantity's rounding: a non-zero magnitude rounds up to a whole number of nano units."""
    nanos = math.ceil(abs(value) * 10**9)
    rounded = Fraction(nanos, 10**9)
    return -rounded if value < 0 else rounded


@settings(max_examples=1000)
@given(quantity_texts())
def test_every_text_of_the_grammar_parses_to_the_api_servers_amount(case: tuple[str, Fraction]) -> None:
    text, value = case
    expected = api_server_amount(value)
    if abs(expected) > MAX_AMOUNT:
        with pytest.raises(QuantityError, match="out of range"):
            parse_quantity(text)
    else:
        assert Fraction(parse_quantity(text)) == expected, text


@given(st.integers(min_value=-(10**27), max_value=10**27))
def test_whole_nano_amounts_round_trip(nanos: int) -> None:
    """Any amount the API server can hold reads back the same from its canonical texts."""
    amount = Fraction(nanos, 10**9)
    if abs(amount) > MAX_AMOUNT:
        return
    assert Fraction(parse_quantity(f"{nanos}n")) == amount
    assert Fraction(parse_quantity(f"{nanos}e-9")) == amount
    assert Fraction(parse_quantity(str(Decimal(nanos).scaleb(-9)))) == amount


@given(quantity_texts(), st.data())
def test_digits_are_ascii_only(case: tuple[str, Fraction], data: st.DataObject) -> None:
    """`"١"` (ARABIC-INDIC DIGIT ONE) was read as one GPU: Python's \\d and int() take any Nd digit."""
    text, _ = case
    positions = [index for index, character in enumerate(text) if character.isdigit()]
    index = data.draw(st.sampled_from(positions))
    changed = text[:index] + data.draw(NON_ASCII_DIGITS) + text[index + 1 :]
    with pytest.raises(QuantityError):
        parse_quantity(changed)


@given(
    mantissa=st.text("0123456789", min_size=1, max_size=30),
    exponent=st.integers(min_value=-(2**70), max_value=2**70),
)
def test_any_exponent_gives_an_amount_in_range_or_a_quantity_error(mantissa: str, exponent: int) -> None:
    """`1e1000000` once raised decimal.Overflow inside 31 rules; exponents past int64 are no
    exponents at all for the API server (strconv.ParseInt fails)."""
    try:
        amount = parse_quantity(f"{mantissa}e{exponent}")
    except QuantityError:
        return
    assert abs(amount) <= MAX_AMOUNT
    assert -(2**63) <= exponent < 2**63


@given(st.integers())
def test_yaml_integers_of_any_size(value: int) -> None:
    try:
        amount = parse_quantity(value)
    except QuantityError:
        assert abs(value) > MAX_AMOUNT
        return
    assert amount == value


@pytest.mark.parametrize("text", ["1" * 3_000_000, "1." + "0" * 3_000_000, "0." + "0" * 3_000_000 + "1"])
def test_huge_texts_are_read_in_one_pass(text: str) -> None:
    try:
        amount = parse_quantity(text)
    except QuantityError as exc:
        assert len(str(exc)) < 200  # an excerpt, not the text
        return
    assert amount in (Decimal(1), Decimal("1E-9"))


@given(st.text("+- \t0123456789_١²x", max_size=25) | st.text(max_size=25))
def test_parse_int64_is_strconv_parseint(text: str) -> None:
    """Gt/Lt label values and IntOrString fields: int() would also take "١", " 5" and "1_0"."""
    stripped = text.lstrip("+-")
    ascii_number = (
        text[:1] in ("+", "-", *"0123456789")
        and stripped.isascii()
        and stripped.isdigit()
        and len(text) - len(stripped) <= 1
    )
    expected = int(text) if ascii_number and -(2**63) <= int(text) < 2**63 else None
    assert parse_int64(text) == expected


# -- what the rules make of them ------------------------------------------------------------------


def lint(text: str) -> Report:
    loaded = load_text(text, "pod.yaml")
    return evaluate(loaded.resources, default_policy(), problems=loaded.problems)


def gpu_pod(quantity: str, *, privileged: bool = True, probe_port: str = "http") -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: p, namespace: ns}}
spec:
  containers:
  - name: c
    image: vllm/vllm-openai:v0.6.3
    ports: [{{name: http, containerPort: 8000}}]
    readinessProbe: {{httpGet: {{path: /health, port: "{probe_port}"}}}}
    securityContext: {{privileged: {str(privileged).lower()}}}
    resources: {{limits: {{nvidia.com/gpu: "{quantity}"}}}}
"""


@pytest.mark.parametrize(
    ("quantity", "words"),
    [
        ("1e1000000", "out of range"),
        ("١", "not a quantity"),
        ("9" * 5000, "out of range"),
        ("1e-1000000000", "not a positive whole number"),  # rounds up to 1n, as the API server does
        ("8Ei", "out of range"),
    ],
)
def test_a_hostile_gpu_quantity_is_gp103_and_every_other_rule_still_runs(quantity: str, words: str) -> None:
    """A privileged pod with nvidia.com/gpu: "1e1000000" was admitted in enforce mode: GP601 and
    30 other rules raised on the quantity, so no error finding was left to deny it."""
    report = lint(gpu_pod(quantity))
    assert report.errors == []
    ids = {finding.rule_id for finding in report.findings}
    assert {"GP103", "GP601"} <= ids
    (gp103,) = [finding for finding in report.findings if finding.rule_id == "GP103"]
    assert words in gp103.message and len(gp103.message) < 300


def test_a_probe_port_of_a_superscript_digit_is_gp405_not_a_crash() -> None:
    report = lint(gpu_pod("1", privileged=False, probe_port="²"))
    assert report.errors == []
    assert "GP405" in {finding.rule_id for finding in report.findings}


@pytest.mark.parametrize("repeats", ["²", "١٠", "³"])
def test_unicode_digits_in_experiment_repeats_are_not_numbers(repeats: str) -> None:
    text = f"""\
apiVersion: v1
kind: ConfigMap
metadata: {{name: day1-experiment, namespace: ns}}
data: {{change: priority, fixed: image, metrics: "P95, GPU hours", repeats: "{repeats}"}}
"""
    report = lint(text)
    assert report.errors == []
    assert "GP801" in {finding.rule_id for finding in report.findings}
