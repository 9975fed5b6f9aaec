"""GP0xx: problems with the input itself. These are findings, never crashes."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from gpupolicy.core.bounded_cache import bounded_memo
from gpupolicy.core.findings import JsonPath
from gpupolicy.core.json_text import json_bytes
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Scope, Setting, Violation, input_rule, rule
from gpupolicy.kube.images import PLACEHOLDER_IMAGES, parse_image
from gpupolicy.kube.kube_schemas import has_schema, resolve_version, schema_errors
from gpupolicy.kube.placeholders import (
    NO_PLACEHOLDERS,
    excerpt,
    field_placeholder,
    scan,
    symbolic_name,
    symbolic_parts,
    symbolic_quantity,
    whole,
)
from gpupolicy.kube.pod_spec import CONTAINER_LISTS, Container, Workload, as_list, as_mapping, value_at
from gpupolicy.kube.roles import Role, gpu_stack_evidence
from gpupolicy.kube.secrets_detect import credential_name_kind
from gpupolicy.loading.documents import DuplicateKey, Resource, is_openshift_template, names_helm
from gpupolicy.loading.object_evidence import GO, own_template_dialect

input_rule(
    id="GP001",
    name="yaml-syntax-error",
    severity="error",
    summary="Reports a document that cannot be parsed as YAML or JSON, or a file that is not UTF-8 text, "
    "with the line and column of the error. The other documents of the file are still linted.",
    rationale="kubectl and Argo CD refuse the whole file, so nothing in it is applied; a CI check that "
    "crashes instead of pointing at the line wastes a round trip.",
    remediation="Fix the YAML syntax at the reported line and column.",
    references=("https://yaml.org/spec/1.2.2/",),
)


@rule(
    id="GP004",
    name="unrendered-template",
    severity="error",
    scope=Scope.OBJECT,
    summary="Reports files that still hold Helm `{{ }}` actions and kustomize directories that could not be "
    "rendered (or, with `lint --no-remote`, that name a remote base, component or file), with the command "
    "that renders them; and, field by field, a deploy-time placeholder (`$VAR`, "
    "`${VAR}`, `<VAR>`, `__VAR__`, `{{ var }}`, an all-capitals image name) where the API server would take "
    "it as the literal value: a container image, an env value, a name, namespace, service account, volume "
    "source, quantity or a Secret's stringData. A value counts when it is a placeholder as a whole or holds "
    "a `${VAR}`; a credential-named env var is GP612's; command, args, ConfigMap data and KubeRay's rayStartParams "
    "are the program's text (shell `${HOME}`, Katib's `${trialParameters.lr}`) and never judged.",
    rationale="A template is not a manifest: linting it would judge placeholders, and skipping it silently "
    "would let the rendered objects through unchecked. An image named `$IMAGE_URL` cannot be pulled, and no "
    "image rule can check what it will be.",
    remediation="Render the templates (helm template, kubectl kustomize, envsubst) and lint the output.",
    references=(
        "https://helm.sh/docs/helm/helm_template/",
        "https://kubectl.docs.kubernetes.io/references/kustomize/",
        "https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/",
    ),
)
def unrendered_template(resource: Resource, ctx: Context) -> Iterator[Violation]:
    workload = ctx.workload_of(resource)
    containers = [container for _, container in workload.containers()] if workload is not None else []
    # Every placeholder form holds `$`, `<`, `{{` or `__`: an object with none of them holds no
    # placeholder in any field, and only an all-capitals image name is left to judge.
    may_hold = _may_hold_placeholder(resource)
    # An Argo workflow's or a KServe runtime's `{{…}}` are its controller's to fill in (`{{item}}`,
    # `{{$}}`, `{{.Name}}`): the template language it speaks, or None.
    own = own_template_dialect(resource.api_version, resource.kind)
    if own is None and resource.rendered_from == "helm":
        own = HELM_OUTPUT
    for container in containers:
        image = _image_placeholder(container, ctx, workload, scanned=may_hold, own=own)
        if image is not None:
            yield image
        yield from _symbolic_quantities(container)
        if may_hold:
            yield from _env_placeholders(container, own=own)
            yield from _list_placeholders(container, own=own)
    yield from _symbolic_names(resource, containers)
    if may_hold:
        # Judged above, or the program's own text (shell scripts, Katib's ${trialParameters.x}).
        handled = {container.field(key) for container in containers for key in PROGRAM_KEYS}
        yield from _field_placeholders(resource, handled, own=own)


def _deploy_time(placeholder: str | None, own: str | None) -> str | None:
    """`placeholder`, unless it is a `{{…}}` of an object that fills them in itself (`own`: its
    template language) and not Helm's (`{{ .Values.image }}` in a chart's workflow is Helm's still)."""
    if placeholder is None or own is None:
        return placeholder
    if own == HELM_OUTPUT:
        return None if placeholder.startswith("{{") else placeholder
    if not placeholder.startswith("{{"):
        return placeholder
    return placeholder if names_helm(placeholder, dot=own != GO) else None


