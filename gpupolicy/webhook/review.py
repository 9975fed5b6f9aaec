"""The admission decision: `review(admission_review, engine, inventory) -> Decision`, a plain function.

No I/O and no HTTP: the server parses the body, calls `review`, sends `decision.response` and
records provenance when `records.should_record(decision)` says so (what a record is built from is
decided there too, gpupolicy/webhook/records.py, not in the route). A malformed review raises
`MalformedReview` (the server answers HTTP 400); a policy violation is `allowed: false`.

What is evaluated: CREATE and UPDATE of workloads that name GPUs, and of the objects that
cross-object rules read (experiment ConfigMaps, PDBs, PriorityClasses, Rollouts, Analysis
templates, Canaries). DELETE, CONNECT, subresources, excluded namespaces and objects without GPUs
are allowed at once. The admitted object is evaluated against the cluster inventory with the
object itself in place of its stored version, so cross-object rules see the cluster as it would
be after the change, and only findings about the admitted object are reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import field
from typing import Any

from gpupolicy.core.findings import Finding, JsonPath, Severity
from gpupolicy.core.immutable import immutable, replace
from gpupolicy.core.json_text import use_encoder
from gpupolicy.core.vocabulary import IGNORE_ANNOTATION
from gpupolicy.engine.evaluation import RulePlan, evaluate_subject
from gpupolicy.engine.registry import REGISTRY, Rule
from gpupolicy.engine.report import Report
from gpupolicy.engine.suppressions import ANNOTATION_PATH
from gpupolicy.kube.inventory import Coverage, Inventory
from gpupolicy.kube.pod_spec import Workload, as_mapping, workload_of
from gpupolicy.loading.documents import Resource, json_text_marks
from gpupolicy.policy.loading import Policy
from gpupolicy.policy.validation import PolicyError
from gpupolicy.webhook.answers import audit_annotations, deny_message, shown_warnings
from gpupolicy.webhook.decision_cache import (
    GENERATED_SUFFIX_LENGTH,
    DecisionCache,
    Outcome,
    ReadKinds,
    generations_of,
)
from gpupolicy.webhook.kinds import is_cross_object, names_gpus
from gpupolicy.webhook.owners import Inherited
from gpupolicy.webhook.settings import Mode, OnRuleError, WebhookSettings

try:  # the webhook's objects come without the loader's text marks: GP004 serialises them
    import orjson
except ImportError:  # pragma: no cover - depends on the install
    pass
else:
    use_encoder(orjson.dumps)

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
EVALUATED_OPERATIONS = frozenset({"CREATE", "UPDATE"})
KNOWN_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


class MalformedReview(ValueError):
    """The body is not an AdmissionReview admission.k8s.io/v1 request (HTTP 400)."""


@immutable
class ReviewEngine:
    """What `review` decides with: the loaded policy, its webhook settings and the rules (all
    registered ones unless given)."""

    policy: Policy
    settings: WebhookSettings
    rules: tuple[Rule, ...] | None = None
    # The given rules as the policy enables them, made once per policy load rather than once per
    # admission (None: every registered rule, planned per evaluation, as the registry may grow).
    plan: RulePlan | None = field(init=False, repr=False, compare=False)
    # Decisions of this engine remembered across admissions of the same content (None: off).
    decisions: DecisionCache | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plan = RulePlan(self.rules, self.policy) if self.rules is not None else None
        object.__setattr__(self, "plan", plan)
        size = self.settings.decision_cache_bytes
        custom = any(rule.source is not None for rule in self.rules or ())
        decisions = DecisionCache(max_bytes=size, whole_objects=custom) if size > 0 else None
        object.__setattr__(self, "decisions", decisions)

    @classmethod
    def from_policy(
        cls, policy: Policy, *, mode: Mode | None = None, rules: Iterable[Rule] | None = None
    ) -> ReviewEngine:
        """`rules` defaults to every registered rule the webhook needs (`webhook_rules()`) and the
        custom rules of the policy (compiled here, once per policy load; PolicyError when one
        cannot be used)."""
        return cls(
            policy=policy,
            settings=WebhookSettings.from_policy(policy, mode=mode),
            rules=tuple(rules) if rules is not None else (*webhook_rules(), *custom_rules(policy)),
        )


# The API server validates built-in kinds against its own OpenAPI schema before it calls
# validating webhooks (mutating admission -> object schema validation -> validating admission),
# so an admitted object can never break it: GP005 would only repeat that check, slower.
# https://kubernetes.io/docs/reference/access-authn-authz/extensible-admission-controllers/
CHECKED_BY_API_SERVER = frozenset({"GP005"})


# Worker processes that evaluate custom rules within their budget (gpupolicy/custom/isolation.py).
CUSTOM_RULE_WORKERS = 2


def webhook_rules() -> tuple[Rule, ...]:
    return tuple(rule for rule in REGISTRY if rule.id not in CHECKED_BY_API_SERVER and rule.source is None)


def custom_rules(policy: Policy) -> tuple[Rule, ...]:
    """The custom rules of the policy's `customRules.paths` (gpupolicy/custom/), as engine rules.
    They are not registered: the engine runs the webhook's rule tuple, and a reloaded policy
    brings its own. None configured: no Rego or CEL engine is imported."""
    from gpupolicy.custom.errors import CustomRuleError
    from gpupolicy.custom.loading import rules_for

    try:
        found = rules_for([policy])
        if not found:
            return ()
        from gpupolicy.custom.rules import checked_engine_rules, use_workers

        engine_rules = checked_engine_rules(found, REGISTRY)
        use_workers(CUSTOM_RULE_WORKERS)  # the time budget holds only out of process
        return engine_rules
    except CustomRuleError as exc:
        raise PolicyError(str(exc)) from exc


@immutable
class Admission:
    """What an AdmissionReview asks (`read_admission`). `object` and `resource` are read only for
    what may be evaluated: a CREATE or UPDATE of a resource, not of a subresource. Kind,
    namespace and name are the object's when it says them, else the request's."""

    request: dict[str, Any]
    uid: str
    operation: str
    dry_run: bool
    kind: str
    namespace: str | None
    name: str
    object: dict[str, Any] | None = None
    resource: Resource | None = None
    # What the object inherits from its controllers (owners.py); None when they were not read.
    inherited: Inherited | None = None


@immutable
class Decision:
    """What was decided of one admission: the answer, and what it rests on."""

    admission: Admission
    response: dict[str, Any]  # the AdmissionReview to send back
    allowed: bool
    mode: Mode | None  # None when nothing was evaluated
    skipped: str | None = None  # why nothing was evaluated: delete, subresource, no-gpus ...
    report: Report | None = None
    findings: tuple[Finding, ...] = ()  # after suppressions and exemptions
    gpu_workload: bool = False  # the object is a workload that uses GPUs
    remembered: bool = False  # answered from the decision cache (the outcome of the same content)

    @property
    def decision(self) -> str:
        return "allowed" if self.allowed else "denied"

    @property
    def uid(self) -> str:
        return self.admission.uid

    @property
    def operation(self) -> str:
        return self.admission.operation

    @property
    def kind(self) -> str:
        return self.admission.kind

    @property
    def namespace(self) -> str | None:
        return self.admission.namespace

    @property
    def name(self) -> str:
        return self.admission.name

    @property
    def dry_run(self) -> bool:
        return self.admission.dry_run


class AdmissionInventory:
    """The cluster inventory as it would be after the admission: the admitted object replaces the
    stored object of the same kind, namespace and name (or joins them, on CREATE)."""

    def __init__(self, base: Inventory, admitted: Resource) -> None:
        self._base = base
        self._admitted = admitted
        # Its identity read once: rules ask the inventory a dozen times per admission.
        self._kind = admitted.kind
        self._name = admitted.name
        self._namespace = admitted.namespace
        # Each kind's coverage, asked once per admission: rules ask it about seven times, through
        # the decision cache's note of the kinds read and the cluster inventory's lookup.
        self._coverages: dict[str, Coverage] = {}

    def _is_admitted(self, item: Resource) -> bool:
        return item.kind == self._kind and item.name == self._name and item.namespace == self._namespace

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        found = self._base.list(kind, namespace)
        if kind != self._kind:
            return found
        admitted_namespace = self._namespace
        if namespace is not None and admitted_namespace is not None and admitted_namespace != namespace:
            return found
        return [*(item for item in found if not self._is_admitted(item)), self._admitted]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
        admitted_namespace = self._namespace
        same_namespace = namespace is None or admitted_namespace is None or admitted_namespace == namespace
        if kind == self._kind and name == self._name and same_namespace:
            return self._admitted
        return self._base.get(kind, name, namespace)

    def coverage(self, kind: str) -> Coverage:
        found = self._coverages.get(kind)
        if found is None:
            found = self._coverages[kind] = self._base.coverage(kind)
        return found


class NoInventory:
    """No cluster to ask (the inventory was switched off): every kind is unavailable."""

    def list(self, kind: str, namespace: str | None = None) -> Sequence[Resource]:
        return []

    def get(self, kind: str, name: str, namespace: str | None = None) -> Resource | None:
        return None

    def coverage(self, kind: str) -> Coverage:
        return Coverage.UNAVAILABLE


# -- parsing -------------------------------------------------------------------------------------


# What an error message quotes of a value from the request: a bounded excerpt, whatever its
# size or shape (an `apiVersion` may be a 7 MB string or a nested object).
SHOWN_CHARS = 60


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= SHOWN_CHARS else value[: SHOWN_CHARS - 1] + "…")
    if value is None or isinstance(value, bool | float) or (isinstance(value, int) and abs(value) < 10**18):
        return repr(value)
    if isinstance(value, dict | list):
        return "an object" if isinstance(value, dict) else "an array"
    return "a number" if isinstance(value, int) else type(value).__name__


def _request_of(admission_review: Any) -> dict[str, Any]:
    if not isinstance(admission_review, dict):
        raise MalformedReview("the body must be a JSON object (an AdmissionReview)")
    api_version = admission_review.get("apiVersion")
    kind = admission_review.get("kind")
    if api_version != API_VERSION or kind != KIND:
        raise MalformedReview(
            f"expected apiVersion {API_VERSION} and kind {KIND}, got apiVersion {_shown(api_version)} and "
            f"kind {_shown(kind)} (set admissionReviewVersions: [v1] in the webhook configuration)"
        )
    request = admission_review.get("request")
    if not isinstance(request, dict):
        raise MalformedReview("the AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("the AdmissionReview request has no uid")
    operation = request.get("operation")
    if operation not in KNOWN_OPERATIONS:
        raise MalformedReview(
            f"request.operation must be one of {', '.join(sorted(KNOWN_OPERATIONS))}, got {_shown(operation)}"
        )
    return request


def _response(
    uid: str,
    allowed: bool,
    *,
    status: dict[str, Any] | None = None,
    warnings: Sequence[str] = (),
    audit_annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The AdmissionReview answered: what is empty is left out (each a copy of the outcome's,
    which a remembered decision shares)."""
    body: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if status:
        body["status"] = status
    if warnings:
        body["warnings"] = list(warnings)
    if audit_annotations:
        body["auditAnnotations"] = dict(audit_annotations)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": body}


