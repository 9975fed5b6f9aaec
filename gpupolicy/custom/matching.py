"""Which objects a custom rule judges: Gatekeeper's `match` and a VAP's `matchResources`, as one
`ObjectMatch`.

Gatekeeper (https://open-policy-agent.github.io/gatekeeper/website/docs/howto#the-match-field):
`kinds` [{apiGroups, kinds}], `namespaces` and `excludedNamespaces` (a trailing or leading `*`
is a glob), `labelSelector`, `namespaceSelector` (read on the object's Namespace from the
inventory; an unknown namespace does not match a selector), `scope` (*, Cluster, Namespaced),
`name`. A ValidatingAdmissionPolicy's `resourceRules` name plural resources, mapped to kinds here
by the usual plural of the kind (`deployments` is Deployment; `*` any).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gpupolicy.core.immutable import immutable
from gpupolicy.custom.definitions import Check, CustomRule, Metadata
from gpupolicy.kube.pod_spec import as_list, as_mapping
from gpupolicy.kube.selectors import selector_matches

ANY = "*"


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def plural_of(kind: str) -> str:
    """The resource name Kubernetes gives a kind (the rule of most kinds; a VAP names resources)."""
    lower = kind.lower()
    if lower.endswith("s") or lower.endswith("x") or lower.endswith("ch") or lower.endswith("sh"):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def _glob_matches(pattern: str, value: str) -> bool:
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    if pattern.startswith("*"):
        return value.endswith(pattern[1:])
    return pattern == value


@immutable
class ObjectMatch:
    # (api group, kind or plural resource) pairs; None matches every object. `by_resource`: the
    # second item is a plural resource name (VAP) rather than a kind (Gatekeeper).
    kinds: frozenset[tuple[str, str]] | None = None
    by_resource: bool = False
    namespaces: tuple[str, ...] | None = None
    excluded_namespaces: tuple[str, ...] = ()
    label_selector: Mapping[str, Any] | None = None
    namespace_selector: Mapping[str, Any] | None = None
    scope: str = ANY
    name: str | None = None

    def kind_matches(self, obj: Mapping[str, Any]) -> bool:
        if self.kinds is None:
            return True
        group = group_of(str(obj.get("apiVersion", "")))
        kind = str(obj.get("kind", ""))
        wanted = plural_of(kind) if self.by_resource else kind
        return any(g in (ANY, group) and k in (ANY, wanted) for g, k in self.kinds)

    def __call__(self, obj: Mapping[str, Any], namespace: Mapping[str, Any] | None) -> bool:
        if not self.kind_matches(obj):
            return False
        metadata = as_mapping(obj.get("metadata"))
        ns = metadata.get("namespace")
        if (self.scope == "Cluster" and ns) or (self.scope == "Namespaced" and not ns):
            return False
        if self.name is not None and not _glob_matches(self.name, str(metadata.get("name", ""))):
            return False
        if self.namespaces is not None and not any(_glob_matches(p, str(ns or "")) for p in self.namespaces):
            return False
        if ns and any(_glob_matches(pattern, str(ns)) for pattern in self.excluded_namespaces):
            return False
        if self.label_selector is not None and not selector_matches(
            self.label_selector, as_mapping(metadata.get("labels"))
        ):
            return False
        if self.namespace_selector is not None:
            labels = as_mapping(as_mapping((namespace or {}).get("metadata")).get("labels"))
            if namespace is None or not selector_matches(self.namespace_selector, labels):
                return False
        return True

    def matches_pods(self) -> bool:
        """Whether the rule is written for Pods (so it also judges workloads' pod templates)."""
        if self.kinds is None:
            return False
        pod = "pods" if self.by_resource else "Pod"
        return any(group in ("", ANY) and kind == pod for group, kind in self.kinds)


def rule_matching(
    metadata: Metadata, match: Mapping[str, Any], check: Check, *, reads_inventory: bool = False
) -> CustomRule:
    """A rule that judges the objects Gatekeeper's `match` selects (and pod templates, for Pods)."""
    selected = gatekeeper_match(match)
    return CustomRule(
        metadata=metadata,
        matches=selected,
        check=check,
        reads_inventory=reads_inventory,
        expands_pods=selected.matches_pods(),
    )


def gatekeeper_match(match: Mapping[str, Any]) -> ObjectMatch:
    kinds: set[tuple[str, str]] | None = None
    if "kinds" in match:
        kinds = set()
        for entry in as_list(match.get("kinds")):
            entry = as_mapping(entry)
            for group in as_list(entry.get("apiGroups")) or [ANY]:
                for kind in as_list(entry.get("kinds")) or [ANY]:
                    kinds.add((str(group), str(kind)))
    return ObjectMatch(
        kinds=frozenset(kinds) if kinds is not None else None,
        namespaces=_strings(match.get("namespaces")) if "namespaces" in match else None,
        excluded_namespaces=_strings(match.get("excludedNamespaces")),
        label_selector=_selector(match.get("labelSelector")),
        namespace_selector=_selector(match.get("namespaceSelector")),
        scope=str(match.get("scope", ANY)),
        name=str(match["name"]) if isinstance(match.get("name"), str) else None,
    )


def vap_match(resources: Mapping[str, Any]) -> ObjectMatch:
    """`matchConstraints` of a policy or `matchResources` of a binding (operations are not
    checked: a manifest in a repository is a CREATE or an UPDATE, and a rule for DELETE sees none)."""
    kinds = {
        (str(group), str(resource).partition("/")[0])
        for rule in as_list(resources.get("resourceRules"))
        for group in as_list(as_mapping(rule).get("apiGroups")) or [ANY]
        for resource in as_list(as_mapping(rule).get("resources")) or [ANY]
    }
    return ObjectMatch(
        kinds=frozenset(kinds) if "resourceRules" in resources else None,
        by_resource=True,
        label_selector=_selector(resources.get("objectSelector")),
        namespace_selector=_selector(resources.get("namespaceSelector")),
    )


def all_of(matches: Iterable[Callable[[Mapping[str, Any], Mapping[str, Any] | None], bool]]) -> Any:
    chosen = tuple(matches)

    def matches_all(obj: Mapping[str, Any], namespace: Mapping[str, Any] | None) -> bool:
        return all(match(obj, namespace) for match in chosen)

    return matches_all


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(str(item) for item in as_list(value))


def _selector(value: Any) -> Mapping[str, Any] | None:
    """An empty selector (`{}`) selects everything, as in Kubernetes: no test at all."""
    selector = as_mapping(value)
    return selector if selector.get("matchLabels") or selector.get("matchExpressions") else None
