"""Experiments: the experiment ConfigMap, its schema, and the metric vocabulary.

The users keep each experiment's definition in a ConfigMap under version control (`change`, `fixed`,
`metrics`, `repeats`; optional `variable`, `arms`, `slo`) and link their workloads to it with the
labels `gpupolicy.io/experiment` and `gpupolicy.io/arm`. This module reads those ConfigMaps,
validates them against `policies/schemas/experiment.schema.json` (each error names its key, so the
finding lands on that key's line), and normalises the metric words people write — English or
Chinese, any case and spacing — to one vocabulary with a category per metric. Unknown words are
kept and reported, never dropped.

Which arms differ in what is `dimensions.py`'s business; `compare_arms` here applies the
experiment's rules (fixed factors, declared variables) to that diff.
"""

from __future__ import annotations

import difflib
import enum
import functools
import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.core.findings import EXCERPT_CHARS, JsonPath, excerpt
from gpupolicy.core.immutable import immutable, mutable
from gpupolicy.core.packaged import policies_dir
from gpupolicy.core.vocabulary import EXPERIMENT_LABEL
from gpupolicy.kube.pod_spec import as_mapping
from gpupolicy.loading.documents import Resource

CONTROL_ARM = "control"
DEFAULT_MINIMUM_REPEATS = 3
REQUIRED_KEYS = ("change", "fixed", "metrics", "repeats")

_LIST_SEPARATORS = re.compile(r"[,，、;；\n]+")


class MetricCategory(enum.Enum):
    SERVICE_QUALITY = "service-quality"
    EFFICIENCY = "efficiency"
    SCHEDULING = "scheduling"

    @property
    def label(self) -> str:
        return self.value.replace("-", " ")


SQ, EFF, SCHED = MetricCategory.SERVICE_QUALITY, MetricCategory.EFFICIENCY, MetricCategory.SCHEDULING

# canonical word -> (category, other spellings). Spellings are compared after `metric_key`
# (NFKC, case-folded, without spaces, `_`, `-`, `.`, `/`), so "GPU hours", "gpu_hours" and
# "GPU-Hours" are one word.
VOCABULARY: dict[str, tuple[MetricCategory, tuple[str, ...]]] = {
    # service quality: what the users of the service feel
    "P95": (SQ, ("p95 latency", "p95 latency ms", "p95_latency_ms", "latency p95", "p95 延遲", "p95延遲")),
    "各類 P95": (SQ, ("per-class P95", "P95 per class", "各類P95", "各类 P95")),
    "P50": (SQ, ("p50 latency", "p50_latency_ms", "median latency")),
    "P90": (SQ, ("p90 latency", "p90_latency_ms")),
    "P99": (SQ, ("p99 latency", "p99_latency_ms", "tail latency", "尾延遲", "尾端延遲")),
    "latency": (SQ, ("latency ms", "latency_ms", "request duration", "request-duration", "延遲", "延迟")),
    "TTFT": (SQ, ("time to first token", "ttft_ms", "first token latency")),
    "TPOT": (SQ, ("time per output token", "inter-token latency", "itl", "tpot_ms")),
    "error rate": (SQ, ("error_rate", "error ratio", "5xx rate", "錯誤率", "错误率")),
    "errors": (SQ, ("error", "error count", "errors total", "錯誤", "服務錯誤")),
    "success rate": (SQ, ("success_rate", "request success rate", "request-success-rate", "成功率")),
    "accepted throughput": (
        SQ,
        ("goodput", "SLO throughput", "effective throughput", "有效吞吐", "符合 SLO 的有效吞吐"),
    ),
    "SLO attainment": (SQ, ("slo_attainment", "slo compliance", "SLO 達成率")),
    "availability": (SQ, ("uptime", "可用性")),
    # efficiency: what the GPUs cost
    "GPU": (EFF, ("GPUs", "GPU 指標", "gpu metrics")),
    "GPU hours": (EFF, ("gpu_hours", "GPU-hours", "GPU 小時", "GPU 時數")),
    "utilization": (
        EFF,
        (
            "utilisation",
            "GPU utilization",
            "GPU utilisation",
            "gpu_utilization",
            "gpu util",
            "SM utilization",
            "DCGM_FI_DEV_GPU_UTIL",
            "利用率",
            "GPU 利用率",
            "使用率",
        ),
    ),
    "aggregate throughput": (EFF, ("total throughput", "throughput", "吞吐", "吞吐量", "tokens per second")),
    "VRAM": (EFF, ("GPU memory", "gpu_memory", "memory usage", "DCGM_FI_DEV_FB_USED", "顯存")),
    "idle": (EFF, ("idle time", "GPU idle", "閒置")),
    "cost": (EFF, ("cost per request", "cost per token", "成本")),
    "power": (EFF, ("power usage", "energy", "DCGM_FI_DEV_POWER_USAGE")),
    # scheduling: where and when pods run
    "placement": (SCHED, ("pod placement", "放置")),
    "Pending": (SCHED, ("pending time", "pending pods", "pending reason")),
    "preemption": (SCHED, ("preemptions", "evictions", "搶占", "搶佔", "抢占")),
    "queue time": (SCHED, ("queue", "queueing time", "queue wait", "排隊時間")),
    "scheduling latency": (SCHED, ("time to schedule", "schedule time", "排程延遲")),
    "restarts": (SCHED, ("restart count", "重啟次數")),
}

