"""core/immutable.py: a value class behaves as the frozen dataclass it replaces (equality, hash,
pickling, replace, slots), and mypy refuses an assignment to its fields."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import textwrap
from pathlib import Path
from typing import Any

from gpupolicy.core.immutable import immutable


@immutable
class Point:
    x: int
    label: str = "origin"
    notes: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenPoint:
    x: int
    label: str = "origin"
    notes: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, hash=False)


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


def test_equality_and_hash_are_the_frozen_dataclass_ones() -> None:
    point, frozen = Point(3, "a", {"n": 1}), FrozenPoint(3, "a", {"n": 1})
    assert point == Point(3, "a", {"other": 2})  # notes: not compared
    assert point != Point(4, "a")
    assert hash(point) == hash(frozen) == hash((3, "a"))
    assert {point: 1}[Point(3, "a")] == 1
    assert repr(point) == "Point(x=3, label='a', notes={'n': 1})"


def test_a_written_eq_keeps_a_hash_and_a_written_hash_is_kept() -> None:
    assert SpelledOut("A") == SpelledOut("a")
    assert hash(SpelledOut("A")) == hash(("A",))  # as a frozen dataclass with its own __eq__
    assert hash(OwnHash("anything")) == 7


def test_slots_pickle_copy_and_replace() -> None:
    point = Point(3, "a", {"n": 1})
    assert not hasattr(point, "__dict__")
    assert pickle.loads(pickle.dumps(point)) == point
    assert pickle.loads(pickle.dumps(point)).notes == {"n": 1}
    assert copy.deepcopy(point) == point
    assert dataclasses.replace(point, x=4) == Point(4, "a")
    assert dataclasses.is_dataclass(point) and [f.name for f in dataclasses.fields(point)] == [
        "x",
        "label",
        "notes",
    ]


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