# An object Helm rendered: a `{{…}}` left in it is a value's own text (Helm would have failed on
# an action of its own), which the object's controller fills in.
HELM_OUTPUT = "helm-output"


# Container fields that hold a program's text, or that GP004 judges on their own. A probe's or
# a lifecycle hook's fields are literal (periodSeconds, port) but for the command it runs, which
# FREE_TEXT_KEYS leaves to the program.
PROGRAM_KEYS = ("image", "env", "command", "args")
# Keys whose values are text for a program or a controller, not literal fields of the object.
# (RayService serveConfigV2 and RayJob entrypoint/runtimeEnvYAML are read by Ray, which expands
# `${HOME}` itself; KubeRay joins rayStartParams into the `ray start` command line that the Ray
# container's bash runs (generateRayStartCommand, ray-operator/controllers/ray/common/pod.go), so
# `redis-password: $REDIS_PASSWORD` is the container's env; managedFields is the API server's
# bookkeeping of who set which field; an Argo resource template's (or a Kubeflow ResourceOp's)
# `manifest` is a whole object as text, whose shell variables its own containers' scripts set; a
# GrafanaDashboard's `json` is the dashboard, whose `${instance}` Grafana fills in when it is viewed.)
FREE_TEXT_KEYS = frozenset(
    {"command", "args", "data", "binaryData", "annotations", "script", "source", "query", "serveConfigV2",
     "entrypoint", "runtimeEnvYAML", "rayStartParams", "managedFields", "manifest", "json"}
)  # fmt: skip
MAX_FIELDS = 20_000  # string fields read per object (a bound on hostile input)
# Kinds whose spec is a document in another program's language, never a field the API server takes
# literally: a CRD's OpenAPI schema (its descriptions document `${PARAMETER_REFERENCE}` syntax) and
# dashboards, whose `$__all`, `${instance}` and `{{pod}}` the dashboard engine fills in when viewed
# (Perses' variables, Grafana's; Prometheus legend formats).
DOCUMENT_KINDS = frozenset({"CustomResourceDefinition", "GrafanaDashboard", "PersesDashboard"})


def _miscased_keys(obj: dict[str, Any], missing: list[str]) -> list[str]:
    """The object's keys that spell a missing one in another case (`apiversion`, `Kind`)."""
    wanted = {name.split(" ")[0].lower(): name for name in missing}
    return [
        key for key in obj if isinstance(key, str) and key.lower() in wanted and key not in wanted.values()
    ][:3]


def _symbolic_quantities(container: Container) -> Iterator[Violation]:
    """`nvidia.com/gpu: PLACEHOLDER_NUM_GPU_PER_NODE`: an all-capitals name where a quantity must
    stand (digits and a unit) can only be a name for a value still to be filled in, as an
    all-capitals image is (kube/placeholders.symbolic_name)."""
    for section, values in (("requests", container.requests), ("limits", container.limits)):
        for name, value in values.items():
            # Most quantities start with a digit: the name test is for the few that do not.
            if isinstance(value, str) and not value[:1].isdigit() and symbolic_quantity(value):
                yield Violation(
                    container.resource_path(section, str(name)),
                    f"{container.label} {section} {excerpt(str(name))} is the placeholder {excerpt(value.strip())!r}: "
                    f"{RENDER}",
                    container=container.name,
                )


