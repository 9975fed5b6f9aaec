"""CEL rules: ValidatingAdmissionPolicies with their bindings, and native CustomRule documents."""

from __future__ import annotations

from collections.abc import Sequence

from gpupolicy.custom.definitions import CustomRule
from gpupolicy.loading.documents import Resource


def is_cel_definition(resource: Resource) -> bool:
    return False


def cel_rules(resources: Sequence[Resource]) -> list[CustomRule]:
    return []