def _admitted_object(request: dict[str, Any], operation: str, inherited: Inherited | None) -> dict[str, Any]:
    obj = request.get("object")
    if not isinstance(obj, dict):
        raise MalformedReview(f"request.object must be an object for {operation}")
    metadata = obj.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise MalformedReview("request.object.metadata must be an object")
    namespace = request.get("namespace")
    if isinstance(namespace, str) and namespace and not as_mapping(metadata).get("namespace"):
        # The API server fills the namespace in before admission; a request path may carry it
        # only in request.namespace. Copy (shallow) rather than change the caller's value.
        obj = {**obj, "metadata": {**as_mapping(metadata), "namespace": namespace}}
    if inherited is not None and (inherited.labels or inherited.annotations):
        # What the object's controllers declare for it, where it declares nothing (owners.py). Copied.
        own = as_mapping(obj.get("metadata"))
        obj = {
            **obj,
            "metadata": {
                **own,
                "labels": {**inherited.labels, **as_mapping(own.get("labels"))},
                "annotations": {**inherited.annotations, **as_mapping(own.get("annotations"))},
            },
        }
    return obj


# -- the decision --------------------------------------------------------------------------------


def read_admission(admission_review: Any, inherited: Inherited | None = None) -> Admission:
    """What the AdmissionReview asks, its object with what it `inherited` from its controllers.
    Raises `MalformedReview` for a body that is not one, or whose object cannot be read where it
    is needed."""
    request = _request_of(admission_review)
    operation: str = request["operation"]
    kind = str(as_mapping(request.get("kind")).get("kind") or "")
    namespace = request.get("namespace") if isinstance(request.get("namespace"), str) else None
    name = request.get("name") if isinstance(request.get("name"), str) else ""
    uid, dry_run = request["uid"], request.get("dryRun") is True
    if operation not in EVALUATED_OPERATIONS or request.get("subResource"):
        return Admission(request, uid, operation, dry_run, kind, namespace or None, name or "")
    obj = _admitted_object(request, operation, inherited)
    resource = Resource(obj, file=f"admission:{kind or '?'}/{namespace or ''}/{name or ''}", doc_index=0)
    return Admission(
        request,
        uid,
        operation,
        dry_run,
        kind=resource.kind or kind,
        namespace=resource.namespace or namespace or None,
        name=resource.name or name or "",
        object=obj,
        resource=resource,
        inherited=inherited,
    )


