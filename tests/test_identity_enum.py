"""Members of an IdentityEnum behave as Enum members do, hashed by identity."""

from __future__ import annotations

import pickle

from gpupolicy.core.identity_enum import IdentityEnum
from gpupolicy.kube.gpu import GpuKind
from gpupolicy.kube.inventory import Coverage
from gpupolicy.kube.pod_security_levels import Behaviour
from gpupolicy.kube.probes import PortStatus
from gpupolicy.kube.roles import Role


class Colour(IdentityEnum):
    RED = "red"
    GREEN = "green"


def test_members_hash_by_identity_and_keep_enum_semantics() -> None:
    assert hash(Colour.RED) == object.__hash__(Colour.RED)
    assert Colour("red") is Colour.RED and Colour["GREEN"] is Colour.GREEN
    assert Colour.RED != "red"  # a plain enum never equals its value
    assert {Colour.RED: 1}[Colour("red")] == 1
    assert Colour.RED in frozenset({Colour.RED}) and Colour.GREEN not in frozenset({Colour.RED})
    assert pickle.loads(pickle.dumps(Colour.GREEN)) is Colour.GREEN  # by name, as for any Enum


def test_the_hot_enums_are_identity_enums() -> None:
    for enum_type in (Role, Behaviour, PortStatus, GpuKind, Coverage):
        assert issubclass(enum_type, IdentityEnum)
        for member in enum_type:
            assert hash(member) == object.__hash__(member)
            assert pickle.loads(pickle.dumps(member)) is member
