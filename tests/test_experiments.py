"""The experiment ConfigMap: detection, schema validation with key and line, the metric vocabulary,
and the users' own ConfigMaps from the field notes (tests/data/seeds, copied verbatim)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpupolicy.engine.report import Report
from gpupolicy.kube.experiments import (
    MetricCategory,
    MetricVocabulary,
    is_experiment_config,
    metric_key,
    parse_experiment,
)
from gpupolicy.loading.documents import Resource
from gpupolicy.loading.inputs import load_text
from tests.conftest import SEEDS, LintText

SEED_COPIES = sorted((Path(__file__).parent / "data" / "seeds").glob("*.yaml"))
SQ, EFF, SCHED = MetricCategory.SERVICE_QUALITY, MetricCategory.EFFICIENCY, MetricCategory.SCHEDULING


def _resource(text: str) -> Resource:
    loaded = load_text(text, "test.yaml")
    assert not loaded.problems, loaded.problems
    return loaded.resources[0]


def _gp8(report: Report) -> list[tuple[str, int | None, str]]:
    return [(f.rule_id, f.line, f.severity.label) for f in report.findings if f.rule_id.startswith("GP8")]


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the field notes are not at {SEEDS}")
def test_three_seed_copies_exist_and_match_the_field_notes() -> None:
    assert len(SEED_COPIES) == 3
    for copy in SEED_COPIES:
        note = (SEEDS / f"{copy.stem}.txt").read_text(encoding="utf-8")
        assert copy.read_text(encoding="utf-8") in note  # verbatim, not retyped


@pytest.mark.parametrize("seed", SEED_COPIES, ids=lambda path: path.stem)
def test_seed_configmaps_validate_without_error(seed: Path) -> None:
    resource = _resource(seed.read_text(encoding="utf-8"))
    assert is_experiment_config(resource.obj)
    config = parse_experiment(resource)
    assert config.problems == []
    assert config.fixed == ["image", "model", "input"]
    assert config.repeats == 3
    assert all(term.category is not None for term in config.metrics)
    assert config.has_service_quality_metric()


@pytest.mark.parametrize("seed", SEED_COPIES, ids=lambda path: path.stem)
def test_seed_configmaps_get_no_error_finding(seed: Path, lint_text: LintText) -> None:
    report = lint_text(seed.read_text(encoding="utf-8"))
    # They are not immutable (GP809 warns); nothing else of GP8xx, and no error at all from GP8xx.
    assert [rule for rule, _, severity in _gp8(report) if severity == "error"] == []
    assert {rule for rule, _, _ in _gp8(report)} == {"GP809"}


def test_seed_metric_words_normalise_to_the_design_vocabulary() -> None:
    by_seed = {
        copy.stem[:3]: [
            (t.canonical, t.category) for t in parse_experiment(_resource(copy.read_text())).metrics
        ]
        for copy in SEED_COPIES
    }
    assert by_seed["000"] == [
        ("GPU hours", EFF),
        ("accepted throughput", SQ),
        ("P95", SQ),
        ("error rate", SQ),
    ]
    assert by_seed["001"] == [("aggregate throughput", EFF), ("各類 P95", SQ), ("errors", SQ), ("GPU", EFF)]
    assert by_seed["002"] == [
        ("placement", SCHED),
        ("Pending", SCHED),
        ("preemption", SCHED),
        ("latency", SQ),
    ]


@pytest.mark.parametrize(
    ("written", "canonical", "category"),
    [
        ("各類 P95", "各類 P95", SQ),
        ("各類P95", "各類 P95", SQ),
        ("各類  p95", "各類 P95", SQ),
        ("ＰＯ５", None, None),  # full-width letters that are not P95 stay unknown
        ("Ｐ９５", "P95", SQ),  # full-width P95 (NFKC)
        ("p95_latency_ms", "P95", SQ),
        ("GPU-Hours", "GPU hours", EFF),
        ("gpu_hours", "GPU hours", EFF),
        ("  Accepted   Throughput ", "accepted throughput", SQ),
        ("ERROR RATE", "error rate", SQ),
        ("錯誤率", "error rate", SQ),
        ("utilisation", "utilization", EFF),
        ("pending", "Pending", SCHED),
        ("Preemption", "preemption", SCHED),
    ],
)
def test_vocabulary_normalises_case_spacing_and_chinese(
    written: str, canonical: str | None, category: MetricCategory | None
) -> None:
    term = MetricVocabulary().lookup(written)
    assert (term.canonical, term.category) == (canonical, category)
    assert term.raw == written


def test_unknown_metric_words_are_kept_and_reported() -> None:
    terms = MetricVocabulary().parse("P95, queue lenght、GPU；vibes")
    assert [t.raw for t in terms] == ["P95", "queue lenght", "GPU", "vibes"]
    assert [t.raw for t in terms if t.category is None] == ["queue lenght", "vibes"]
    config = parse_experiment(
        _resource(
            'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x-experiment}\ndata:\n  change: "c"\n'
            '  fixed: "image"\n  metrics: "P95, vibes"\n  repeats: "3"\n'
        )
    )
    [problem] = config.problems
    assert (problem.key, problem.severity) == ("metrics", "warning")
    assert "'vibes'" in problem.message
    assert [t.raw for t in config.metrics] == ["P95", "vibes"]  # not dropped


def test_policy_metric_words_extend_the_vocabulary() -> None:
    vocabulary = MetricVocabulary({"queue lenght": "scheduling"})
    assert vocabulary.lookup("Queue Lenght").category is SCHED
    assert metric_key("Queue  Lenght") == metric_key("queue-lenght")


def test_free_form_metric_names_are_categorised_by_hints() -> None:
    vocabulary = MetricVocabulary()
    assert vocabulary.categorise("success-rate") is SQ
    assert vocabulary.categorise("request-duration") is SQ
    assert vocabulary.categorise("check", detail="histogram_quantile(0.95, rate(latency_bucket[5m]))") is SQ
    assert vocabulary.categorise("dcgm-util") is EFF
    assert vocabulary.categorise("mystery") is None


def test_categories_are_remembered_per_vocabulary_and_name_and_detail() -> None:
    words = MetricVocabulary({"queue lenght": "scheduling"})
    for _ in range(2):  # the second round answers from the memo
        assert words.categorise("queue-lenght") is SCHED
        assert MetricVocabulary().categorise("queue-lenght") is None
        assert words.categorise("check") is None
        assert words.categorise("check", detail="rate(errors_total[5m])") is SQ
        assert words.categorise("p95_latency_ms") is SQ


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: day1-experiment}\ndata: {}\n", True),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  labels: {gpupolicy.io/experiment: x}\n",
            True,
        ),
        ('apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {change: "a", repeats: "3"}\n', True),
        ('apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {change: "a"}\n', False),
        ("apiVersion: v1\nkind: Secret\nmetadata: {name: x-experiment}\n", False),
    ],
)
def test_experiment_config_detection(text: str, expected: bool) -> None:
    assert is_experiment_config(_resource(text).obj) is expected


BROKEN = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: bad-experiment
  namespace: ai-lab
immutable: true
data:
  change: ""
  metrics: "P95"
  repeats: "three"
  variable: "priority, colour"
  arms: "control, Treatment A"
  slo: "p95 under 800"
  varaible: "sharing"
"""


