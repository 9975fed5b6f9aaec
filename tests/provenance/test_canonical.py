"""Canonical JSON by orjson is the standard library's text, and the template hash computed in
remembered parts is the hash of its definition: stored records and their hashes do not change."""

from __future__ import annotations

import hashlib
import json
import random
import struct
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpupolicy.kube.pod_spec import workload_of
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy
from gpupolicy.provenance.canonical import (
    canonical_json,
    canonical_json_with_fragments,
    content_bytes,
    float_free_json,
    fragment,
    sha256,
    stdlib_canonical_json,
)
from gpupolicy.provenance.record import ProvenanceRecord, build_record
from gpupolicy.provenance.redaction import REDACTED, redact
from gpupolicy.provenance.redaction_memo import redacted_fields, redacted_record
from gpupolicy.provenance.template_hash import template_hash
from tests.provenance.samples import DEPLOYMENT, SECRET_TOKEN, admission_request, deployment, report_for

EXAMPLES = Path(__file__).resolve().parents[2] / "gpupolicy" / "rules" / "examples"


def _defined_template_hash(templates: Any) -> str:
    """The template hash as docs/provenance.md defines it (and as it was computed before)."""
    canonical = stdlib_canonical_json(
        [{"role": t.role, "metadata": redact(t.metadata), "spec": redact(t.spec)} for t in templates]
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def _random_float(rng: random.Random) -> float:
    choice = rng.randrange(3)
    if choice == 0:
        value: float = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        return value if value == value and abs(value) != float("inf") else 0.5
    if choice == 1:
        return rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30)
    return round(rng.uniform(0, 1000), rng.randint(0, 8))


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    strings = ["", "a", "é", "\u2028", "\x00\x1f\x7f", '"\\', "1e-5", "0.00001", "Z", "😀", "\uffff", "ǅ"]
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return rng.choice(strings) + rng.choice(strings)
    if kind == 1:
        return rng.choice([0, 1, -1, 2**63 - 1, 2**64 - 1, -(2**63), 10**30])
    if kind == 2:
        return _random_float(rng)
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return rng.choice([datetime(2026, 12, 6, tzinfo=UTC), date(2026, 12, 6)])
    if kind == 5:
        return rng.choice(strings)
    if kind in (6, 7):
        return {rng.choice(strings) + str(n): _random_value(rng, depth + 1) for n in range(rng.randrange(4))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_canonical_json_is_the_standard_librarys_text() -> None:
    rng = random.Random(20261206)
    for _ in range(20000):
        value = _random_value(rng)
        assert canonical_json(value) == stdlib_canonical_json(value), repr(value)
    for _ in range(20000):
        value = _random_float(rng)
        assert canonical_json([value, {"f": value}]) == stdlib_canonical_json([value, {"f": value}])


def test_content_bytes_tell_types_apart() -> None:
    values: list[Any] = [1, 1.0, True, "1", None, [1], {"a": 1}, {"a": 1.0}, -0.0, 0.0]
    contents = [content_bytes(value) for value in values]
    assert None not in contents
    assert len(set(contents)) == len(values)
    assert content_bytes({"t": datetime(2026, 12, 6, tzinfo=UTC)}) is None  # left to the definition


@pytest.mark.parametrize("size", [0, 1, 2046, 2047, 2048, 4095, 10_000])
def test_sha256_is_hashlibs(size: int) -> None:
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    assert sha256(data) == hashlib.sha256(data).digest()


def _example_templates() -> list[Any]:
    found = []
    for path in sorted(EXAMPLES.glob("*/*.yaml")):
        try:
            objects = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except yaml.YAMLError:  # the examples of input rules (GP001 …) do not load
            continue
        for index, obj in enumerate(objects):
            if isinstance(obj, dict):
                workload = workload_of(Resource(obj, file=str(path), doc_index=index))
                if workload is not None and workload.templates:
                    found.append(workload.templates)
    return found


def test_template_hash_is_its_definition_on_every_rule_example() -> None:
    every = _example_templates()
    assert len(every) > 100
    for templates in every:
        assert template_hash(templates) == _defined_template_hash(templates)
        assert template_hash(templates) == _defined_template_hash(templates)  # remembered parts


def test_template_hash_tells_values_of_other_types_apart() -> None:
    """Templates that differ in a value's type only (`1`, `1.0`, `true`) each get their own hash,
    remembered parts or not."""
    hashes = set()
    for value in (1, 1.0, True, "1"):
        obj = json.loads(json.dumps(DEPLOYMENT))
        obj["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = value
        workload = workload_of(Resource(obj, file="<test>", doc_index=0))
        assert workload is not None
        assert template_hash(workload.templates) == _defined_template_hash(workload.templates)
        hashes.add(template_hash(workload.templates))
    assert len(hashes) == 4


def test_redacted_fields_are_redact_of_the_record() -> None:
    """Fields redacted one by one, lists and mappings remembered, are `redact` of the whole,
    the first time and from the memo."""
    from tests.provenance.test_record import PATTERN_EXAMPLES

    rng = random.Random(1206)
    leaves: list[Any] = [*PATTERN_EXAMPLES, "password", "hf-token", "", 7, 1.0, True, None]
    names = ["placement", "gpu", "user", "findings", "token", "password", "env", "git", "images"]
    keys = ["name", "key", "value", "values", "token", "env", "secretName", "password", "image"]

    def make(depth: int) -> Any:
        if depth > 3 or rng.random() < 0.3:
            return rng.choice(leaves)
        if rng.random() < 0.5:
            return [make(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(keys): make(depth + 1) for _ in range(rng.randrange(4))}

    for _ in range(3000):
        fields = {name: make(0) for name in rng.sample(names, 4)}
        expected = redact(fields)
        assert redacted_fields(fields) == expected
        assert redacted_fields(fields) == expected
        for _ in range(2):  # the first time and from the memo
            redacted = redacted_record(fields)
            assert redacted.fields == expected
            assert redacted.body_json in (None, stdlib_canonical_json(expected))


def _holds_float_by_definition(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_float_by_definition(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_float_by_definition(item) for item in value)
    return isinstance(value, float)


def test_float_free_json_is_canonical_json_of_what_holds_no_float() -> None:
    """Written without the scan for small floats only where no float is: any float, at any depth,
    leaves the text to canonical_json (as does a type orjson does not write)."""
    rng = random.Random(61206)
    written = 0
    for _ in range(20000):
        value = _random_value(rng)
        text = float_free_json(value)
        if text is None:
            assert _holds_float_by_definition(value) or content_bytes(value) is None
        else:
            written += 1
            assert not _holds_float_by_definition(value)
            assert text.decode() == stdlib_canonical_json(value), repr(value)
    assert written > 5000
    assert float_free_json([[[{"a": [1, 2, {"b": 1e-5}]}]]]) is None
    assert float_free_json({"deep": _nested(3000, 0.5)}) is None  # a loop, not recursion
    assert float_free_json({"deep": _nested(3000, 1)}) is None  # orjson refuses past 255 levels


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_canonical_json_with_fragments_is_canonical_json_of_the_whole() -> None:
    rng = random.Random(71206)
    compared = 0
    for _ in range(5000):
        plain = {f"p{n}": _random_value(rng) for n in range(rng.randrange(4))}
        parts = {f"{rng.choice('azPm_')}{n}": _random_value(rng) for n in range(rng.randrange(4))}
        texts = {name: float_free_json(value) for name, value in parts.items()}
        if None in texts.values():
            continue
        whole = {**plain, **parts}
        text = canonical_json_with_fragments(plain, {n: fragment(t) for n, t in texts.items() if t})
        if text is None:
            assert any(_holds_float_by_definition(v) or content_bytes(v) is None for v in plain.values())
        else:
            compared += 1
            assert text == stdlib_canonical_json(whole)
    assert compared > 1000


def test_a_record_writes_the_values_it_holds(gpu_policy: Policy) -> None:
    """The body's JSON written while the record was assembled serves only while the record holds
    the very values it was written from."""
    obj = deployment()
    record = build_record(admission_request(obj), obj, report_for(obj, gpu_policy), gpu_policy)
    assert getattr(record, "_written_body", None) is not None  # written from the memo's parts
    assert record.body_json() == stdlib_canonical_json(record.body())
    object.__setattr__(record, "findings", [{"message": "changed", "weight": 1e-5}])
    assert record.body_json() == stdlib_canonical_json(record.body())
    assert '"weight":1e-05' in record.body_json()
    copied = ProvenanceRecord.from_dict(record.to_dict())
    assert copied == record
    assert copied.body_json() == record.body_json()
    assert "_written_body" not in record.to_dict()


@pytest.mark.parametrize(
    ("text", "small_float"),
    [
        (b'{"uid":"3f2a1b9e-0000-4000"}', False),  # a uid: orjson's text serves
        (b'{"name":"image-not-pinned"}', False),
        (b'{"a":"10.0000"}', False),
        (b"[1e-5]", True),
        (b"1e-5", True),
        (b'{"a":0.00001}', True),
        (b'{"a":-1.5e-7}', True),
        (b'{"a":"x:1e-5"}', True),  # a string that looks like one: the standard library writes it
    ],
)
def test_small_floats_are_told_from_strings(text: bytes, small_float: bool) -> None:
    from gpupolicy.provenance.canonical import _may_hold_small_float

    assert _may_hold_small_float(text) is small_float


def test_the_memos_count_their_keys_and_stay_in_their_budget() -> None:
    """Keyed by content (bytes as long as the part's JSON), the memos count those bytes: many
    large distinct parts never take them past their budget."""
    from gpupolicy.provenance import redaction_memo

    for index in range(400):
        big = {"node_selector": {f"label-{index}-{n}": "x" * 200 for n in range(100)}}
        assert redacted_fields({"placement": [big]}) == redact({"placement": [big]})
        redaction_memo.redacted_json(big)
    for memo in (
        redaction_memo._REDACTED_FIELDS,
        redaction_memo._REDACTED_ITEMS,
        redaction_memo._REDACTED_JSON,
    ):
        assert 0 < memo.nbytes <= memo.max_bytes
        assert memo.nbytes >= sum(len(key if isinstance(key, bytes) else key[1]) for key in memo._data)


def test_items_of_a_new_list_field_are_remembered_under_its_name() -> None:
    """A list field not remembered whole takes the items it shares with others from the memo of
    items: each item redacted as `redact` of the whole field redacts it, under the field's name."""
    shared = {"rule": "GP108", "message": "unknown: the cluster's GPU node pools " * 8}
    secret = {"rule": "GP901", "message": f"Pod llm-0 has HF_TOKEN={SECRET_TOKEN}"}
    first = {"findings": [shared, {"rule": "GP901", "message": "Pod llm-1"}]}
    second = {"findings": [shared, secret], "password": [["hunter22"], shared]}
    third = {"images": [["hunter22"], shared], "findings": [secret, shared]}
    for fields in (first, second, third, second, third):
        redacted = redacted_record(fields)
        assert redacted.fields == redact(fields)
        assert redacted.body_json == stdlib_canonical_json(redact(fields))
    assert SECRET_TOKEN not in str(redacted_fields(second))
    assert redacted_fields(second)["password"][0] == [REDACTED]
    assert redacted_fields(third)["images"][0] == ["hunter22"]