def _list_placeholders(container: Container, *, own: str | None = None) -> Iterator[Violation]:
    """`env: ${ENGINE_ENV}`, `command: ${COMMAND}`: a placeholder where a whole list stands (the
    items' own placeholders are judged apart, and a program's text is its own)."""
    for key in ("env", "command", "args"):
        value = container.spec.get(key)
        found = _deploy_time(field_placeholder(value), own) if isinstance(value, str) else None
        if found is not None:
            yield Violation(
                container.field(key),
                f"{container.label} {key} is the placeholder {excerpt(found)!r}: {RENDER}",
                container=container.name,
            )


def _env_placeholders(container: Container, *, own: str | None = None) -> Iterator[Violation]:
    for path, item in container.env_items():
        name, value = str(item.get("name", "")), item.get("value")
        placeholder = _deploy_time(whole(value), own) if isinstance(value, str) else None
        if placeholder is not None and credential_name_kind(name) is None:
            yield Violation(
                (*path, "value"),
                f"{container.label} env {excerpt(name)} is the placeholder {excerpt(placeholder)!r}: {RENDER}; "
                "the container would get it as its literal value",
                container=container.name,
            )


def _field_placeholders(
    resource: Resource, handled: set[JsonPath], *, own: str | None = None
) -> Iterator[Violation]:
    """Every other field the API server takes literally (names, namespaces, service accounts,
    volume sources, quantities, selectors, a Secret's stringData): a value that is a placeholder
    as a whole, or that holds a `${VAR}`."""
    # Each entry: the path of the parent, the key or index, the value; a value's own path is made
    # only when it is a container or a finding (most fields are neither).
    root = resource.obj
    if resource.kind in DOCUMENT_KINDS and isinstance(root, dict):
        root = {key: value for key, value in root.items() if key != "spec"}  # the document is its spec
    stack: list[tuple[JsonPath, str | int | None, Any]] = [((), None, root)]
    parents = {path[:-1] for path in handled}
    budget = MAX_FIELDS
    secret = resource.kind == "Secret"  # a Secret's data is base64: a placeholder there was never encoded
    while stack and budget > 0:
        parent, step, value = stack.pop()
        if isinstance(value, str):
            budget -= 1
            if value.startswith("#!"):
                continue  # a script (soperator's sbatchScript): its `${gpus_on_node}` are its own
            found = _deploy_time(field_placeholder(value), own)
            if found is not None:
                path = parent if step is None else (*parent, step)
                yield Violation(
                    path, f"{field_excerpt(path)} holds the placeholder {excerpt(found)!r}: {RENDER}"
                )
            continue
        if not isinstance(value, dict | list):
            continue
        path = parent if step is None else (*parent, step)
        if isinstance(value, dict):
            skipped = handled if path in parents else None
            stack.extend(
                (path, str(key), item)
                for key, item in value.items()
                if (key not in FREE_TEXT_KEYS or (key == "data" and secret and not path))
                and (skipped is None or (*path, str(key)) not in skipped)
            )
        else:
            stack.extend((path, index, item) for index, item in enumerate(value))


def _symbolic_names(resource: Resource, containers: list[Container]) -> Iterator[Violation]:
    """`name: MODEL_NAME`, `namespace: KUBEFLOW_NAMESPACE`, Helm 2's `RELEASE-NAME-redis`: a name
    still to fill in where the API server wants a lowercase one (the object's name and namespace, a
    container's, the service account), as an all-capitals image is. GP005 leaves such a name to
    GP004, which said nothing of it: no placeholder character is in it."""
    metadata = as_mapping(as_mapping(resource.obj).get("metadata"))
    for key in ("name", "namespace"):
        value = metadata.get(key)
        # A lowercase name (most of them) is asked nothing more: `str.islower`, in C.
        if isinstance(value, str) and not value.islower() and _stands_in(value):
            yield _name_placeholder(("metadata", key), value)
    for container in containers:
        if container.name and not container.name.islower() and _stands_in(container.name):
            yield _name_placeholder(container.field("name"), container.name)


def _name_placeholder(path: JsonPath, value: str) -> Violation:
    return Violation(path, f"{field_excerpt(path)} is the placeholder {excerpt(value)!r}: {RENDER}")


