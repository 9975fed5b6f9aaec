"""Credential detection: provider token shapes and credential-named variables, few false positives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupolicy.kube.secrets_detect import (
    _ANY_REQUIRED_TEXT,
    _REQUIRED_TEXT,
    credential_name_kind,
    detect,
    detect_in_arguments,
    holds_any_search,
    names_a_credential_object,
    placeholder_credential,
)


@pytest.mark.parametrize(
    ("name", "value", "kind"),
    [
        ("HF_TOKEN", "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "Hugging Face token"),
        ("X", "sk-proj-abcdefghijklmnopqrstuvwxyz012345", "OpenAI-style API key"),
        ("X", "sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "Anthropic API key"),
        ("AWS_ACCESS_KEY_ID", "AKIAQWERTYUIOPASDFGH", "AWS access key id"),
        ("GH", "ghp_" + "a" * 36, "GitHub token"),
        ("GH", "github_pat_" + "A1" * 20, "GitHub token"),
        ("SLACK", "xoxb-1234567890-abcdefghij", "Slack token"),
        ("HOOK", "https://hooks.slack.com/services/T000/B000/XXXXabcd", "Slack webhook URL"),
        ("G", "AIza" + "b" * 35, "Google API key"),
        ("AUTH", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijklmnop", "JSON Web Token"),
        ("TLS", "-----BEGIN RSA PRIVATE KEY-----\nMIIE...", "private key"),
        ("DB_URL", "postgresql://app:s3cr3tpw@db:5432/app", "URL with an embedded password"),
    ],
)
def test_value_shapes(name: str, value: str, kind: str) -> None:
    hit = detect(name, value)
    assert hit is not None and (hit.kind, hit.evidence) == (kind, "value")


@pytest.mark.parametrize(
    ("name", "kind"),
    [("DB_PASSWORD", "password"), ("WANDB_API_KEY", "API key"), ("apiKey", "API key"), ("MY_SECRET", "secret"),
     ("AWS_SECRET_ACCESS_KEY", "access key"), ("SIGNING_KEY", "key"), ("GITLAB_TOKEN", "token")],
)  # fmt: skip
def test_credential_names(name: str, kind: str) -> None:
    assert credential_name_kind(name) == kind
    hit = detect(name, "Zq8!mK2#pL9x")
    assert hit is not None and hit.evidence == "name"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("MAX_TOTAL_TOKENS", "4096"),  # plural: a count
        ("HF_TOKEN_PATH", "/var/run/secrets/hf/token"),  # about a secret, not the secret
        ("SECRET_NAME", "hf-token"),
        ("OPENAI_API_KEY", "EMPTY"),  # vLLM's dummy key
        (
            "HUGGING_FACE_HUB_TOKEN",
            "$HF_TOKEN",
        ),  # envsubst placeholder: not a literal (placeholder_credential)
        ("API_KEY", "$(VLLM_API_KEY)"),  # Kubernetes variable reference
        ("PASSWORD", "<your-password>"),
        ("TOKEN", "changeme"),
        ("CACHE_KEY", "true"),
        ("AWS_ACCESS_KEY_ID", "1234567890"),
        ("REDIS_PASSWORD", "short"),
        ("OIDC_SECRET", "https://issuer.example.com/"),
        ("GROUP_KEY", "{{ .Values.key }}"),
        ("TOKENIZER_MODE", "auto"),
        ("MODEL", "meta-llama/Llama-3.1-8B-Instruct"),
        (
            "SECRET",
            "volcano-admission-secret",
        ),  # a Secret's name (Volcano's gen-admission-secret.sh --secret)
        ("WEBHOOK_TOKEN", "webhook.token"),
        # the name of a key, not a key (AIBrix's KV-cache samples: a Redis key)
        ("AIBRIX_KV_CACHE_OL_META_SERVICE_CLUSTER_META_KEY", "kvcache_nodes"),
        ("S3_KEY", "models/llama-3-8b"),
        ("PARTITION_KEY", "tenant:prefill"),
        ("ETCD_INITIAL_CLUSTER_TOKEN", "etcd-cluster-k8s"),  # Milvus's etcd: a seed for IDs, not a secret
    ],
)
def test_not_credentials(name: str, value: str) -> None:
    assert detect(name, value) is None


def test_arguments() -> None:
    args = [
        "vllm",
        "serve",
        "m",
        "--api-key",
        "sk-kFJ12nKsFVfVmGpj3QzX65s4RbN2xJqWzPYC",
        "--token=hunter2hunter2",
        "--max-num-seqs",
        "256",
    ]
    found = detect_in_arguments(args)
    assert [(index, hit.kind) for index, hit in found] == [(4, "OpenAI-style API key"), (5, "token")]
    assert not detect_in_arguments(["--api-key", "$(VLLM_API_KEY)", "--token", "EMPTY"])


@pytest.mark.parametrize(
    ("text", "names_one"),
    [
        ("volcano-admission-secret", True),
        ("hf-token", True),
        ("registry.credentials", True),
        ("secret", False),  # one word: GP612's placeholders say what it is
        ("s3cr3t-pa55word", False),  # no credential word among the words
        ("Admission-Secret", False),  # not an object's name: upper case
        ("admission--secret", False),
        ("-secret", False),
        ("admission-secret-", False),
        ("my secret token", False),
    ],
)
def test_a_credential_objects_name(text: str, names_one: bool) -> None:
    assert names_a_credential_object(text) is names_one


def test_a_secret_flag_naming_a_secret_object_is_no_credential() -> None:
    script = [
        "./gen-admission-secret.sh",
        "--service",
        "volcano-admission-service",
        "--secret",
        "volcano-admission-secret",
    ]
    assert not detect_in_arguments(script)
    assert detect_in_arguments(["--secret", "Zm9vYmFyYmF6cXV4"])


@pytest.mark.parametrize(
    "value",
    [
        "$HF_TOKEN",
        "${HF_TOKEN}",
        "<secret>",
        "<your-hf-token>",
        "YOUR_TOKEN_HERE",
        "changeme",
        "{{ hf_token }}",
    ],
)
def test_a_credential_to_fill_in_at_deploy_time(value: str) -> None:
    hit = placeholder_credential("HF_TOKEN", value)
    assert hit is not None and (hit.kind, hit.evidence) == ("token", "placeholder")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("HF_TOKEN", "$(HF_TOKEN)"),  # the kubelet resolves it from another variable
        ("OPENAI_API_KEY", "EMPTY"),  # a declared dummy
        ("PAD_TOKEN", "<pad>"),  # a tokenizer's special token
        ("MODEL_NAME", "$MODEL_NAME"),  # not a credential (GP004's)
        ("HF_TOKEN", "/var/run/secrets/hf/${TOKEN_FILE}"),
    ],
)
def test_not_a_credential_placeholder(name: str, value: str) -> None:
    assert placeholder_credential(name, value) is None


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab:-_AK", min_size=1, max_size=4), min_size=1, max_size=8),
    value=st.text(alphabet="ab:-_AKx\n", max_size=30),
)
def test_the_required_text_search_finds_what_a_substring_test_finds(texts: list[str], value: str) -> None:
    assert (holds_any_search(texts).search(value) is not None) is any(text in value for text in texts)


def test_the_required_text_search_of_the_value_patterns() -> None:
    every = [text for texts in _REQUIRED_TEXT for text in texts]
    for value in [
        *every,
        "x" + "y".join(every),
        "--model\nmeta-llama/Llama-3.1-8B\n--revision",
        "",
        "AKI",
        "s-k",
    ]:
        assert (_ANY_REQUIRED_TEXT.search(value) is not None) is any(text in value for text in every)


def test_arguments_without_a_flag_or_token_text_are_not_walked_yet_flags_are_found() -> None:
    assert detect_in_arguments(["--model=meta-llama/Llama-3.1-8B", "--port=8000", "--tokenizer", "x"]) == []
    found = detect_in_arguments(["--port=8000", "--hf-token=hf_" + "a" * 34])
    assert [where for where, _ in found] == [1]


@pytest.mark.parametrize(
    ("name", "value"),
    [("SIGNING_KEY", "x8f2k9d0a7q1"), ("SIGNING_KEY", "3f8a9c0d1e2b4a5f"), ("ENCRYPTION_KEY", "Zm9vYmFyYmF6cXV4"),
     ("ENCRYPTION_KEY", "kvcache_7f3e9a8b7c6d"), ("API_KEY", "kvcache_nodes"), ("SECRET_KEY", "hunter_two_words"),
     ("GITLAB_TOKEN", "glpat_x8f2k9d0a7q1"), ("AUTH_TOKEN", "Zm9vYmFyYmF6cXV4")],
)  # fmt: skip
def test_a_key_named_only_key_is_a_credential_unless_it_reads_as_a_keys_name(name: str, value: str) -> None:
    """Random values stay credentials under a bare `…_KEY`; a name that says which key it is keeps
    even a wordy value one."""
    hit = detect(name, value)
    assert hit is not None and hit.evidence == "name"


@pytest.mark.parametrize(
    ("name", "value", "credential"),
    [("SECRET_KEY", "accessToken", False), ("API_KEY", "hfApiKey", False), ("CLIENT_SECRET", "clientSecret", False),
     ("DB_PASSWORD", "correctHorse", True), ("SECRET_KEY", "aK9xQ2mZ7pL4", True), ("AUTH_TOKEN", "Zm9vYmFyYmF6", True)],
)  # fmt: skip
def test_a_camel_case_identifier_is_a_data_keys_name(name: str, value: str, credential: bool) -> None:
    """soperator's token writer sets SECRET_KEY=accessToken, the data key it writes the token under;
    a password stays one whatever words it is."""
    assert (detect(name, value) is not None) is credential
