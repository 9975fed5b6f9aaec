"""What one provenance record holds, and how an admission request becomes one (pure, no I/O).

The fields follow DESIGN.md (The webhook, Provenance): time, operation, user, object identity
and generation, images with digests, GPU resources, placement, priority, experiment, arm,
fixed factors, rollback criteria, model and input, policy version and hash, git revision,
findings, and a hash of the pod template. Everything passes through `redaction.redact` first.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Mapping
from dataclasses import field
from datetime import UTC, datetime
from typing import Any

from gpupolicy.core.bounded_cache import bounded_memo
from gpupolicy.core.findings import Finding, Severity, format_path
from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import (
    ARM_LABEL,
    EXPERIMENT_LABEL,
    GIT_REVISION_KEY,
    INPUT_ANNOTATION,
    MODEL_ANNOTATION,
    ROLLBACK_ANNOTATION,
)
from gpupolicy.engine.report import Report
from gpupolicy.kube.gpu import dra_gpu_claims
from gpupolicy.kube.owners import controller_of
from gpupolicy.kube.pod_spec import PodTemplate, Workload, as_list, as_mapping, workload_of
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy
from gpupolicy.provenance.canonical import canonical_json
from gpupolicy.provenance.redaction_memo import redacted_record
from gpupolicy.provenance.template_hash import template_hash

# GitOps tracking metadata (read from labels and annotations of the admitted object).
# Argo CD: annotation tracking (`<app>:<group>/<kind>:<namespace>/<name>`) or label tracking
# (`app.kubernetes.io/instance`, or a custom `argocd.argoproj.io/instance`).
ARGOCD_TRACKING_ID = "argocd.argoproj.io/tracking-id"
ARGOCD_INSTANCE_LABELS = ("app.kubernetes.io/instance", "argocd.argoproj.io/instance")
# Flux: kustomize-controller and helm-controller label what they apply with the name and
# namespace of the Kustomization / HelmRelease; the revision (`main@sha1:…`) is in the keys
# `…/revision` when the manifests carry it (e.g. through `spec.commonMetadata`).
FLUX_PREFIXES = ("kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/")
REVISION_KEYS = (
    "kustomize.toolkit.fluxcd.io/revision",
    "helm.toolkit.fluxcd.io/revision",
    GIT_REVISION_KEY,
)

STATUS_ADMITTED = "admitted"
STATUS_CONFIRMED = "confirmed"
STATUS_NEVER_PERSISTED = "never-persisted"
STATUSES = (STATUS_ADMITTED, STATUS_CONFIRMED, STATUS_NEVER_PERSISTED)

RECORDED_OPERATIONS = ("CREATE", "UPDATE")

_DIGEST = re.compile(r"@(?P<digest>[A-Za-z0-9_+.-]+:[0-9a-fA-F]{32,})$")


class NotRecordable(ValueError):
    """The request must not be recorded (dry run, not a create/update, not a GPU workload)."""


class _WrittenBody:
    """Where a record keeps the body's canonical JSON written while it was assembled: a slot
    outside the dataclass's fields, so that equality, `to_dict` and `from_dict` never see it."""

    __slots__ = ("_written_body",)


@immutable
class ProvenanceRecord(_WrittenBody):
    """One admitted create/update of a GPU workload. `uid` is the admission request's uid: it
    is the record id and what makes writes idempotent."""

    uid: str
    time: str  # RFC 3339 UTC with microseconds, e.g. 2026-11-30T02:41:35.123456Z (sorts as text)
    operation: str
    user: dict[str, Any]
    object_uid: str | None
    api_version: str
    kind: str
    namespace: str | None
    name: str
    generation: int | None
    images: list[dict[str, Any]] = field(default_factory=list)
    gpu: list[dict[str, Any]] = field(default_factory=list)
    placement: list[dict[str, Any]] = field(default_factory=list)
    priority: list[dict[str, Any]] = field(default_factory=list)
    # The controller that made the object (a ReplicaSet's Deployment, a Pod's ReplicaSet or Job):
    # {api_version, kind, name, uid}, or None for an object a person or GitOps tool applied.
    controller: dict[str, Any] | None = None
    experiment: str | None = None
    arm: str | None = None
    fixed: list[str] | None = None
    # The experiment ConfigMap as admitted with this arm ({name, namespace, data}), so that
    # `gpupolicy results report` judges the runs by the config they ran under.
    experiment_config: dict[str, Any] | None = None
    rollback_criteria: str | None = None
    model: str | None = None
    input: str | None = None
    policy_version: str = ""
    policy_digest: str = ""
    git: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    template_hash: str = ""
    status: str = STATUS_ADMITTED
    status_changed_at: str | None = None

    @property
    def git_revision(self) -> str | None:
        revision = self.git.get("revision")
        return revision if isinstance(revision, str) else None

    def to_dict(self) -> dict[str, Any]:
        """Every field, as a deep copy (the caller may change it)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProvenanceRecord:
        return cls(**{key: value for key, value in data.items() if key in _FIELD_NAMES})

    def body(self) -> dict[str, Any]:
        """What the database keeps as JSON beside the indexed columns (status lives in columns).
        Shares the record's lists and dicts (no copy): read it, serialise it, do not change it."""
        return {name: getattr(self, name) for name in _BODY_FIELDS}

    def body_json(self) -> str:
        """`body()` as canonical JSON: the one serialisation a database write needs (written
        once, when the record was assembled, while the record holds the values it was written
        from)."""
        written: tuple[tuple[Any, ...], str] | None = getattr(self, "_written_body", None)
        if written is not None and all(map(operator.is_, written[0], _body_values(self))):
            return written[1]
        return canonical_json(self.body())

    def _keep_body_json(self, text: str) -> ProvenanceRecord:
        """Remember `text` as `body_json()` of the values the record holds now."""
        object.__setattr__(self, "_written_body", (_body_values(self), text))
        return self


