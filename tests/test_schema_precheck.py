"""The jsonschema-rs precheck of policy layers never says "valid" where jsonschema finds an error,
and says it for the policies we ship, so that a valid policy is loaded without jsonschema."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gpupolicy.core.linear_regex import PatternError, check_pattern
from gpupolicy.core.schema_precheck import schema_precheck
from gpupolicy.kube.rollback import _rollback_precheck, rollback_schema
from gpupolicy.policy.loading import policies_dir
from gpupolicy.policy.validation import _valid_layer_precheck, policy_schema

REPO = Path(__file__).resolve().parent.parent


def jsonschema_errors(data: Any) -> list[str]:
    checker = jsonschema.FormatChecker()
    checker.checks("regex", raises=PatternError)(check_pattern)
    validator = jsonschema.Draft202012Validator(policy_schema(), format_checker=checker)
    return [error.message for error in validator.iter_errors(data)]


def shipped_policies() -> list[Path]:
    return [
        policies_dir() / "default.yaml",
        *sorted(REPO.glob("examples/**/.gpupolicy.yaml")),
        *sorted(REPO.glob("examples/**/cluster/policy.yaml")),
    ]


@pytest.mark.parametrize("path", shipped_policies(), ids=lambda path: str(path.relative_to(REPO)))
def test_the_shipped_policies_pass_the_precheck(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert jsonschema_errors(data) == []
    assert _valid_layer_precheck()(data)


EXEMPTION = {"rules": ["GP102"], "owner": "ml-platform", "reason": "the driver", "expires": "2026-12-31"}
# Valid layers and layers with one error each, among them the values where the Rust engine and
# Python's `re` disagree, and values jsonschema-rs cannot take.
LAYERS: list[tuple[str, dict[Any, Any], bool]] = [
    ("empty", {}, True),
    ("version", {"kubernetesVersion": "1.30"}, True),
    ("version-newline", {"kubernetesVersion": "1.30\n"}, True),  # Python's `$` matches before it
    ("version-word", {"kubernetesVersion": "one"}, False),
    ("fail-on", {"failOn": "warning"}, True),
    ("fail-on-unknown", {"failOn": "sometimes"}, False),
    ("unknown-key", {"failOn": "error", "exlude": []}, False),
    ("rule-id", {"rules": {"GP701": {"enabled": False}}}, True),
    ("rule-id-bad", {"rules": {"GP7": {"enabled": False}}}, False),
    ("regex", {"gpu": {"servingImages": ["^vllm/", "triton[a-z]+"]}}, True),
    ("regex-unclosed", {"gpu": {"servingImages": ["(vllm"]}}, False),
    ("regex-lookahead", {"gpu": {"servingImages": ["^(?!vllm)"]}}, False),  # RE2 cannot run it
    ("regex-not-string", {"gpu": {"servingImages": [3]}}, False),
    ("exemption", {"exemptions": [EXEMPTION]}, True),
    ("exemption-blank-reason", {"exemptions": [{**EXEMPTION, "reason": " \t"}]}, False),
    # U+001C..U+001F are whitespace to Python's `\S`, not to the Rust engine's.
    ("exemption-separator-reason", {"exemptions": [{**EXEMPTION, "reason": "\x1c\x1f"}]}, False),
    ("exemption-date", {"exemptions": [{**EXEMPTION, "expires": datetime.date(2026, 12, 31)}]}, False),
    # jsonschema matches `pattern` on strings only: a YAML integer key passes (jsonschema-rs cannot
    # take it, so the precheck says no and jsonschema decides, as before).
    ("integer-key", {"rules": {701: {"enabled": False}}}, True),
    ("shm-float", {"gpu": {"shmMinimumGpus": 2.0}}, True),
    ("shm-bool", {"gpu": {"shmMinimumGpus": True}}, False),
    ("shm-below", {"gpu": {"shmMinimumGpus": 1}}, False),
    ("shm-huge", {"gpu": {"shmMinimumGpus": 10**30}}, True),
    ("shm-infinite", {"gpu": {"shmMinimumGpus": float("inf")}}, False),
]


@pytest.mark.parametrize(("data", "valid"), [case[1:] for case in LAYERS], ids=[case[0] for case in LAYERS])
def test_the_precheck_passes_only_what_jsonschema_passes(data: dict[Any, Any], valid: bool) -> None:
    assert (jsonschema_errors(data) == []) is valid
    if not valid:
        assert not _valid_layer_precheck()(data)


def test_a_schema_naming_a_format_without_its_check_gets_no_precheck() -> None:
    precheck = schema_precheck({"type": "string", "format": "email"}, formats={})
    assert not precheck("someone@example.com")
    assert schema_precheck(
        {"type": "string", "format": "email"}, formats={"email": lambda text: "@" in text}
    )("someone@example.com")


# Rollback criteria (gpupolicy.kube.rollback): the same promise for the annotation's schema.
CRITERIA: list[tuple[str, Any, bool]] = [
    (
        "two",
        [
            {"metric": "p95_latency_ms", "max": 800, "window": "10m"},
            {"metric": "error_rate", "max": 0.01, "window": "1h30m"},
        ],
        True,
    ),
    (
        "min-and-comparator",
        [{"metric": "accepted_throughput", "min": 10, "window": "30s", "comparator": ">="}],
        True,
    ),
    (
        "window-newline",
        [{"metric": "p95", "max": 1, "window": "10m\n"}],
        True,
    ),  # Python's `$` matches before it
    ("window-words", [{"metric": "p95", "max": 1, "window": "ten minutes"}], False),
    ("no-threshold", [{"metric": "p95", "window": "10m"}], False),
    ("bool-threshold", [{"metric": "p95", "max": True, "window": "10m"}], False),
    ("huge-threshold", [{"metric": "p95", "max": 10**400, "window": "10m"}], True),
    ("unknown-key", [{"metric": "p95", "max": 1, "window": "10m", "windw": "5m"}], False),
    ("comparator-unknown", [{"metric": "p95", "max": 1, "window": "10m", "comparator": "=="}], False),
    ("empty-metric", [{"metric": "", "max": 1, "window": "10m"}], False),
    ("empty-list", [], False),
    ("not-a-list", {"metric": "p95", "max": 1, "window": "10m"}, False),
    ("date-key", [{datetime.date(2026, 1, 1): 1}], False),
]


@pytest.mark.parametrize(
    ("data", "valid"), [case[1:] for case in CRITERIA], ids=[case[0] for case in CRITERIA]
)
def test_the_rollback_precheck_never_passes_what_jsonschema_refuses(data: Any, valid: bool) -> None:
    errors = list(jsonschema.Draft202012Validator(rollback_schema()).iter_errors(data))
    assert (errors == []) is valid
    if not valid:
        assert not _rollback_precheck()(data)
    elif _rollback_precheck()(data) is False:
        assert data[0]["max"] == 10**400  # a number jsonschema-rs cannot take goes to jsonschema