def _stands_in(name: str) -> bool:
    """A name left to fill in at deploy time; not one that says a program fills it in (the GPU
    operator's assets: `FILLED_BY_OPERATOR`, which the operator writes when it renders them)."""
    if name.startswith(FILLED_BY):
        return False
    return ("_" in name and symbolic_name(name)) or name.startswith(HELM2_RELEASE)


FILLED_BY = "FILLED_BY"


HELM2_RELEASE = "RELEASE-NAME"  # what Helm 2's `helm template` wrote for the release's name


FIELD_EXCERPT = 60


def field_excerpt(path: JsonPath, limit: int = FIELD_EXCERPT) -> str:
    """A field's dotted path, shortened at its segments' boundaries: the first one or two and as
    many of the last as fit (`spec.template.….entryTemplate.metadata`); a long last segment is cut."""
    parts = [str(part) for part in path]
    whole = ".".join(parts)
    if len(whole) <= limit or len(parts) < 3:
        return excerpt(whole, limit)
    head = parts[:2] if len(".".join([*parts[:2], "…", parts[-1]])) <= limit else parts[:1]
    tail = [parts[-1]]
    for part in reversed(parts[len(head) : -1]):
        if len(".".join([*head, "…", part, *tail])) > limit:
            break
        tail.insert(0, part)
    return excerpt(".".join([*head, "…", *tail]), limit)


def _may_hold_placeholder(resource: Resource) -> bool:
    """Whether any key or text the walk below reads holds a character every placeholder form
    starts with. The loader noted whether the object's text holds one, or an escape that could
    write one (`Resource.text_marks`): most texts hold none. Else one serialisation in C (a
    fraction of the walk, which visits every field in Python) answers no for most objects;
    serialised without ASCII escapes, the text holds each key and string as written, and `$`, `<`,
    `{` and `_` are never escaped. The metadata's free text (annotations, managedFields: often most
    of an object's bytes) is left out, as the walk leaves it."""
    if resource.text_marks is not None and not resource.text_marks:
        return False
    obj = resource.obj
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if isinstance(metadata, dict) and not FREE_TEXT_KEYS.isdisjoint(metadata):
        kept = {key: value for key, value in metadata.items() if key not in FREE_TEXT_KEYS}
        obj = {**obj, "metadata": kept}
    try:
        text = json_bytes(obj)
    except (TypeError, ValueError, RecursionError):  # not plain JSON values, or nested too deep
        return True
    # `$` and `<` are found by memchr; a two-byte needle by a compiled literal search is 2-3 times
    # faster than `in` on JSON text, where `{` and `_` are frequent.
    return (
        b"$" in text
        or b"<" in text
        or _DOUBLE_BRACE.search(text) is not None
        or _DOUBLE_UNDERSCORE.search(text) is not None
    )


_DOUBLE_BRACE = re.compile(rb"\{\{")  # literals: searched in linear time
_DOUBLE_UNDERSCORE = re.compile(rb"__")


RENDER = "render the manifest (envsubst, kustomize or helm) before it is applied"


def _image_placeholder(
    container: Container,
    ctx: Context,
    workload: Workload | None = None,
    *,
    scanned: bool = True,
    own: str | None = None,
) -> Violation | None:
    """The image's placeholder; `scanned=False` when the object holds no placeholder character,
    so that only an all-capitals name can be one."""
    image = container.image.strip()
    # `{TAG}` escapes the object's quick look (a brace is in most texts): an image has none.
    found = scan(image) if scanned or "{" in image else NO_PLACEHOLDERS
    # An all-capitals name is a placeholder, except in the GPU stack's own pods, whose operator
    # fills such fields in itself (`image: FILLED_BY_THE_VALIDATOR`); a node agent of another kind
    # (a runtime plugin's exporter with `image: MBE_IMG`) is deployed as written.
    agent = (
        workload is not None
        and ctx.role(workload).role is Role.AGENT
        and gpu_stack_evidence(workload) is not None
    )
    symbolic = symbolic_name(image) and not agent
    if found.spans:
        texts = found.texts(image)
    elif symbolic or image.lower() in PLACEHOLDER_IMAGES:
        texts = [image]
    elif agent or image.islower():
        texts = []
    else:  # `YOUR_REGISTRY/mt-bench-eval:tag`: a name to fill in where the image's host or repository goes
        texts = [image[start:end] for start, end in symbolic_parts(image)]
    texts = [text for text in texts if _deploy_time(text, own) is not None]
    if not texts:
        return None
    ref = parse_image(image, placeholders=True)
    entire = texts == [image]
    what = (
        f"image is the placeholder {excerpt(image)!r}"
        if entire
        else f"image {excerpt(image)!r} holds the placeholder{'s' if len(texts) > 1 else ''} "
        + ", ".join(repr(excerpt(text, 40)) for text in texts[:3])
    )
    version = ref is None or not ref.version_known
    registry = ref is None or not ref.registry_known
    if not ctx.policy.supply_chain.allowed_registries:
        registry = False  # GP703 checks nothing without an allow list
    unchecked = {
        (True, True): "; GP701-GP703 could not check it",
        (True, False): f"; GP701 and GP702 could not check {'it' if entire else 'its tag or digest'}",
        (False, True): "; GP703 could not check its registry",
        (False, False): "",
    }[(version, registry)]
    return Violation(
        container.field("image"), f"{container.label} {what}: {RENDER}{unchecked}", container=container.name
    )