def review(
    admission_review: Any,
    engine: ReviewEngine,
    inventory: Inventory | None = None,
    *,
    inherited: Inherited | None = None,
) -> Decision:
    """Decide one AdmissionReview, its object with what it `inherited` from its controllers (the
    server reads them: owners.py). Raises `MalformedReview` for a body that is not one."""
    admission = read_admission(admission_review, inherited)
    resource = admission.resource
    if resource is None:
        operation = admission.operation
        return _allowed_at_once(
            admission, "subresource" if operation in EVALUATED_OPERATIONS else operation.lower()
        )
    if engine.settings.excluded(admission.namespace):
        return _allowed_at_once(admission, "excluded-namespace")
    workload = workload_of(resource)
    gpu_workload = workload is not None and names_gpus(workload, engine.policy)
    if not gpu_workload and not (
        is_cross_object(resource) and (workload is None or admission.kind == "Rollout")
    ):
        return _allowed_at_once(admission, "no-gpus" if workload is not None else "not-checked")
    return _evaluated(admission, resource, workload, engine, inventory, gpu_workload=gpu_workload)


def _allowed_at_once(admission: Admission, reason: str) -> Decision:
    """Allowed without evaluating anything, for `reason`."""
    return Decision(admission, _response(admission.uid, True), allowed=True, mode=None, skipped=reason)


