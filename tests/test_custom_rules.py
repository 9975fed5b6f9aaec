"""Custom rules (docs/custom-rules.md): native Rego, Gatekeeper templates and constraints,
ValidatingAdmissionPolicies and native CEL rules, run by `gpupolicy lint` like built-in rules;
errors before linting; `gpupolicy test`; time budgets and failures."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gpupolicy.cli.main import main
from gpupolicy.custom import rules as custom_rules
from gpupolicy.custom.definitions import Review
from gpupolicy.custom.errors import CustomRuleError
from gpupolicy.custom.isolation import IsolatedRunner
from gpupolicy.custom.loading import rule_files, rules_for
from gpupolicy.custom.rules import STATS, CustomRuleFailed, installed, run_within_budget
from gpupolicy.custom.testing import load_rules
from gpupolicy.engine.evaluation import evaluate
from gpupolicy.engine.registry import REGISTRY
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import policy_from_mapping

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "custom"
EXAMPLES = REPO / "examples" / "policies"

REQUEST_EQUALS_LIMIT = """\
package acme.gpu

import rego.v1

metadata := {
\t"id": "ACME001",
\t"name": "gpu-request-equals-limit",
\t"severity": "error",
\t"summary": "GPU requests equal GPU limits.",
\t"remediation": "Set the GPU request equal to the GPU limit.",
\t"parameters": {"resource": "nvidia.com/gpu"},
}