@rule(
    id="GP002",
    name="duplicate-key",
    severity="error",
    scope=Scope.OBJECT,
    summary="Reports a mapping that repeats a key, and a container's env that defines a variable again "
    "with another value (not a repetition of the same definition, nor a value that builds on the earlier "
    "one with `$(NAME)`).",
    rationale="YAML parsers used by kubectl keep the last value and drop the first without a word, so a "
    "second `resources:` or `env:` silently replaces the one a reviewer read. A variable defined twice in one "
    "container's env is the same: the kubelet sets the later value, and the API server only warns that it "
    "hides the earlier one.",
    remediation="Merge the repeated keys into one.",
    references=(
        "https://yaml.org/spec/1.2.2/#mapping",
        "https://github.com/kubernetes/kubernetes/blob/master/pkg/api/pod/warnings.go",
    ),
)
def duplicate_key(resource: Resource, ctx: Context) -> Iterator[Violation]:
    workload = ctx.workload_of(resource)
    if workload is not None:
        for _, container in workload.containers():
            yield from _repeated_env(container)
    if resource.positions is None:
        return
    # One key written three times (a chart's literal label beside two helpers that write it too)
    # is one problem: said once, at its last writing, naming every line.
    repeats: dict[tuple[JsonPath, str], list[DuplicateKey]] = {}
    for duplicate in resource.duplicates:
        repeats.setdefault((duplicate.path, duplicate.key), []).append(duplicate)
    for (parent, key), written in repeats.items():
        path = _dup_path(parent, key)
        times = len(written) + 1
        if resource.rendered_from is not None:
            # Lines of helm's or kustomize's output are no file's: the finding is at the later key
            # in the file it came from, and says what happens there.
            said = (
                "appears again in its mapping; the later value silently replaces the first"
                if times == 2
                else f"is written {times} times in its mapping; the last value silently replaces the others"
            )
            yield Violation(path, f"key {key!r} {said}")
            continue
        lines = [written[0].first_line + resource.line_offset]
        lines.extend(resource.position_of(duplicate.place)[0] for duplicate in written)
        if times == 2:
            message = (
                f"key {key!r} appears again (first at line {lines[0]}); the value at line {lines[1]} "
                "silently replaces it"
            )
        else:
            shown = ", ".join(str(line) for line in lines[:-1]) + f" and {lines[-1]}"
            message = (
                f"key {key!r} is written {times} times (lines {shown}); the value at line {lines[-1]} "
                "silently replaces the others"
            )
        yield Violation(path, message)


def _repeated_env(container: Container) -> Iterator[Violation]:
    env = as_list(container.spec.get("env"))
    if len(env) < 2:
        return
    first: dict[str, int] = {}
    for index, item in enumerate(env):
        name = as_mapping(item).get("name")
        if not isinstance(name, str):
            continue
        earlier = first.setdefault(name, index)
        if earlier != index and _replaces(env[earlier], as_mapping(item), name):
            yield Violation(
                container.field("env", index, "name"),
                f"{container.label} env {excerpt(name)} is defined again (first as item {earlier}); "
                "this value silently replaces it",
                container=container.name,
            )


