"""No regular expression runs in more than linear time on request content.

Each case is a pattern's worst input that we know (found by reading the pattern: a run of the
characters it repeats over, the literal it starts at repeated, a near-miss at the end). With
Python's backtracking `re`, several took time quadratic (or worse) in the input: a 100 KB
argument blocked the webhook for 55 s in provenance redaction, and `tritonserver:(?!.*-sdk)` for
26 s on a 1.5 MB image. The property checked is growth (8x the input, about 8x the time), not
a time budget. Patterns over request content run on RE2 (gpupolicy/core/linear_regex.py); those that
stay on Python's `re` are listed below with the input that would hurt them, if anything could.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from gpupolicy.core.linear_regex import PatternError, compile_linear
from gpupolicy.engine import suppressions
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.kube import images, placeholders, secrets_detect
from gpupolicy.kube.rollback import ARG_PLACEHOLDER
from gpupolicy.loading import directives, documents
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy
from gpupolicy.provenance import record, redaction
from tests.robustness.growth import FACTOR, LINEAR_BOUND, growth

Case = tuple[str, Callable[[Any], object], Callable[[int], Any]]


def _lint(text: str) -> object:
    loaded = load_text(text, "big.yaml")
    return evaluate(loaded.resources, default_policy(), problems=loaded.problems)


def _pod_with_image(image: str) -> str:
    return (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ns}\nspec:\n  containers:\n"
        f"  - name: c\n    image: {json.dumps(image)}\n"
    )


def _pod_with_args(argument: str) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "args": [argument], "env": [{"name": "A", "value": "x"}]}]}}


REDACTION: list[Case] = [
    ("flag --passpass…", redaction._redact_text_fully, lambda n: "--" + "pass" * (n // 4)),
    ("assignment A_TOKEN_TOKEN…", redaction._redact_text_fully, lambda n: "A" + "_TOKEN" * (n // 6)),
    ("url aaaa… ://", redaction._redact_text_fully, lambda n: "a" * n + " ://"),
    ("jwt -eyJ-eyJ…", redaction._redact_text_fully, lambda n: "-eyJ" * (n // 4)),
    ("pem BEGIN AAAA…", redaction._redact_text_fully, lambda n: "-----BEGIN " + "A" * n),
    ("bearer + spaces", redaction._redact_text_fully, lambda n: "bearer" + " " * n + "!"),
    ("sk- + dashes", redaction._redact_text_fully, lambda n: " sk-" + "-" * n + "!"),
    (
        "pem END repeated",
        redaction._redact_text_fully,
        lambda n: "-----BEGIN PRIVATE KEY-----" + "-----END " * (n // 9),
    ),
    ("redact() of an argument", redaction.redact, lambda n: _pod_with_args("--passpass" * (n // 10))),
]
CREDENTIALS: list[Case] = [
    ("jwt -eyJ-eyJ…", secrets_detect.value_credential, lambda n: "-eyJ" * (n // 4)),
    ("url aaaa… ://", secrets_detect.value_credential, lambda n: "a" * n + " ://"),
    (
        "slack hook + letters",
        secrets_detect.value_credential,
        lambda n: "https://hooks.slack.com/services/T" + "a" * n,
    ),
    ("placeholder {{{{…", secrets_detect.is_placeholder, lambda n: "{{" * (n // 2)),
    ("named API_KEY {{{{…", lambda value: secrets_detect.detect("API_KEY", value), lambda n: "{{" * (n // 2)),
    (
        "private key A A A…",
        secrets_detect.value_credential,
        lambda n: "-----BEGIN " + "A " * (n // 2) + "PRIVATE KEX",
    ),
]


def _is_serving_image(image: str) -> bool:
    """GP105's test of an image against the policy's servingImages (compiled as the rule does)."""
    return any(
        compile_linear(pattern).search(image) for pattern in default_policy().data["gpu"]["servingImages"]
    )


# Large enough that a quadratic part would dominate what is linear around it.
LARGE: list[Case] = [
    (
        "servingImages on tritonserver:… -sdk",
        _is_serving_image,
        lambda n: "nvcr.io/nvidia/tritonserver:" * (n // 28) + "-sdk",
    ),
    (
        "GP105 and every rule on tritonserver:… -sdk",
        _lint,
        lambda n: _pod_with_image("nvcr.io/nvidia/tritonserver:" * (n // 28) + "-sdk"),
    ),
]
OBJECTS: list[Case] = [
    ("an image of one long path", _lint, lambda n: _pod_with_image("a" * n + ":1")),
    ("an image of separators", _lint, lambda n: _pod_with_image("a-" * (n // 2) + "!")),
    ("ignore annotation A + spaces", suppressions.parse_annotation, lambda n: "A" + " " * n + "x"),
    (
        "experiment slo",
        _lint,
        lambda n: (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x-experiment, namespace: ns}\n"
            f"data: {{change: a, fixed: image, metrics: P95, repeats: '3', slo: {json.dumps('a<1' + ' , a<1' * (n // 6) + ' ,!')}}}\n"
        ),
    ),
    (
        "experiment slo spaces",
        _lint,
        lambda n: (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x-experiment, namespace: ns}\n"
            f"data: {{change: a, fixed: image, metrics: P95, repeats: '3', slo: {json.dumps('a' + ' ' * n + 'x')}}}\n"
        ),
    ),
    (
        "mig resource name",
        _lint,
        lambda n: (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: x:1\n"
            f"    resources: {{limits: {{{json.dumps('nvidia.com/mig-' + '1' * n + 'g')}: 1}}}}\n"
        ),
    ),
]
# Patterns kept on Python's re, each with the input that would hurt it if anything could.
PYTHON_RE: list[Case] = [
    ("redaction prefilter", redaction._MAYBE_SECRET.search, lambda n: "pas" * (n // 3)),
    ("secret key names", redaction._SECRET_KEY.search, lambda n: "api-" * (n // 4)),
    ("reference key names", redaction._REFERENCE_KEY.search, lambda n: "key-" * (n // 4) + "x"),
    ("harmless strings", redaction._HARMLESS.fullmatch, lambda n: "0-" * (n // 2) + "x"),
    ("helm actions", documents._HELM_ACTION.search, lambda n: "{{ " * (n // 3)),
    ("env placeholders", documents._ENV_PLACEHOLDER.search, lambda n: "${a" * (n // 3)),
    ("placeholders", placeholders.scan, lambda n: "<a" * (n // 2)),
    ("placeholders, braces", placeholders.scan, lambda n: "${a" * (n // 3)),
    ("image repository", images._REPOSITORY.match, lambda n: "a--" * (n // 3) + "!"),
    ("record digest", record._DIGEST.search, lambda n: "@a:" + "0" * n + "x"),
    ("analysis args", ARG_PLACEHOLDER.search, lambda n: "{{args." + "a" * n + " " * n),
    ("ignore comments", directives._DIRECTIVE.search, lambda n: "# " * (n // 2)),
    ("ignore tokens", suppressions._TOKEN.match, lambda n: "A" + "-" * n + "["),
]


@pytest.mark.parametrize(
    ("name", "func", "make", "n"),
    [pytest.param(*case, 2000, id=case[0]) for case in REDACTION + CREDENTIALS + PYTHON_RE]
    + [pytest.param(*case, 4000, id=case[0]) for case in OBJECTS]
    + [pytest.param(*case, 20000, id=case[0]) for case in LARGE],
)
def test_time_grows_linearly_with_the_input(
    name: str, func: Callable[[Any], object], make: Callable[[int], Any], n: int
) -> None:
    ratio = growth(func, make, n)
    assert ratio < LINEAR_BOUND, f"{name}: {FACTOR}x the input took {ratio:.0f}x the time"


def test_the_default_serving_images_still_mean_what_they_meant() -> None:
    patterns = [compile_linear(pattern) for pattern in default_policy().data["gpu"]["servingImages"]]

    def serving(image: str) -> bool:
        return any(pattern.search(image) for pattern in patterns)

    assert serving("nvcr.io/nvidia/tritonserver:24.08-py3")
    assert serving("nvcr.io/nvidia/tritonserver:24.08-trtllm-python-py3@sha256:" + "a" * 64)
    assert not serving("nvcr.io/nvidia/tritonserver:24.08-py3-sdk")
    assert not serving("nvcr.io/nvidia/tritonserver:24.08-py3-igpu-sdk@sha256:" + "a" * 64)
    assert serving("vllm/vllm-openai:v0.6.3") and serving("nvcr.io/nim/meta/llama3-8b-instruct:1.0")
    assert not serving("python:3.12")


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("tritonserver:(?!.*-sdk)", "lookahead"),
        ("(?<=a)b", "lookbehind"),
        (r"(a)\1", "backreferences"),
        ("a{2000}", "invalid repetition size"),
    ],
)
def test_patterns_that_cannot_run_in_linear_time_are_refused_with_the_reason(
    pattern: str, words: str
) -> None:
    with pytest.raises(PatternError, match=words):
        compile_linear(pattern)