# For free-form metric names (Argo/Flagger metrics, PromQL): words that reveal the category.
_SERVICE_QUALITY_HINTS = re.compile(
    r"latenc|duration|p50|p9[059]|quantile|ttft|tpot|error|5xx|success|goodput|accepted|slo|availab",
    re.IGNORECASE,
)
_EFFICIENCY_HINTS = re.compile(r"util|dcgm|gpu|vram|memory|throughput|power|cost|idle", re.IGNORECASE)


def metric_key(word: str) -> str:
    """The form words are compared in: NFKC, case-folded, without spaces and punctuation."""
    # NFKC leaves ASCII text as it is, and ASCII case-folds as it lower-cases.
    text = word.lower() if word.isascii() else unicodedata.normalize("NFKC", word).casefold()
    return _KEY_PUNCTUATION.sub("", text)


_KEY_PUNCTUATION = re.compile(r"[\s_\-./]+")


@immutable
class MetricTerm:
    raw: str  # as written
    canonical: str | None  # the vocabulary word, None when unknown
    category: MetricCategory | None


CATEGORIES_CACHE_BYTES = 1 << 18
_UNSEEN: Any = object()


class MetricVocabulary:
    """The built-in words plus the policy's `experiments.metricWords`."""

    def __init__(self, extra: Mapping[str, str] | None = None) -> None:
        self._index: dict[str, tuple[str, MetricCategory]] = {}
        for canonical, (category, spellings) in VOCABULARY.items():
            for spelling in (canonical, *spellings):
                self._index[metric_key(spelling)] = (canonical, category)
        for word, category_name in (extra or {}).items():
            self._index[metric_key(str(word))] = (str(word), MetricCategory(str(category_name)))
        # `categorise` of (name, detail): the same criteria names (p95_latency_ms, error_rate) come
        # with workload after workload (GP903); they come from objects, so bounded in bytes.
        self._categories: BoundedCache[tuple[str, str], MetricCategory | None] = BoundedCache(
            max_bytes=CATEGORIES_CACHE_BYTES
        )

    def lookup(self, word: str) -> MetricTerm:
        found = self._index.get(metric_key(word))
        if found is None:
            return MetricTerm(word, None, None)
        return MetricTerm(word, found[0], found[1])

    def parse(self, text: str) -> list[MetricTerm]:
        """Split a metrics list ("GPU hours, accepted throughput, P95") into terms, unknown ones kept."""
        return [self.lookup(word) for word in split_words(text)]

    def categorise(self, name: str, *, detail: str = "") -> MetricCategory | None:
        """The category of a free-form metric name (an Argo or Flagger metric, a PromQL query):
        a vocabulary word first, then hints in the name, then hints in `detail` (the query)."""
        if type(name) is not str or type(detail) is not str:
            return self._categorise(name, detail)
        key = (name, detail)
        found = self._categories.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._categories.put(key, self._categorise(name, detail))
        category: MetricCategory | None = found
        return category

    def _categorise(self, name: str, detail: str) -> MetricCategory | None:
        term = self.lookup(name)
        if term.category is not None:
            return term.category
        for text in (name, detail):
            if _SERVICE_QUALITY_HINTS.search(text):
                return SQ
            if _EFFICIENCY_HINTS.search(text):
                return EFF
        return None


