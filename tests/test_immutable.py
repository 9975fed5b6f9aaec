"""core/immutable.py: a value class is a frozen msgspec Struct that behaves as the frozen dataclass
it replaced (equality, hash, pickling, replace, slots), or a slotted dataclass where a field needs
dataclass options; mypy refuses an assignment to its fields either way."""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib
import pickle
import textwrap
from pathlib import Path
from typing import Any, Generic, TypeVar

import msgspec
import pytest

from gpupolicy.core.immutable import field_names, field_values, immutable, mutable, replace

T = TypeVar("T")


@immutable
class Point:
    x: int
    label: str = "origin"
    tags: tuple[str, ...] = ()
    extra: frozenset[str] = dataclasses.field(default_factory=frozenset)


@immutable
class Counted:
    counts: dict[str, int] = dataclasses.field(default_factory=dict)


@immutable
class NotedPoint:
    x: int
    label: str = "origin"
    notes: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenNotedPoint:
    x: int
    label: str = "origin"
    notes: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)


@mutable
class Tally:
    name: str
    seen: list[str] = dataclasses.field(default_factory=list)
    total: int = 0


@mutable
class TallyWithCache:
    name: str
    cache: dict[str, int] = dataclasses.field(default_factory=dict, compare=False)


@immutable
class SpelledOut:
    key: str

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpelledOut) and other.key.lower() == self.key.lower()


@immutable
class OwnHash:
    key: str

    def __hash__(self) -> int:
        return 7


@immutable
class Boxed(Generic[T]):
    item: T

    def unboxed(self) -> T:
        return self.item


class _HandSetSlot:
    __slots__ = ("_memo",)


@immutable
class Memoised(_HandSetSlot):
    x: int


def test_a_value_class_is_a_frozen_struct_compared_and_hashed_by_its_fields() -> None:
    point = Point(3, "a", ("t",))
    assert isinstance(point, msgspec.Struct)
    assert point == Point(3, "a", ("t",)) and point != Point(4, "a", ("t",))
    assert point != (3, "a", ("t",), frozenset())
    assert hash(Point(3, "a")) == hash(Point(3, "a")) and {Point(3): 1}[Point(3)] == 1
    assert repr(point) == "Point(x=3, label='a', tags=('t',), extra=frozenset())"
    with pytest.raises(AttributeError):
        point.x = 4  # type: ignore[misc]
    assert Counted().counts == {} and Counted().counts is not Counted().counts  # a new dict each time


def test_a_field_left_out_of_equality_keeps_the_dataclass() -> None:
    point, frozen = NotedPoint(3, "a", {"n": 1}), FrozenNotedPoint(3, "a", {"n": 1})
    assert not isinstance(point, msgspec.Struct) and dataclasses.is_dataclass(point)
    assert point == NotedPoint(3, "a", {"other": 2})  # notes: not compared
    assert point != NotedPoint(4, "a")
    assert hash(point) == hash(frozen) == hash((3, "a"))
    assert repr(point) == "NotedPoint(x=3, label='a', notes={'n': 1})"


def test_a_mutable_class_is_changed_in_place_and_compared_by_its_fields() -> None:
    tally = Tally("a")
    tally.seen.append("x")
    tally.total += 1
    assert isinstance(tally, msgspec.Struct) and tally == Tally("a", ["x"], 1) != Tally("a")
    assert Tally("b").seen is not Tally("b").seen
    with pytest.raises(TypeError):
        hash(tally)  # as a @dataclass(slots=True): equal by value, so not hashable
    kept = TallyWithCache("a", {"x": 1})
    assert dataclasses.is_dataclass(kept) and kept == TallyWithCache("a") and not hasattr(kept, "__dict__")


def test_a_written_eq_keeps_a_hash_and_a_written_hash_is_kept() -> None:
    assert SpelledOut("A") == SpelledOut("a")
    assert hash(SpelledOut("A")) == hash(
        SpelledOut("A")
    )  # hashable, as a frozen dataclass with its own __eq__
    assert hash(OwnHash("anything")) == 7


