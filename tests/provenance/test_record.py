"""build_record: what a record holds, what it never holds, and which requests are recorded."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from gpupolicy.core.findings import Finding, Severity, format_path
from gpupolicy.kube.pod_spec import workload_of
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy
from gpupolicy.provenance import NotRecordable, ProvenanceRecord, build_record, should_record
from gpupolicy.provenance.record import finding_entry, git_source, split_image, template_hash
from gpupolicy.provenance.redaction import REDACTED, redact, redact_text
from gpupolicy.provenance.rendering import flat
from tests.provenance.samples import (
    SECRET_ENV_VALUE,
    SECRET_TOKEN,
    T0,
    admission_request,
    deployment,
    report_for,
)


def test_record_holds_the_design_fields(gpu_policy: Policy) -> None:
    obj = deployment()
    request = admission_request(obj, uid="req-1", operation="UPDATE")
    report = report_for(obj, gpu_policy)
    record = build_record(request, obj, report, gpu_policy, now=T0)

    assert record.uid == "req-1"
    assert record.time == "2026-11-30T02:00:00.000000Z"
    assert record.operation == "UPDATE"
    assert record.user == {"username": "alice@example.com", "uid": "u-1", "groups": ["ml-engineers"]}
    assert (record.object_uid, record.kind, record.namespace, record.name, record.generation) == (
        "0d6c3f8e-0000-4000-8000-000000000001",
        "Deployment",
        "ai-lab",
        "vllm-llama",
        3,
    )
    assert record.images == [
        {
            "template": "",
            "container": "vllm",
            "role": "container",
            "image": "vllm/vllm-openai:v0.6.3@sha256:" + "a" * 64,
            "reference": "vllm/vllm-openai:v0.6.3",
            "digest": "sha256:" + "a" * 64,
        }
    ]
    [gpu] = record.gpu
    assert gpu["uses_gpus"] is True and gpu["replicas"] == 2
    assert gpu["resources"] == [
        {
            "container": "vllm",
            "resource": "nvidia.com/gpu",
            "vendor": "nvidia",
            "kind": "device",
            "request": "1",
            "limit": "1",
        }
    ]
    [placement] = record.placement
    assert placement["node_selector"] == {"nvidia.com/gpu.product": "NVIDIA-L4"}
    assert placement["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert placement["preferred_node_affinity"][0]["weight"] == 10
    assert placement["required_node_affinity"] is None
    assert placement["topology_spread_constraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    assert record.priority == [
        {"template": "", "priority_class_name": "online-inference", "preemption_policy": "Never"}
    ]
    assert (record.experiment, record.arm) == ("day29-experiment", "control")
    assert record.fixed is None  # no experiment ConfigMap supplied
    assert record.rollback_criteria == "[{metric: p95_latency_ms, max: 800, window: 10m}]"
    assert record.model == "meta-llama/Llama-3.1-8B-Instruct@0e9e39f"
    assert record.input == "sharegpt-v3@2024-05"
    assert record.policy_version == gpu_policy.version
    assert record.policy_digest == gpu_policy.digest
    assert record.git["tool"] == "argocd"
    assert record.git["argocd_application"] == "llm-serving"
    assert record.git["instance"] == "llm-serving"
    assert {item["rule"] for item in record.findings} == {finding.rule_id for finding in report.findings}
    assert all(
        set(item) == {"rule", "name", "severity", "path", "message", "container"} for item in record.findings
    )
    assert record.template_hash.startswith("sha256:") and len(record.template_hash) == 71
    assert record.status == "admitted"


def test_a_finding_is_kept_as_its_fields_say_whatever_was_written_before() -> None:
    # finding_entry remembers the JSON paths it wrote: the same entry, fresh or remembered.
    def finding(path: tuple[str | int, ...], severity: Severity) -> Finding:
        return Finding("GP001", "rule-name", severity, "message", "fix", None, path, container="main")

    paths = [("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), ("metadata", "a-b_c"), ()]
    for _ in range(2):
        for path in paths:
            for severity in Severity:
                entry = finding_entry(finding(path, severity))
                assert entry == {
                    "rule": "GP001",
                    "name": "rule-name",
                    "severity": severity.label,
                    "path": format_path(path),
                    "message": "message",
                    "container": "main",
                }


def test_fixed_factors_come_from_the_experiment_configmap(gpu_policy: Policy) -> None:
    obj = deployment()
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "day29-experiment", "namespace": "ai-lab"},
        "data": {"change": "x", "fixed": "image, model, input", "repeats": "3"},
    }
    record = build_record(
        admission_request(obj), obj, report_for(obj, gpu_policy), gpu_policy, experiment_config=config
    )
    assert record.fixed == ["image", "model", "input"]
    other = {**config, "metadata": {"name": "another-experiment"}}
    record = build_record(
        admission_request(obj), obj, report_for(obj, gpu_policy), gpu_policy, experiment_config=other
    )
    assert record.fixed is None


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"dryRun": True}, "dry-run"),
        ({"operation": "DELETE"}, "DELETE"),
        ({"operation": "CONNECT"}, "CONNECT"),
    ],
)
def test_requests_that_are_never_recorded(gpu_policy: Policy, fields: dict[str, Any], reason: str) -> None:
    obj = deployment()
    request = admission_request(obj, **fields)
    assert not should_record(request, obj, gpu_policy)
    with pytest.raises(NotRecordable, match=reason):
        build_record(request, obj, report_for(obj, gpu_policy), gpu_policy)


def test_workloads_without_gpus_are_not_recorded(gpu_policy: Policy) -> None:
    obj = deployment()
    resources = obj["spec"]["template"]["spec"]["containers"][0]["resources"]
    for section in resources.values():
        section.pop("nvidia.com/gpu")
    request = admission_request(obj)
    assert not should_record(request, obj, gpu_policy)
    with pytest.raises(NotRecordable, match="not a GPU workload"):
        build_record(request, obj, report_for(obj, gpu_policy), gpu_policy)
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}}
    assert not should_record(admission_request(configmap), configmap, gpu_policy)


def test_the_reviewed_workload_view_gives_the_same_record(gpu_policy: Policy) -> None:
    """The webhook passes the workload view its review made, so templates are not extracted twice."""
    obj = deployment()
    request = admission_request(obj, uid="req-view")
    report = report_for(obj, gpu_policy)
    view = workload_of(Resource(obj, file="<admission>", doc_index=0))
    assert view is not None
    with_view = build_record(request, obj, report, gpu_policy, now=T0, workload=view)
    assert with_view == build_record(request, obj, report, gpu_policy, now=T0)
    other = workload_of(Resource(deployment(), file="<admission>", doc_index=0))
    with pytest.raises(ValueError, match="workload must be the view of obj"):
        build_record(request, obj, report, gpu_policy, workload=other)


def test_a_controller_made_object_records_its_controller(gpu_policy: Policy) -> None:
    """A ReplicaSet's Pods reach the webhook too: their records say which controller made them."""
    applied = deployment()
    assert (
        build_record(
            admission_request(applied), applied, report_for(applied, gpu_policy), gpu_policy
        ).controller
        is None
    )
    made = deployment(
        ownerReferences=[
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "not-a-controller", "uid": "u-0"},
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "vllm-llama-7d9f",
                "uid": "u-1",
                "controller": True,
            },
        ]
    )
    record = build_record(admission_request(made), made, report_for(made, gpu_policy), gpu_policy)
    assert record.controller == {
        "api_version": "apps/v1",
        "kind": "ReplicaSet",
        "name": "vllm-llama-7d9f",
        "uid": "u-1",
    }
    assert ProvenanceRecord.from_dict(record.to_dict()) == record
    old_record = record.to_dict()
    del old_record["controller"]  # a record written before the field existed
    assert ProvenanceRecord.from_dict(old_record).controller is None
    assert flat(record)["controller"] == "ReplicaSet/vllm-llama-7d9f"


