"""The object's controller: the ownerReference with `controller: true`, which at most one may
have. What a controller makes from an owner's template (a Deployment's ReplicaSet, a ReplicaSet's
Pods, a LeaderWorkerSet's StatefulSets, an InferenceService's Deployment) is rolled out by that
owner, and carries the owner's template rather than the owner's metadata.
https://kubernetes.io/docs/concepts/overview/working-with-objects/owners-dependents/
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpupolicy.kube.pod_spec import as_list, as_mapping


def controller_of(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The controller's reference (`api_version`, `kind`, `name`, `uid`: each None where not
    written as text), or None for an object no controller owns."""
    for reference in as_list(metadata.get("ownerReferences")):
        reference = as_mapping(reference)
        if reference.get("controller") is True:
            return {
                "api_version": _text(reference.get("apiVersion")),
                "kind": _text(reference.get("kind")),
                "name": _text(reference.get("name")),
                "uid": _text(reference.get("uid")),
            }
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