def _evaluated(
    admission: Admission,
    resource: Resource,
    workload: Workload | None,
    engine: ReviewEngine,
    inventory: Inventory | None,
    *,
    gpu_workload: bool,
) -> Decision:
    """The rules run on the admitted object against the cluster as it would be after it, or the
    outcome of the same content remembered (decision_cache.py)."""
    cache, cluster = engine.decisions, generations_of(inventory)
    if cache is None or cluster is None or admission.object is None:
        base = inventory if inventory is not None else NoInventory()
        evaluated = _outcome(admission, resource, workload, engine, base, gpu_workload=gpu_workload)
        return _decision(admission, evaluated)
    keyed = cache.keyed(
        operation=admission.operation,
        kind=admission.kind,
        namespace=admission.namespace,
        obj=admission.object,
        owners_read=admission.inherited is not None,
    )
    if keyed is None:
        evaluated = _outcome(admission, resource, workload, engine, cluster, gpu_workload=gpu_workload)
        return _decision(admission, evaluated)  # content that cannot be keyed is never remembered
    key, text = keyed
    outcome = cache.get(key, cluster, resource.name)
    if outcome is not None:
        owners_read = admission.inherited is not None
        return _decision(admission, _renamed(outcome, resource, engine, owners_read), remembered=True)
    # The key's text holds every key and string the rules read but the server's own metadata
    # (uid, resourceVersion, timestamps, a generated name's five letters and digits: never a
    # placeholder): a mark it lacks, no field holds, and GP004 need not serialise the object again.
    resource.text_marks = json_text_marks(text)
    read = ReadKinds(cluster)
    outcome = _outcome(admission, resource, workload, engine, read, gpu_workload=gpu_workload)
    cache.put(key, text, outcome, read, cluster)
    return _decision(admission, outcome)


