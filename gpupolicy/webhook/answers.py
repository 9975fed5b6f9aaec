"""What the API server shows of a decision: the deny message, the warnings and the audit
annotations, each bounded as the API server bounds them."""

from __future__ import annotations

from collections.abc import Sequence

from gpupolicy.core.findings import Finding, Severity
from gpupolicy.core.vocabulary import ARM_LABEL, EXPERIMENT_LABEL, IGNORE_ANNOTATION, WORKLOAD_CLASS_LABEL
from gpupolicy.engine.report import InternalError, Report
from gpupolicy.kube.owners import controller_of
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy
from gpupolicy.webhook.settings import Mode

# The API server's limits on warnings (k8s.io/apiserver/pkg/warning): each is truncated past
# 120 characters in kubectl's display, and the total is capped at 4 KiB.
WARNING_MAX_CHARS = 120
WARNINGS_MAX_BYTES = 4096
DENY_MESSAGE_MAX_CHARS = 32 * 1024


def shown_warnings(report: Report, mode: Mode) -> list[str]:
    """What the API server shows the client: none in audit mode. Errors are in the deny message
    in enforce mode; what a cache could not answer (info findings saying "unknown") is shown
    too, so that an unverified check is never silent. Facts of the cluster the policy does not
    describe are said in the log, not on every admission."""
    if mode is Mode.AUDIT:
        return []
    shown = sorted(
        (
            finding
            for finding in report.findings
            if (finding.severity is not Severity.ERROR or mode is Mode.WARN)
            and "clusterFact" not in finding.extra
        ),
        key=lambda finding: -finding.severity,
    )
    return format_warnings(shown, internal_errors=[error.rule_id for error in report.errors])


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _where(finding: Finding) -> str:
    container = f" (container {finding.container})" if finding.container else ""
    return f"{finding.json_path}{container}"


def deny_message(
    resource: Resource,
    errors: Sequence[Finding],
    policy: Policy,
    *,
    rule_errors: Sequence[InternalError] = (),
    owners_read: bool = False,
) -> str:
    """Every error finding, each with its rule, its path and what to change; and the rules that
    failed, when they are why the object is denied (webhook.onRuleError: deny). For a Pod a
    controller made whose owners were not read (`owners_read`), what its owner's metadata does
    not pass on."""
    count = len(errors)
    lines = [
        f"gpupolicy denied {resource.ref}: {count} error{'s' if count != 1 else ''} "
        f"(policy {policy.version}, sha256:{policy.digest[:12]})"
    ]
    failed = ", ".join(dict.fromkeys(error.rule_id for error in rule_errors))
    if failed:
        lines.append(
            f"Not fully checked: {failed} failed with an internal error, and the policy's "
            "webhook.onRuleError is deny (see the webhook log)"
        )
    size = sum(len(line) + 1 for line in lines)
    for index, finding in enumerate(errors, start=1):
        line = (
            f"{index}. {finding.rule_id} {finding.rule_name} at {_where(finding)}: "
            f"{_one_line(finding.message)}. Fix: {finding.remediation}"
        )
        if size + len(line) > DENY_MESSAGE_MAX_CHARS:
            lines.append(f"... and {count - index + 1} more errors (see the webhook log)")
            break
        lines.append(line)
        size += len(line) + 1
    ids = ", ".join(dict.fromkeys(finding.rule_id for finding in errors))
    if ids:
        lines.append(f"Details: gpupolicy explain <rule> ({ids})")
    made_by = None if owners_read else _made_by(resource)
    if made_by and size + len(made_by) <= DENY_MESSAGE_MAX_CHARS:
        lines.append(made_by)
    return "\n".join(lines)


def _made_by(resource: Resource) -> str | None:
    """For a Pod a controller made, why its owner's suppression or declared class did not help: a
    Pod carries its pod template's metadata, not its owner's (docs/suppressions.md, docs/roles.md)."""
    if resource.kind != "Pod":
        return None
    owner = controller_of(resource.metadata)
    if owner is None:
        return None
    kind, name = owner["kind"] or "controller", owner["name"]
    return (
        f"This Pod was made by {kind} {name} from its pod template: a {IGNORE_ANNOTATION} annotation "
        f"or a {WORKLOAD_CLASS_LABEL} label on the {kind} (or its owner) does not reach it; write it in "
        "the pod template's metadata too"
    )


def _warning(finding: Finding) -> str:
    suffix = f" (gpupolicy explain {finding.rule_id})"
    head = f"{finding.rule_id} {finding.severity.label}: "
    text = _one_line(finding.message)
    room = WARNING_MAX_CHARS - len(head) - len(suffix)
    if len(text) > room:
        text = text[: max(room - 1, 0)].rstrip() + "…"
    return head + text + suffix


def format_warnings(findings: Sequence[Finding], *, internal_errors: Sequence[str] = ()) -> list[str]:
    """One warning per finding (≤ 120 characters each), at most 4,096 bytes in all; when they do
    not all fit, the last one says how many more the log holds."""
    candidates = [_warning(finding) for finding in findings]
    candidates += [
        f"gpupolicy: internal error in rule {rule_id}; the object was not fully checked"
        for rule_id in dict.fromkeys(internal_errors)
    ]
    warnings: list[str] = []
    total = 0
    for index, text in enumerate(candidates):
        size = len(text.encode())
        remaining = len(candidates) - index - 1
        reserve = 64 if remaining else 0  # room for the "N more" line
        if total + size + reserve > WARNINGS_MAX_BYTES:
            warnings.append(f"gpupolicy: {len(candidates) - index} more findings in the webhook log")
            break
        warnings.append(text)
        total += size
    return warnings


def audit_annotations(
    resource: Resource, policy: Policy, findings: Sequence[Finding], mode: Mode, allowed: bool
) -> dict[str, str]:
    """Keys are prefixed with the webhook's name by the API server (`<webhook>/policy-hash`)."""
    annotations = {
        "policy-hash": f"sha256:{policy.digest}",
        "policy-version": policy.version,
        "mode": mode.value,
        "decision": "allowed" if allowed else "denied",
    }
    labels = resource.labels
    experiment = labels.get(EXPERIMENT_LABEL)
    if isinstance(experiment, str) and experiment:
        annotations["experiment"] = experiment
        arm = labels.get(ARM_LABEL)
        if isinstance(arm, str) and arm:
            annotations["arm"] = arm
    if findings:
        ids = ",".join(dict.fromkeys(finding.rule_id for finding in findings))
        annotations["findings"] = ids[:1024]
    return annotations
