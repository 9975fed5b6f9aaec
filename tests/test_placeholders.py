"""Deploy-time placeholders told apart from the references the cluster fills in."""

from __future__ import annotations

import pytest

from gpupolicy.kube.placeholders import EXCERPT, braced, excerpt, field_placeholder, scan, whole


@pytest.mark.parametrize(
    ("text", "placeholders"),
    [
        ("$IMAGE_URL", ["$IMAGE_URL"]),
        ("${REGISTRY}/vllm:latest", ["${REGISTRY}"]),
        ("${REGISTRY:-nvcr.io}/vllm:1", ["${REGISTRY:-nvcr.io}"]),
        ("<your-registry>/image:latest", ["<your-registry>"]),
        ("__REGISTRY__/app:__TAG__", ["__REGISTRY__", "__TAG__"]),
        ("{{ image }}", ["{{ image }}"]),
        ("{{- .Values.image.repository }}:{{ .Values.image.tag -}}", ["{{- .Values.image.repository }}", "{{ .Values.image.tag -}}"]),
        ("nvcr.io/nvidia/tritonserver:24.05-py3", []),
        ("my__repo/app_name:v1_2", []),  # `__` inside a name is the reference grammar's separator
        ("__init__", []),  # lowercase: not a placeholder
        ("$$HOME", []),  # an escaped dollar
        ("${}", []),
        ("<>", []),
        # a name in single braces, which a sed step fills in (AWS's Composer job): images only
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com/composer:{TAG}", ["{TAG}"]),
        ("{REGISTRY}/{image}:v1", ["{REGISTRY}", "{image}"]),
        ("{}", []),
        ("{TAG", []),
    ],
)  # fmt: skip
def test_placeholders(text: str, placeholders: list[str]) -> None:
    found = scan(text)
    assert found.texts(text) == placeholders and not found.references


@pytest.mark.parametrize(
    "text",
    ["$(VLLM_API_KEY)", "$(params.image)", "${trialParameters.learningRate}", "{{inputs.parameters.image}}"],
)
def test_references_the_cluster_fills_in(text: str) -> None:
    found = scan(text)
    assert found.spans == () and found.references


def test_tokenizer_tokens_are_text_outside_images() -> None:
    for token in ("<s>", "<pad>", "<unk>", "<mask>", "</s>", "<|im_start|>"):
        assert whole(token) is None, token
    assert whole("<token>") == "<token>" and whole("<KEY>") == "<KEY>"
    assert scan("<tag>", strict=True).texts("<tag>") == ["<tag>"]  # an image cannot hold `<`


def test_single_braces_are_a_programs_format_string_outside_images() -> None:
    assert whole("{PROMPT}") is None and scan("User: {PROMPT}", strict=False).spans == ()
    assert whole("{{ image }}") == "{{ image }}"


def test_whole_values() -> None:
    assert whole("  $HF_TOKEN ") == "$HF_TOKEN"
    assert whole("${HF_TOKEN}") == "${HF_TOKEN}"
    assert whole("/models/${MODEL}") is None  # part of a longer value
    assert whole("$(HF_TOKEN)") is None
    assert whole("") is None


@pytest.mark.parametrize(
    "text",
    [
        "<" * 100_000,
        "{{" * 50_000,
        "${" * 50_000,
        "${" + "A" * 100_000,
        "$" + "A_" * 50_000,
        "__" + "A" * 100_000,
        "_" * 100_000,
        ("<" + "a" * 60) * 2_000,
    ],
)
def test_hostile_input_is_scanned_without_finding_nonsense(text: str) -> None:
    found = scan(text)  # linear: every delimiter search is bounded
    assert all(end - start <= len(text) for start, end in found.spans)


def test_excerpt_is_bounded() -> None:
    cut = excerpt("a" * 300 + "b" * 300)
    assert len(cut) == EXCERPT and cut.startswith("a") and cut.endswith("b") and "…" in cut
    assert excerpt("short") == "short"


@pytest.mark.parametrize(
    ("value", "found"),
    [("${env:CLUSTER_NAME}", None), ('set(attributes["cluster"], "${env:CLUSTER_NAME}")', None),
     ("${file:/run/secrets/token}", None), ("${CLUSTER_NAME}", "${CLUSTER_NAME}"),
     ("${NAME:-default}", "${NAME:-default}")],
)  # fmt: skip
def test_a_programs_scheme_reference_is_no_envsubst_placeholder(value: str, found: str | None) -> None:
    """The OpenTelemetry collector's `${env:VAR}` (soperator's chart values): no shell or envsubst
    writes a lowercase scheme and a colon before a name."""
    assert braced(value) == found


@pytest.mark.parametrize(
    ("value", "found"),
    [("gs://<gpt-fast-url>/v1", "<gpt-fast-url>"), ("s3://<BUCKET_NAME>/model", "<BUCKET_NAME>"),
     ("gs://bucket/v1", None), ("a < b > c", None)],
)  # fmt: skip
def test_a_word_in_angle_brackets_inside_a_literal_field_is_a_placeholder(
    value: str, found: str | None
) -> None:
    """pytorch/serve's KServe example: `storageUri: gs://<gpt-fast-url>/v1`."""
    assert field_placeholder(value) == found
