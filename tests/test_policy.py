"""The policy: default + .gpupolicy.yaml (found walking up) + --policy, validated with positions."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpupolicy.core.findings import Severity
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import (
    _load_layer,
    deep_merge,
    default_policy,
    load_policy,
    policies_dir,
    policy_from_mapping,
)
from gpupolicy.policy.repo_policies import find_repo_policy
from gpupolicy.policy.validation import PolicyError, validate_layer
from gpupolicy.rules.gpu_resources import SHM_MINIMUM_GPUS

REPO = Path(__file__).resolve().parent.parent
GP102_FIRES = (REPO / "gpupolicy" / "rules" / "examples" / "GP102" / "fires.yaml").read_text(encoding="utf-8")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_default_policy() -> None:
    policy = default_policy()
    assert policy.fail_on is Severity.ERROR
    assert policy.kubernetes_version == policy.data["kubernetesVersion"]
    assert policy.param(SHM_MINIMUM_GPUS) == 2
    assert len(policy.digest) == 64
    assert policy.digest == load_policy().digest  # stable across loads
    assert policy.rule("GP102").enabled and policy.rule("GP102").severity is None


def test_the_shipped_default_is_valid_so_a_run_need_not_validate_it() -> None:
    """load_policy does not validate the shipped default (gpupolicy/policy/loading.py): this does,
    as a policy file of the user's is validated, with its positions."""
    default = policies_dir() / "default.yaml"
    data, resource = _load_layer(default.read_text(encoding="utf-8"), str(default))
    validate_layer(data, resource, str(default))  # raises PolicyError with file, line and key


def test_a_policy_file_is_still_validated(tmp_path: Path) -> None:
    repo_policy = write(tmp_path / ".gpupolicy.yaml", "failOn: sometimes\n")
    with pytest.raises(PolicyError, match="failOn"):
        load_policy(repo_policy=repo_policy)


def test_repo_policy_found_walking_up(tmp_path: Path) -> None:
    repo_policy = write(tmp_path / ".gpupolicy.yaml", "failOn: warning\n")
    nested = tmp_path / "clusters" / "prod" / "ai-lab"
    manifest = write(nested / "llm.yaml", "kind: Namespace\n")
    assert find_repo_policy(manifest) == repo_policy
    assert find_repo_policy(nested) == repo_policy
    closer = write(tmp_path / "clusters" / ".gpupolicy.yml", "failOn: info\n")
    assert find_repo_policy(manifest) == closer


def test_no_repo_policy(tmp_path: Path) -> None:
    if any(
        (folder / name).is_file()
        for folder in tmp_path.parents
        for name in (".gpupolicy.yaml", ".gpupolicy.yml")
    ):
        pytest.skip("a .gpupolicy.yaml exists above the temporary directory")
    assert find_repo_policy(tmp_path / "x.yaml") is None


def test_merge_order_default_repo_then_each_policy_flag(tmp_path: Path) -> None:
    repo = write(
        tmp_path / ".gpupolicy.yaml",
        "failOn: warning\nrules:\n  GP104: {severity: error}\n  GP111: {enabled: false}\n"
        "gpu:\n  shmMinimumGpus: 4\n",
    )
    first = write(tmp_path / "ci.yaml", "rules:\n  GP104: {severity: info}\nexclude: [vendor/]\n")
    second = write(tmp_path / "local.yaml", "failOn: error\nexclude: [tmp/]\n")
    policy = load_policy(repo_policy=repo, extra=[first, second])
    assert policy.sources[0].endswith("default.yaml")
    assert policy.sources[1:] == (str(repo), str(first), str(second))
    assert policy.fail_on is Severity.ERROR  # the last layer wins
    assert policy.rule("GP104").severity is Severity.INFO  # --policy over the repo policy
    assert policy.rule("GP111").enabled is False  # kept from the repo policy: mappings merge by key
    assert policy.param(SHM_MINIMUM_GPUS) == 4  # GP113's parameter, set by its section key
    assert (
        policy.data["gpu"]["servingImages"] == default_policy().data["gpu"]["servingImages"]
    )  # default kept
    assert policy.exclude == ["tmp/"]  # lists are replaced, not appended
    assert policy.digest != default_policy().digest