def _replaces(earlier: Any, later: Mapping[str, Any], name: str) -> bool:
    """Whether a later definition of `name` changes what the container gets: not when it repeats
    the earlier one exactly (the same value: nothing is replaced), nor when its value builds on the
    earlier one (`PATH: $(PATH):/opt/bin`: the kubelet expands the reference to the value before,
    and the API server does not warn of it either: pkg/api/pod/warnings.go)."""
    if later == earlier:
        return False
    value, reference = later.get("value"), f"$({name})"
    composes = isinstance(value, str) and reference in value and value != reference
    return not composes or "valueFrom" in later


def _dup_path(path: tuple[str | int, ...], key: str) -> tuple[str | int, ...]:
    return path if path and path[-1] == key else (*path, key)


@rule(
    id="GP003",
    name="malformed-object",
    severity="error",
    scope=Scope.OBJECT,
    summary="Reports documents that try to be Kubernetes objects and fail: no apiVersion, kind or "
    "metadata.name (or generateName), said once, a document that is not a mapping among objects, or - for "
    "kinds without a bundled OpenAPI schema - pod-spec fields of the wrong type, or an ObjectMeta field "
    "(`labels`, `name`…) at the top level, which the API server prunes. A document tries to be an "
    "object when it has an `apiVersion`, a `kind` beside `metadata`, `spec`, `data`, `stringData` or "
    "`items`, or a `metadata` mapping with a name, generateName or namespace; or when it is an item "
    "of a `kind: List`, or plain text or a list in a file that holds objects. Other YAML and JSON (CI "
    "workflows, mkdocs.yml, compose files, Helm values, OpenAPI specs, renovate.json, empty files) and the "
    "configuration files of Kubernetes' programs (kubeconfig, kubeadm, kubelet, kind, kustomize) are "
    "skipped and counted in the summary, never reported.",
    rationale="The API server rejects such objects, and every other rule would be judging a guess. A "
    "repository keeps other YAML beside its manifests, and pre-commit passes every changed file; which "
    "files are applied is the deploy tool's choice (a kustomization's resources, an Argo CD path with its "
    "include and exclude globs). A finding on a CI workflow or an empty placeholder file would be noise, "
    "so only a document with the evidence of an object is held to an object's rules, and what was "
    "skipped is counted where a reviewer sees it.",
    remediation="Give the object apiVersion, kind and metadata.name, and the pod-spec fields their API types.",
    references=("https://kubernetes.io/docs/concepts/overview/working-with-objects/#required-fields",),
)
def malformed_object(resource: Resource, ctx: Context) -> Iterator[Violation]:
    if not isinstance(resource.obj, dict):
        kind = {str: "plain text", list: "a list", int: "a number", float: "a number", bool: "a boolean"}.get(
            type(resource.obj), type(resource.obj).__name__
        )
        yield Violation(
            (), f"document is {kind}, not a Kubernetes object (a mapping with apiVersion and kind)"
        )
        return
    # What the object lacks, said once (one problem, one finding): `object has no apiVersion or kind`.
    missing = [
        key
        for key in ("apiVersion", "kind")
        if not isinstance(resource.obj.get(key), str) or not resource.obj.get(key)
    ]
    metadata = resource.obj.get("metadata")
    path: JsonPath = ()
    if isinstance(metadata, str) and field_placeholder(metadata) is not None:
        pass  # `metadata: ${METADATA}`: GP004's placeholder
    elif not isinstance(metadata, dict):
        missing.append("metadata mapping")
        path = ("metadata",) if "metadata" in resource.obj and len(missing) == 1 else ()
    elif not metadata.get("name") and not metadata.get("generateName"):
        missing.append("metadata.name (or generateName)")
        path = ("metadata",) if len(missing) == 1 else ()
    custom = not has_schema(resource.api_version, resource.kind, ctx.policy.kubernetes_version) and not (
        is_openshift_template(resource.obj)
    )
    # Metadata's fields written beside a missing metadata (armadactl's Queue: `name: test`) are
    # the same problem as the missing mapping: said with it, once.
    outside = [key for key in _META_FIELDS if key in resource.obj] if custom else []
    if missing:
        listed = missing[0] if len(missing) == 1 else f"{', '.join(missing[:-1])} or {missing[-1]}"
        miscased = _miscased_keys(resource.obj, missing)
        if miscased:
            path = (miscased[0],) if len(miscased) == 1 and not path else path
            written = ", ".join(repr(key) for key in miscased)
            listed += f" ({written}: keys are case-sensitive)"
        if outside and not isinstance(metadata, dict):
            written = ", ".join(repr(key) for key in outside)
            listed += f" ({written} at the top level: metadata holds {'them' if len(outside) > 1 else 'it'})"
            outside = []
        yield Violation(path, f"object has no {listed}")
    if custom:
        yield from _metadata_outside_metadata(resource, outside)
        yield from _pod_spec_types(resource, ctx)