DEFAULT_VOCABULARY = MetricVocabulary()


def split_words(text: str) -> list[str]:
    return [word.strip() for word in _LIST_SEPARATORS.split(text) if word.strip()]


# -- the ConfigMap --------------------------------------------------------------------------

FIXED_ALIASES = {
    "images": "image",
    "container image": "image",
    "models": "model",
    "model version": "model",
    "inputs": "input",
    "dataset": "input",
    "data set": "input",
    "request set": "input",
    "workload": "input",
    "prompts": "input",
}


def normalise_dimension_word(word: str) -> str | None:
    """`fixed`/`variable` words to dimension names (None when unknown)."""
    from gpupolicy.kube.dimensions import DIMENSION_NAMES  # here: only experiment configs need it

    text = word.lower() if word.isascii() else unicodedata.normalize("NFKC", word).casefold()
    key = " ".join(text.split())
    key = FIXED_ALIASES.get(key, key)
    return key if key in DIMENSION_NAMES else None


def is_experiment_config(obj: Any) -> bool:
    """DESIGN.md: a ConfigMap whose name ends in -experiment, labelled gpupolicy.io/experiment, or
    whose data has both `change` and `repeats`. `obj` is the object itself: a `Resource.obj` from
    the repository, or a cluster object (the webhook's inventory keeps only these ConfigMaps).
    The name is read as `Resource.name` reads it (`generateName` when there is no `name`)."""
    if not isinstance(obj, dict) or obj.get("kind") != "ConfigMap":
        return False
    metadata = as_mapping(obj.get("metadata"))
    name = metadata.get("name") or metadata.get("generateName")
    data = as_mapping(obj.get("data"))
    return (
        (isinstance(name, str) and name.endswith("-experiment"))
        or EXPERIMENT_LABEL in as_mapping(metadata.get("labels"))
        or ("change" in data and "repeats" in data)
    )


@immutable
class ConfigProblem:
    """One thing wrong with an experiment ConfigMap: the key it is about, where, and why."""

    key: str
    path: JsonPath
    message: str
    severity: str = "error"


@mutable
class ExperimentConfig:
    resource: Resource
    change: str = ""
    fixed: list[str] = field(default_factory=list)  # dimension names
    metrics: list[MetricTerm] = field(default_factory=list)
    repeats: int | None = None
    variables: list[str] = field(default_factory=list)  # dimension names; empty: not declared
    arms: list[str] = field(default_factory=list)  # treatment arm names; empty: not declared
    slo: list[str] = field(default_factory=list)
    problems: list[ConfigProblem] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.resource.name

    @property
    def immutable(self) -> bool:
        return self.resource.obj.get("immutable") is True

    def has_service_quality_metric(self) -> bool:
        return any(term.category is MetricCategory.SERVICE_QUALITY for term in self.metrics)

    def located_problems(self) -> list[tuple[str, int | None, str]]:
        """(key, line, message) of every problem: the line of the key in the ConfigMap's file."""
        located = []
        for problem in self.problems:
            position = self.resource.position(problem.path)
            located.append((problem.key, position[0] if position else None, problem.message))
        return located

    def arm_is_declared(self, arm: str) -> bool:
        return arm == CONTROL_ARM or not self.arms or arm in self.arms


