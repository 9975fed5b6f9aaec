# mypy: disallow-untyped-calls=False
# (the kubernetes client ships type hints only in part)
"""`gpupolicy cluster snapshot` and `gpupolicy init`: the cluster's facts as a policy fragment, and
a repository's `.gpupolicy.yaml` that builds on it.

    gpupolicy cluster snapshot [-o FILE] [--kubeconfig FILE] [--context NAME]
    gpupolicy cluster snapshot --from FILE [--complete KIND]... [--partial] [-o FILE]
    gpupolicy init [DIR] [--snapshot FILE] [--force]

`snapshot` lists Nodes, PriorityClasses, RuntimeClasses, Namespaces, NetworkPolicies,
ResourceQuotas, LimitRanges, Kueue WorkloadPriorityClasses and DRA DeviceClasses from the live
cluster (the in-cluster service account, else the kubeconfig; list calls only, so `get`/`list`
RBAC on those kinds is all it needs, and the `kubernetes` client of the [webhook] extra), or reads
them from `--from FILE`: the output of `kubectl get nodes,priorityclasses,runtimeclasses,... -A
-o yaml` (a v1 List, in YAML or JSON) or a stream of objects. It writes the facts
(gpupolicy/policy/cluster_facts.py) as a commented policy file. From a file, the cluster-scoped kinds
inside a List are taken as listed whole (what `kubectl get KIND` prints without a selector), and
so are namespaced kinds spread over several namespaces (`-A`); `--partial` takes nothing as whole,
`--complete KIND` adds a kind.

Exit codes: 0 written; 2 usage errors, unreadable input, a cluster that cannot be reached, or no
kubernetes client for a live snapshot.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from gpupolicy.core.exit_codes import EXIT_CLEAN, UsageError
from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import POLICY_API_VERSION
from gpupolicy.loading.documents import Resource
from gpupolicy.policy.cluster_facts import ClusterFacts, read_cluster
from gpupolicy.policy.loading import Policy, load_policy
from gpupolicy.policy.repo_policies import REPO_POLICY_NAMES
from gpupolicy.policy.validation import PolicyError

SNAPSHOT_FILE = "cluster-snapshot.yaml"
PAGE_SIZE = 500
CLUSTER_SCOPED = frozenset(
    {"Node", "PriorityClass", "RuntimeClass", "Namespace", "WorkloadPriorityClass", "DeviceClass"}
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = commands.add_parser("cluster", help="learn the cluster's facts from the cluster")
    actions = cluster.add_subparsers(dest="cluster_action", metavar="ACTION", required=True)
    snapshot = actions.add_parser(
        "snapshot",
        help="write the cluster's node pools, GPU taints, node labels and classes as a policy fragment",
        description="Read the cluster (live, read-only list calls; or --from a `kubectl get ... -o yaml` "
        "file) and write the facts the shipped policy cannot know as a policy file to extend.",
    )
    snapshot.add_argument(
        "--from", dest="source", metavar="FILE", help="read objects from FILE (- for stdin)"
    )
    snapshot.add_argument("--output", "-o", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    snapshot.add_argument("--kubeconfig", metavar="FILE", help="the kubeconfig to use (live snapshot)")
    snapshot.add_argument("--context", metavar="NAME", help="the kubeconfig context to use (live snapshot)")
    snapshot.add_argument(
        "--complete",
        action="append",
        default=[],
        metavar="KIND",
        help="with --from: FILE holds every object of KIND in the cluster",
    )
    snapshot.add_argument(
        "--partial", action="store_true", help="with --from: FILE may miss objects of every kind"
    )
    snapshot.add_argument(
        "--policy",
        "-p",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a policy whose GPU vendors and node-label registry to use (default: the shipped one)",
    )
    snapshot.set_defaults(handler=run_snapshot)
    # `init` lives here too: it writes the repository's side of the same facts.
    init = commands.add_parser("init", help="write a commented .gpupolicy.yaml for a repository")
    init.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the repository (default: .)")
    init.add_argument("--snapshot", type=Path, metavar="FILE", help="a cluster snapshot to extend")
    init.add_argument("--force", action="store_true", help="overwrite an existing .gpupolicy.yaml")
    init.set_defaults(handler=run_init)


# -- snapshot --------------------------------------------------------------------------------------


@immutable
class Read:
    """What a snapshot read: the objects, the kinds held whole, and where they came from."""

    objects: list[dict[str, Any]]
    complete: set[str]
    source: str
    warnings: list[str]


def run_snapshot(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(extra=args.policy)
    except PolicyError as exc:
        raise UsageError(str(exc)) from exc
    if args.source is not None:
        if args.kubeconfig or args.context:
            raise UsageError("--kubeconfig and --context read a live cluster; they do not go with --from")
        read = read_file(args.source, policy, complete=args.complete, partial=args.partial)
    else:
        if args.complete or args.partial:
            raise UsageError("--complete and --partial describe a --from FILE")
        read = read_live(kubeconfig=args.kubeconfig, context=args.context)
    for warning in read.warnings:
        print(f"gpupolicy: {warning}", file=sys.stderr)
    facts = read_cluster(read.objects, complete_kinds=read.complete, policy=policy)
    text = render_snapshot(facts, source=read.source, taken=datetime.now(UTC))
    if args.output is None:
        sys.stdout.write(text)
    else:
        _write(args.output, text)
    pools = len(facts.fragment.get("nodePools", []))
    seen = len(facts.unconfirmed.get("nodePools", []))
    unconfirmed = f", {seen} more seen in part (commented out)" if seen else ""
    print(
        f"gpupolicy: wrote {args.output or 'to stdout'}: {pools} node pools{unconfirmed} from "
        f"{facts.counts.get('Node', 0)} nodes ({facts.gpu_nodes} with GPUs)",
        file=sys.stderr,
    )
    return EXIT_CLEAN


def _write(target: Path, text: str) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{target}: cannot write: {exc.strerror or exc}") from None


def read_file(source: str, policy: Policy, *, complete: Sequence[str], partial: bool) -> Read:
    """Objects from a file, through the linter's loader (bounded by the policy's limits)."""
    from gpupolicy.loading.inputs import UNREADABLE, load_file, load_text

    if source == "-":
        loaded = load_text(sys.stdin.read(), "<stdin>", limits=policy.limits)
    else:
        path = Path(source)
        if not path.is_file():
            raise UsageError(f"{source}: no such file")
        loaded = load_file(path, policy.limits)
    for problem in loaded.problems:  # documents that are not objects were skipped: said below when all were
        raise UsageError(f"{problem.file}:{problem.line or 1}:{problem.column or 1}: {problem.message}")
    resources = [item for item in loaded.resources if item.is_mapping and item.kind]
    if not resources:
        # A file skipped as one that does not parse says where and what stops it.
        unreadable = next(
            (item.reason for item in loaded.skipped if item.reason.startswith(UNREADABLE)), None
        )
        raise UsageError(f"{source}: {unreadable or 'holds no Kubernetes objects'}")
    listed = set() if partial else _listed_whole(resources)
    where = "stdin" if source == "-" else f"the file {source}"
    return Read([item.obj for item in resources], listed | set(complete), where, [])


def _listed_whole(resources: Sequence[Resource]) -> set[str]:
    """The kinds `kubectl get KIND -o yaml` listed: items of a List (nested in its `items`, where a
    document's own object starts at column 1) of a cluster-scoped kind, or of a namespaced kind
    spread over several namespaces (listed with -A; without it, kubectl lists one namespace)."""
    items = [item for item in resources if _column(item) > 0]
    namespaces: dict[str, set[str]] = {}
    for item in items:
        namespaces.setdefault(item.kind, set()).add(item.namespace or "")
    return {kind for kind, seen in namespaces.items() if kind in CLUSTER_SCOPED or len(seen) > 1}


def _column(resource: Resource) -> int:
    """0-based column where the object starts, as libyaml counts (-1 without positions)."""
    if resource.positions is None or resource.lines is None:
        return -1
    return resource.positions.start(resource.lines)[1]


@immutable
class Listing:
    """How to list one kind: a typed API method, or (custom and optional API groups) the versions to
    try with CustomObjectsApi; a group none of them serves has no such objects."""

    kind: str
    api_version: str = ""
    api: str = ""
    method: str = ""
    group: str = ""
    versions: tuple[str, ...] = ()
    plural: str = ""


LISTINGS = (
    Listing("Node", "v1", "CoreV1Api", "list_node"),
    Listing("PriorityClass", "scheduling.k8s.io/v1", "SchedulingV1Api", "list_priority_class"),
    Listing("RuntimeClass", "node.k8s.io/v1", "NodeV1Api", "list_runtime_class"),
    Listing("Namespace", "v1", "CoreV1Api", "list_namespace"),
    Listing(
        "NetworkPolicy", "networking.k8s.io/v1", "NetworkingV1Api", "list_network_policy_for_all_namespaces"
    ),
    Listing("ResourceQuota", "v1", "CoreV1Api", "list_resource_quota_for_all_namespaces"),
    Listing("LimitRange", "v1", "CoreV1Api", "list_limit_range_for_all_namespaces"),
    Listing(
        "WorkloadPriorityClass",
        group="kueue.x-k8s.io",
        versions=("v1beta2", "v1beta1"),
        plural="workloadpriorityclasses",
    ),
    Listing(
        "DeviceClass", group="resource.k8s.io", versions=("v1", "v1beta2", "v1beta1"), plural="deviceclasses"
    ),
)


def read_live(*, kubeconfig: str | None, context: str | None) -> Read:
    try:
        from kubernetes.client.exceptions import ApiException
    except ImportError:
        raise UsageError(
            "a live snapshot needs the kubernetes client: pip install 'gpupolicy[webhook]' "
            "(or use --from FILE with the output of kubectl get ... -o yaml)"
        ) from None
    api_client, source = _api_client(kubeconfig, context)
    objects: list[dict[str, Any]] = []
    complete: set[str] = set()
    warnings = []
    for listing in LISTINGS:
        try:
            found = _list_kind(api_client, listing)
        except ApiException as exc:
            if exc.status not in (401, 403):
                raise UsageError(
                    f"listing {listing.kind} failed: HTTP {exc.status} {exc.reason or ''}".strip()
                ) from None
            warnings.append(f"not allowed to list {listing.kind} (HTTP {exc.status}): its facts are left out")
            continue
        except Exception as exc:  # connection refused, TLS, timeouts: the cluster cannot be read
            raise UsageError(
                f"cannot list {listing.kind} from {source}: {type(exc).__name__}: {exc}"
            ) from None
        objects.extend(found)
        complete.add(listing.kind)
    return Read(objects, complete, source, warnings)


def _api_client(kubeconfig: str | None, context: str | None) -> tuple[Any, str]:
    """In a pod: the service account; elsewhere (or when a kubeconfig or context is named): the kubeconfig."""
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    configuration = k8s.Configuration()
    if kubeconfig is None and context is None:
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
            return k8s.ApiClient(configuration), "the cluster it runs in (service account)"
        except k8s_config.ConfigException:
            pass
    try:
        k8s_config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=configuration
        )
        _, active = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
    except (k8s_config.ConfigException, OSError, TypeError, ValueError) as exc:
        raise UsageError(f"no Kubernetes configuration: {exc}") from None
    name = context or (active or {}).get("name", "")
    return k8s.ApiClient(configuration), f"the cluster of kubeconfig context {name}"


def _list_kind(api_client: Any, listing: Listing) -> list[dict[str, Any]]:
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    if listing.api:
        call = getattr(getattr(k8s, listing.api)(api_client), listing.method)
        return _pages(api_client, call, (), listing.kind, listing.api_version)
    custom = k8s.CustomObjectsApi(api_client).list_cluster_custom_object
    for version in listing.versions:
        try:
            args = (listing.group, version, listing.plural)
            return _pages(api_client, custom, args, listing.kind, f"{listing.group}/{version}")
        except ApiException as exc:
            if exc.status != 404:
                raise
    return []  # the group is not served: the CRD (or the API) is not installed, so none exist


def _pages(
    api_client: Any, call: Any, args: tuple[Any, ...], kind: str, api_version: str
) -> list[dict[str, Any]]:
    objects = []
    token = None
    while True:
        options: dict[str, Any] = {"limit": PAGE_SIZE, "_request_timeout": (10, 60)}
        if token:
            options["_continue"] = token
        page = call(*args, **options)
        if isinstance(page, dict):  # CustomObjectsApi answers with JSON
            items, token = page.get("items") or [], (page.get("metadata") or {}).get("continue")
        else:
            items, token = page.items or [], getattr(page.metadata, "_continue", None)
        for item in items:
            obj = item if isinstance(item, dict) else api_client.sanitize_for_serialization(item)
            if isinstance(obj, dict):
                obj.setdefault("apiVersion", api_version)  # list items carry no kind of their own
                obj.setdefault("kind", kind)
                objects.append(obj)
        if not token:
            return objects


# -- the fragment as text --------------------------------------------------------------------------

UNCONFIRMED_START = "# --- seen in part ---"
SECTION_ORDER = ("nodePools", "placement", "nodeLabels", "priority", "gpu", "inventory")
SECTION_COMMENTS = {
    "nodePools": "The GPU node pools: nodes grouped by GPU product, count, memory, sharing and provider pool.",
    "placement": "Where GPU pods land: the taints every GPU node carries, and the node label registry's completeness.",
    "nodeLabels": "Node label keys in use that the shipped registry does not know (source and owner as far as known).",
    "priority": "The cluster's PriorityClasses and Kueue WorkloadPriorityClasses (system classes are built in).",
    "gpu": "DRA DeviceClasses of the cluster that hand out GPUs, added to the shipped ones.",
    "inventory": "Kinds named in full above: a name not listed does not exist in the cluster.",
}


def render_snapshot(facts: ClusterFacts, *, source: str, taken: datetime) -> str:
    header = [
        "A cluster snapshot: what the shipped gpupolicy policy cannot know about the cluster, in the",
        f"policy's own schema. Taken {taken.strftime('%Y-%m-%dT%H:%M:%SZ')} from {source} by `gpupolicy cluster snapshot`.",
        "Use it from a repository's .gpupolicy.yaml (`extends: <this file>`, see `gpupolicy init`) or",
        "with `gpupolicy lint --policy <this file>`; take it again when the cluster changes.",
        "",
        "Read: " + ", ".join(f"{count} {kind}" for kind, count in facts.counts.items()) + "."
        if facts.counts
        else "Read: no objects.",
        "Held completely: " + (", ".join(facts.complete_kinds) or "nothing") + ".",
    ]
    left_out = [kind for kind in ("Namespace", "NetworkPolicy", "LimitRange") if kind in facts.counts]
    if left_out:
        header.append(
            f"Not written: {', '.join(left_out)} (a policy has no place for them; the webhook reads them live)."
        )
    lines = [_comment(text) for text in header]
    body = {"apiVersion": POLICY_API_VERSION, "kind": "Policy", "metadata": {"name": "cluster-snapshot"}}
    lines.append(yaml.safe_dump(body, sort_keys=False, default_flow_style=False).rstrip("\n"))
    for key in SECTION_ORDER:
        if key in facts.fragment:
            section = {key: facts.fragment[key]}
            lines += [
                "",
                _comment(f"{SECTION_COMMENTS[key]} {_readers(section)}".strip()),
                _dump(section).rstrip("\n"),
            ]
    if facts.notes:
        lines += ["", *(_comment(note) for note in facts.notes)]
    if facts.unconfirmed:
        lines += [
            "",
            _comment(
                "Seen, but the snapshot did not hold every object of the kind: a list written from it would "
                "claim that nothing else exists. Check these against the cluster, then uncomment them."
            ),
            UNCONFIRMED_START,
            *(f"# {line}".rstrip() for line in _dump(facts.unconfirmed).splitlines()),
        ]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    if not text:
        return "#"
    return "\n".join(f"# {line}" for line in textwrap.wrap(text, width=98, break_on_hyphens=False))


def _dump(value: Any) -> str:
    # flow style for mappings and lists of scalars (a taint, a label entry), one line each
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=None, width=4096, allow_unicode=True)


def _readers(section: Mapping[str, Any]) -> str:
    ids = rules_reading(_dotted_keys(section))
    return f"Read by {', '.join(ids)}." if ids else ""


def _dotted_keys(value: Any, prefix: str = "") -> list[str]:
    if not isinstance(value, Mapping):
        return [prefix]
    keys = []
    for key, item in value.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        keys += [dotted] if key == "nodeLabels" or prefix == "nodeLabels" else _dotted_keys(item, dotted)
    return keys


def _described(ids: Iterable[str]) -> list[str]:
    from gpupolicy.engine.registry import REGISTRY

    return [f"{rule_id} {REGISTRY[rule_id].name}" for rule_id in ids]


def rules_reading(keys: Iterable[str]) -> list[str]:
    """The rules that read one of the policy `keys` (or a key under it, or above it): as a setting,
    or as the section key of one of their parameters."""
    import gpupolicy.rules  # noqa: F401  (registers the built-in rules)
    from gpupolicy.engine.registry import REGISTRY

    wanted = list(keys)
    found = set()
    for rule in REGISTRY:
        read = [setting.key for setting in rule.settings]
        read += [parameter.setting for parameter in rule.parameters if parameter.setting]
        for name in read:
            if any(key == name or key.startswith(f"{name}.") or name.startswith(f"{key}.") for key in wanted):
                found.add(rule.id)
    return sorted(found)


# -- init ------------------------------------------------------------------------------------------

# The cluster's facts, as a repository would write them by hand: every line is commented out in
# the written file (tests/test_cluster_snapshot.py uncomments them and loads the result).
EXAMPLE_FACTS = """\
# The GPU node pools: what a node of each offers.
nodePools:
  - {name: a100, vendor: nvidia, resource: nvidia.com/gpu, gpuProduct: NVIDIA-A100-SXM4-80GB, gpusPerNode: 8, gpuMemoryMiB: 81920}
  - {name: l4-shared, vendor: nvidia, resource: nvidia.com/gpu.shared, gpuProduct: NVIDIA-L4, gpusPerNode: 4, sharing: time-slicing, sharingReplicas: 4}
placement:
  # The taints every GPU node carries ([]: GPU nodes are untainted).
  gpuTaints: [{key: nvidia.com/gpu, effect: NoSchedule, vendor: nvidia}]
  # The API server adds the GPU toleration to pods that request GPUs (GKE does).
  extendedResourceToleration: false
  # nodeLabels lists every node label key the cluster's nodes carry.
  labelRegistryComplete: true
  # The RuntimeClasses the cluster has.
  runtimeClass: {names: [nvidia]}
# The cluster's own node labels (the shipped registry knows GFD's, the cloud providers' and Kubernetes').
nodeLabels:
  accelerator: {source: team, owner: platform-team, use: requirement, gpu: true}
priority:
  # The cluster's PriorityClasses, its global default class, and its Kueue WorkloadPriorityClasses.
  clusterClasses: [gpu-serving, gpu-batch]
  globalDefault: null
  kueueClasses: []
  # Which classes each workload class (label gpupolicy.io/workload-class) may use.
  tiers: {online: [gpu-serving], batch: [gpu-batch]}
inventory:
  # Kinds of which the repository (with the lists above) names every object in the cluster.
  completeKinds: [PriorityClass, RuntimeClass]
"""
EXAMPLES_START = "# --- cluster facts: uncomment and edit ---"
EXAMPLES_END = "# --- end of cluster facts ---"
TURNED_ON = (
    "nodePools",
    "placement.gpuTaints",
    "placement.extendedResourceToleration",
    "placement.labelRegistryComplete",
    "placement.runtimeClass",
    "nodeLabels",
    "priority.clusterClasses",
    "priority.globalDefault",
    "priority.kueueClasses",
    "priority.tiers",
)


def run_init(args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such directory")
    existing = [folder / name for name in REPO_POLICY_NAMES if (folder / name).exists()]
    if existing and not args.force:
        raise UsageError(f"{existing[0]} exists; --force overwrites it")
    extends = None
    if args.snapshot is not None:
        if not args.snapshot.is_file():
            raise UsageError(f"{args.snapshot}: no such snapshot file")
        try:
            load_policy(extra=[args.snapshot])
        except PolicyError as exc:
            raise UsageError(str(exc)) from exc
        extends = Path(os.path.relpath(args.snapshot.resolve(), folder.resolve())).as_posix()
    target = folder / REPO_POLICY_NAMES[0]
    _write(target, render_repo_policy(extends=extends, name=folder.resolve().name))
    for other in existing:
        if other != target:  # .gpupolicy.yml would otherwise stand beside the new file, unread
            other.unlink()
    load_policy(repo_policy=target)  # what init writes always loads
    print(f"gpupolicy: wrote {target}", file=sys.stderr)
    return EXIT_CLEAN


def render_repo_policy(*, extends: str | None, name: str) -> str:
    lines = [
        "# gpupolicy settings for this repository, merged over the shipped policy (mappings key by key,",
        "# lists replaced). Schema: policies/schemas/policy.schema.json; every key: policies/default.yaml.",
        f"apiVersion: {POLICY_API_VERSION}",
        "kind: Policy",
        "metadata:",
        f"  name: {yaml.safe_dump(name or 'repository', default_style=None).splitlines()[0]}",
    ]
    if extends is not None:
        lines += [
            "# The cluster's facts, from `gpupolicy cluster snapshot` (take it again when the cluster changes).",
            f"extends: {yaml.safe_dump(extends).splitlines()[0]}",
        ]
    lines += [
        "",
        "# The lowest severity that fails `gpupolicy lint` (error, warning or info).",
        "# failOn: error",
        "# Globs of paths not to lint, relative to this file's folder.",
        "# exclude: [charts/*/templates/tests/*]",
        "# Per-rule settings by id or name: enabled, severity, params (docs/rules/ lists each rule's), e.g.",
        "# {GP104: {severity: error}, GP701: {enabled: false}, replicas-without-spread: {params: {minReplicas: 3}}}.",
        "# rules: {}",
    ]
    if extends is None:
        lines += ["", *_facts_help(), EXAMPLES_START]
        lines += [f"# {line}".rstrip() for line in EXAMPLE_FACTS.splitlines()]
        lines.append(EXAMPLES_END)
    return "\n".join(lines) + "\n"


def _facts_help() -> list[str]:
    text = [
        "The shipped policy describes no cluster: the rules that need a fact of it say once, as info, that it "
        "is unknown. Take the facts from the cluster:",
        "",
        f"    gpupolicy cluster snapshot -o {SNAPSHOT_FILE}        (or --from the output of kubectl get ... -o yaml)",
        f"    gpupolicy init --snapshot {SNAPSHOT_FILE} --force",
        "",
        "or uncomment and edit the examples below. What each fact turns on:",
    ]
    lines = []
    for item in text:
        lines += (
            [f"# {item}".rstrip()] if item.startswith("    ") or not item else _comment(item).splitlines()
        )
    for key in TURNED_ON:
        readers = f"{key}: {', '.join(_described(rules_reading([key])))}"
        lines += [
            f"# {line}"
            for line in textwrap.wrap(readers, width=96, initial_indent="  ", subsequent_indent="      ")
        ]
    return lines