def test_generic_value_classes_and_their_methods() -> None:
    boxed: Boxed[int] = Boxed(5)
    assert isinstance(boxed, msgspec.Struct) and boxed.unboxed() == 5 and Boxed(5) == boxed


def test_slots_set_by_hand_keep_the_dataclass() -> None:
    value = Memoised(1)
    object.__setattr__(value, "_memo", "kept")
    assert value._memo == "kept" and value == Memoised(1)


@pytest.mark.parametrize("value", [Point(3, "a", ("t",), frozenset({"n"})), NotedPoint(3, "a", {"n": 1})])
def test_slots_pickle_copy_and_replace(value: Point | NotedPoint) -> None:
    assert not hasattr(value, "__dict__")
    assert pickle.loads(pickle.dumps(value)) == value
    assert pickle.loads(pickle.dumps(value)).x == 3
    assert copy.deepcopy(value) == value and copy.copy(value) == value
    changed = replace(value, x=4)
    assert type(changed) is type(value) and changed.x == 4 and changed.label == "a"
    assert field_names(type(value))[:2] == ("x", "label")
    assert field_values(value) == {name: getattr(value, name) for name in field_names(type(value))}
    assert field_values({"x": 3}) is None


def test_mypy_refuses_to_assign_a_field(tmp_path: Path) -> None:
    from mypy import api

    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent(
            """
            from gpupolicy.core.immutable import immutable

            @immutable
            class Value:
                x: int

            value = Value(1)
            value.x = 2
            Value(x="not an int")
            """
        ),
        encoding="utf-8",
    )
    out, _, status = api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(probe)])
    assert status == 1
    assert 'Property "x" defined in "Value" is read-only' in out
    assert 'Argument "x" to "Value" has incompatible type "str"; expected "int"' in out


def test_value_classes_are_declared_immutable() -> None:
    """A new frozen dataclass would bring back the cost @immutable removed; these few keep theirs,
    each for its reason."""
    package = Path(__file__).resolve().parents[1] / "gpupolicy"
    kept = {
        "core/vocabulary.py",  # imports nothing from gpupolicy
        "policy/parameters.py",  # compared by identity (eq=False)
        "provenance/journal/segments.py",  # ordered (order=True), made once per journal read
    }
    frozen = {
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if "@dataclass(frozen=True" in path.read_text(encoding="utf-8") and path.name != "immutable.py"
    }
    assert frozen == kept


def test_value_classes_are_structs_but_for_those_a_dataclass_field_needs() -> None:
    """A class falls back to a dataclass silently when one of its fields asks for an option
    msgspec has no word for; the few that do are named here, so that a new one is a choice."""
    package = Path(__file__).resolve().parents[1] / "gpupolicy"
    dataclasses_kept = {
        "gpupolicy.core.findings.Finding",  # `extra` is outside equality and hashing
        "gpupolicy.kube.pod_spec.Container",  # fields filled by __post_init__, a cache outside equality
        "gpupolicy.kube.gpu.GpuDemand",  # parsed amounts kept outside equality
        "gpupolicy.kube.pod_security_levels.Standard",  # `allows` outside equality
        "gpupolicy.loading.inputs.Source",  # the render session outside equality
        "gpupolicy.webhook.review.ReviewEngine",  # plan and decision cache filled by __post_init__
        "gpupolicy.provenance.record.ProvenanceRecord",  # a base's slot set by hand
    }
    found: dict[str, bool] = {}
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(("gpupolicy", *path.relative_to(package).with_suffix("").parts))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(decorator, ast.Name) and decorator.id == "immutable"
                for decorator in node.decorator_list
            ):
                declared = getattr(importlib.import_module(module), node.name)
                found[f"{module}.{node.name}"] = issubclass(declared, msgspec.Struct)
    assert len(found) > 100
    assert {name for name, is_struct in found.items() if not is_struct} == dataclasses_kept
