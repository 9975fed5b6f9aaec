"""`@immutable`: the project's value classes, frozen for the type checker and cheap to make.

A `@dataclass(frozen=True)` sets each field in `__init__` through `object.__setattr__` (frozen
classes refuse plain assignment), an interpreted call per field: for a Finding or a Container,
made hundreds of times per admission, construction took 7 % of a webhook review (py-spy over
`review()`), and an eight-field frozen class took 1.9 µs to make against 0.33 µs for the same
class unfrozen (one-off `timeit`). Such a class is a plain slotted dataclass at run time, with
the same equality and hash (`unsafe_hash`: the hash a frozen dataclass generates, from the same
fields), and frozen where it matters, in `mypy --strict`: `dataclass_transform(frozen_default=True)`
makes every assignment to a field an error there (PEP 681).
https://docs.python.org/3/library/dataclasses.html#frozen-instances
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, eq_default=True, field_specifiers=(dataclasses.field,))
def immutable(cls: type[T], /) -> type[T]:
    """A slotted dataclass whose fields the type checker holds read-only. A class that writes
    its own `__hash__` keeps it."""
    # As dataclasses tells a written __hash__ from the None that a written __eq__ implies.
    written = cls.__dict__.get("__hash__", _UNSET)
    own_hash = not (written is _UNSET or (written is None and "__eq__" in cls.__dict__))
    return dataclasses.dataclass(slots=True, unsafe_hash=not own_hash)(cls)


_UNSET = object()