def test_schema_errors_name_the_key_and_its_line(lint_text: LintText) -> None:
    report = lint_text(BROKEN)
    found = {
        (f.line, f.message.split(": ", 1)[1].split(" ")[0]) for f in report.findings if f.rule_id == "GP801"
    }
    assert found == {
        (7, "data.fixed"),  # missing: points at data
        (8, "data.change:"),
        (10, "data.repeats:"),
        (11, "data.variable:"),
        (12, "data.arms:"),
        (12, "data.arms"),  # control is implied
        (13, "data.slo:"),
        (14, "data.varaible"),
    }
    messages = " | ".join(f.message for f in report.findings if f.rule_id == "GP801")
    assert "did you mean variable?" in messages
    assert "'three' is not a whole number" in messages


def test_value_that_is_not_a_string_is_explained(lint_text: LintText) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a-experiment}\nimmutable: true\ndata:\n"
    text += '  change: "c"\n  fixed: "image"\n  metrics: "P95"\n  repeats: 3\n'
    [finding] = [f for f in lint_text(text).findings if f.rule_id == "GP801"]
    assert finding.line == 9
    assert re.search(r"must be a string .*quote it", finding.message)


def test_fixed_and_variable_words_must_be_dimensions() -> None:
    config = parse_experiment(
        _resource(
            'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x-experiment}\ndata:\n  change: "c"\n'
            '  fixed: "Images, dataset, weights"\n  metrics: "P95"\n  repeats: "5"\n  variable: "Sharing"\n'
        )
    )
    assert config.fixed == ["image", "input"]
    assert config.variables == ["sharing"]
    assert [(p.key, p.severity) for p in config.problems] == [("fixed", "error")]
    assert "'weights'" in config.problems[0].message


def test_minimum_repeats_comes_from_the_policy(lint_text: LintText) -> None:
    text = (SEED_COPIES[0]).read_text(encoding="utf-8")
    assert "GP802" not in {f.rule_id for f in lint_text(text).findings}
    report = lint_text(text, {"experiments": {"minimumRepeats": 5}})
    [finding] = [f for f in report.findings if f.rule_id == "GP802"]
    assert finding.line == 10 and "at least 5" in finding.message


def test_problems_are_located_by_key_and_line_without_the_engine() -> None:
    config = parse_experiment(_resource(BROKEN))
    located = config.located_problems()
    assert ("repeats", 10, "data.repeats: 'three' is not a whole number") in located
    assert ("fixed", 7, "data.fixed is missing (required: change, fixed, metrics, repeats)") in located