@functools.cache
def experiment_schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        (policies_dir() / "schemas" / "experiment.schema.json").read_text(encoding="utf-8")
    )
    return loaded


_PRECHECK_SCHEMA_KEYS = frozenset(
    {"$schema", "$id", "title", "description", "type", "required", "additionalProperties", "properties"}
)
_PRECHECK_PROPERTY_KEYS = frozenset({"description", "type", "minLength", "pattern"})


@functools.cache
def _schema_precheck() -> Callable[[dict[Any, Any]], bool] | None:
    """A fast test that `data` has no schema error at all, with jsonschema's own semantics for the
    keywords the experiment schema uses (`required`, `additionalProperties: false`, string
    `type`, `minLength`, `pattern` by `re.search`); None when the schema uses any other keyword.
    Data that fail it go through jsonschema for the messages."""
    schema = experiment_schema()
    properties = schema.get("properties")
    if (
        set(schema) - _PRECHECK_SCHEMA_KEYS
        or schema.get("type") != "object"
        or schema.get("additionalProperties") is not False
        or not isinstance(properties, dict)
    ):
        return None
    checks: dict[str, tuple[int, re.Pattern[str] | None]] = {}
    for key, sub in properties.items():
        if not isinstance(sub, dict) or set(sub) - _PRECHECK_PROPERTY_KEYS or sub.get("type") != "string":
            return None
        minimum = sub.get("minLength", 0)
        pattern = sub.get("pattern")
        if not isinstance(minimum, int) or not (pattern is None or isinstance(pattern, str)):
            return None
        checks[key] = (minimum, re.compile(pattern) if pattern is not None else None)
    required = tuple(schema.get("required", ()))

    def valid(data: dict[Any, Any]) -> bool:
        for key in required:
            if key not in data:
                return False
        for key, value in data.items():
            check = checks.get(key) if isinstance(key, str) else None
            if check is None or not isinstance(value, str) or len(value) < check[0]:
                return False
            if check[1] is not None and not check[1].search(value):
                return False
        return True

    return valid


def _schema_problems(data: Any) -> list[ConfigProblem]:
    if not isinstance(data, dict):
        return [ConfigProblem("data", ("data",), "data must be a mapping of keys to strings")]
    precheck = _schema_precheck()
    if precheck is not None and precheck(data):
        return []
    import jsonschema  # here: only experiment ConfigMaps that fail the precheck need its messages

    validator = jsonschema.Draft202012Validator(experiment_schema())
    problems = []
    for error in sorted(validator.iter_errors(data), key=lambda item: [str(step) for step in item.path]):
        if error.validator == "required":
            missing = re.search(r"'([^']+)' is a required property", error.message)
            key = missing.group(1) if missing else "?"
            problems.append(
                ConfigProblem(key, ("data",), f"data.{key} is missing (required: {', '.join(REQUIRED_KEYS)})")
            )
        elif error.validator == "additionalProperties":
            allowed = sorted(experiment_schema()["properties"])
            for key in sorted(set(data) - set(allowed)):
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"did you mean {close[0]}?" if close else ", ".join(allowed)
                shown = str(key) if len(str(key)) <= EXCERPT_CHARS else excerpt(str(key))
                problems.append(
                    ConfigProblem(
                        str(key), ("data", str(key)), f"data.{shown} is not an experiment key ({hint})"
                    )
                )
        else:
            key = str(error.path[0]) if error.path else "data"
            problems.append(ConfigProblem(key, ("data", key), f"data.{key}: {_explain(key, error)}"))
    return problems