_FIELD_NAMES = frozenset(item.name for item in dataclasses.fields(ProvenanceRecord))
_BODY_FIELDS = tuple(
    item.name
    for item in dataclasses.fields(ProvenanceRecord)
    if item.name not in ("status", "status_changed_at")
)
_BODY_FIELD_SET = frozenset(_BODY_FIELDS)
_body_values = operator.attrgetter(*_BODY_FIELDS)


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def should_record(request: Mapping[str, Any], obj: Mapping[str, Any], policy: Policy) -> bool:
    """True for a create/update of a GPU workload that is not a dry run."""
    return _not_recordable_reason(request, obj, policy) is None


def _not_recordable_reason(
    request: Mapping[str, Any], obj: Mapping[str, Any], policy: Policy, workload: Workload | None = None
) -> str | None:
    if request.get("dryRun") is True:
        return "dry-run requests are never recorded (sideEffects: NoneOnDryRun)"
    if str(request.get("operation", "")).upper() not in RECORDED_OPERATIONS:
        return f"operation {request.get('operation')!r} is not recorded (only CREATE and UPDATE)"
    workload = workload or _workload(obj)
    if workload is None or not any(policy.gpu.uses_gpus(template) for template in workload.templates):
        return "not a GPU workload"
    return None


def _workload(obj: Mapping[str, Any]) -> Workload | None:
    return workload_of(Resource(dict(obj), file="<admission>", doc_index=0))


def build_record(
    request: Mapping[str, Any],
    obj: Mapping[str, Any],
    report: Report,
    policy: Policy,
    *,
    experiment_config: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    workload: Workload | None = None,
) -> ProvenanceRecord:
    """The provenance record of an admitted request. Raises `NotRecordable` for dry runs,
    operations other than CREATE/UPDATE and objects that use no GPU (see `should_record`).
    `workload` is `obj`'s workload view when the caller has it already (the webhook's review
    made it): its pod templates are then not extracted again."""
    return assemble_record(
        request,
        obj,
        policy,
        findings=[finding_entry(finding) for finding in report.findings],
        policy_digest=report.policy_digest or policy.digest,
        experiment_config=experiment_config,
        now=now,
        workload=workload,
    )