# ObjectMeta's fields, which a custom resource's top level cannot hold: the API server prunes an
# unknown field of a structural schema without a word (GP005 reports it for built-in kinds).
# https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#field-pruning
_META_FIELDS = ("labels", "annotations", "name", "namespace", "generateName")


def _metadata_outside_metadata(resource: Resource, keys: list[str]) -> Iterator[Violation]:
    """`labels:` written beside `metadata:` instead of under it (rh-aiservices-bu's ServingRuntimes:
    the dashboard's label was lost)."""
    for key in keys:
        if key in resource.obj:
            yield Violation(
                (key,),
                f"{key!r} is at the top level, not under metadata: the API server drops it from a custom resource",
            )


_LIST_FIELDS = ("volumes", "tolerations", "imagePullSecrets", "resourceClaims")
_CONTAINER_LIST_FIELDS = ("ports", "env", "envFrom", "volumeMounts", "command", "args")
_CONTAINER_MAP_FIELDS = ("resources", "securityContext", "livenessProbe", "readinessProbe", "startupProbe")


def _mistyped(value: object, kind: type) -> bool:
    """A value of the wrong type, that is neither null (absent: an empty field; the API server
    prunes a custom resource's nulls before validating it, apiextensions "Defaulting and
    Nullable") nor a deploy-time placeholder (GP004's finding: one problem, one finding)."""
    if value is None or isinstance(value, kind):
        return False
    return not (isinstance(value, str) and field_placeholder(value) is not None)


def _pod_spec_types(resource: Resource, ctx: Context) -> Iterator[Violation]:
    workload = ctx.workload_of(resource)
    if workload is None:
        return
    for template in workload.templates:
        spec = template.spec
        for key in (*(key for key, _ in CONTAINER_LISTS), *_LIST_FIELDS):
            if key in spec and _mistyped(spec[key], list):
                yield Violation(template.field(key), f"{key} must be a list, not {_type(spec[key])}")
        for key in ("nodeSelector", "affinity", "securityContext"):
            if key in spec and _mistyped(spec[key], dict):
                yield Violation(template.field(key), f"{key} must be a mapping, not {_type(spec[key])}")
        for container in template.containers:
            yield from _container_types(container.spec, container.path, container.resources_key)


def _container_types(
    spec: dict[str, object], path: tuple[str | int, ...], resources_key: str
) -> Iterator[Violation]:
    for key in _CONTAINER_LIST_FIELDS:
        if key in spec and _mistyped(spec[key], list):
            yield Violation((*path, key), f"{key} must be a list, not {_type(spec[key])}")
    for key in (*_CONTAINER_MAP_FIELDS, resources_key):
        if key in spec and _mistyped(spec[key], dict):
            yield Violation((*path, key), f"{key} must be a mapping, not {_type(spec[key])}")
    resources = spec.get(resources_key)
    if isinstance(resources, dict):
        for section in ("requests", "limits"):
            if (
                section in resources
                and resources[section] is not None
                and not isinstance(resources[section], dict)
            ):
                yield Violation(
                    (*path, resources_key, section),
                    f"{section} must be a mapping, not {_type(resources[section])}",
                )


def _type(value: object) -> str:
    return {
        str: "a string",
        int: "a number",
        float: "a number",
        bool: "a boolean",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), "null" if value is None else type(value).__name__)