violation contains {"msg": msg, "path": path} if {
\tsome i
\tcontainer := input.spec.template.spec.containers[i]
\trequest := container.resources.requests[data.parameters.resource]
\tlimit := container.resources.limits[data.parameters.resource]
\tunits.parse(sprintf("%v", [request])) != units.parse(sprintf("%v", [limit]))
\tmsg := sprintf("container %s: request %v != limit %v", [container.name, request, limit])
\tpath := ["spec", "template", "spec", "containers", i, "resources", "requests", data.parameters.resource]
}
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: ai-lab
spec:
  selector:
    matchLabels: {app: llm}
  template:
    metadata:
      labels: {app: llm}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            requests:
              nvidia.com/gpu: 1
            limits:
              nvidia.com/gpu: 2
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with a policy file and a Rego rule in policies/rego/."""
    write(tmp_path / ".git" / "HEAD", "ref: refs/heads/main\n")
    write(tmp_path / ".gpupolicy.yaml", "apiVersion: gpupolicy.io/v1alpha1\nkind: Policy\n")
    write(tmp_path / "policies" / "rego" / "gpu.rego", REQUEST_EQUALS_LIMIT)
    write(tmp_path / "apps" / "llm.yaml", DEPLOYMENT)
    return tmp_path


def lint_json(
    folder: Path, *args: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict]:  # type: ignore[type-arg]
    monkeypatch.chdir(folder)
    code = main(["lint", "-f", "json", *args])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def custom_findings(report: dict) -> list[tuple[str, int, int, str]]:  # type: ignore[type-arg]
    return [
        (f["rule"], f["line"], f["column"], f["severity"])
        for f in report["findings"]
        if not f["rule"].startswith("GP")
    ]


# -- native Rego ---------------------------------------------------------------------------------


def test_a_rego_rule_in_policies_rego_reports_at_the_field_like_a_built_in_rule(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = lint_json(repo, "apps", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1
    assert custom_findings(report) == [("ACME001", 18, 15, "error")]
    built_in = next(f for f in report["findings"] if f["rule"] == "GP102")
    ours = next(f for f in report["findings"] if f["rule"] == "ACME001")
    assert (ours["line"], ours["column"], ours["path"]) == (
        built_in["line"],
        built_in["column"],
        built_in["path"],
    )
    assert ours["message"] == "container vllm: request 1 != limit 2"
    assert ours["remediation"] == "Set the GPU request equal to the GPU limit."
    assert "ACME001" not in REGISTRY  # registered for the run only


def test_the_policy_overrides_severity_params_and_can_disable_a_custom_rule(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(repo / ".gpupolicy.yaml", "rules:\n  ACME001: {severity: warning}\n")
    _, report = lint_json(repo, "apps", monkeypatch=monkeypatch, capsys=capsys)
    assert custom_findings(report) == [("ACME001", 18, 15, "warning")]
    write(repo / ".gpupolicy.yaml", "rules:\n  gpu-request-equals-limit: {params: {resource: amd.com/gpu}}\n")
    write(repo / ".gpupolicy.yaml", "rules:\n  ACME001: {params: {resource: amd.com/gpu}}\n")
    _, report = lint_json(repo, "apps", monkeypatch=monkeypatch, capsys=capsys)
    assert custom_findings(report) == []
    write(repo / ".gpupolicy.yaml", "rules:\n  ACME001: {enabled: false}\n")
    _, report = lint_json(repo, "apps", monkeypatch=monkeypatch, capsys=capsys)
    assert custom_findings(report) == []


def test_suppressions_and_baselines_apply_to_custom_rules(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    annotated = DEPLOYMENT.replace(
        "  namespace: ai-lab\n",
        "  namespace: ai-lab\n  annotations:\n    gpupolicy.io/ignore: 'ACME001: MIG slices are counted apart'\n",
    )
    write(repo / "apps" / "llm.yaml", annotated)
    _, report = lint_json(repo, "apps", monkeypatch=monkeypatch, capsys=capsys)
    assert custom_findings(report) == []
    assert [item["rule"] for item in report["suppressed"] if item["rule"] == "ACME001"] == ["ACME001"]
    write(repo / "apps" / "llm.yaml", DEPLOYMENT)
    monkeypatch.chdir(repo)
    assert main(["lint", "--write-baseline", "baseline.json", "apps"]) == 0
    capsys.readouterr()
    _, report = lint_json(repo, "--baseline", "baseline.json", "apps", monkeypatch=monkeypatch, capsys=capsys)
    assert custom_findings(report) == []


def test_sarif_describes_custom_rules(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    assert main(["lint", "-f", "sarif", "apps"]) == 1
    run = json.loads(capsys.readouterr().out)["runs"][0]
    rules = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    (result,) = [result for result in run["results"] if result["ruleId"] == "ACME001"]
    assert rules[result["ruleIndex"]] == "ACME001"


def test_rules_and_explain_list_the_custom_rules_of_the_policy(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    assert main(["rules"]) == 0
    assert "ACME001  error    gpu-request-equals-limit" in capsys.readouterr().out
    assert main(["explain", "gpu-request-equals-limit"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("# ACME001 gpu-request-equals-limit")
    assert "policies/rego/gpu.rego:5" in page and "`resource` (string, default `nvidia.com/gpu`)" in page


def test_rules_read_the_inventory_in_gatekeepers_shape(tmp_path: Path) -> None:
    write(
        tmp_path / "rules" / "unique.rego",
        textwrap.dedent(
            """\
            package acme.unique_host

            import rego.v1

            metadata := {"id": "ACME010", "name": "service-name-taken", "severity": "warning",
              "summary": "Service names are unique across namespaces.",
              "remediation": "Rename the Service.", "kinds": ["Service"]}

            violation contains {"msg": msg, "path": ["metadata", "name"]} if {
              some namespace, other in data.inventory.namespace
              namespace != input.metadata.namespace
              other.v1.Service[input.metadata.name]
              msg := sprintf("Service %v also exists in namespace %v", [input.metadata.name, namespace])
            }
            """
        ),
    )
    services = "".join(
        f"---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec: {{ports: [{{port: 80}}]}}\n"
        for name, namespace in (("api", "a"), ("api", "b"), ("web", "a"))
    )
    loaded = load_text(services, "services.yaml")
    policy = policy_from_mapping({"customRules": {"paths": [str(tmp_path / "rules")]}})
    with installed(rules_for([policy])):
        report = evaluate(loaded.resources, policy)
    found = sorted((f.rule_id, f.line, f.message) for f in report.findings if f.rule_id == "ACME010")
    assert found == [
        ("ACME010", 5, "Service api also exists in namespace b"),
        ("ACME010", 12, "Service api also exists in namespace a"),
    ]


# -- Gatekeeper and ValidatingAdmissionPolicy fixtures ----------------------------------------------


def expectations(path: Path) -> set[tuple[str, int]]:
    """Every (rule id, line) the `# expect:` markers of a file name."""
    found = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        _, marker, ids = line.partition("# expect:")
        found.update((rule_id.strip(), number) for rule_id in ids.split(",") if marker and rule_id.strip())
    return found


@pytest.mark.parametrize("folder", ["gatekeeper", "vap", "cel"])
def test_definitions_in_the_linted_tree_fire_where_their_fixtures_say(
    folder: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GitOps tree keeps its constraints and policies beside its workloads: both are linted."""
    _, report = lint_json(DATA / folder, ".", monkeypatch=monkeypatch, capsys=capsys)
    found = {
        (f["rule"], f["line"])
        for f in report["findings"]
        if not f["rule"].startswith("GP") and f["file"].endswith("workloads.yaml")
    }
    assert found == expectations(DATA / folder / "workloads.yaml")