def assemble_record(
    request: Mapping[str, Any],
    obj: Mapping[str, Any],
    policy: Policy,
    *,
    findings: list[dict[str, Any]],
    policy_digest: str,
    experiment_config: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    workload: Workload | None = None,
) -> ProvenanceRecord:
    """`build_record` from the review's findings as `finding_entry` makes them and the digest of
    the policy that decided: what the admission journal keeps of a decision (journal/), so that a
    record is built later, in another process, as the webhook would have built it."""
    if workload is not None and workload.resource.obj is not obj:
        raise ValueError("build_record: workload must be the view of obj")
    workload = workload or _workload(obj)
    reason = _not_recordable_reason(request, obj, policy, workload)
    if reason is not None:
        raise NotRecordable(reason)
    assert workload is not None
    annotations = workload.annotations
    fields: dict[str, Any] = {
        **_who_and_what(request, obj, workload),
        "images": _images(workload),
        "gpu": _gpu(workload, policy),
        "placement": [_placement(template) for template in workload.templates],
        "priority": [_priority(template) for template in workload.templates],
        "controller": controller_of(as_mapping(obj.get("metadata"))),
        **_experiment_fields(workload, experiment_config),
        "rollback_criteria": _str(annotations.get(ROLLBACK_ANNOTATION)),
        "model": _str(annotations.get(MODEL_ANNOTATION)),
        "input": _str(annotations.get(INPUT_ANNOTATION)),
        "policy_version": policy.version,
        "policy_digest": policy_digest,
        "git": git_source(workload.labels, annotations),
        "findings": findings,
    }
    # One redaction pass over the whole record (finding messages included), one construction:
    # `redact` returns fresh lists and dicts, so the record shares nothing with the request (it
    # may share them with other records: redaction_memo.py). The body's canonical JSON is written
    # from the remembered fields' JSON as it is redacted, when it can be. What the record writes
    # itself of digits, hex and `sha256:`, `T`, `Z` (no redaction pattern can match them, and
    # their names sound no secret: tests check both) is kept as it is, without the search: a
    # template hash is new with every Pod, and would fill redaction's memo of clean strings.
    written_here = {
        "time": format_time(now or datetime.now(UTC)),
        "template_hash": template_hash(workload.templates),
    }
    redacted = redacted_record(fields, clean=written_here)
    record = ProvenanceRecord(**redacted.fields)
    if redacted.body_json is not None and fields.keys() | written_here.keys() == _BODY_FIELD_SET:
        record._keep_body_json(redacted.body_json)
    return record


def _who_and_what(request: Mapping[str, Any], obj: Mapping[str, Any], workload: Workload) -> dict[str, Any]:
    """The request's uid, operation and user, and which object, at which generation."""
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise NotRecordable("the admission request has no uid")
    metadata = as_mapping(obj.get("metadata"))
    user = as_mapping(request.get("userInfo"))
    generation = metadata.get("generation")
    return {
        "uid": uid,
        "operation": str(request.get("operation", "")).upper(),
        "user": {
            "username": _str(user.get("username")),
            "uid": _str(user.get("uid")),
            "groups": [str(group) for group in as_list(user.get("groups"))],
        },
        "object_uid": _str(metadata.get("uid")),
        "api_version": _str(obj.get("apiVersion")) or "",
        "kind": workload.kind,
        "namespace": workload.namespace or _str(request.get("namespace")),
        "name": workload.name or _str(request.get("name")) or "",
        "generation": generation
        if isinstance(generation, int) and not isinstance(generation, bool)
        else None,
    }