@rule(
    id="GP005",
    name="schema-violation",
    severity="error",
    scope=Scope.OBJECT,
    summary="Validates built-in kinds against the Kubernetes OpenAPI schema of the policy's Kubernetes "
    "version (strict: unknown fields are errors), and reports each violation at its field; and the names the "
    "API server validates beyond the schema: a workload's name (a lowercase DNS subdomain) and its containers' "
    "(DNS labels).",
    rationale="A misspelt field is dropped by the API server with at most a warning: `resouces:` hides a GPU "
    "limit, `tolerations` under the wrong parent loses the toleration, and the pod schedules somewhere else.",
    remediation="Correct the field name or type to what the Kubernetes API defines.",
    references=("https://kubernetes.io/docs/reference/kubernetes-api/",),
    settings=(Setting("kubernetesVersion", "The Kubernetes minor version whose schemas are used."),),
)
def schema_violation(resource: Resource, ctx: Context) -> Iterator[Violation]:
    if not isinstance(resource.obj, dict) or not resource.kind or not resource.api_version:
        return
    version = resolve_version(ctx.policy.kubernetes_version)  # memoised there, per version
    for error in schema_errors(resource.obj, version):
        if _placeholder_at(resource.obj, error.path):
            continue  # `port: ${PORT:-9002}` is not a wrong type but a template: GP004 says so
        yield Violation(error.path, f"{error.message} (Kubernetes {version} schema)")
    kind = resource.kind
    if kind in NAMED_WORKLOAD_KINDS and has_schema(resource.api_version, kind, version):
        yield from _invalid_names(resource, ctx)


# Built-in kinds whose names the API server validates as DNS subdomains (apimachinery's
# NameIsDNSSubdomain: pkg/apis/core/validation ValidatePodName, apps and batch validation), and
# whose pods' containers it validates as DNS labels (validateContainers: IsDNS1123Label).
NAMED_WORKLOAD_KINDS = frozenset(
    {"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"}
)
_DNS_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_PLACEHOLDER_CHARS = frozenset("${}<>_")  # GP004's to judge (`$NAME`, `{{ .Name }}`, `__NAME__`)


def _invalid_names(resource: Resource, ctx: Context) -> Iterator[Violation]:
    name = as_mapping(resource.obj.get("metadata")).get("name")
    if (
        isinstance(name, str)
        and name
        and not _is_dns_subdomain(name)
        and _PLACEHOLDER_CHARS.isdisjoint(name)
        and not _stands_in(name)
    ):
        yield Violation(
            ("metadata", "name"),
            f"name {excerpt(name)!r} is not a lowercase DNS subdomain (a-z, 0-9, '-' and '.'; at most 253): "
            "the API server refuses the object",
        )
    workload = ctx.workload_of(resource)
    for _, container in workload.containers() if workload is not None else ():
        named = container.spec.get("name")
        if (
            isinstance(named, str)
            and named
            and not _is_dns_label(named)
            and _PLACEHOLDER_CHARS.isdisjoint(named)
        ):
            yield Violation(
                container.field("name"),
                f"container name {excerpt(named)!r} is not a DNS label (a-z, 0-9 and '-'; at most 63): the "
                "API server refuses the pod",
                container=named,
            )


# Names repeat across a repository's objects (`vllm`, `main`): each checked once, bounded in bytes.
@bounded_memo(max_bytes=1 << 16)
def _is_dns_label(text: str) -> bool:
    return 0 < len(text) <= 63 and _DNS_LABEL_CHARS.issuperset(text) and text[0] != "-" and text[-1] != "-"


@bounded_memo(max_bytes=1 << 16)
def _is_dns_subdomain(text: str) -> bool:
    """apimachinery's IsDNS1123Subdomain: at most 253 characters of dot-separated parts, each
    lowercase alphanumerics and '-' that start and end alphanumeric; no part is limited to 63
    (a kubebuilder namePrefix makes 68-character Deployment names the API server accepts)."""
    return len(text) <= 253 and all(_is_dns_part(part) for part in text.split("."))


def _is_dns_part(part: str) -> bool:
    return bool(part) and _DNS_LABEL_CHARS.issuperset(part) and part[0] != "-" and part[-1] != "-"


def _placeholder_at(obj: object, path: JsonPath) -> bool:
    """Whether the value at `path` is a string holding a deploy-time placeholder, which GP004
    reports (kube/placeholders.field_placeholder: one problem, one finding)."""
    value = value_at(obj, path)
    return isinstance(value, str) and field_placeholder(value) is not None
