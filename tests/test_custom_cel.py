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

DNS1123_LABEL_ERROR = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)

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
    # sets
    (
        "sets.contains",
        "sets.contains([1, 2, 3], [3, 1]) && !sets.contains([1], [1, 2]) && sets.contains([1], [])",
        True,
    ),
    ("sets.equivalent", "sets.equivalent([1, 2, 2], [2, 1]) && !sets.equivalent([1], [1, 2])", True),
    ("sets.intersects", "sets.intersects(['a', 'b'], ['b']) && !sets.intersects(['a'], ['c'])", True),
    # format: valid strings have no errors, invalid ones apimachinery's (Volcano's VAP joins them)
    ("format.dns1123Label", "format.dns1123Label().validate('Task_1').value()", [DNS1123_LABEL_ERROR]),
    (
        "format.dns1123Subdomain",
        "!format.dns1123Subdomain().validate('apiextensions.k8s.io').hasValue() && "
        "format.dns1123Subdomain().validate('a..b').hasValue()",
        True,
    ),
    (
        "format.dns1035Label",
        "!format.dns1035Label().validate('my-name').hasValue() && format.dns1035Label().validate('1abc').hasValue()",
        True,
    ),
    (
        "format.qualifiedName",
        "format.qualifiedName().validate('example.com/-x').value()",
        [
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        ],
    ),
    (
        "format.dns1123LabelPrefix",
        "!format.dns1123LabelPrefix().validate('my-label-prefix-').hasValue() && "
        "format.dns1123Label().validate('my-label-prefix-').hasValue()",
        True,
    ),
    (
        "format.dns1123SubdomainPrefix",
        "format.dns1123SubdomainPrefix().validate('mysubdomain.prefix.-').hasValue()",
        False,
    ),
    (
        "format.dns1035LabelPrefix",
        "format.dns1035LabelPrefix().validate('my-label-prefix-').hasValue()",
        False,
    ),
    (
        "format.labelValue",
        "!format.labelValue().validate('').hasValue() && format.labelValue().validate('-x').hasValue()",
        True,
    ),
    (
        "format.uri",
        "!format.uri().validate('http://example.com').hasValue() && format.uri().validate('relative').hasValue()",
        True,
    ),
    (
        "format.uuid",
        "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue() && "
        "format.uuid().validate('123').value() == ['does not match the UUID format']",
        True,
    ),
    (
        "format.byte",
        "!format.byte().validate('aGVsbG8=').hasValue() && format.byte().validate('a!').hasValue()",
        True,
    ),
    (
        "format.date",
        "!format.date().validate('2021-01-01').hasValue() && format.date().validate('2021-02-30').hasValue()",
        True,
    ),
    (
        "format.datetime",
        "!format.datetime().validate('2021-01-01T00:00:00Z').hasValue() && "
        "!format.datetime().validate('2021-01-01T00:00:00.5+02:00').hasValue() && "
        "format.datetime().validate('2021-01-01').hasValue()",
        True,
    ),
    (
        "format.named",
        "format.named('dns1123Label').hasValue() && !format.named('email').hasValue()",
        True,
    ),
    ("validate", "format.named('uuid').value().validate('x').value()", ["does not match the UUID format"]),
    # IP and CIDR
    ("ip", "ip('2001:DB8::1') == ip('2001:db8::1') && cidr('10.0.0.1/8').ip() == ip('10.0.0.1')", True),
    (
        "isIP",
        "isIP('10.0.0.1') && !isIP('010.0.0.1') && !isIP('::ffff:1.2.3.4') && !isIP('fe80::1%eth0')",
        True,
    ),
    ("ip.isCanonical", "ip.isCanonical('2001:db8::1') && !ip.isCanonical('2001:DB8::1')", True),
    ("family", "[ip('10.0.0.1').family(), ip('::1').family()]", [4, 6]),
    ("isUnspecified", "ip('0.0.0.0').isUnspecified() && !ip('10.0.0.1').isUnspecified()", True),
    ("isLoopback", "ip('127.0.0.2').isLoopback() && ip('::1').isLoopback()", True),
    (
        "isLinkLocalMulticast",
        "ip('224.0.0.251').isLinkLocalMulticast() && ip('ff02::1').isLinkLocalMulticast()",
        True,
    ),
    (
        "isLinkLocalUnicast",
        "ip('169.254.1.1').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast()",
        True,
    ),
    (
        "isGlobalUnicast",
        "ip('10.0.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast() && "
        "!ip('ff02::1').isGlobalUnicast()",
        True,
    ),
    ("cidr", "cidr('192.168.0.1/24').prefixLength()", 24),
    ("isCIDR", "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0')", True),
    (
        "containsIP",
        "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3')) && cidr('10.0.0.0/8').containsIP('10.1.2.3') && "
        "!cidr('10.0.0.0/8').containsIP('11.0.0.1') && !cidr('::/0').containsIP('10.0.0.1')",
        True,
    ),
    (
        "containsCIDR",
        "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16') && !cidr('10.1.0.0/16').containsCIDR(cidr('10.0.0.0/8'))",
        True,
    ),
    ("masked", "cidr('192.168.1.7/24').masked() == cidr('192.168.1.0/24')", True),
    ("prefixLength", "cidr('::1/128').prefixLength()", 128),
    (
        "string",
        "[string(ip('10.0.0.1')), string(cidr('10.0.0.1/8').masked()), string(2)]",
        ["10.0.0.1", "10.0.0.0/8", "2"],
    ),
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