def test_deep_merge_does_not_mutate_its_inputs() -> None:
    base = {"a": {"b": 1, "c": [1]}}
    override = {"a": {"c": [2]}, "d": 1}
    assert deep_merge(base, override) == {"a": {"b": 1, "c": [2]}, "d": 1}
    assert base == {"a": {"b": 1, "c": [1]}}


def test_schema_error_names_key_file_and_line(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.yaml", "failOn: sometimes\nrules:\n  GP104:\n    severity: loud\n")
    with pytest.raises(PolicyError) as caught:
        load_policy(extra=[bad])
    message = str(caught.value)
    assert f"{bad}:1:1: policy key failOn:" in message
    assert f"{bad}:4:5: policy key rules.GP104.severity:" in message
    assert "'loud'" in message


def test_unknown_key_is_reported_at_its_own_line(tmp_path: Path) -> None:
    bad = write(
        tmp_path / "typo.yaml", "nodePools:\n  - name: l4\n    gpusPerNode: 4\n    gpuProdcut: NVIDIA-L4\n"
    )
    with pytest.raises(PolicyError) as caught:
        load_policy(extra=[bad])
    message = str(caught.value)
    assert f"{bad}:4:5: policy key nodePools.0.gpuProdcut: unknown key 'gpuProdcut'" in message
    assert "did you mean 'gpuProduct'?" in message


def test_bad_rule_id_and_wrong_types(tmp_path: Path) -> None:
    bad = write(tmp_path / "ids.yaml", "rules:\n  gp104: {enabled: false}\nkubernetesVersion: 1.34\n")
    with pytest.raises(PolicyError) as caught:
        load_policy(extra=[bad])
    message = str(caught.value)
    assert "policy key kubernetesVersion" in message and ":3:1:" in message
    assert "gp104" in message


def test_duplicate_key_and_syntax_error_in_policy(tmp_path: Path) -> None:
    duplicate = write(tmp_path / "dup.yaml", "failOn: error\nfailOn: warning\n")
    with pytest.raises(PolicyError, match=r"dup\.yaml:2:1: key 'failOn' appears twice"):
        load_policy(extra=[duplicate])
    broken = write(tmp_path / "broken.yaml", "rules: [\n")
    with pytest.raises(PolicyError, match=r"broken\.yaml:\d+:\d+: YAML syntax error"):
        load_policy(extra=[broken])
    not_mapping = write(tmp_path / "list.yaml", "- a\n")
    with pytest.raises(PolicyError, match="must be a mapping"):
        load_policy(extra=[not_mapping])


def test_empty_policy_file_is_the_default(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.yaml", "# nothing to change\n")
    assert load_policy(extra=[empty]).data == default_policy().data


def test_policy_from_mapping_is_validated() -> None:
    with pytest.raises(PolicyError, match="failOn"):
        policy_from_mapping({"failOn": "never"})
    assert policy_from_mapping({"failOn": "warning"}).fail_on is Severity.WARNING


def rule_findings(policy_overrides: dict[str, object], rule_id: str) -> list[tuple[int | None, Severity]]:
    loaded = load_text(GP102_FIRES, "llm.yaml")
    policy = policy_from_mapping(policy_overrides) if policy_overrides else default_policy()
    report = evaluate(loaded.resources, policy, problems=loaded.problems)
    return [(f.line, f.severity) for f in report.findings if f.rule_id == rule_id]


def test_per_rule_enabled_and_severity_overrides() -> None:
    assert rule_findings({}, "GP102") == [(24, Severity.ERROR)]
    assert rule_findings({"rules": {"GP102": {"enabled": False}}}, "GP102") == []
    assert rule_findings({"rules": {"GP102": {"severity": "warning"}}}, "GP102") == [(24, Severity.WARNING)]
    assert rule_findings({"rules": {"GP113": {"severity": "error"}}}, "GP113") == [(25, Severity.ERROR)]
    # an override of one rule leaves the others alone
    assert rule_findings({"rules": {"GP113": {"enabled": False}}}, "GP102") == [(24, Severity.ERROR)]


UNKNOWN_RUNTIME_CLASS = """\
apiVersion: v1
kind: Pod
metadata:
  name: cuda
  namespace: ai-lab
spec:
  runtimeClassName: nvidia-cdi
  containers:
    - name: cuda
      image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
      resources:
        limits: {nvidia.com/gpu: 1}
"""


@pytest.mark.parametrize("severity", ["error", "warning"])
def test_an_override_never_raises_an_unknown_above_info(severity: str) -> None:
    """A RuntimeClass the repository does not hold could not be verified: that stays info even
    when the policy raises GP210 (a raised GP210 is for the pod that is certainly wrong)."""
    loaded = load_text(UNKNOWN_RUNTIME_CLASS, "pod.yaml")
    policy = policy_from_mapping({"rules": {"GP210": {"severity": severity}}})
    report = evaluate(loaded.resources, policy)
    [finding] = [f for f in report.findings if f.rule_id == "GP210"]
    assert finding.severity is Severity.INFO and "could not be verified" in finding.message
    # the same override still raises the finding that is not an unknown
    complete = policy_from_mapping(
        {"rules": {"GP210": {"severity": severity}}, "inventory": {"completeKinds": ["RuntimeClass"]}}
    )
    [certain] = [f for f in evaluate(loaded.resources, complete).findings if f.rule_id == "GP210"]
    assert certain.severity is Severity.parse(severity) and "does not exist" in certain.message


def test_input_rules_can_be_overridden_too() -> None:
    loaded = load_text("apiVersion: v1\nkind: ConfigMap\nmetadata: [\n", "broken.yaml")
    policy = policy_from_mapping({"rules": {"GP001": {"severity": "warning"}}})
    report = evaluate(loaded.resources, policy, problems=loaded.problems)
    assert [(f.rule_id, f.severity) for f in report.findings] == [("GP001", Severity.WARNING)]
    disabled = policy_from_mapping({"rules": {"GP001": {"enabled": False}}})
    assert evaluate(loaded.resources, disabled, problems=loaded.problems).findings == []


def lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpupolicy", "lint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
        check=False,
    )


def test_cli_uses_repo_policy_unless_told_not_to(tmp_path: Path) -> None:
    write(tmp_path / ".gpupolicy.yaml", "rules:\n  GP102: {enabled: false}\n")
    write(tmp_path / "apps" / "llm.yaml", GP102_FIRES)
    with_repo = lint(tmp_path, "apps")
    assert "GP102" not in with_repo.stdout
    without = lint(tmp_path, "--no-repo-policy", "apps")
    assert "GP102 error" in without.stdout
    write(tmp_path / "override.yaml", "rules:\n  GP102: {enabled: true, severity: info}\n")
    flagged = lint(tmp_path, "--policy", "override.yaml", "apps")
    assert "GP102 info gpu-request-limit-mismatch" in flagged.stdout  # --policy merges over the repo policy


def test_cli_repo_policy_error_is_exit_2(tmp_path: Path) -> None:
    write(tmp_path / ".gpupolicy.yaml", "rulez: {}\n")
    write(tmp_path / "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    result = lint(tmp_path, "cm.yaml")
    assert result.returncode == 2
    assert ".gpupolicy.yaml:1:1: policy key rulez: unknown key 'rulez'" in result.stderr
    assert "Traceback" not in result.stderr


def test_only_a_sharing_scheduler_may_leave_out_its_domains(tmp_path: Path) -> None:
    """Koordinator's domain also names its overcommit CPU (koordinator.sh/batch-cpu): a sharing
    vendor may list no domain; a GPU maker must, its node labels and unknown resources are read by it."""
    sharing = "gpu:\n  vendors:\n    - {name: koordinator, sharing: true, fractionResources: [koordinator.sh/gpu-core]}\n"
    (tmp_path / "sharing.yaml").write_text(sharing)
    assert load_policy(extra=[tmp_path / "sharing.yaml"]).gpu is not None
    (tmp_path / "maker.yaml").write_text(sharing.replace(", sharing: true", ""))
    with pytest.raises(PolicyError, match="'domains' is a required property"):
        load_policy(extra=[tmp_path / "maker.yaml"])