def _words(words: list[str], shown: int = 5) -> str:
    """`'a'`, `'a', 'b'`, `'a', … 'e' and 7 more`: excerpts of a few words and a count, so that
    a value of 100,000 words is one bounded message (not one finding per word)."""
    listed = ", ".join(excerpt(word) for word in words[:shown])
    return f"{listed} and {len(words) - shown} more" if len(words) > shown else listed


def _are(words: list[str]) -> str:
    return "is" if len(words) == 1 else "are"


def _explain(key: str, error: Any) -> str:
    """What is wrong with one data value, quoting an excerpt of it (never a 3 MB value whole)."""
    value = excerpt(error.instance)
    if error.validator == "type":
        return f"must be a string (ConfigMap data are strings; quote it), not {value}"
    if key == "repeats":
        return f"{value} is not a whole number"
    if key == "arms":
        return f"{value} is not a list of arm names (lower-case label values)"
    if key == "slo":
        return f"{value} is not a list of `metric<=number` objectives"
    if error.validator in ("pattern", "minLength"):
        return f"{value} is not a valid {key}"
    return str(error.message) if len(str(error.message)) <= 200 else f"{value} is not a valid {key}"


def parse_experiment(
    resource: Resource, vocabulary: MetricVocabulary = DEFAULT_VOCABULARY
) -> ExperimentConfig:
    """Read an experiment ConfigMap; `problems` holds every schema error and unknown word."""
    from gpupolicy.kube.dimensions import DIMENSION_NAMES  # here: only experiment configs need it

    raw = resource.obj.get("data") if resource.is_mapping else None
    config = ExperimentConfig(resource, problems=_schema_problems(raw if raw is not None else {}))
    data = as_mapping(raw)

    def text(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    config.change = text("change").strip()
    not_dimensions = []
    for word in split_words(text("fixed")):
        dimension = normalise_dimension_word(word)
        if dimension is None:
            not_dimensions.append(word)
        elif dimension not in config.fixed:
            config.fixed.append(dimension)
    if not_dimensions:
        config.problems.append(
            ConfigProblem(
                "fixed",
                ("data", "fixed"),
                f"data.fixed: {_words(not_dimensions)} {_are(not_dimensions)} not a dimension "
                f"({', '.join(DIMENSION_NAMES[:-1])})",
            )
        )
    config.metrics = vocabulary.parse(text("metrics"))
    unknown = [term.raw for term in config.metrics if term.category is None]
    if unknown:
        config.problems.append(
            ConfigProblem(
                "metrics",
                ("data", "metrics"),
                f"data.metrics: unknown metric word(s) {_words(unknown)} "
                "(add them to experiments.metricWords in the policy with a category)",
                severity="warning",
            )
        )
    repeats = text("repeats").strip()
    config.repeats = int(repeats) if repeats.isascii() and repeats.isdigit() else None
    not_dimensions = []
    for word in split_words(text("variable")):
        dimension = normalise_dimension_word(word)
        if dimension is None:
            not_dimensions.append(word)
        elif dimension not in config.variables:
            config.variables.append(dimension)
    if not_dimensions:
        message = (
            f"data.variable: {_words(not_dimensions)} {_are(not_dimensions)} not a dimension "
            f"({', '.join(DIMENSION_NAMES[:-1])})"
        )
        config.problems.append(ConfigProblem("variable", ("data", "variable"), message))
    config.arms = split_words(text("arms"))
    config.slo = split_words(text("slo"))
    clash = sorted(set(config.fixed) & set(config.variables))
    if clash:
        config.problems.append(
            ConfigProblem(
                "variable", ("data", "variable"), f"data.variable: {', '.join(clash)} is also in data.fixed"
            )
        )
    if CONTROL_ARM in config.arms:
        config.problems.append(
            ConfigProblem("arms", ("data", "arms"), "data.arms lists treatment arms; `control` is implied")
        )
    return config


def vocabulary_for(extra: Any) -> MetricVocabulary:
    return MetricVocabulary(as_mapping(extra)) if extra else DEFAULT_VOCABULARY


# -- arms -------------------------------------------------------------------------------------
