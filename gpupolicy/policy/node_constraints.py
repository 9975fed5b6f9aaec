"""Whether a pod's node constraints can ever hold, evaluated as sets of label values.

The scheduler requires the nodeSelector AND at least one of the required node-selector terms
(the terms are ORed; the expressions of one term are ANDed; an empty term matches no node).
https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#node-affinity
https://kubernetes.io/docs/reference/kubernetes-api/definitions/node-selector-term-v1/
Per key, each term (with the nodeSelector) narrows the values a node label may take: `In` and
nodeSelector equality intersect the allowed set, `NotIn` removes values, `Exists`/`DoesNotExist`
require presence or absence, `Gt`/`Lt` bound an integer value. An empty result means no node can
match that term.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import field
from decimal import Decimal
from typing import Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.immutable import immutable, mutable, replace
from gpupolicy.kube.pod_spec import PodTemplate, as_list, as_mapping
from gpupolicy.kube.quantities import parse_int64
from gpupolicy.kube.scheduling import REQUIRED_TERMS_PATH, node_selector, required_terms, required_values
from gpupolicy.policy.node_pools import NodePool


@mutable
class _KeyState:
    allowed: set[str] | None = None  # None: any value
    excluded: set[str] = field(default_factory=set)
    exists: bool = False
    absent: bool = False
    gt: int | None = None
    lt: int | None = None
    said: list[tuple[str, JsonPath]] = field(default_factory=list)  # (how it reads, where)


@immutable
class Contradiction:
    key: str | None  # the label key that made a term impossible (None: an empty term, or every term)
    path: JsonPath  # the expression that made the term impossible, or the list of terms
    term_index: int | None  # None: the nodeSelector against every term
    reason: str  # reads after "<where>: "
    where: str = ""  # "required term 1", "required node affinity"
    fatal: bool = True  # no required term can match: the pod can never be scheduled


# The positive operators: a node must carry the label for the expression to hold.
POSITIVE_OPERATORS = ("In", "Exists", "Gt", "Lt")


def _as_int(value: str) -> int | None:
    return parse_int64(value)  # strconv.ParseInt, as the scheduler reads Gt/Lt values


def _within(value: str, state: _KeyState) -> bool:
    if state.gt is None and state.lt is None:
        return True
    number = _as_int(value)
    if number is None:
        return False
    return (state.gt is None or number > state.gt) and (state.lt is None or number < state.lt)


def _impossible(state: _KeyState) -> str | None:
    if state.exists and state.absent:
        return "the label must both exist and not exist"
    if state.allowed is not None:
        if not state.allowed:
            return "the allowed values have nothing in common"
        remaining = {value for value in state.allowed - state.excluded if _within(value, state)}
        if not remaining:
            return "every allowed value is excluded"
    if state.gt is not None and state.lt is not None and state.lt - state.gt <= 1:
        return f"no integer is > {state.gt} and < {state.lt}"
    return None


def _apply(state: _KeyState, operator: str, values: list[str]) -> str | None:
    """Narrow `state`; return a reason when the expression alone can match nothing."""
    if operator == "In":
        if not values:
            return "In with no values matches no node"
        state.allowed = set(values) if state.allowed is None else state.allowed & set(values)
        state.exists = True
    elif operator == "NotIn":
        state.excluded |= set(values)
    elif operator == "Exists":
        state.exists = True
    elif operator == "DoesNotExist":
        state.absent = True
    elif operator in ("Gt", "Lt"):
        bound = _as_int(values[0]) if len(values) == 1 else None
        if bound is None:
            return f"{operator} needs exactly one integer value"
        state.exists = True
        if operator == "Gt":
            state.gt = bound if state.gt is None else max(state.gt, bound)
        else:
            state.lt = bound if state.lt is None else min(state.lt, bound)
    return None


def _describe(operator: str, values: list[str]) -> str:
    if operator in ("Exists", "DoesNotExist"):
        return operator
    if operator in ("Gt", "Lt"):
        return f"{operator} {', '.join(values)}"
    return f"{operator} [{', '.join(values)}]"


def _term_contradiction(
    selector: Mapping[str, Any],
    term: Any,
    term_path: JsonPath,
    base: JsonPath,
    index: int,
    foreign_label: Callable[[str], str | None] | None,
) -> Contradiction | None:
    """Why no node can satisfy `term` together with `selector` (None when one can)."""
    term = as_mapping(term)
    expressions = as_list(term.get("matchExpressions"))
    if not expressions and not as_list(term.get("matchFields")):
        return Contradiction(
            None, term_path, index, "an empty term (no matchExpressions, no matchFields) matches no node"
        )
    states: dict[str, _KeyState] = {}
    for key, value in selector.items():
        state = states.setdefault(str(key), _KeyState())
        state.allowed, state.exists = {str(value)}, True
        state.said.append((f"nodeSelector {key}={value}", (*base, "nodeSelector", str(key))))
    for expr_index, expr in enumerate(expressions):
        expr = as_mapping(expr)
        key, operator = str(expr.get("key", "")), str(expr.get("operator", ""))
        values = [str(item) for item in as_list(expr.get("values"))]
        path = (*term_path, "matchExpressions", expr_index)
        foreign = foreign_label(key) if foreign_label is not None and operator in POSITIVE_OPERATORS else None
        if foreign is not None:
            return Contradiction(key, path, index, f"{key} {_describe(operator, values)}: {foreign}")
        state = states.setdefault(key, _KeyState())
        state.said.append((f"{key} {_describe(operator, values)}", path))
        reason = _apply(state, operator, values) or _impossible(state)
        if reason is not None:
            previous = [said for said, _ in state.said[:-1]]
            both = f"{'; '.join(previous)} and {state.said[-1][0]}" if previous else state.said[-1][0]
            return Contradiction(key, path, index, f"{both}: {reason}")
    return None


def node_contradictions(
    template: PodTemplate, foreign_label: Callable[[str], str | None] | None = None
) -> Iterator[Contradiction]:
    """What in the required node affinity can never hold, read as the scheduler reads it: the pod
    needs its nodeSelector AND at least one required term (the terms are ORed).

    - A term that no node can match by itself (`In []`, In and NotIn of one value, an empty term, a
      label `foreign_label` names as impossible for this pod) is reported on its own: fatal when no
      other term can match either, else a dead alternative (the pod still schedules).
    - Terms that are fine alone but not with the nodeSelector make the pod unschedulable only when
      that holds for every term: then one Contradiction says so (at the expression when one term is
      involved, at the list of terms when several are).
    """
    terms = required_terms(template)
    if not terms:
        return
    selector = node_selector(template)
    base = template.path
    dead: list[Contradiction] = []
    conflicts: list[Contradiction] = []
    live = False
    for index, term in enumerate(terms):
        term_path = (*base, *REQUIRED_TERMS_PATH, index)
        own = _term_contradiction({}, term, term_path, base, index, foreign_label)
        if own is not None:
            dead.append(own)
            continue
        against = _term_contradiction(selector, term, term_path, base, index, None) if selector else None
        if against is None:
            live = True
        else:
            conflicts.append(against)
    for found in dead:
        alive = "" if not live else "; the other terms can still place the pod, so this alternative is dead"
        yield replace(
            found, where=f"required term {found.term_index}", reason=found.reason + alive, fatal=not live
        )
    if not live and conflicts:
        yield _against_every_term(conflicts, base, others_dead=bool(dead))


def _against_every_term(
    conflicts: list[Contradiction], base: JsonPath, *, others_dead: bool
) -> Contradiction:
    """The nodeSelector rules out every term that could otherwise match: one finding for them all."""
    if len(conflicts) == 1:
        [found] = conflicts
        return replace(found, where=f"required term {found.term_index}")
    which = "every required term that could otherwise match" if others_dead else "every required term"
    reasons = "; ".join(f"term {found.term_index}: {found.reason}" for found in conflicts)
    return Contradiction(
        None,
        (*base, *REQUIRED_TERMS_PATH),
        None,
        f"the nodeSelector rules out {which} ({reasons})",
        where="required node affinity",
    )


PRODUCT_LABEL = "nvidia.com/gpu.product"


def _base_product(value: str) -> str:
    """GFD appends -SHARED (time-slicing/MPS) and -MIG-<profile> (MIG single strategy) to the product."""
    return value.split("-MIG-", 1)[0].removesuffix("-SHARED")


@immutable
class PoolConflict:
    path: JsonPath
    reason: str
    resource: str
    count: Decimal | None = None  # set when the count, not the resource, is what no pool offers


def pool_conflicts(
    template: PodTemplate, pools: Sequence[NodePool], demands: Mapping[str, Decimal]
) -> Iterator[PoolConflict]:
    """The node-pool catalogue against the pod: when every product the pod requires is a pool of the
    catalogue, those pools must advertise each GPU resource the pod asks for, in that number per node.
    `demands` maps whole-GPU or shared resource names to the pod's count. Products the catalogue does
    not know are not judged."""
    wanted = required_values(template, PRODUCT_LABEL)
    if wanted is None or not demands:
        return
    values, path = wanted
    products = {_base_product(value) for value in values}
    matched = [pool for pool in pools if pool.gpu_product in products]
    if not products or products - {str(pool.gpu_product) for pool in matched}:
        return
    shown = ", ".join(sorted(values))
    for resource, count in sorted(demands.items()):
        offering = [pool for pool in matched if pool.resource == resource]
        if not offering:
            advertised = ", ".join(sorted({pool.resource for pool in matched}))
            names = ", ".join(sorted(pool.name for pool in matched))
            reason = f"{PRODUCT_LABEL} {shown} nodes (pool {names}) advertise {advertised}, not {resource}"
            yield PoolConflict(path, reason, resource)
            continue
        per_node = [pool.gpus_per_node for pool in offering if pool.gpus_per_node is not None]
        if per_node and count > max(per_node):
            yield PoolConflict(
                path,
                f"the pod needs {count} {resource} but {PRODUCT_LABEL} {shown} nodes have at most {max(per_node)}",
                resource,
                count,
            )
