"""Suppressions: annotations, inline comments, policy exemptions, and GP010/GP011 about them."""

from __future__ import annotations

import datetime
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpupolicy.cli.main import main
from gpupolicy.core.findings import Finding
from gpupolicy.engine.evaluation import apply_suppressions, evaluate
from gpupolicy.engine.registry import REGISTRY
from gpupolicy.engine.report import Report
from gpupolicy.engine.suppressions import Target, parse_annotation, parse_targets
from gpupolicy.loading.directives import scan_comments
from gpupolicy.loading.inputs import load_text
from gpupolicy.policy.loading import default_policy, policy_from_mapping
from gpupolicy.policy.validation import PolicyError

# Two containers; `vllm` has GP102 (request 1, limit 2) at line 21, `sidecar` has GP102 at line 27.
MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm
  namespace: ai-lab
  annotations:
    gpupolicy.io/ignore: {annotation}
spec:
  selector:
    matchLabels: {{app: llm}}
  template:
    metadata:
      labels: {{app: llm}}
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          resources:
            {comment_above}
            requests:
              nvidia.com/gpu: 1  {comment_inline}
            limits:
              nvidia.com/gpu: 2
        - name: sidecar
          image: vllm/vllm-openai:v0.6.3
          resources:
            requests: {{nvidia.com/gpu: 1}}
            limits: {{nvidia.com/gpu: 2}}
