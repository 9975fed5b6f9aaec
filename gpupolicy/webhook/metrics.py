"""Prometheus metrics of the webhook, in a registry of its own (one per app, so tests and
several apps in one process never collide)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from gpupolicy.core.findings import Finding, Severity

# The API server's timeout is at most 30 s and the chart's 3 s; buckets go past both ends.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 3.0, 5.0, 10.0)

# The `kind` label comes from the request: every distinct value is a time series kept for the
# life of the process. Kinds are names of at most 63 characters (a DNS label, CamelCase:
# https://kubernetes.io/docs/reference/using-api/api-concepts/); past MAX_KINDS distinct ones,
# or for anything else, the label is "other".
MAX_KINDS = 100
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")


class _InventoryCollector(Collector):
    """`gpupolicy_inventory_synced{kind}`: 1 when the kind's cache has synced, read at scrape time."""

    def __init__(self, synced: Callable[[], Mapping[str, bool]]) -> None:
        self._synced = synced

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "gpupolicy_inventory_synced",
            "1 when the cluster inventory's cache of a kind has synced (list done, watch running).",
            labels=["kind"],
        )
        for kind, synced in sorted(self._synced().items()):
            family.add_metric([kind], 1.0 if synced else 0.0)
        yield family


class _ClusterFactsCollector(Collector):
    """`gpupolicy_cluster_facts{fact}`: what the webhook learned of the cluster (live_facts.py),
    read at scrape time; nothing while it learns nothing (switched off)."""

    def __init__(self, counts: Callable[[], Mapping[str, int] | None]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "gpupolicy_cluster_facts",
            "What the webhook learned of the cluster from its inventory: GPU node pools, GPU taints "
            "(absent while unknown), nodes and GPU nodes, unregistered node label keys.",
            labels=["fact"],
        )
        for fact, value in sorted((self._counts() or {}).items()):
            family.add_metric([fact], float(value))
        yield family


class _CustomRuleCollector(Collector):
    """`gpupolicy_custom_rule_evaluations_total{rule}` and `gpupolicy_custom_rule_errors_total{rule,
    reason}` (raised, timeout): the custom rules' counts (gpupolicy/custom/rules.py), read at
    scrape time. Rules are the policy's, so the label values are bounded by the policies loaded."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        from gpupolicy.custom.rules import STATS

        evaluations, errors = STATS.snapshot()
        evaluated = CounterMetricFamily(
            "gpupolicy_custom_rule_evaluations",
            "Evaluations of custom rules (Rego, Gatekeeper, CEL, ValidatingAdmissionPolicy) on one object.",
            labels=["rule"],
        )
        for rule, count in sorted(evaluations.items()):
            evaluated.add_metric([rule], float(count))
        yield evaluated
        failed = CounterMetricFamily(
            "gpupolicy_custom_rule_errors",
            "Evaluations of custom rules that failed: raised (an error of the rule) or timeout (past "
            "customRules.timeBudgetMs; the admission did not wait longer).",
            labels=["rule", "reason"],
        )
        for (rule, reason), count in sorted(errors.items()):
            failed.add_metric([rule, reason], float(count))
        yield failed


class _JournalCollector(Collector):
    """The admission journal and its replayer (provenance_replayer.py), read at scrape time from
    `Provenance.health()`: nothing while provenance is written by the request itself."""

    def __init__(self, health: Callable[[], Mapping[str, Any] | None]) -> None:
        self._health = health

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        health = self._health()
        if not health or "journal" not in health:
            return
        journal, replayer = health["journal"], health["replayer"]
        report = replayer.get("report") or {}
        yield _gauge(
            "gpupolicy_provenance_journal_bytes",
            "Bytes the admission journal holds on disk.",
            journal["bytes"],
        )
        yield _gauge(
            "gpupolicy_provenance_journal_backlog_bytes",
            "Bytes of admissions in the journal the replayer has not yet stored.",
            journal["backlog_bytes"],
        )
        yield _gauge(
            "gpupolicy_provenance_replayer_up",
            "1 while the replayer's process runs.",
            1 if replayer["running"] else 0,
        )
        yield _counter(
            "gpupolicy_provenance_replayer_restarts",
            "Restarts of the replayer's process.",
            replayer["restarts"],
        )
        yield _labelled(
            "gpupolicy_provenance_replayed",
            "Journal entries the running replayer handled: stored (committed or spooled by its store), "
            "unrecordable (logged and skipped). Restarts with the replayer.",
            {"stored": report.get("stored", 0), "unrecordable": report.get("unrecordable", 0)},
        )
        yield from _store_families(report.get("store") or {})


def _store_families(store: Mapping[str, Any]) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The replayer's store, as it last reported it."""
    yield _labelled(
        "gpupolicy_provenance_store_writes",
        "Records the replayer's store made durable: committed to the database, or spooled while "
        "it could not take them (and replayed from the spool later). Restarts with the replayer.",
        {
            "committed": store.get("writes", 0),
            "spooled": store.get("spooled", 0),
            "replayed": store.get("replayed", 0),
        },
    )
    yield _counter(
        "gpupolicy_provenance_store_failures",
        "Database errors the replayer's store met. Restarts with the replayer.",
        store.get("failures", 0),
    )
    yield _gauge(
        "gpupolicy_provenance_spool_backlog",
        "Records waiting in the spool for the database.",
        store.get("spool_backlog", 0),
    )


