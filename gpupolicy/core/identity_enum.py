"""Enums whose members hash by identity.

`enum.Enum.__hash__` is a Python method (`hash(self._name_)`), so every set or dict lookup of a
member is a Python call. The rules look members up many times per object (a workload's role in
the rule plan, a check's behaviour in a Pod Security level, a GPU resource's kind): members are
singletons that compare by identity, so `object.__hash__` gives the same answers in C. Only for
plain enums: a `str` or `int` mixin compares equal to its value and must hash like it.
"""

from __future__ import annotations

import enum


class IdentityEnum(enum.Enum):
    __hash__ = object.__hash__