"""
VLLM_LINE, SIDECAR_LINE, ANNOTATION_LINE = 21, 27, 7


def manifest(annotation: str = '"GP104: placeholder never used"', above: str = "", inline: str = "") -> str:
    return MANIFEST.format(annotation=annotation, comment_above=above or "#", comment_inline=inline)


def lint(text: str, overrides: dict[str, Any] | None = None, file: str = "deploy.yaml") -> Report:
    policy = policy_from_mapping(overrides) if overrides else default_policy()
    loaded = load_text(text, file)
    return evaluate(loaded.resources, policy, problems=loaded.problems, directives=loaded.directives)


def of(report: Report, rule_id: str) -> list[Finding]:
    return [finding for finding in report.findings if finding.rule_id == rule_id]


def suppressed(report: Report, rule_id: str) -> list[tuple[Finding, str]]:
    return [(finding, reason) for finding, reason in report.suppressed if finding.rule_id == rule_id]


def test_the_manifest_has_two_gp102_findings_without_suppressions() -> None:
    report = lint(manifest())
    assert sorted(f.line or 0 for f in of(report, "GP102")) == [VLLM_LINE, SIDECAR_LINE]


# -- annotations -------------------------------------------------------------------------------------


def test_annotation_with_reason_suppresses_every_container_and_records_why() -> None:
    report = lint(manifest('"GP102: the benchmark harness pins the request"'))
    assert of(report, "GP102") == []
    hidden = suppressed(report, "GP102")
    assert sorted(f.line or 0 for f, _ in hidden) == [VLLM_LINE, SIDECAR_LINE]
    assert all("the benchmark harness pins the request" in reason for _, reason in hidden)
    assert all(f.extra["suppressedBy"] == "annotation" for f, _ in hidden)
    assert of(report, "GP010") == [] and of(report, "GP011") == []


def test_annotation_accepts_rule_names() -> None:
    report = lint(manifest('"gpu-request-limit-mismatch: pinned by the harness"'))
    assert of(report, "GP102") == [] and len(suppressed(report, "GP102")) == 2


def test_annotation_scoped_to_a_container_keeps_the_other_containers_finding() -> None:
    report = lint(manifest('"GP102[sidecar]: the sidecar borrows the GPU for warm-up"'))
    assert [f.line for f in of(report, "GP102")] == [VLLM_LINE]
    assert [f.line for f, _ in suppressed(report, "GP102")] == [SIDECAR_LINE]


def test_several_entries_and_a_reason_with_semicolons() -> None:
    value = '"GP102[vllm]: pinned; see BENCH-42; also note: reviewed by SRE; GP104: zero on purpose"'
    entries = parse_annotation(value.strip('"'))
    assert [(targets, reason) for targets, _, reason in entries] == [
        ([Target("GP102", "vllm")], "pinned; see BENCH-42; also note: reviewed by SRE"),
        ([Target("GP104")], "zero on purpose"),
    ]
    report = lint(manifest(value))
    assert [f.line for f in of(report, "GP102")] == [SIDECAR_LINE]
    # GP104 fires nowhere: that entry is unused
    assert [f.message for f in of(report, "GP011")] == [
        "gpupolicy.io/ignore on Deployment ai-lab/llm suppresses GP104 but no such finding is reported"
    ]


def test_annotation_without_reason_is_gp010_and_hides_nothing() -> None:
    report = lint(manifest('"GP102"'))
    assert len(of(report, "GP102")) == 2
    (problem,) = of(report, "GP010")
    assert "gives no reason" in problem.message
    assert (problem.file, problem.line, problem.json_path) == (
        "deploy.yaml",
        ANNOTATION_LINE,
        '$.metadata.annotations["gpupolicy.io/ignore"]',
    )
    assert problem.severity.label == "error"


def test_annotation_with_empty_reason_after_colon_is_gp010() -> None:
    report = lint(manifest('"GP102:   "'))
    assert len(of(report, "GP102")) == 2 and len(of(report, "GP010")) == 1


def test_annotation_naming_an_unknown_rule_is_gp010() -> None:
    report = lint(manifest('"GP999: typo of GP102"'))
    (problem,) = of(report, "GP010")
    assert "unknown rule 'GP999'" in problem.message
    assert len(of(report, "GP102")) == 2


def test_unused_annotation_is_gp011_warning_at_the_annotation() -> None:
    report = lint(manifest('"GP101: no such finding here"'))
    (problem,) = of(report, "GP011")
    assert problem.severity.label == "warning"
    assert (problem.line, str(problem.object)) == (ANNOTATION_LINE, "Deployment ai-lab/llm")


def test_suppression_findings_take_the_policy_severity_override() -> None:
    report = lint(manifest('"GP101: no such finding here"'), {"rules": {"GP011": {"severity": "error"}}})
    (problem,) = of(report, "GP011")
    assert problem.severity.label == "error"


def test_container_scope_that_matches_no_container_is_unused() -> None:
    report = lint(manifest('"GP102[no-such-container]: wrong name"'))
    assert len(of(report, "GP102")) == 2
    assert "in container no-such-container" in of(report, "GP011")[0].message


def test_annotation_that_is_not_text_is_gp010() -> None:
    report = lint(manifest("[GP102]"))
    assert len(of(report, "GP010")) == 1 and len(of(report, "GP102")) == 2


def test_policy_forbids_suppressing_chosen_rules() -> None:
    forbid = {"suppressions": {"forbidden": ["gpu-request-limit-mismatch"]}}
    report = lint(manifest('"GP102: I exempt myself"'), forbid)
    assert len(of(report, "GP102")) == 2
    (problem,) = of(report, "GP010")  # once per suppression, not once per finding
    assert "forbids" in problem.message and problem.line == ANNOTATION_LINE
    assert of(report, "GP011") == []  # it did match: it is refused, not unused


def test_policy_can_switch_annotations_off() -> None:
    report = lint(manifest('"GP102: reason"'), {"suppressions": {"annotations": False}})
    assert len(of(report, "GP102")) == 2
    assert "does not allow" in of(report, "GP010")[0].message


def test_suppression_findings_can_be_disabled_like_any_rule() -> None:
    report = lint(manifest('"GP102"'), {"rules": {"GP010": {"enabled": False}}})
    assert of(report, "GP010") == [] and len(of(report, "GP102")) == 2


def test_annotations_count_only_on_the_objects_reported_on() -> None:
    loaded = load_text(manifest('"GP102"'), "deploy.yaml")
    report = evaluate(loaded.resources, default_policy(), report_on=lambda resource: False)
    assert report.findings == [] and report.suppressed == []


# -- comments ------------------------------------------------------------------------------------


def test_inline_comment_on_the_offending_line() -> None:
    report = lint(manifest(inline="# gpupolicy: ignore GP102 -- pinned by the harness"))
    assert [f.line for f in of(report, "GP102")] == [SIDECAR_LINE]
    ((finding, reason),) = suppressed(report, "GP102")
    assert finding.line == VLLM_LINE and finding.extra["suppressedBy"] == "comment"
    assert reason == f"comment at deploy.yaml:{VLLM_LINE}: pinned by the harness"


def test_comment_on_the_line_above() -> None:
    text = manifest().replace(
        "            requests:\n              nvidia.com/gpu: 1",
        "            requests:\n              # gpupolicy: ignore GP102 -- pinned\n              nvidia.com/gpu: 1",
    )
    report = lint(text)
    assert [f.line for f in of(report, "GP102")] == [SIDECAR_LINE + 1]
    assert [f.line for f, _ in suppressed(report, "GP102")] == [VLLM_LINE + 1]


def test_comment_two_lines_above_does_not_apply_and_is_unused() -> None:
    report = lint(manifest(above="# gpupolicy: ignore GP102 -- too far away"))
    assert len(of(report, "GP102")) == 2
    (unused,) = [f for f in of(report, "GP011") if f.line != ANNOTATION_LINE]
    assert unused.line == VLLM_LINE - 2 and str(unused.object) == "Deployment ai-lab/llm"


def test_comment_without_reason_is_gp010() -> None:
    report = lint(manifest(inline="# gpupolicy: ignore GP102"))
    assert len(of(report, "GP102")) == 2
    (problem,) = of(report, "GP010")
    assert (problem.line, problem.column) == (VLLM_LINE, 34)


def test_comment_naming_no_rule_or_an_unknown_one_is_gp010() -> None:
    assert "names no rule" in of(lint(manifest(inline="# gpupolicy: ignore -- why")), "GP010")[0].message
    unknown = of(lint(manifest(inline="# gpupolicy: ignore GP9999 -- why")), "GP010")
    assert "unknown rule 'GP9999'" in unknown[0].message


def test_policy_can_switch_comments_off() -> None:
    report = lint(manifest(inline="# gpupolicy: ignore GP102 -- why"), {"suppressions": {"comments": False}})
    assert len(of(report, "GP102")) == 2 and len(of(report, "GP010")) == 1


def test_scan_comments_reads_rules_containers_and_reason() -> None:
    text = "a: 1  # gpupolicy: ignore GP102[vllm], privileged-container -- the reason -- with dashes\n"
    (directive,) = scan_comments(text, "f.yaml")
    assert parse_targets(directive.rules) == ([Target("GP102", "vllm"), Target("privileged-container")], [])
    assert directive.reason == "the reason -- with dashes"
    assert (directive.line, directive.column, directive.own_line) == (1, 7, False)
    assert scan_comments("image: repo/x#gpupolicy: ignore GP102 -- no\n", "f.yaml") == []


REPO = Path(__file__).resolve().parent.parent
DIRECTIVE = "# gpupolicy: ignore GP102 -- reason"


def test_a_json_file_has_no_comments() -> None:
    """The policy schema's description mentions the syntax inside a JSON string (issue 11)."""
    schema = REPO / "policies" / "schemas" / "sections" / "suppressions.json"
    assert scan_comments(schema.read_text(encoding="utf-8"), str(schema)) == []
    assert scan_comments('{"a": 1}\n' + DIRECTIVE + "\n", "x.json") == []
    assert main(["lint", str(schema)]) == 0  # skipped (not a manifest), and no GP010