def _outcome(
    admission: Admission,
    resource: Resource,
    workload: Workload | None,
    engine: ReviewEngine,
    inventory: Inventory,
    *,
    gpu_workload: bool,
) -> Outcome:
    # The view `review` made to tell whether the object names GPUs is the one its rules read.
    report = evaluate_subject(
        resource, engine.policy, AdmissionInventory(inventory, resource), rules=engine.plan, view=workload
    )
    if admission.inherited is not None and IGNORE_ANNOTATION in admission.inherited.annotations:
        report = _without_findings_about(report, ANNOTATION_PATH)  # the owner's, said at its review
    findings = report.findings  # exemptions and allowed suppressions already applied
    mode = engine.settings.mode_for(admission.namespace)
    errors = [finding for finding in findings if finding.severity is Severity.ERROR]
    # A rule that raised did not say what it would have: in enforce mode the policy decides
    # (webhook.onRuleError, deny by default), never the accident of which rule crashed.
    unchecked = bool(report.errors) and engine.settings.on_rule_error is OnRuleError.DENY
    allowed = not (mode is Mode.ENFORCE and (errors or unchecked))
    status = None
    if not allowed:
        rule_errors = report.errors if unchecked else ()
        message = deny_message(
            resource,
            errors,
            engine.policy,
            rule_errors=rule_errors,
            owners_read=admission.inherited is not None,
        )
        status = {"code": 403, "reason": "Forbidden", "message": message}
    return Outcome(
        allowed=allowed,
        mode=mode,
        status=status,
        warnings=tuple(shown_warnings(report, mode)),
        audit_annotations=audit_annotations(resource, engine.policy, findings, mode, allowed),
        report=report,
        findings=tuple(findings),
        gpu_workload=gpu_workload,
        name=resource.name,
    )


def _without_findings_about(report: Report, path: JsonPath) -> Report:
    """The report without its findings at `path` (GP010 and GP011 about an annotation the object
    inherited: its owner's review reported them)."""
    kept = [finding for finding in report.findings if finding.path != path]
    return report if len(kept) == len(report.findings) else replace(report, findings=kept)


def _renamed(outcome: Outcome, resource: Resource, engine: ReviewEngine, owners_read: bool) -> Outcome:
    """A remembered outcome as an evaluation of `resource` says it: another Pod of the same
    template has its own generated name, which messages may quote and the deny message does
    (decision_cache.is_renamable says when replacing it is exact). The warnings and the deny
    message, cut to their lengths, are made again from the messages. What else holds the first
    object's reference (the findings' `object`, the report's roles) is read by nothing the webhook
    answers, logs or records."""
    old, new = outcome.name, resource.name
    if old == new:
        return outcome
    quoting = any(old in finding.message for finding in outcome.findings)
    status = outcome.status
    if not quoting and status is None:
        return outcome  # nothing quotes the name: the warnings are made of the messages
    findings, report = outcome.findings, outcome.report  # the report's findings are the outcome's
    if quoting:
        findings = tuple(
            replace(finding, message=finding.message.replace(old, new)) if old in finding.message else finding
            for finding in findings
        )
        report = replace(report, findings=list(findings))
    if status is not None:
        errors = [finding for finding in findings if finding.severity is Severity.ERROR]
        message = deny_message(resource, errors, engine.policy, owners_read=owners_read)
        status = {**status, "message": message}
    warnings = _renamed_warnings(outcome, report, old, new) if quoting else outcome.warnings
    return replace(outcome, findings=findings, report=report, warnings=warnings, status=status, name=new)


def _renamed_warnings(outcome: Outcome, report: Report, old: str, new: str) -> tuple[str, ...]:
    """The warnings with the name replaced where they quote it whole (the two names are of one
    length, so each is cut where an evaluation cuts it); made again where one is cut inside it."""
    stem = old[: len(old) - GENERATED_SUFFIX_LENGTH]
    if all(warning.count(stem) == warning.count(old) for warning in outcome.warnings):
        return tuple(warning.replace(old, new) for warning in outcome.warnings)
    return tuple(shown_warnings(report, outcome.mode))


def _decision(admission: Admission, outcome: Outcome, *, remembered: bool = False) -> Decision:
    """The decision of `admission` (its uid) from the outcome of its content."""
    response = _response(
        admission.uid,
        outcome.allowed,
        status=outcome.status,
        warnings=outcome.warnings,
        audit_annotations=outcome.audit_annotations,
    )
    return Decision(
        admission,
        response,
        allowed=outcome.allowed,
        mode=outcome.mode,
        report=outcome.report,
        findings=outcome.findings,
        gpu_workload=outcome.gpu_workload,
        remembered=remembered,
    )
