"""`data.inventory` for Rego rules, in Gatekeeper's shape: the other objects of the bundle (lint)
or of the cluster's caches (the webhook), of the kinds the policy names.

    data.inventory.cluster[<apiVersion>][<kind>][<name>]               cluster-scoped objects
    data.inventory.namespace[<namespace>][<apiVersion>][<kind>][<name>] namespaced objects

(https://open-policy-agent.github.io/gatekeeper/website/docs/sync). Gatekeeper replicates the
kinds a `Config` lists under `sync.syncOnly`; here they are `customRules.inventoryKinds`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gpupolicy.kube.inventory import Inventory


def inventory_document(inventory: Inventory, kinds: Iterable[str]) -> dict[str, Any]:
    cluster: dict[str, Any] = {}
    namespaced: dict[str, Any] = {}
    for kind in kinds:
        for resource in inventory.list(kind):
            obj = resource.obj
            if not isinstance(obj, dict):
                continue
            api_version = str(obj.get("apiVersion", "v1"))
            name = resource.name or ""
            scope = namespaced.setdefault(resource.namespace, {}) if resource.namespace else cluster
            scope.setdefault(api_version, {}).setdefault(kind, {})[name] = obj
    return {"cluster": cluster, "namespace": namespaced}