@pytest.mark.parametrize(
    "text",
    [
        f'description: "see {DIRECTIVE}"\n',  # double-quoted scalar
        f"description: 'see {DIRECTIVE}'\n",  # single-quoted scalar
        f'description: "multi\n  {DIRECTIVE}"\n',  # a quoted scalar's continuation line
        f'{{"description": "{DIRECTIVE}"}}\n',  # JSON-style flow mapping in a .yaml file
        f"script: |\n  echo hi\n  {DIRECTIVE}\n  echo bye\n",  # a block scalar's line
        f"script: >-\n    folded\n    {DIRECTIVE}\n",
        f"image: repo/x{DIRECTIVE}\n",  # no white space before `#`: part of the plain scalar
        f"a: 1  # note {DIRECTIVE}\n",  # inside another comment: the directive must start it
    ],
)
def test_text_that_is_not_a_comment_is_no_directive(text: str) -> None:
    assert scan_comments(text, "f.yaml") == []


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        (f"a: 1  {DIRECTIVE}\n", 1, 7),
        (f"description: plain words {DIRECTIVE}\n", 1, 26),  # ` #` ends a plain scalar
        (f"script: |  {DIRECTIVE}\n  echo hi\n", 1, 12),  # a block scalar's header line
        (f"script: |\n    echo hi\n  {DIRECTIVE}\nb: 1\n", 3, 3),  # less indented: after the block
        (f'a: "x # y"  {DIRECTIVE}\r\nb: 2\r\n', 1, 13),
        (f"list: [a, b  {DIRECTIVE}\n  , c]\n", 1, 14),
    ],
)
def test_real_yaml_comments_are_directives(text: str, line: int, column: int) -> None:
    (directive,) = scan_comments(text, "f.yaml")
    assert (directive.line, directive.column) == (line, column)
    assert parse_targets(directive.rules)[0] == [Target("GP102")] and directive.reason == "reason"


def test_a_syntax_error_does_not_hide_the_directives_of_other_documents() -> None:
    # The quoted scalar runs into the next document's separator: libyaml cannot scan document 1.
    text = f'a: "unclosed\n{DIRECTIVE}\n---\nb: 1  {DIRECTIVE}\n'
    assert [directive.line for directive in scan_comments(text, "f.yaml")] == [4]
    # after the error, nothing in that document counts (a comment there cannot be told from text)
    broken = f"a: b: c  {DIRECTIVE}\n---\nd: 1  {DIRECTIVE}\n"
    assert [directive.line for directive in scan_comments(broken, "f.yaml")] == [3]


