"""What a rule may read besides its object (`Context`): the policy, the inventory, and memos for
work that several rules share, once per evaluation or once per object rather than once per rule."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from gpupolicy.kube.gpu import claims_gpus_in_repository
from gpupolicy.kube.inventory import Inventory, workload_namespace
from gpupolicy.kube.pod_spec import PodTemplate, Workload, as_list, as_mapping, workload_of
from gpupolicy.kube.roles import Role, RoleDecision, decide, remote_access, service_selects
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.loading import Policy

_MISSING: Any = object()
_SERVER = Role.SERVER  # a module constant: an enum member is a class attribute lookup (70 ns on 3.11)
# Namespaces whose `namespace_memo`s are kept at once. What those hold (the views of a namespace's
# workloads, which PDB rules compare) is remade on demand; a streaming lint checks the PDBs of a
# namespace one after another, and with this bound keeps the views of a few namespaces, not of all.
NAMESPACES_REMEMBERED = 8


class Context:
    """What a rule may read besides its object: the policy, the inventory, and memos for work
    that several rules share (computed once per evaluation, or once per object, not once per rule)."""

    def __init__(
        self,
        policy: Policy,
        inventory: Inventory,
        resources: Sequence[Resource],
        *,
        said: set[Hashable] | None = None,
        subjects_only: bool = False,
    ) -> None:
        self.policy = policy
        self.inventory = inventory
        self.resources = resources
        # Only findings about the objects checked are kept (the webhook's admitted object): a rule
        # need not look for what it would say about another object (the ConfigMap a pod loads).
        self.subjects_only = subjects_only
        # What has been said once (gpupolicy/engine/unknowns.py): one run may evaluate several groups of
        # files, each under its own policy (gpupolicy/lint/scopes.py), and say it once in all.
        self.said: set[Hashable] = set() if said is None else said
        self._memo: dict[Any, Any] = {}
        self._subject_memo: dict[Any, Any] = {}
        self._namespace_memos: OrderedDict[str, dict[Hashable, Any]] = OrderedDict()
        # The object being checked and its workload view (_MISSING until asked for): see workload_of.
        self._subject: Resource | None = None
        self._subject_view: Any = _MISSING
        self.gpu = policy.gpu
        # Keys of the facts memoised on a Workload view: specific to this policy's settings.
        # Strings, whose hash is kept, not tuples hashed again at each of the dozen lookups per object.
        self._uses_key = f"uses-gpus:{id(policy.gpu)}"
        # What a template's claims ask for depends on this run's inventory as well.
        self._claims_key = f"claims-gpus:{id(self)}"
        self._role_key = f"role:{id(policy)}"

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        memo = self._memo
        value = memo.get(key, _MISSING)
        if value is _MISSING:
            value = memo[key] = compute()
        return value

    def namespace_memo(self, namespace: str, key: Hashable, compute: Callable[[], Any]) -> Any:
        """Like `memo`, for work about the objects of one namespace, kept for the few namespaces last
        asked about (NAMESPACES_REMEMBERED): the memos of a namespace are forgotten together, so
        that one never refers to views another remade."""
        memos = self._namespace_memos
        memo = memos.get(namespace)
        if memo is None:
            memo = memos[namespace] = {}
            if len(memos) > NAMESPACES_REMEMBERED:
                memos.popitem(last=False)
        else:
            memos.move_to_end(namespace)
        value = memo.get(key, _MISSING)
        if value is _MISSING:
            value = memo[key] = compute()
        return value

    def subject_memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Like `memo`, for work about the object being checked (several of its rules read it):
        forgotten when the engine moves to the next object. Keys may hold `id()`s of objects, which
        a streaming run frees after their findings and which Python then reuses for others."""
        memo = self._subject_memo
        value = memo.get(key, _MISSING)
        if value is _MISSING:
            value = memo[key] = compute()
        return value

    def next_subject(self, resource: Resource | None = None, view: Workload | None = None) -> None:
        """The engine starts on another object (`resource`; None for the bundle rules): per-object
        memos no longer apply. `view`: its workload view (`pod_spec.workload_of`), when the caller
        made it already (the webhook, to tell whether the object names GPUs)."""
        if self._subject_memo:
            self._subject_memo = {}
        self._subject = resource
        self._subject_view = view if view is not None else _MISSING

    def workload_of(self, resource: Resource) -> Workload | None:
        """`pod_spec.workload_of`; for the object being checked, one view made once, which the
        engine then gives its workload rules: what an object rule memoises on it (GP004, the
        role of a workload whose image is all capitals) is theirs too, and the view's identity
        (kind, name, labels ...) is read once per object, not once per rule that asks."""
        if resource is not self._subject:
            return workload_of(resource)
        view: Workload | None = self._subject_view
        if view is _MISSING:
            view = self._subject_view = workload_of(resource)
        return view

    def object_fact(self, resource: Resource, key: Hashable, compute: Callable[[], Any]) -> Any:
        """A fact computed from `resource` and the policy alone, kept on the resource for as long as
        the policy is the same. The cluster inventory keeps each version of an object across
        admissions (a watch event replaces it), so an experiment ConfigMap is parsed once per
        version rather than once per admission. Never for a fact that reads other objects: those
        change without the resource changing."""
        facts = resource.facts
        if facts is None:
            facts = resource.facts = {}
        entry = facts.get(key)
        if entry is None or entry[0] is not self.policy:
            entry = facts[key] = (self.policy, compute())
        return entry[1]

    def uses_gpus(self, workload: Workload) -> bool:
        cache = workload.cache
        uses: bool | None = cache.get(self._uses_key)
        if uses is None:
            uses = cache[self._uses_key] = any(
                self.template_uses_gpus(template, workload) for template in workload.templates
            )
        return uses

    def template_uses_gpus(self, template: PodTemplate, workload: Workload) -> bool:
        """`GpuCatalog.uses_gpus`, or a DRA claim of the template whose ResourceClaim or
        ResourceClaimTemplate (in the repository, or the cluster's inventory) asks for a GPU device
        class, whatever the claim is called (`decode-claim` of `gpu.intel.com`)."""
        if self.gpu.uses_gpus(template):
            return True
        if not template.spec.get("resourceClaims"):
            return False
        cache = template.cache
        found: bool | None = cache.get(self._claims_key)
        if found is None:
            found = cache[self._claims_key] = claims_gpus_in_repository(
                template, workload_namespace(workload), self.inventory, self.gpu.dra_device_classes
            )
        return found

    def role(self, workload: Workload) -> RoleDecision:
        """What the workload is (server, batch, dev, agent or plain workload), from evidence."""
        cache = workload.cache
        decision: RoleDecision | None = cache.get(self._role_key)
        if decision is None:
            workloads = self.policy.workloads
            decision = cache[self._role_key] = decide(
                workload,
                service_of=self._service_of,
                serving_classes=workloads.serving_classes,
                batch_classes=workloads.batch_classes,
                serving_kinds=workloads.serving_kinds,
            )
        return decision

    def is_serving(self, workload: Workload) -> bool:
        # Seven rules ask of each workload, whose role the engine decided before its rules ran:
        # read from the view's memo without a call to `role`.
        decision: RoleDecision | None = workload.cache.get(self._role_key)
        return (decision or self.role(workload)).role is _SERVER

    def _service_of(self, workload: Workload, template: PodTemplate) -> str | None:
        """The name of a Service of the inventory that selects the template's pods."""
        labels = template.labels
        if not labels:
            return None
        namespace = workload_namespace(workload)
        for service in self.inventory.list("Service", namespace):
            if service_selects(service.obj, labels) and not _remote_access_only(service.obj):
                return service.name
        return None


def _remote_access_only(service: Any) -> bool:
    """A Service whose every port is SSH's (an interactive box's, MPI workers'): it serves nothing."""
    ports = as_list(as_mapping(as_mapping(service).get("spec")).get("ports"))
    return bool(ports) and all(remote_access(port) for port in ports)