def _experiment_fields(workload: Workload, experiment_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The experiment and arm the workload is labelled with, and what its config holds fixed."""
    experiment = _first_label(workload, EXPERIMENT_LABEL)
    return {
        "experiment": experiment,
        "arm": _first_label(workload, ARM_LABEL),
        "fixed": _fixed(experiment_config, experiment),
        "experiment_config": _config_snapshot(experiment_config, experiment),
    }


# The webhook writes the findings of every admission it journals, on its event loop, and the
# same few paths come back (10 distinct among 5,185 findings of the realistic mix): written once.
_json_path = bounded_memo(max_bytes=1 << 20)(format_path)
_SEVERITY_LABELS = {severity: severity.label for severity in Severity}


def finding_entry(finding: Finding) -> dict[str, Any]:
    """A finding as a record keeps it (before redaction)."""
    return {
        "rule": finding.rule_id,
        "name": finding.rule_name,
        "severity": _SEVERITY_LABELS[finding.severity],
        "path": _json_path(finding.path),
        "message": finding.message,
        "container": finding.container,
    }


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _first_label(workload: Workload, key: str) -> str | None:
    """The workload's label, or the first pod template's (operators that copy labels down)."""
    found = _str(workload.labels.get(key))
    if found is None:
        found = next((_str(t.labels.get(key)) for t in workload.templates if _str(t.labels.get(key))), None)
    return found


def split_image(image: str) -> tuple[str, str | None]:
    """`registry/repo:tag@sha256:…` → (`registry/repo:tag`, `sha256:…`); no digest → None."""
    match = _DIGEST.search(image)
    if match is None:
        return image, None
    return image[: match.start()], match["digest"]


def _images(workload: Workload) -> list[dict[str, Any]]:
    images = []
    for template, container in workload.containers():
        reference, digest = split_image(container.image)
        images.append(
            {
                "template": template.role,
                "container": container.name,
                "role": container.role,
                "image": container.image,
                "reference": reference,
                "digest": digest,
            }
        )
    return images


def _gpu(workload: Workload, policy: Policy) -> list[dict[str, Any]]:
    entries = []
    for template in workload.templates:
        demands = [
            {
                "container": demand.container.name,
                "resource": demand.resource.name,
                "vendor": demand.resource.vendor,
                "kind": demand.resource.kind.value,
                "request": None if demand.request is None else str(demand.request),
                "limit": None if demand.limit is None else str(demand.limit),
            }
            for demand in policy.gpu.template_demands(template)
        ]
        claims = [claim for _, claim in dra_gpu_claims(template)]
        fractions = {
            str(key): str(value)
            for key, value in template.annotations.items()
            if key in policy.gpu.fraction_annotations
        }
        entries.append(
            {
                "template": template.role,
                "replicas": template.replicas,
                "uses_gpus": policy.gpu.uses_gpus(template),
                "resources": demands,
                "resource_claims": claims,
                "fraction_annotations": fractions,
                "runtime_class": _str(template.spec.get("runtimeClassName")),
            }
        )
    return entries


def _placement(template: PodTemplate) -> dict[str, Any]:
    spec = template.spec
    affinity = as_mapping(spec.get("affinity"))
    node_affinity = as_mapping(affinity.get("nodeAffinity"))
    return {
        "template": template.role,
        "node_selector": as_mapping(spec.get("nodeSelector")),
        "required_node_affinity": node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
        "preferred_node_affinity": node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution"),
        "pod_affinity": affinity.get("podAffinity"),
        "pod_anti_affinity": affinity.get("podAntiAffinity"),
        "tolerations": as_list(spec.get("tolerations")),
        "topology_spread_constraints": as_list(spec.get("topologySpreadConstraints")),
    }


def _priority(template: PodTemplate) -> dict[str, Any]:
    return {
        "template": template.role,
        "priority_class_name": _str(template.spec.get("priorityClassName")),
        "preemption_policy": _str(template.spec.get("preemptionPolicy")),
    }


def _fixed(config: Mapping[str, Any] | None, experiment: str | None) -> list[str] | None:
    """The experiment ConfigMap's `fixed` list (comma or newline separated), when supplied."""
    if config is None:
        return None
    name = _str(as_mapping(config.get("metadata")).get("name"))
    if experiment is not None and name is not None and name != experiment:
        return None  # a ConfigMap for another experiment
    raw = as_mapping(config.get("data")).get("fixed")
    if isinstance(raw, list):
        return [str(item).strip() for item in raw if str(item).strip()]
    if not isinstance(raw, str):
        return []
    return [item.strip() for item in re.split(r"[,\n、，]", raw) if item.strip()]


def _config_snapshot(config: Mapping[str, Any] | None, experiment: str | None) -> dict[str, Any] | None:
    """The experiment ConfigMap's name, namespace and string data, when it is this experiment's."""
    if config is None or experiment is None:
        return None
    metadata = as_mapping(config.get("metadata"))
    if _str(metadata.get("name")) != experiment:
        return None
    data = {
        str(key): value for key, value in as_mapping(config.get("data")).items() if isinstance(value, str)
    }
    return {"name": experiment, "namespace": _str(metadata.get("namespace")), "data": data}


def git_source(labels: Mapping[str, Any], annotations: Mapping[str, Any]) -> dict[str, Any]:
    """Which GitOps tool applied the object, and the revision when the object carries it."""
    merged = {**{str(k): v for k, v in labels.items()}, **{str(k): v for k, v in annotations.items()}}
    source: dict[str, Any] = {"tool": None, "revision": None}
    tracking = _str(merged.get(ARGOCD_TRACKING_ID))
    if tracking is not None:
        source["tool"] = "argocd"
        source["argocd_tracking_id"] = tracking
        source["argocd_application"] = tracking.split(":", 1)[0]
    flux = {key: str(value) for key, value in merged.items() if key.startswith(FLUX_PREFIXES)}
    if flux:
        source["tool"] = source["tool"] or "flux"
        source["flux"] = dict(sorted(flux.items()))
    instance = next((_str(labels.get(key)) for key in ARGOCD_INSTANCE_LABELS if _str(labels.get(key))), None)
    if instance is not None:  # Argo CD label tracking (also Helm's release label: not proof of Argo CD)
        source["instance"] = instance
        if source["tool"] is None and _str(labels.get("argocd.argoproj.io/instance")):
            source["tool"] = "argocd"
    source["revision"] = next((_str(merged.get(key)) for key in REVISION_KEYS if _str(merged.get(key))), None)
    return source