# -- exemptions ----------------------------------------------------------------------------------

FUTURE = (datetime.date.today() + datetime.timedelta(days=365)).isoformat()
PAST = "2020-01-31"


def exemption(**fields: Any) -> dict[str, Any]:
    return {"owner": "platform-team", "reason": "migrating", "expires": FUTURE, **fields}


@pytest.mark.parametrize(
    ("fields", "hidden"),
    [
        ({"rules": ["GP102"], "namespaces": ["ai-*"]}, 2),
        ({"rules": ["gpu-request-limit-mismatch"], "names": ["llm"], "kinds": ["Deployment"]}, 2),
        ({"rules": ["GP102"], "namespaces": ["other"]}, 0),
        ({"rules": ["GP101"], "namespaces": ["ai-lab"]}, 0),
        ({"namespaces": ["ai-lab"]}, 2),  # every rule
        ({"rules": ["GP102"], "paths": ["deploy/*.yaml"]}, 0),
        ({"rules": ["GP102"], "paths": ["*.yaml"]}, 2),
    ],
)
def test_exemptions_match_by_rule_kind_namespace_name_and_path(fields: dict[str, Any], hidden: int) -> None:
    report = lint(manifest(), {"exemptions": [exemption(**fields)]})
    assert len(suppressed(report, "GP102")) == hidden
    assert len(of(report, "GP102")) == 2 - hidden
    if hidden:
        reason = suppressed(report, "GP102")[0][1]
        assert reason == f"policy exemption #1 (owner platform-team), until {FUTURE}: migrating"


def test_an_exemption_lifts_a_rule_that_manifests_may_not_suppress() -> None:
    policy = {
        "suppressions": {"forbidden": ["GP102"]},
        "exemptions": [exemption(rules=["GP102"], names=["llm"])],
    }
    report = lint(manifest(), policy)
    assert of(report, "GP102") == [] and of(report, "GP010") == []


def test_expired_exemption_suppresses_nothing_and_is_gp010_per_object() -> None:
    report = lint(manifest(), {"exemptions": [exemption(rules=["GP102"], expires=PAST)]})
    assert len(of(report, "GP102")) == 2
    (problem,) = of(report, "GP010")
    assert problem.message.startswith(f"policy exemption #1 (owner platform-team) expired on {PAST}")
    assert str(problem.object) == "Deployment ai-lab/llm"


def test_expiry_is_judged_against_the_given_day() -> None:
    loaded = load_text(manifest(), "deploy.yaml")
    report = evaluate(loaded.resources, default_policy())
    policy = policy_from_mapping({"exemptions": [exemption(rules=["GP102"], expires="2030-06-30")]})
    active = [rule.id for rule in REGISTRY]
    before = apply_suppressions(
        report.findings, loaded.resources, policy, active=active, today=datetime.date(2030, 6, 30)
    )
    after = apply_suppressions(
        report.findings, loaded.resources, policy, active=active, today=datetime.date(2030, 7, 1)
    )
    assert len(before[1]) == 2
    assert after[1] == [] and [f.rule_id for f in after[0]].count("GP010") == 1


def test_exemption_naming_an_unknown_rule_is_gp010() -> None:
    report = lint(manifest(), {"exemptions": [exemption(rules=["GP998"])]})
    assert "names unknown rule GP998" in of(report, "GP010")[0].message


@pytest.mark.parametrize("missing", ["owner", "reason", "expires"])
def test_exemptions_need_owner_reason_and_expiry(missing: str) -> None:
    item = exemption(rules=["GP102"])
    del item[missing]
    with pytest.raises(PolicyError, match=missing):
        policy_from_mapping({"exemptions": [item]})


# -- the command line ------------------------------------------------------------------------------


def test_show_suppressed_lists_what_was_suppressed_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("deploy.yaml").write_text(textwrap.dedent(manifest('"GP102[vllm]: pinned by the harness"')))
    main(["lint", "--no-repo-policy", "deploy.yaml"])
    quiet = capsys.readouterr().out
    assert "pinned by the harness" not in quiet and "1 suppressed" in quiet
    main(["lint", "--no-repo-policy", "--show-suppressed", "deploy.yaml"])
    shown = capsys.readouterr().out
    assert (
        f"deploy.yaml:{VLLM_LINE}:15: GP102 error gpu-request-limit-mismatch" in shown
        and "-- suppressed: gpupolicy.io/ignore on Deployment ai-lab/llm: pinned by the harness" in shown
    )
