"""`@immutable`: the project's value classes, frozen and cheap both to declare and to make.

Such a class is a frozen `msgspec.Struct` (https://jcristharif.com/msgspec/structs.html): slots,
an `__init__`, `__eq__`, `__hash__` and `__repr__` written in C, and assignment refused at run
time as in `mypy --strict` (`dataclass_transform(frozen_default=True)`, PEP 681). Two costs of
the dataclass it replaces are why:

- declaring: `dataclasses.dataclass` writes each class's methods as Python source and compiles
  it; the 76 value classes `gpupolicy lint one.yaml` imports took 50-75 ms of its start-up (a
  third of a pre-commit run), against a few ms as Structs;
- making: a frozen dataclass sets each field through `object.__setattr__` (an eight-field class
  took 1.9 µs to make against 0.33 µs unfrozen; a Struct takes 0.16 µs), and findings and
  containers are made hundreds of times per admission.

Equality and hashing are by field values, as a frozen dataclass's are (a Struct's hash is not
`hash(tuple_of_fields)`, so no code may rely on that number). A class that needs what only a
dataclass field says — a field left out of equality, hashing or `__init__`, or a
`__post_init__` that fills fields — stays a slotted dataclass, frozen for the type checker only
(as before this module used msgspec), and so does a class built on another class whose slots
it sets by hand. `replace()` below copies either kind.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Generic, TypeVar, cast, dataclass_transform

import msgspec

T = TypeVar("T")

# Attributes the class statement made for a class with a __dict__; a Struct has slots instead.
_NOT_COPIED = frozenset({"__dict__", "__weakref__"})


@dataclass_transform(
    frozen_default=True, eq_default=True, field_specifiers=(dataclasses.field, msgspec.field)
)
def immutable(cls: type[T], /) -> type[T]:
    """The class as a frozen Struct, or as a slotted dataclass when a field needs dataclass
    options. A class that writes its own `__hash__` keeps it."""
    return _struct_or_dataclass(cls, frozen=True)


@dataclass_transform(eq_default=True, field_specifiers=(dataclasses.field, msgspec.field))
def mutable(cls: type[T], /) -> type[T]:
    """A class of fields changed in place (a report being filled, a load's results): a Struct
    that is not frozen (compared by its fields, not hashable, as a `@dataclass(slots=True)`), or
    that dataclass when a field needs dataclass options."""
    return _struct_or_dataclass(cls, frozen=False)


def _struct_or_dataclass(cls: type[T], *, frozen: bool) -> type[T]:
    namespace = _struct_namespace(cls, frozen=frozen)
    if namespace is None:
        return _as_dataclass(cls) if frozen else dataclasses.dataclass(slots=True)(cls)
    bases = tuple(getattr(cls, "__orig_bases__", ()))  # Generic[T] as written
    struct = types.new_class(
        cls.__name__, (*bases, msgspec.Struct), {"frozen": frozen}, lambda body: body.update(namespace)
    )
    return cast("type[T]", struct)


def replace(value: T, /, **changes: Any) -> T:
    """A copy of a value class (or any dataclass) with some fields changed."""
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.replace(value, **changes)
    return cast("T", dataclasses.replace(cast(Any, value), **changes))


def field_names(kind: type) -> tuple[str, ...]:
    """A value class's (or dataclass's) field names, in order."""
    if issubclass(kind, msgspec.Struct):
        return kind.__struct_fields__
    return tuple(item.name for item in dataclasses.fields(cast(Any, kind)))


def field_values(value: object) -> dict[str, Any] | None:
    """A value class's (or dataclass's) fields by name, or None for anything else."""
    if isinstance(value, msgspec.Struct) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        return {name: getattr(value, name) for name in field_names(type(value))}
    return None


def _struct_namespace(cls: type, *, frozen: bool) -> dict[str, Any] | None:
    """The class body as a Struct's, or None when it says something only a dataclass can."""
    if "__post_init__" in cls.__dict__ or any(
        base is not object for base in cls.__bases__ if base is not Generic
    ):
        return None  # fields filled after __init__, or slots of a base class set by hand
    namespace: dict[str, Any] = {}
    for name, value in cls.__dict__.items():
        if name in _NOT_COPIED:
            continue
        if isinstance(value, dataclasses.Field):
            converted = _struct_field(value)
            if converted is None:
                return None
            value = converted
        namespace[name] = value
    if frozen and "__eq__" in namespace and namespace.get("__hash__") is None:
        # Python drops the hash of a class that writes __eq__ alone; a frozen dataclass keeps a
        # hash of its fields, and so does this.
        namespace["__hash__"] = msgspec.Struct.__hash__
    return namespace


def _struct_field(spec: dataclasses.Field[Any]) -> Any | None:
    """`dataclasses.field(default=…)` or `(default_factory=…)` as msgspec's; None for any other
    option (left out of equality, hashing, repr or __init__; metadata)."""
    if not (spec.init and spec.repr and spec.compare and spec.hash is None and not spec.metadata):
        return None
    if spec.default_factory is not dataclasses.MISSING:
        return msgspec.field(default_factory=spec.default_factory)
    if spec.default is not dataclasses.MISSING:
        return msgspec.field(default=spec.default)
    return msgspec.field()


def _as_dataclass(cls: type[T]) -> type[T]:
    # As dataclasses tells a written __hash__ from the None that a written __eq__ implies.
    written = cls.__dict__.get("__hash__", _UNSET)
    own_hash = not (written is _UNSET or (written is None and "__eq__" in cls.__dict__))
    return dataclasses.dataclass(slots=True, unsafe_hash=not own_hash)(cls)


_UNSET = object()
