"""The compiled policy: rules' own parameters (declared in `@rule`, set by `rules.<id or name>.params`),
the shipped policy kept equal to the declarations, and typed sections."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import gpupolicy.rules  # noqa: F401  (registers the built-in rules)
from gpupolicy.engine.registry import REGISTRY
from gpupolicy.policy.exemptions import Exemption
from gpupolicy.policy.loading import default_policy, load_policy, policies_dir, policy_from_mapping
from gpupolicy.policy.validation import PolicyError
from gpupolicy.rules.example_files import examples_for, run_example
from gpupolicy.rules.placement import SPREAD_MIN_REPLICAS

REPO = Path(__file__).resolve().parent.parent


def _at(data: Any, dotted: str) -> Any:
    for step in dotted.split("."):
        data = data[step]
    return data


def test_the_shipped_policy_holds_each_parameters_declared_default() -> None:
    """A parameter a section also sets (`placement.spread.minReplicas`) has one default: the
    declaration's, written out in policies/default.yaml for those who read the file."""
    shipped = yaml.safe_load((policies_dir() / "default.yaml").read_text(encoding="utf-8"))
    checked = 0
    for rule in REGISTRY:
        for parameter in rule.parameters:
            if parameter.setting is None:
                continue
            value = _at(shipped, parameter.setting)
            assert parameter.accepts(value), f"{rule.id} {parameter.name}: {parameter.setting} is {value!r}"
            assert parameter.coerce(value) == parameter.default, (
                f"{rule.id} {parameter.name}: default.yaml {parameter.setting}={value!r}, declared {parameter.default!r}"
            )
            checked += 1
    assert checked >= 8


def test_every_setting_a_rule_names_is_a_policy_key() -> None:
    shipped = yaml.safe_load((policies_dir() / "default.yaml").read_text(encoding="utf-8"))
    for rule in REGISTRY:
        for setting in rule.settings:
            _at(shipped, setting.key.split("[]")[0])  # a KeyError for a key the shipped policy lacks


def test_params_set_a_rule_by_id_or_by_name_and_win_over_the_section() -> None:
    assert default_policy().param(SPREAD_MIN_REPLICAS) == 2
    by_id = policy_from_mapping({"rules": {"GP208": {"params": {"minReplicas": 3}}}})
    assert by_id.param(SPREAD_MIN_REPLICAS) == 3
    by_name = policy_from_mapping({"rules": {"replicas-without-spread": {"params": {"minReplicas": 4}}}})
    assert by_name.param(SPREAD_MIN_REPLICAS) == 4
    section = policy_from_mapping({"placement": {"spread": {"minReplicas": 5}}})
    assert section.param(SPREAD_MIN_REPLICAS) == 5
    both = policy_from_mapping(
        {"placement": {"spread": {"minReplicas": 5}}, "rules": {"GP208": {"params": {"minReplicas": 6}}}}
    )
    assert both.param(SPREAD_MIN_REPLICAS) == 6


def test_a_rule_named_by_name_in_one_file_and_by_id_in_another_is_one_rule(tmp_path: Path) -> None:
    repo = tmp_path / ".gpupolicy.yaml"
    repo.write_text("rules:\n  replicas-without-spread: {severity: error, params: {minReplicas: 3}}\n")
    extra = tmp_path / "ci.yaml"
    extra.write_text("rules:\n  GP208: {severity: info}\n")
    policy = load_policy(repo_policy=repo, extra=[extra])
    assert policy.rule("GP208").severity is not None and policy.rule("GP208").severity.label == "info"
    assert policy.param(SPREAD_MIN_REPLICAS) == 3


def test_minreplicas_param_changes_what_gp208_reports() -> None:
    examples = examples_for("GP208")
    assert examples is not None
    fired = run_example(examples.fires, examples.policy_for())
    assert any(finding.rule_id == "GP208" for finding in fired.findings)
    raised = policy_from_mapping({"rules": {"GP208": {"params": {"minReplicas": 1000}}}})
    quiet = run_example(examples.fires, raised)
    assert not any(finding.rule_id == "GP208" for finding in quiet.findings)


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("rules:\n  GP999: {enabled: false}\n", ":2:3:", "policy key rules.GP999: unknown rule 'GP999'"),
        (
            "rules:\n  replicas-without-sprad: {enabled: false}\n",
            ":2:3:",
            "policy key rules.replicas-without-sprad: unknown rule 'replicas-without-sprad' "
            "(did you mean 'replicas-without-spread'?)",
        ),
        (
            "rules:\n  GP208:\n    params:\n      minReplica: 3\n",
            ":4:7:",
            "policy key rules.GP208.params.minReplica: GP208 has no parameter 'minReplica' (parameters: minReplicas)",
        ),
        (
            "rules:\n  GP208:\n    params:\n      minReplicas: three\n",
            ":4:7:",
            "policy key rules.GP208.params.minReplicas: GP208 parameter minReplicas must be an integer",
        ),
        (
            "rules:\n  GP605: {params: {allowMpsHostIPC: 1}}\n",
            ":2:20:",
            "policy key rules.GP605.params.allowMpsHostIPC: GP605 parameter allowMpsHostIPC must be a boolean",
        ),
    ],
)
def test_an_unknown_rule_or_parameter_is_an_error_at_its_line(
    tmp_path: Path, text: str, position: str, message: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyError) as caught:
        load_policy(extra=[bad])
    assert f"{bad}{position} {message}" in str(caught.value)


def test_lint_with_an_unknown_rule_in_the_policy_exits_2(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules:\n  GP208:\n    params: {spread: 3}\n", encoding="utf-8")
    manifest = tmp_path / "ns.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", "--policy", str(policy), str(manifest)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert (
        f"{policy}:3:14: policy key rules.GP208.params.spread: GP208 has no parameter 'spread'"
        in result.stderr
    )


def test_sections_are_typed_and_derived_facts_are_attributes() -> None:
    policy = policy_from_mapping(
        {
            "placement": {
                "gpuTaints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "vendor": "nvidia"}]
            },
            "priority": {"tiers": {"online": ["gpu-serving"]}, "highValue": 5000},
            "exemptions": [
                {
                    "rules": ["GP601"],
                    "namespaces": ["gpu-operator"],
                    "owner": "platform",
                    "reason": "driver",
                    "expires": "2030-01-31",
                }
            ],
        }
    )
    assert default_policy().placement.gpu_taints is None  # unknown, not untainted
    (taint,) = policy.placement.gpu_taints or ()
    assert (taint.taint.key, taint.taint.effect, taint.vendor, taint.value_given) == (
        "nvidia.com/gpu",
        "NoSchedule",
        "nvidia",
        False,
    )
    assert policy.priority.tiers == {"online": ("gpu-serving",)} and policy.priority.high_value == 5000
    (exemption,) = policy.exemptions
    assert isinstance(exemption, Exemption) and exemption.expires == datetime.date(2030, 1, 31)
    assert policy.label_registry.lookup("nvidia.com/gpu.product") is not None
    assert ("nvidia", (("nvidia.com", ".nvidia.com"),)) in policy.gpu.vendor_domains
