"""An admitted object nested as deep as the webhook's JSON parser accepts (orjson: 1,024 levels)
is recorded, not a RecursionError out of the provenance redaction (an HTTP 500 instead of a
decision). Found by bench/soak.py: a custom field 800 levels deep under a GPU pod template."""

from __future__ import annotations

import json
from typing import Any

from gpupolicy.policy.loading import default_policy
from gpupolicy.provenance import build_record
from gpupolicy.provenance.redaction import MAX_REDACTED_DEPTH, TOO_DEEP, redact
from tests.provenance.samples import admission_request, deployment, report_for


def nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"n": [value]}
    return value


def depth(value: Any) -> int:
    text = json.dumps(value)
    deepest = level = 0
    for character in text:
        if character in "[{":
            level += 1
            deepest = max(deepest, level)
        elif character in "]}":
            level -= 1
    return deepest


def test_a_deep_custom_field_is_recorded() -> None:
    policy = default_policy()
    obj = deployment()
    obj["spec"]["template"]["spec"]["x-custom"] = nested(450)  # 900 levels of JSON
    record = build_record(admission_request(obj, uid="deep-1"), obj, report_for(obj, policy), policy)
    assert record.uid == "deep-1" and record.template_hash.startswith("sha256:")


def test_redaction_cuts_what_nests_too_deep() -> None:
    redacted = redact({"a": nested(1000)})
    assert depth(redacted) <= MAX_REDACTED_DEPTH + 1
    assert TOO_DEEP in json.dumps(redacted)
    shallow = {"a": nested(10)}
    assert redact(shallow) == shallow