def test_gatekeeper_enforcement_actions_are_severities(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, report = lint_json(DATA / "gatekeeper", ".", monkeypatch=monkeypatch, capsys=capsys)
    severity = {f["rule"]: f["severity"] for f in report["findings"] if not f["rule"].startswith("GP")}
    assert severity == {
        "ACME100": "error",  # deny (the default)
        "GK-no-host-namespace": "error",
        "GK-no-privileged": "error",
        "GK-images-from-nvcr": "warning",  # warn
        "GK-container-limits": "info",  # dryrun
    }


# -- errors before linting -------------------------------------------------------------------------

BAD_REGO = REQUEST_EQUALS_LIMIT.replace("some i\n", "some i (\n")
UNKNOWN_FUNCTION = REQUEST_EQUALS_LIMIT.replace("msg := sprintf(", "msg := sprintff(")
BUILT_IN_ID = REQUEST_EQUALS_LIMIT.replace('"ACME001"', '"GP102"')
BUILT_IN_NAME = REQUEST_EQUALS_LIMIT.replace('"gpu-request-equals-limit"', '"gpu-request-limit-mismatch"')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (BAD_REGO, "policies/rego/gpu.rego:16:"),
        (UNKNOWN_FUNCTION, "policies/rego/gpu.rego:20:9: Rego: unknown function sprintff"),
        (
            BUILT_IN_ID,
            "policies/rego/gpu.rego:5: rule id GP102: ids starting with GP are reserved for built-in rules",
        ),
        (
            BUILT_IN_NAME,
            "policies/rego/gpu.rego:5: rule gpu-request-limit-mismatch clashes with the built-in rule GP102",
        ),
    ],
)
def test_a_rule_that_cannot_be_used_stops_the_run_with_its_file_and_line(
    repo: Path, text: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(repo / "policies" / "rego" / "gpu.rego", text)
    monkeypatch.chdir(repo)
    assert main(["lint", "apps"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert message in line


def test_two_rules_with_one_id_are_refused(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(
        repo / "policies" / "rego" / "again.rego",
        REQUEST_EQUALS_LIMIT.replace("package acme.gpu", "package acme.again"),
    )
    monkeypatch.chdir(repo)
    assert main(["lint", "apps"]) == 2
    error = capsys.readouterr().err
    assert "rule ACME001 is defined twice (also at" in error and "gpu.rego:5" in error


TEMPLATE = """\
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata:
  name: k8sbroken
spec:
  crd:
    spec:
      names:
        kind: K8sBroken
  targets:
    - target: admission.k8s.gatekeeper.sh
      rego: |
        package k8sbroken

        violation[{"msg": msg}] {
          msg := "always"
        }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sBroken
metadata:
  name: broken
"""

VAP = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: broken
spec:
  validations:
    - expression: "object.spec.replicas <= 5"
    - expression: >-
        object.spec.template.spec.containers.all(c,
          c.image.startsWith('nvcr.io/'))
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: broken
spec:
  policyName: broken
  validationActions: [Deny]
"""


BROKEN_TEMPLATE = TEMPLATE.replace('msg := "always"', 'msg := "always')
BROKEN_VAP = VAP.replace("c.image.startsWith('nvcr.io/'))", "c.image.startsWith('nvcr.io/') &&)")


COMPILE_ERRORS = [
    (BROKEN_TEMPLATE, "defs.yaml:16:17: Rego: invalid character in string"),  # its line in the YAML file
    (BROKEN_VAP, "defs.yaml:10:36: CEL: broken: validations[1]: Syntax error"),  # line 2 of the expression
    (
        VAP.replace("c.image.startsWith", "c.image.nosuch"),
        "defs.yaml:9: CEL: broken: validations[1]: unknown function nosuch",
    ),
]
BROKEN_REFERENCES = [
    (
        TEMPLATE.replace(
            "kind: K8sBroken\nmetadata:\n  name: broken", "kind: K8sOther\nmetadata:\n  name: broken"
        ),
        "defs.yaml:19: constraint K8sOther/broken: no ConstraintTemplate defines kind K8sOther",
    ),
    (
        VAP.replace("policyName: broken", "policyName: other"),
        "defs.yaml:12: binding broken: no ValidatingAdmissionPolicy named 'other'",
    ),
]


# Rules of the policy's paths that cannot be used stop the run; definitions of the linted tree
# never do (below).
STOPPING = [("paths", text, message) for text, message in [*COMPILE_ERRORS, *BROKEN_REFERENCES]]


@pytest.mark.parametrize(("where", "text", "message"), STOPPING)
def test_definitions_that_cannot_be_used_stop_the_run(
    tmp_path: Path,
    where: str,
    text: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if where == "paths":
        write(tmp_path / "rules" / "defs.yaml", text)
        write(tmp_path / ".gpupolicy.yaml", "customRules:\n  paths: [rules]\n")
    else:
        write(tmp_path / "defs.yaml", text)
    write(tmp_path / "apps" / "app.yaml", DEPLOYMENT)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "apps" if where == "paths" else "."]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert message in line, line


@pytest.mark.parametrize(("text", "message"), COMPILE_ERRORS)
def test_a_definition_in_the_tree_that_cannot_be_compiled_is_one_info_finding_on_itself(
    tmp_path: Path,
    text: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A GitOps repository's own admission policy that gpupolicy cannot evaluate (Volcano's
    installer calls Kubernetes CEL libraries) does not leave the repository unlinted: the rest is
    linted, and the policy's rule says, once, at the expression, that it checked nothing."""
    write(tmp_path / "defs.yaml", text)
    write(tmp_path / "app.yaml", DEPLOYMENT)
    monkeypatch.chdir(tmp_path)
    main(["lint", ".", "-f", "json"])
    report = json.loads(capsys.readouterr().out)
    custom = [finding for finding in report["findings"] if finding["rule"] in ("VAP-broken", "GK-broken")]
    (finding,) = custom
    where, _, reason = message.partition(": ")
    _, line, *column = where.split(":")
    assert finding["file"] == "defs.yaml" and finding["line"] <= int(line)  # the field holding the code
    assert finding["severity"] == "info"
    assert finding["message"].startswith(
        ("unknown: ValidatingAdmissionPolicy broken", "unknown: Gatekeeper constraint")
    )
    assert finding["message"].endswith(
        "the objects it selects were not checked against it (the API server applies it)"
    )
    exact = f"line {line}" + (f", column {column[0]}" if column else "")
    assert f"({exact}: {reason}" in finding["message"]
    assert any(finding["file"] == "app.yaml" for finding in report["findings"])  # the workload is linted


# -- gpupolicy test ------------------------------------------------------------------------------


def test_gpupolicy_test_runs_each_rule_on_its_examples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "gpu.rego", REQUEST_EQUALS_LIMIT)
    fires = DEPLOYMENT.replace("nvidia.com/gpu: 1\n", "nvidia.com/gpu: 1  # expect: ACME001\n")
    write(tmp_path / "examples" / "ACME001" / "fires.yaml", fires)
    write(
        tmp_path / "examples" / "ACME001" / "passes.yaml",
        DEPLOYMENT.replace("nvidia.com/gpu: 1\n", 'nvidia.com/gpu: "2"\n'),
    )
    assert main(["test", str(tmp_path)]) == 0
    assert (
        capsys.readouterr().out == "PASS ACME001 gpu-request-equals-limit (2 examples)\n1 passed, 0 failed\n"
    )
    write(tmp_path / "examples" / "ACME001" / "passes.yaml", DEPLOYMENT)
    assert main(["test", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL ACME001" in out and "passes.yaml:18: unexpected ACME001" in out


def test_gpupolicy_test_fails_a_rule_without_examples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "gpu.rego", REQUEST_EQUALS_LIMIT)
    assert main(["test", str(tmp_path)]) == 1
    assert "no examples: add examples/ACME001/fires.yaml and passes.yaml" in capsys.readouterr().out


def test_the_shipped_example_policies_pass_their_own_tests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(EXAMPLES)]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 3, out


# -- budgets and failures ----------------------------------------------------------------------------

SLOW = """\
package acme.slow

import rego.v1

metadata := {"id": "ACME900", "name": "slow-rule", "severity": "error",
  "summary": "Counts for seconds.", "remediation": "Do not."}

violation contains "never" if {
  count([1 | some i in numbers.range(1, 3000); some j in numbers.range(1, 3000); i == j + 5000000]) > 0
}
"""


def test_a_rule_past_its_budget_fails_without_holding_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engines keep the interpreter lock while they run: the budget holds out of process."""
    write(tmp_path / "slow.rego", SLOW)
    write(tmp_path / "gpu.rego", REQUEST_EQUALS_LIMIT)
    slow, fast = sorted(load_rules(tmp_path), key=lambda rule: rule.metadata.id, reverse=True)
    runner = IsolatedRunner(1)
    monkeypatch.setattr(custom_rules, "_RUNNER", runner)
    try:
        assert runner.wait_ready(60)
        before = STATS.snapshot()[1].get(("ACME900", "timeout"), 0)
        started = time.monotonic()
        with pytest.raises(CustomRuleFailed, match="ran past its time budget of 300 ms"):
            run_within_budget(slow, Review({"kind": "Pod"}), {}, 300)
        assert time.monotonic() - started < 2  # the rule alone counts for seconds
        assert STATS.snapshot()[1][("ACME900", "timeout")] == before + 1
        (deployment,) = load_text(DEPLOYMENT, "llm.yaml").resources
        found = run_within_budget(fast, Review(deployment.obj), fast.metadata.parameters, 5000)
        assert [violation.message for violation in found] == ["container vllm: request 1 != limit 2"]
    finally:
        runner.close()


def test_a_rule_that_raises_is_an_internal_error_and_the_others_still_report(tmp_path: Path) -> None:
    write(tmp_path / "gpu.rego", REQUEST_EQUALS_LIMIT)
    write(
        tmp_path / "raises.rego",
        'package acme.raises\n\nimport rego.v1\n\nmetadata := {"id": "ACME901", "name": "raises", "severity": "error",\n'
        '  "summary": "Fails.", "remediation": "Fix it."}\n\nviolation contains x if { x := to_number(input.metadata.name) }\n',
    )
    policy = policy_from_mapping({"customRules": {"paths": [str(tmp_path)]}})
    loaded = load_text(DEPLOYMENT, "llm.yaml")
    with installed(rules_for([policy])):
        report = evaluate(loaded.resources, policy)
    assert [error.rule_id for error in report.errors] == ["ACME901"]
    assert "could not parse string as number" in report.errors[0].message
    assert "ACME001" in {finding.rule_id for finding in report.findings}


def test_rule_paths_must_exist(tmp_path: Path) -> None:
    with pytest.raises(CustomRuleError, match="does not exist"):
        rule_files([tmp_path / "missing"])


def test_a_missing_rego_engine_is_a_usage_error_naming_the_rule_file(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """regorus has wheels for Linux x86_64 only: elsewhere a Rego rule says what to install."""
    write(repo / "policies" / "rego" / "gpu.rego", REQUEST_EQUALS_LIMIT)
    monkeypatch.chdir(repo)
    monkeypatch.setitem(sys.modules, "regorus", None)  # `import regorus` raises ImportError
    assert main(["lint", "apps"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert (
        line.startswith("gpupolicy: ")
        and "policies/rego/gpu.rego:1: Rego rules need the regorus engine" in line
    )


VOLCANO = DATA / "volcano"


def test_volcanos_own_job_policy_judges_its_examples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Volcano's installer keeps a ValidatingAdmissionPolicy for its Jobs that calls the Kubernetes
    CEL format library. Linted with Volcano's examples, it compiles whole, denies the example
    written to be denied, admits the example Job, and says apimachinery's reason for a bad name."""
    for source in VOLCANO.iterdir():
        write(tmp_path / source.name, source.read_text(encoding="utf-8"))
    renamed = (VOLCANO / "job.yaml").read_text(encoding="utf-8").replace("name: test-job", "name: -test-job")
    write(tmp_path / "renamed.yaml", renamed)
    monkeypatch.chdir(tmp_path)
    main(["lint", ".", "-f", "json"])
    report = json.loads(capsys.readouterr().out)
    found = sorted(
        (finding["file"], finding["severity"], finding["message"])
        for finding in report["findings"]
        if finding["rule"] == "VAP-job-validation-policy-binding"
    )
    assert found == [
        ("duplicatedTaskName-webhook-deny.yaml", "error", "duplicated task name found"),
        (
            "renamed.yaml",
            "error",
            "job name errors: name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
    ]


def test_a_definition_written_again_unchanged_in_the_tree_is_one_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Volcano ships its admission policies in two variants of its installer: the same objects twice."""
    policy = (VOLCANO / "job-validation-policy.yaml").read_text(encoding="utf-8")
    write(tmp_path / "installer-vap.yaml", policy)
    write(tmp_path / "installer-vap-map.yaml", policy)
    write(
        tmp_path / "job.yaml", (VOLCANO / "duplicatedTaskName-webhook-deny.yaml").read_text(encoding="utf-8")
    )
    monkeypatch.chdir(tmp_path)
    assert main(["lint", ".", "-f", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    found = [f["file"] for f in report["findings"] if f["rule"] == "VAP-job-validation-policy-binding"]
    assert found == ["job.yaml"]


def test_two_different_definitions_of_one_binding_in_the_tree_are_two_rules(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two overlays of one repository keep the same binding, one denying and one warning: in the
    cluster they never meet, so the run goes on; the second read (files in path order) takes the id
    and name `-2`."""
    policy = (VOLCANO / "job-validation-policy.yaml").read_text(encoding="utf-8")
    write(tmp_path / "installer-vap.yaml", policy)
    write(
        tmp_path / "installer-vap-map.yaml",
        policy.replace("validationActions: [Deny]", "validationActions: [Warn]"),
    )
    write(
        tmp_path / "job.yaml", (VOLCANO / "duplicatedTaskName-webhook-deny.yaml").read_text(encoding="utf-8")
    )
    code, report = lint_json(tmp_path, ".", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1
    found = {(f["rule"], f["severity"]) for f in report["findings"] if f["rule"].startswith("VAP-")}
    assert found == {
        ("VAP-job-validation-policy-binding", "warning"),  # installer-vap-map.yaml
        ("VAP-job-validation-policy-binding-2", "error"),  # installer-vap.yaml
    }


@pytest.mark.parametrize(
    ("text", "rule", "line", "reason"),
    [
        (
            BROKEN_REFERENCES[0][0],
            "GK-broken",
            20,  # its kind
            "no ConstraintTemplate in the linted tree or customRules.paths defines kind K8sOther",
        ),
        (
            BROKEN_REFERENCES[1][0],
            "VAP-broken",
            17,
            "no ValidatingAdmissionPolicy named 'other' is in the linted tree or customRules.paths",
        ),
        (
            VAP.replace("  policyName: broken\n", ""),
            "VAP-broken",
            16,
            "it names no policy (spec.policyName)",
        ),
        (
            VAP.replace("validationActions: [Deny]", "validationActions: [Block]"),
            "VAP-broken",
            12,
            "ValidatingAdmissionPolicyBinding broken was not evaluated: validationActions must hold Deny, Warn or Audit",
        ),
    ],
)
def test_a_constraint_or_binding_of_the_tree_that_cannot_be_a_rule_is_one_info_finding_on_itself(
    tmp_path: Path,
    text: str,
    rule: str,
    line: int,
    reason: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A repository's Constraints whose templates come from Gatekeeper's library, installed by
    another chart, or a binding of a policy another repository ships: the cluster has what the tree
    lacks, so the run goes on, and each says once, on itself, what it did not check."""
    write(tmp_path / "defs.yaml", text)
    write(tmp_path / "app.yaml", DEPLOYMENT)
    code, report = lint_json(tmp_path, ".", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1  # the Deployment's own findings (GP102)
    custom = [f for f in report["findings"] if not f["rule"].startswith("GP")]
    (finding,) = custom
    assert (finding["rule"], finding["file"], finding["line"], finding["severity"]) == (
        rule,
        "defs.yaml",
        line,
        "info",
    )
    assert finding["message"].startswith("unknown: ") and reason in finding["message"]
    # What the tree names but does not hold comes with how to supply it.
    hint = "(add the file that defines it to the policy's customRules.paths)"
    assert finding["message"].endswith(hint) == ("customRules.paths" in reason)
    assert any(f["rule"] == "GP102" and f["file"] == "app.yaml" for f in report["findings"])


K8S_DOCS_VAP = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: "demo-policy.example.com"
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups:   ["apps"]
      apiVersions: ["v1"]
      operations:  ["CREATE", "UPDATE"]
      resources:   ["deployments"]
  matchConditions:
    - name: deployments-only
      expression: "request.resource.resource == 'deployments' && request.kind.version == 'v1'"
  validations:
    - expression: "object.spec.replicas <= 5"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: "demo-binding-test.example.com"
spec:
  policyName: "demo-policy.example.com"
  validationActions: [Deny]
"""


def test_a_binding_named_as_the_kubernetes_docs_name_them_is_a_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Object names are DNS subdomains (the Kubernetes docs' `demo-binding-test.example.com`): the
    rule's derived id and name take a hyphen for each dot. The request holds what the API server
    would fill in for the object (its resource, its kind's version)."""
    write(tmp_path / "vap.yaml", K8S_DOCS_VAP)
    write(
        tmp_path / "app.yaml", DEPLOYMENT.replace("spec:\n  selector:", "spec:\n  replicas: 8\n  selector:")
    )
    code, report = lint_json(tmp_path, ".", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1
    custom = [
        (f["rule"], f["name"], f["file"], f["severity"])
        for f in report["findings"]
        if not f["rule"].startswith("GP")
    ]
    assert custom == [
        ("VAP-demo-binding-test-example-com", "demo-binding-test-example-com", "app.yaml", "error")
    ]


USER_CONDITION = K8S_DOCS_VAP.replace(
    "request.resource.resource == 'deployments' && request.kind.version == 'v1'",
    "!('system:masters' in request.userInfo.groups)",
)


def test_a_policy_that_reads_who_sends_the_request_is_not_evaluated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No manifest says who applies it: in the tree, such a policy is one info finding on itself
    (not an internal error on every object it selects); in the policy's paths, the run stops."""
    write(tmp_path / "tree" / "vap.yaml", USER_CONDITION)
    write(tmp_path / "tree" / "app.yaml", DEPLOYMENT)
    code, report = lint_json(tmp_path / "tree", ".", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1 and not report["internalErrors"]
    (finding,) = [f for f in report["findings"] if not f["rule"].startswith("GP")]
    assert (finding["file"], finding["severity"]) == ("vap.yaml", "info")
    assert "reads request.userInfo, which no manifest holds" in finding["message"]
    write(tmp_path / "paths" / "rules" / "vap.yaml", USER_CONDITION)
    write(tmp_path / "paths" / ".gpupolicy.yaml", "customRules:\n  paths: [rules]\n")
    write(tmp_path / "paths" / "apps" / "app.yaml", DEPLOYMENT)
    monkeypatch.chdir(tmp_path / "paths")
    assert main(["lint", "apps"]) == 2
    assert "vap.yaml:15: CEL: demo-policy.example.com: matchConditions[0]: reads request.userInfo" in (
        capsys.readouterr().err
    )


CONSTRAINT_NAMED_LIKE_A_BUILT_IN = TEMPLATE.replace(
    "kind: K8sBroken\nmetadata:\n  name: broken", "kind: K8sBroken\nmetadata:\n  name: privileged-container"
)


def test_a_constraint_of_the_tree_named_like_a_built_in_rule_runs_under_another_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "defs.yaml", CONSTRAINT_NAMED_LIKE_A_BUILT_IN)
    write(tmp_path / "app.yaml", DEPLOYMENT)
    code, report = lint_json(tmp_path, ".", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1
    names = {(f["rule"], f["name"]) for f in report["findings"] if not f["rule"].startswith("GP")}
    assert names == {("GK-privileged-container-2", "privileged-container-2")}  # id and name move together
    # In the policy's paths, the same constraint is the user's rule for gpupolicy: a clash stops.
    write(tmp_path / "paths" / "rules" / "defs.yaml", CONSTRAINT_NAMED_LIKE_A_BUILT_IN)
    write(tmp_path / "paths" / ".gpupolicy.yaml", "customRules:\n  paths: [rules]\n")
    write(tmp_path / "paths" / "apps" / "app.yaml", DEPLOYMENT)
    monkeypatch.chdir(tmp_path / "paths")
    assert main(["lint", "apps"]) == 2
    assert "clashes with the built-in rule GP601 privileged-container" in capsys.readouterr().err


SCOPED = """\
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sBroken
metadata:
  name: scoped
spec:
  enforcementAction: scoped
  scopedEnforcementActions:
{entries}
"""


@pytest.mark.parametrize(
    ("entries", "severity"),
    [
        # Gatekeeper's docs: deny in shift-left (gator), warn at admission.
        ('  - action: warn\n    enforcementPoints: [{name: "validation.gatekeeper.sh"}]\n'
         '  - action: deny\n    enforcementPoints: [{name: "gator.gatekeeper.sh"}]', "error"),
        ('  - action: warn\n    enforcementPoints: [{name: "validation.gatekeeper.sh"}]', "warning"),
        ('  - action: deny\n    enforcementPoints: [{name: "vap.k8s.io"}, {name: "audit.gatekeeper.sh"}]', "error"),
        ('  - action: deny\n    enforcementPoints: [{name: "*"}]', "error"),
        # Audit alone reports what the cluster holds and blocks nothing.
        ('  - action: deny\n    enforcementPoints: [{name: "audit.gatekeeper.sh"}]', "info"),
    ],
)  # fmt: skip
def test_a_scoped_constraint_takes_the_action_of_the_points_gpupolicy_stands_for(
    tmp_path: Path,
    entries: str,
    severity: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    template = TEMPLATE[: TEMPLATE.index("---")]
    write(tmp_path / "defs.yaml", template + "---\n" + SCOPED.format(entries=entries))
    write(tmp_path / "app.yaml", DEPLOYMENT)
    _, report = lint_json(tmp_path, ".", monkeypatch=monkeypatch, capsys=capsys)
    found = {(f["rule"], f["severity"]) for f in report["findings"] if not f["rule"].startswith("GP")}
    assert found == {("GK-scoped", severity)}


# GKE's sample policy (kubernetes-engine-samples, autoscaling/custom-compute-classes/vap): it reads
# `object.spec.tolerations` without has(), which never fails in the API server, where the
# DefaultTolerationSeconds admission plugin gives every pod two tolerations before validation.
TOLERATIONS_POLICY = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: restrict-toleration}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["pods"]
  matchConditions:
  - name: match-tolerations
    expression: "object.spec.tolerations.exists(t, has(t.key) && t.key == 'cloud.google.com/compute-class')"
  validations:
  - expression: "object.metadata.namespace == 'ccc'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: restrict-toleration-binding}
spec:
  policyName: restrict-toleration
  validationActions: ["Deny"]
"""


def test_a_definition_of_the_tree_that_fails_on_an_object_is_one_info_finding_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "vap.yaml", TOLERATIONS_POLICY)
    write(tmp_path / "app.yaml", DEPLOYMENT)
    write(tmp_path / "other.yaml", DEPLOYMENT.replace("name: llm", "name: llm-2", 1))
    monkeypatch.chdir(tmp_path)
    code = main(["lint", ".", "-f", "json"])
    captured = capsys.readouterr()
    assert "internal error" not in captured.err
    report = json.loads(captured.out)
    (finding,) = [item for item in report["findings"] if item["rule"] == "VAP-restrict-toleration-binding"]
    assert finding["severity"] == "info" and finding["file"] == "app.yaml"
    assert finding["message"].startswith(
        "unknown: ValidatingAdmissionPolicy binding VAP-restrict-toleration-binding (vap.yaml:"
    )
    assert "matchConditions[0]: no such key: tolerations" in finding["message"]
    assert "KeyError" not in finding["message"]
    assert code == (1 if any(item["severity"] == "error" for item in report["findings"]) else 0)


def test_a_rule_of_the_policy_paths_that_fails_on_an_object_is_still_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "rules" / "vap.yaml", TOLERATIONS_POLICY)
    write(tmp_path / ".gpupolicy.yaml", "customRules:\n  paths: [rules]\n")
    write(tmp_path / "apps" / "app.yaml", DEPLOYMENT)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "apps"]) == 3
    assert "no such key: tolerations" in capsys.readouterr().err