def _labelled(name: str, documentation: str, values: Mapping[str, float]) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=["outcome"])
    for outcome, value in values.items():
        family.add_metric([outcome], float(value))
    return family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value))


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=float(value))


class WebhookMetrics:
    def __init__(
        self,
        inventory_synced: Callable[[], Mapping[str, bool]] | None = None,
        cluster_facts: Callable[[], Mapping[str, int] | None] | None = None,
        provenance_health: Callable[[], Mapping[str, Any] | None] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "gpupolicy_admission_requests",
            "Admission requests by decision (allowed, denied, invalid, too-large, unsupported-media-type,"
            " error), mode, dry run and kind.",
            ["decision", "mode", "dry_run", "kind"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "gpupolicy_admission_duration_seconds",
            "Time from receiving an admission request to sending the response.",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.findings = Counter(
            "gpupolicy_findings",
            "Findings reported on admitted objects, by rule and severity.",
            ["rule", "severity"],
            registry=self.registry,
        )
        self.rule_errors = Counter(
            "gpupolicy_rule_errors",
            "Rules that failed with an internal error on an admitted object, by rule and by what the "
            "request was answered (denied or allowed; webhook.onRuleError decides in enforce mode).",
            ["rule", "decision"],
            registry=self.registry,
        )
        self.decision_cache = Counter(
            "gpupolicy_decision_cache",
            "Evaluated admissions by whether the decision was remembered from the same content (hit) "
            "or evaluated (miss); webhook.decisionCacheBytes sizes the cache.",
            ["result"],
            registry=self.registry,
        )
        self.provenance_writes = Counter(
            "gpupolicy_provenance_writes",
            "Provenance writes by outcome (recorded, skipped, failed).",
            ["outcome"],
            registry=self.registry,
        )
        self.policy_reloads = Counter(
            "gpupolicy_policy_reloads",
            "Changes of the policy files by outcome: reloaded (the new policy is in use) or refused "
            "(invalid: the last good policy stays in use).",
            ["outcome"],
            registry=self.registry,
        )
        self.policy_reload_failing = Gauge(
            "gpupolicy_policy_reload_failing",
            "1 while the policy files hold a policy that was refused (the last good one decides).",
            registry=self.registry,
        )
        self.cluster_facts_recomputes = Counter(
            "gpupolicy_cluster_facts_recomputes",
            "Recomputations of the cluster facts after the inventory changed, by outcome: updated (a "
            "new effective policy is in use), unchanged, refused (rules failed under the new facts).",
            ["outcome"],
            registry=self.registry,
        )
        self.registry.register(_CustomRuleCollector())
        if inventory_synced is not None:
            self.registry.register(_InventoryCollector(inventory_synced))
        if cluster_facts is not None:
            self.registry.register(_ClusterFactsCollector(cluster_facts))
        if provenance_health is not None:
            self.registry.register(_JournalCollector(provenance_health))
        self._kinds: set[str] = set()
        # The labelled children counted on every admission, by their label values: `labels()`
        # checks and converts its arguments and takes a lock each time (5 µs a finding, a tenth
        # of the log line's and metrics' cost). Bounded as the labels are: decisions, modes and
        # MAX_KINDS kinds; the policy's rules and their severities.
        self._request_children: dict[tuple[str, str, str, str], Any] = {}
        self._finding_children: dict[tuple[str, Severity], Any] = {}
        self._cache_children: dict[str, Any] = {}  # made at first use, as `labels()` would be

    def count_request(self, decision: str, mode: str, dry_run: str, kind: str) -> None:
        """`requests{decision, mode, dry_run, kind}` += 1, `kind` bounded by `kind_label`."""
        key = (decision, mode, dry_run, self.kind_label(kind))
        child = self._request_children.get(key)
        if child is None:
            child = self._request_children[key] = self.requests.labels(*key)
        child.inc()

    def count_decision_cache(self, *, remembered: bool) -> None:
        """`decision_cache{result}` += 1: "hit" for a remembered decision, else "miss"."""
        result = "hit" if remembered else "miss"
        child = self._cache_children.get(result)
        if child is None:
            child = self._cache_children[result] = self.decision_cache.labels(result)
        child.inc()

    def count_findings(self, findings: Iterable[Finding]) -> None:
        """`findings{rule, severity}` += 1 for each finding."""
        children = self._finding_children
        for finding in findings:
            key = (finding.rule_id, finding.severity)
            child = children.get(key)
            if child is None:
                child = children[key] = self.findings.labels(finding.rule_id, finding.severity.label)
            child.inc()

    def kind_label(self, kind: str) -> str:
        """`kind`, or "other" (see MAX_KINDS)."""
        if kind in self._kinds:
            return kind
        if len(self._kinds) >= MAX_KINDS or not _KIND.fullmatch(kind):
            return "other"
        self._kinds.add(kind)
        return kind