def test_create_and_update_of_gpu_workloads_are_recorded(gpu_policy: Policy) -> None:
    obj = deployment()
    assert should_record(admission_request(obj, operation="CREATE"), obj, gpu_policy)
    assert should_record(admission_request(obj, operation="UPDATE"), obj, gpu_policy)


def test_env_values_and_secret_looking_strings_never_reach_the_record(gpu_policy: Policy) -> None:
    obj = deployment()
    obj["metadata"]["annotations"]["gpupolicy.io/input"] = "s3://user:hunter2@bucket/data"
    obj["metadata"]["annotations"]["gpupolicy.io/model"] = f"Bearer {SECRET_TOKEN}"
    record = build_record(admission_request(obj), obj, report_for(obj, gpu_policy), gpu_policy)
    text = json.dumps(record.to_dict())
    assert SECRET_TOKEN not in text
    assert SECRET_ENV_VALUE not in text
    assert "hunter2" not in text
    assert record.input == f"s3://user:{REDACTED}@bucket/data"
    assert record.model is not None and REDACTED in record.model


def test_values_of_secret_named_pairs_never_reach_the_record(gpu_policy: Policy) -> None:
    """A toleration or node selector requirement whose key is `password` holds a password: its
    value is redacted, as an env value is (issue 12: they were stored verbatim)."""
    obj = deployment()
    spec = obj["spec"]["template"]["spec"]
    spec["tolerations"] += [
        {"key": "password", "operator": "Equal", "value": "tolerated-hunter2", "effect": "NoSchedule"},
        {"key": "example.com/api-token", "operator": "Equal", "value": "tolerated-t0ken"},
    ]
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "secret", "operator": "In", "values": ["selected-s3cret"]}]}
        ]
    }
    record = build_record(admission_request(obj), obj, report_for(obj, gpu_policy), gpu_policy)
    text = json.dumps(record.to_dict())
    for secret in ("tolerated-hunter2", "tolerated-t0ken", "selected-s3cret"):
        assert secret not in text
    tolerations = record.placement[0]["tolerations"]
    assert tolerations[0] == {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert tolerations[-2]["value"] == REDACTED and tolerations[-2]["key"] == "password"


def test_comments_in_the_rollback_annotation_never_reach_the_record(gpu_policy: Policy) -> None:
    """The rollback annotation is stored as text: a `# token=…` comment in it was kept verbatim."""
    obj = deployment()
    obj["metadata"]["annotations"]["gpupolicy.io/rollback-criteria"] = (
        "[{metric: p95_latency_ms, max: 800, window: 10m}]  # token=comment-t0ken-1\n"
        '# password: comment-hunter2\n# {"apiToken": "comment-json-t0ken"}'
    )
    record = build_record(admission_request(obj), obj, report_for(obj, gpu_policy), gpu_policy)
    assert record.rollback_criteria is not None
    for secret in ("comment-t0ken-1", "comment-hunter2", "comment-json-t0ken"):
        assert secret not in record.rollback_criteria
    assert record.rollback_criteria.startswith("[{metric: p95_latency_ms, max: 800, window: 10m}]")


def test_template_hash_ignores_env_values_but_not_images() -> None:
    def hash_of(obj: dict[str, object]) -> str:
        workload = workload_of(Resource(obj, file="x", doc_index=0))
        assert workload is not None
        return template_hash(workload.templates)

    base = deployment()
    other_env = deployment()
    other_env["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] = "something else"
    other_image = deployment()
    other_image["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.6.4"
    assert hash_of(base) == hash_of(other_env)
    assert hash_of(base) != hash_of(other_image)
    assert hash_of(base) == hash_of(deployment())  # canonical JSON: stable


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("--token=abcdef123456", "abcdef123456"),
        ("--api-key secretvalue1", "secretvalue1"),
        ("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx && run", "sk-proj-abcdefghijklmnopqrstuvwx"),
        ("postgresql://app:pa55word@db:5432/x", "pa55word"),
        ("ghp_" + "x" * 36, "ghp_" + "x" * 36),
        ("AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXZhbHVl", "eyJzdWIiOiIxMjM0NSJ9"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----", "MIIEabc"),
        ("# token=abc123def", "abc123def"),
        ("# password: hunter22 (rotate monthly)", "hunter22"),
        ('{"clientSecret": "s3cr3t-value"}', "s3cr3t-value"),
        ("s3://bucket/x?X-Amz-Security-Token=FwoGZXIvYXdz&X-Amz-Signature=8f3a9c", "FwoGZXIvYXdz"),
        ("s3://bucket/x?X-Amz-Signature=8f3a9c0d", "8f3a9c0d"),
        ("db.password = pa55", "pa55"),
    ],
)
def test_redact_text_removes_credentials(text: str, secret: str) -> None:
    redacted = redact_text(text)
    assert secret not in redacted
    assert REDACTED in redacted


def test_redact_keeps_what_is_not_secret() -> None:
    value = {
        "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
        "password": "pw",
        "secretName": "tls-cert",
        "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
        "model": "ghcr.io/acme/sk-learn-regression-baseline-model:v1",
        "args": ["--model", "llama"],
    }
    assert redact(value) == {
        "env": [
            {"name": "A", "value": REDACTED},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
        "password": REDACTED,
        "secretName": "tls-cert",
        "image": "nvcr.io/nvidia/tritonserver:24.05-py3",
        "model": "ghcr.io/acme/sk-learn-regression-baseline-model:v1",
        "args": ["--model", "llama"],
    }


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 512",
        "tokenizer: meta-llama/Llama-3.1-8B",
        "passthrough: true",
        "ghcr.io/acme/token-service:v1.2",
        "registry.example.com/secret-scanner:2024.05",
        "[{metric: tokens_per_second, min: 100, window: 5m}]",
        "secretName: tls-cert",
    ],
)
def test_redact_text_keeps_look_alikes(text: str) -> None:
    assert redact_text(text) == text


def test_split_image() -> None:
    assert split_image("repo/x:1@sha256:" + "b" * 64) == ("repo/x:1", "sha256:" + "b" * 64)
    assert split_image("repo/x:1") == ("repo/x:1", None)
    assert split_image("localhost:5000/x") == ("localhost:5000/x", None)


def test_git_source_flux() -> None:
    labels = {
        "kustomize.toolkit.fluxcd.io/name": "apps",
        "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    }
    annotations = {
        "kustomize.toolkit.fluxcd.io/revision": "main@sha1:40d6b21b888db0ca794876cf7bdd399e3da2137e"
    }
    source = git_source(labels, annotations)
    assert source["tool"] == "flux"
    assert source["revision"] == "main@sha1:40d6b21b888db0ca794876cf7bdd399e3da2137e"
    assert source["flux"]["kustomize.toolkit.fluxcd.io/name"] == "apps"
    helm = git_source(
        {"helm.toolkit.fluxcd.io/name": "vllm", "helm.toolkit.fluxcd.io/namespace": "flux-system"}, {}
    )
    assert helm["tool"] == "flux" and helm["revision"] is None


def test_git_source_none() -> None:
    assert git_source({}, {}) == {"tool": None, "revision": None}


@pytest.mark.slow
def test_linter_core_does_not_import_webhook_dependencies() -> None:
    import subprocess
    import sys

    code = (
        "import sys, gpupolicy.cli.main, gpupolicy.provenance; gpupolicy.cli.main.build_parser();"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sqlalchemy', 'fastapi', 'psycopg', 'kubernetes'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# Strings each pattern of redaction.py redacts (at least one per pattern), and look-alikes.
PATTERN_EXAMPLES = [
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----truncated",
    "token ghp_" + "a" * 36,
    "github_pat_" + "B" * 30,
    "glpat-" + "c" * 20,
    "xoxb-1234567890-abcdef",
    "ASIAABCDEFGHIJKLMNOP",
    "HF=hf_" + "d" * 30,
    "key sk-" + "e" * 24,
    "AIza" + "f" * 35,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXZhbHVl",
    "Authorization: BEARER abcdefgh12345",
    "redis://default:hunter22@redis:6379/0",
    "--password hunter22",
    "-p --Client-Secret=xyz",
    "--CREDENTIALS=/dev/stdin",
    "export HF_TOKEN=abc123; run",
    "db_password=x",
    "MY_API_KEY=v",
    "S3_Access_Key=v",
    "--paſſword=x",  # Unicode case folding: the long s matches `s` under IGNORECASE
    "--api-\u212aey=x",  # the Kelvin sign matches `k`
    "# token=x1",
    "password: x",
    "'privateKey': 'x'",
    "X-Amz-Signature=ab",
    "a_session-key = x",
]


def test_prefilter_is_a_necessary_condition() -> None:
    """Every string a pattern changes passes the prefilter (else it would go unredacted)."""
    from gpupolicy.provenance.redaction import _MAYBE_SECRET, _redact_text_fully

    for text in PATTERN_EXAMPLES:
        assert _redact_text_fully(text) != text, text  # the example does exercise a pattern
        assert _MAYBE_SECRET.search(text) is not None, text
        assert redact_text(text) == _redact_text_fully(text), text


def test_folded_prefilter_answers_as_the_prefilter() -> None:
    """`_may_hold_secret` (RE2 on the case-folded text, then `_MAYBE_SECRET`) gives
    `_MAYBE_SECRET`'s answer: on every example, on random strings of its literals in any case and
    of the characters re's IGNORECASE takes for ASCII letters."""
    import random
    import sys

    from gpupolicy.provenance.redaction import _MAYBE_SECRET, _may_hold_secret

    letters = re.compile("(?i)[a-z]")
    like_letters = [chr(c) for c in range(sys.maxunicode + 1) if letters.fullmatch(chr(c))]
    assert {c for c in like_letters if not c.isascii()} == {"\u0130", "\u0131", "\u017f", "\u212a"}
    literals = [
        "-----BEGIN ", "ghp_", "gho_", "github_pat_", "glpat-", "xoxb-", "AKIA", "ASIA", "asia", "hf_",
        "sk-", "AIza", "eyJ", "://", "bearer", "pass", "secret", "token", "api-key", "api_key", "apikey",
        "access-key", "private_key", "sessionkey", "signing-key", "credential", "signature",
    ]  # fmt: skip
    rng = random.Random(20261201)

    def shuffled_case(text: str) -> str:
        return "".join(rng.choice([c.lower(), c.upper(), c]) for c in text)

    def spelled(text: str) -> str:  # letters replaced by what IGNORECASE takes for them
        return "".join(
            rng.choice([c, *(other for other in like_letters if re.fullmatch(f"(?i){c}", other))])
            if c.isalpha()
            else c
            for c in text
        )

    texts = [*PATTERN_EXAMPLES, *literals, "İ", "ı", "credentİal", "paſſ", "to\u212aen"]
    fragments = [*literals, "x", " ", "-", "_", "İ", "ı", "ſ", "\u212a", "ß", "é"]
    for _ in range(4000):
        parts = [rng.choice(fragments) for _ in range(rng.randint(1, 5))]
        texts.append("".join(rng.choice([part, shuffled_case(part), spelled(part)]) for part in parts))
    for text in texts:
        assert _may_hold_secret(text) == (_MAYBE_SECRET.search(text) is not None), text


def test_harmless_alphabet_holds_no_secret() -> None:
    """No pattern matches a string of uids' and times' characters alone, which redact_text keeps
    without a search: every pattern example has a character outside them, and random strings of
    them (in the patterns' own shapes too) come out of the patterns unchanged."""
    import random

    from gpupolicy.provenance.redaction import _HARMLESS, _redact_text_fully

    for text in PATTERN_EXAMPLES:
        assert _HARMLESS.fullmatch(text) is None, text
    alphabet = "0123456789abcdefABCDEF.:+TZ-"
    shapes = ["-----", "eA", "AA", "Ab", "://", "=", "e-", "aa:", "Bearer"]
    rng = random.Random(1206)
    for _ in range(5000):
        text = "".join(
            rng.choice([rng.choice(alphabet), rng.choice(shapes)]) for _ in range(rng.randint(6, 60))
        )
        if _HARMLESS.fullmatch(text):
            assert _redact_text_fully(text) == text, text
            assert redact_text(text) == text


def test_only_strings_the_patterns_keep_are_remembered_as_clean() -> None:
    """A string the prefilter lets through is remembered once the patterns leave it unchanged
    (`HF_TOKEN`), and never when they redact it: a secret is never a key of the clean cache."""
    from gpupolicy.provenance.redaction import _CLEAN

    kept, secret = "HF_TOKEN_FOR_TEST", "export HF_TOKEN_FOR_TEST=abc123"
    assert redact_text(kept) == kept
    assert _CLEAN.get(kept) is True
    assert redact_text(secret) != secret
    assert redact_text(secret) != secret  # asked again: still redacted
    assert _CLEAN.get(secret) is None


def test_redact_text_equals_the_sequential_patterns_on_random_strings() -> None:
    """The prefilter, the length shortcut and the clean-string cache change no result."""
    import random

    from gpupolicy.provenance.redaction import _redact_text_fully

    fragments = [
        *PATTERN_EXAMPLES, "nvidia.com/gpu", "vllm/vllm-openai:v0.6.3", "sk-", "ask-me", "://", "@",
        "user:pw@", "https://", "pass", "PASS", "word", "=", " ", "--", "-", "_", "TOKEN", "token-path",
        "secretName", "Bearer ", "ſ", "\u212a", "\n", "'", '"', "hf_", "eyJ", "AKIA", "x" * 20, "0123456789",
        ": ", "signature", "_key", "max_tokens", "{",
    ]  # fmt: skip
    rng = random.Random(20261130)
    for _ in range(3000):
        text = "".join(rng.choice(fragments) for _ in range(rng.randint(1, 6)))
        assert redact_text(text) == _redact_text_fully(text), text
        assert redact_text(text) == _redact_text_fully(text), text  # again: from the cache


def _redact_by_definition(value: Any, key: str | None = None) -> Any:
    """What `redact` means, written plainly (the module's version decides strings in the loop)."""
    from gpupolicy.provenance.redaction import is_secret_key, redact_env

    if isinstance(value, str):
        return (
            REDACTED
            if value and key is not None and value != REDACTED and is_secret_key(key)
            else redact_text(value)
        )
    if isinstance(value, dict):
        named = [value.get(field) for field in ("key", "name")]
        pair = next((name for name in named if isinstance(name, str) and is_secret_key(name)), None)
        return {
            str(k): _redact_by_definition(
                redact_env(v) if str(k) == "env" and isinstance(v, list) else v,
                pair if pair is not None and str(k) in ("value", "values") else str(k),
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redact_by_definition(item, key) for item in value]
    return value


def test_redact_equals_its_plain_definition_on_random_objects() -> None:
    import random

    keys = [
        "name",
        "token",
        "apiKey",
        "secretName",
        "env",
        "value",
        "args",
        "image",
        "password",
        "tokenPath",
        3,
        "auth",
        "key",
        "values",
    ]
    leaves: list[Any] = [
        *PATTERN_EXAMPLES, "", "short", REDACTED, "nvidia.com/gpu", "vllm/vllm-openai:v0.6.3", 7, None, True, 1.5,
        "password", "api-token",
    ]  # fmt: skip
    rng = random.Random(1130)

    def make(depth: int) -> Any:
        roll = rng.random()
        if depth > 3 or roll < 0.4:
            return rng.choice(leaves)
        if roll < 0.7:
            return [make(depth + 1) for _ in range(rng.randint(0, 4))]
        return {rng.choice(keys): make(depth + 1) for _ in range(rng.randint(0, 5))}

    for _ in range(2000):
        value = make(0)
        assert redact(value) == _redact_by_definition(value), value
        assert redact(value) == _redact_by_definition(value), value  # again: from the caches


def test_record_body_is_one_canonical_serialisation(gpu_policy: Policy) -> None:
    from gpupolicy.provenance.record import canonical_json

    obj = deployment()
    record = build_record(admission_request(obj), obj, report_for(obj, gpu_policy), gpu_policy)
    expected = record.to_dict()
    del expected["status"], expected["status_changed_at"]
    assert record.body() == expected
    assert record.body_json() == canonical_json(expected)
    assert json.loads(record.body_json())["uid"] == record.uid


def test_what_the_record_writes_itself_is_what_redaction_keeps() -> None:
    """The time and the template hash join a record as they are (record.py): redaction, had they
    gone through it, would have kept every one of them."""
    import hashlib
    import random
    from datetime import timedelta

    from gpupolicy.provenance.record import format_time
    from gpupolicy.provenance.redaction import is_secret_key

    rng = random.Random(61206)
    assert not is_secret_key("time") and not is_secret_key("template_hash")
    for _ in range(5000):
        moment = T0 + timedelta(microseconds=rng.randrange(-(6 * 10**16), 2 * 10**17))
        text = format_time(moment)
        assert redact({"time": text}) == {"time": text}
        digest = "sha256:" + hashlib.sha256(rng.randbytes(16)).hexdigest()
        assert redact({"template_hash": digest}) == {"template_hash": digest}
        assert redact_text(digest) == digest
    for hexdigit in "0123456789abcdef":
        digest = "sha256:" + hexdigit * 64
        assert redact({"template_hash": digest}) == {"template_hash": digest}


def _redact_by_the_old_definition(value: Any, key: str | None = None, depth: int = 0) -> Any:
    """`redact` as it was written before its lists and scalars were decided in its loops: every
    value through one function, the depth counted on each list and mapping."""
    from gpupolicy.provenance.redaction import MAX_REDACTED_DEPTH, TOO_DEEP, is_secret_key, redact_env

    if isinstance(value, str):
        return (
            REDACTED
            if value and key is not None and value != REDACTED and is_secret_key(key)
            else redact_text(value)
        )
    if isinstance(value, dict | list) and depth >= MAX_REDACTED_DEPTH:
        return TOO_DEEP
    if isinstance(value, dict):
        named = [value.get(field) for field in ("key", "name")]
        pair = next((name for name in named if isinstance(name, str) and is_secret_key(name)), None)
        return {
            str(k): _redact_by_the_old_definition(
                redact_env(v) if str(k) == "env" and isinstance(v, list) else v,
                pair if pair is not None and str(k) in ("value", "values") else str(k),
                depth + 1,
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_redact_by_the_old_definition(item, key, depth + 1) for item in value]
    return value


def test_redact_of_lists_and_scalars_and_depth_is_its_definition() -> None:
    """Lists of strings under secret and plain names, numbers, booleans and None (exact types and
    subclasses), and values at every depth around the cut, as the plain definition redacts them."""
    import enum
    import random

    class Level(enum.IntEnum):
        HIGH = 3

    class Text(str):
        pass

    rng = random.Random(61207)
    names = ["args", "token", "password", "values", "value", "key", "name", "command", "env", "x"]
    leaves: list[Any] = [
        *PATTERN_EXAMPLES, "", "short", REDACTED, "password", 0, 1, -2**70, 1.5, 1e-7, True, False,
        None, Level.HIGH, Text("ghp_" + "a" * 36), Text("plain text"),
    ]  # fmt: skip

    def make(depth: int) -> Any:
        roll = rng.random()
        if depth > 4 or roll < 0.35:
            return rng.choice(leaves)
        if roll < 0.7:
            return [make(depth + 1) for _ in range(rng.randint(0, 5))]
        return {rng.choice(names): make(depth + 1) for _ in range(rng.randint(0, 5))}

    def nested(depth: int, leaf: Any) -> Any:
        for level in range(depth):
            leaf = [leaf] if level % 3 else {rng.choice(names): leaf}
        return leaf

    values = [make(0) for _ in range(3000)]
    values += [nested(depth, make(2)) for depth in range(190, 206) for _ in range(5)]
    for value in values:
        for key in (None, "token", "args"):
            assert redact(value, key) == _redact_by_the_old_definition(value, key), value


def test_the_memo_of_clean_strings_counts_what_estimate_size_counts() -> None:
    """Its one-call size is the estimate the memo used before: the same strings fit in 2 MiB."""
    from gpupolicy.core.bounded_cache import estimate_size
    from gpupolicy.provenance.redaction import _CLEAN

    for text in ["", "abc", "é" * 40, "😀" * 5, "x" * 256, "nvidia.com/gpu.product"]:
        assert _CLEAN._size_of(text, True) == estimate_size(text) + estimate_size(True)
