"""The Kubernetes CEL library of custom rules (gpupolicy/custom/k8s_cel.py): every function that
docs/custom-rules.md lists, evaluated through the CEL engine as a rule would call it."""

from __future__ import annotations

from typing import Any

import pytest

from gpupolicy.custom.cel import CelEvaluationError, compile_expression
from gpupolicy.custom.definitions import Origin
from gpupolicy.custom.errors import CustomRuleError
from gpupolicy.custom.k8s_cel import FUNCTIONS

ORIGIN = Origin("rules.yaml", 7)

CASES: list[tuple[str, str, Any]] = [
    # quantity
    ("quantity", "quantity('1Gi') == quantity('1024Mi')", True),
    ("isQuantity", "isQuantity('1Gi') && !isQuantity('1Gx')", True),
    ("isInteger", "quantity('2').isInteger() && !quantity('500m').isInteger()", True),
    ("asInteger", "quantity('2k').asInteger()", 2000),
    ("asApproximateFloat", "quantity('500m').asApproximateFloat()", 0.5),
    ("sign", "quantity('-1').sign()", -1),
    (
        "add",
        "quantity('1').add(quantity('500m')) == quantity('1500m') && quantity('1').add(2).asInteger() == 3",
        True,
    ),
    ("sub", "quantity('1Gi').sub(quantity('512Mi')) == quantity('512Mi')", True),
    ("compareTo", "quantity('1').compareTo(quantity('1000m'))", 0),
    ("isGreaterThan", "quantity('1Gi').isGreaterThan(quantity('500Mi'))", True),
    ("isLessThan", "quantity('100m').isLessThan(quantity('1'))", True),
    # lists
    ("isSorted", "[1, 2, 3].isSorted() && !['b', 'a'].isSorted()", True),
    ("sum", "[1, 2, 3].sum()", 6),
    ("min", "[3, 1, 2].min()", 1),
    ("max", "[3, 1, 2].max()", 3),
    ("indexOf", "[1, 2, 3].indexOf(2) == 1 && 'hello'.indexOf('l') == 2 && [1].indexOf(5) == -1", True),
    ("lastIndexOf", "[1, 2, 2].lastIndexOf(2) == 2 && 'hello'.lastIndexOf('l') == 3", True),
    # strings
    ("charAt", "'hello'.charAt(1)", "e"),
    ("lowerAscii", "'GPU-A100'.lowerAscii()", "gpu-a100"),
    ("upperAscii", "'gpu'.upperAscii()", "GPU"),
    ("replace", "'a-b-c'.replace('-', '.')", "a.b.c"),
    ("split", "'nvcr.io/nvidia/pytorch'.split('/')", ["nvcr.io", "nvidia", "pytorch"]),
    ("substring", "'nvidia.com/gpu'.substring(0, 6)", "nvidia"),
    ("join", "['a', 'b'].join(', ')", "a, b"),
    ("trim", "'  gpu  '.trim()", "gpu"),
    ("strings.quote", "strings.quote('say \"hi\"')", '"say \\"hi\\""'),
    ("format", "'%s asks for %d GPUs (%.1f%%)'.format(['train', 2, 12.5])", "train asks for 2 GPUs (12.5%)"),
    # regex
    ("find", "'image:v1.2.3'.find('[0-9]+[.][0-9]+')", "1.2"),
    (
        "findAll",
        "'a1b22c333'.findAll('[0-9]+') == ['1', '22', '333'] && 'a1b22'.findAll('[0-9]+', 1) == ['1']",
        True,
    ),
    # URLs
    ("url", "url('https://nvcr.io/v2/').getScheme()", "https"),
    ("isURL", "isURL('https://nvcr.io') && !isURL('relative/path')", True),
    ("getScheme", "url('http://example.com').getScheme()", "http"),
    ("getHost", "url('https://example.com:8443/p').getHost()", "example.com:8443"),
    ("getHostname", "url('https://user@example.com:8443/p').getHostname()", "example.com"),
    ("getPort", "url('https://example.com:8443/p').getPort()", "8443"),
    ("getEscapedPath", "url('https://example.com/a%20b').getEscapedPath()", "/a%20b"),
    ("getQuery", "url('https://example.com/?x=1&x=2&y=').getQuery()", {"x": ["1", "2"], "y": [""]}),
]


def evaluate(text: str, activation: dict[str, Any] | None = None) -> Any:
    return compile_expression(text, ORIGIN, "test").evaluate(activation or {})


@pytest.mark.parametrize(("function", "expression", "expected"), CASES, ids=[case[0] for case in CASES])
def test_each_kubernetes_cel_function(function: str, expression: str, expected: Any) -> None:
    assert function in FUNCTIONS
    assert evaluate(expression) == expected


def test_every_function_of_the_library_has_a_case() -> None:
    assert {case[0] for case in CASES} == set(FUNCTIONS)


def test_functions_read_the_object() -> None:
    obj = {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 2, "memory": "64Gi"}}}]}}
    expression = (
        "object.spec.containers.all(c, quantity(c.resources.limits.memory).isLessThan(quantity('80Gi'))"
        " && c.resources.limits['nvidia.com/gpu'] <= 4)"
    )
    assert evaluate(expression, {"object": obj}) is True


def test_a_bad_argument_is_an_evaluation_error_not_a_crash() -> None:
    with pytest.raises(CelEvaluationError, match="quantity"):
        evaluate("quantity('lots')")
    with pytest.raises(CelEvaluationError, match="regular expression"):
        evaluate("'a'.find('(')")


def test_parse_errors_and_unknown_functions_name_the_line() -> None:
    with pytest.raises(CustomRuleError, match=r"rules.yaml:8:3: CEL: test: Syntax error"):
        compile_expression("1 +\n  ]", ORIGIN, "test")
    with pytest.raises(CustomRuleError, match=r"rules\.yaml:7: CEL: test: unknown function isQuantiy"):
        compile_expression("isQuantiy('1')", ORIGIN, "test")
