"""GP701-GP704: what a workload runs must be the thing that was reviewed: images by digest,
from allowed registries, and models at a fixed revision.

Image references are parsed once (`gpupolicy.kube.images`), model references once
(`gpupolicy.kube.models`). An experiment's arms are only comparable when image and model are fixed
(DESIGN.md): a moving tag or an unpinned model changes under them between runs.
https://kubernetes.io/docs/concepts/containers/images/#image-names
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gpupolicy.core.findings import Severity
from gpupolicy.core.vocabulary import MODEL_ANNOTATION
from gpupolicy.engine.context import Context
from gpupolicy.engine.registry import Parameter, Setting, Violation, rule
from gpupolicy.kube.images import LATEST, ImageRef, parse_image, registry_allowed, rolling_tag
from gpupolicy.kube.models import ModelRef, models_of, parse_annotation, served_names, workload_models
from gpupolicy.kube.placeholders import excerpt
from gpupolicy.kube.pod_spec import Container, Workload
from gpupolicy.kube.roles import NOT_AGENT, SERVERS, command_text, runs_a_simulator, serving_templates_of
from gpupolicy.policy.loading import Policy

IMAGES = "https://kubernetes.io/docs/concepts/containers/images/"
SLSA = "https://slsa.dev/spec/v1.0/requirements"


def _images(workload: Workload) -> Iterator[tuple[Container, ImageRef]]:
    for _, container in workload.containers():
        ref = _image_of(container)
        if ref is not None:
            yield container, ref


_NO_IMAGE: Any = object()


def _image_of(container: Container) -> ImageRef | None:
    """The container's parsed image, once per container (four rules read it). An image with a
    deploy-time placeholder (GP004) is parsed around it: what the placeholder leaves intact is still
    checked (`<your-registry>/app:latest` is tagged latest), what it may stand for is not."""
    ref = container.cache.get("image-ref", _NO_IMAGE)
    if ref is _NO_IMAGE:
        ref = container.cache["image-ref"] = parse_image(container.image, placeholders=True)
    found: ImageRef | None = ref
    return found


REQUIRE_DIGESTS = Parameter(
    "requireDigests",
    False,
    "Digests are the organisation's rule: a version tag without one is a warning (otherwise info).",
    setting="supplyChain.requireDigests",
)


@rule(
    id="GP701",
    roles=NOT_AGENT,
    name="image-not-pinned",
    severity="warning",
    summary="Reports an image without an `@sha256:` digest.",
    rationale="A tag can be moved: two pods of one Deployment, or two arms of an experiment, may run different "
    "bytes under the same name, and a pushed tag changes what a rollback restores.",
    remediation="Reference the image by digest (image: repo:tag@sha256:…), e.g. with a digest-resolving CD step.",
    references=(IMAGES, SLSA),
    parameters=(REQUIRE_DIGESTS,),
)
def image_not_pinned(workload: Workload, ctx: Context) -> Iterator[Violation]:
    # A version tag is how most teams deploy; a digest is an organisation's choice (SLSA, signed
    # releases). So a version tag without a digest is information unless the policy requires digests.
    severity = None if ctx.policy.param(REQUIRE_DIGESTS) else Severity.INFO
    for container, ref in _images(workload):
        if ref.pinned or ref.floating or not ref.version_known:  # `:latest` and untagged are GP702's alone
            continue
        detail = f" (digest {excerpt(ref.digest)} is malformed)" if ref.digest else ""
        yield Violation(
            container.field("image"),
            f"{container.label} image {excerpt(ref.raw)} is not pinned by digest{detail}",
            container=container.name,
            severity=Severity.WARNING if detail else severity,
        )


@rule(
    id="GP702",
    name="image-latest-or-untagged",
    severity="error",
    summary="Reports an image tagged `:latest`, or with neither tag nor digest (which means latest), or tagged "
    "with a branch's name (`:main`, `:master`, `:develop`), which every push to the branch moves as it "
    "moves latest.",
    rationale="`latest` is whatever was pushed last: the pull policy defaults to Always, nodes run different "
    "versions, and neither a rollback nor an experiment repeat can name what ran.",
    remediation="Use an immutable version tag, and better a digest.",
    references=(IMAGES, "https://kubernetes.io/docs/concepts/configuration/overview/#container-images"),
)
def image_latest_or_untagged(workload: Workload, ctx: Context) -> Iterator[Violation]:
    for container, ref in _images(workload):
        if ref.floating and ref.version_known:
            if not ref.tag:
                what = "has no tag (it means latest)"
            elif ref.tag.lower() == LATEST:
                what = "is tagged latest"
            elif rolling_tag(ref.tag):
                what = f"is tagged {excerpt(ref.tag, 40)}, a rolling tag that every build of the flavour moves, as latest"
            else:
                what = f"is tagged {excerpt(ref.tag, 40)}, a branch's tag that every push moves, as latest"
            yield Violation(
                container.field("image"),
                f"{container.label} image {excerpt(ref.raw)} {what}",
                container=container.name,
            )


def _image_floats(container: Container) -> bool:
    """Whether GP702 reports the container's image (untagged, `latest` or a branch's tag)."""
    ref = _image_of(container)
    return ref is not None and ref.floating and ref.version_known


def _has_allow_list(policy: Policy) -> bool:
    return bool(policy.supply_chain.allowed_registries)


@rule(
    id="GP703",
    can_find=_has_allow_list,  # no check without an allow list
    name="image-registry-not-allowed",
    severity="error",
    summary="Reports an image whose registry (or registry/path prefix) is not in the policy's allow list; no check "
    "when the list is empty.",
    rationale="Images from unreviewed registries bypass the organisation's scanning, signing and mirroring; a "
    "typo-squatted repository looks exactly like the real one in a manifest.",
    remediation="Pull the image from an allowed registry (mirror it there), or add its registry to supplyChain.allowedRegistries.",
    references=(IMAGES, SLSA),
    settings=(
        Setting(
            "supplyChain.allowedRegistries",
            "Registries (host, glob, or host/path prefix) images may come from.",
        ),
    ),
)
def image_registry_not_allowed(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not _has_allow_list(ctx.policy):
        return
    allowed = ctx.policy.supply_chain.allowed_registries
    for container, ref in _images(workload):
        if ref.registry_known and not registry_allowed(ref, allowed):
            yield Violation(
                container.field("image"),
                f"{container.label} image {excerpt(ref.name)} comes from {excerpt(ref.registry)}, not an allowed registry",
                container=container.name,
            )


def _describe(model: ModelRef) -> str:
    if model.revision:
        return f"model {model.name} at revision {model.revision!r}, a moving branch"
    return f"model {model.name} without a revision"


@rule(
    id="GP704",
    roles=SERVERS,
    name="model-unpinned",
    severity="warning",
    summary="Reports a serving workload that names a model (the `gpupolicy.io/model` annotation, vLLM `--model` or "
    "`vllm serve MODEL`, TGI `--model-id`/MODEL_ID, SGLang `--model-path`, Triton `--model-repository`, a NIM "
    "image) without a fixed revision. A server told to load dummy weights (`--load-format dummy`) reads no "
    "checkpoint and is not judged.",
    rationale="A model id without a revision loads whatever the hub's main branch holds at pod start: replicas "
    "started a day apart serve different weights, and experiment arms stop being comparable.",
    remediation="Pin the model with --revision <commit> (REVISION for TGI) or annotate gpupolicy.io/model: org/name@<commit>.",
    references=(
        "https://docs.vllm.ai/en/latest/configuration/engine_args.html",
        "https://huggingface.co/docs/text-generation-inference/reference/launcher#revision",
    ),
)
def model_unpinned(workload: Workload, ctx: Context) -> Iterator[Violation]:
    if not ctx.is_serving(workload):
        return
    annotation = workload.annotations.get(MODEL_ANNOTATION)
    if isinstance(annotation, str):
        name, revision = parse_annotation(annotation)
        model = ModelRef(name, revision, "annotation", ("metadata", "annotations", MODEL_ANNOTATION))
        if not model.pinned:
            yield Violation(model.path, f"annotation {MODEL_ANNOTATION} names {_describe(model)}")
        return  # the annotation is the workload's declared identity
    seen: set[str] = set()
    for model in workload_models(workload.kind, workload.resource.obj):
        if model.is_local or model.is_unresolved or model.pinned or model.name in seen or not model.name:
            continue
        seen.add(model.name)
        yield Violation(model.path, f"{workload.kind} serves {_describe(model)}")
    # A container told to serve under the service's served name serves the service's model.
    seen.update(served_names(workload.kind, workload.resource.obj))
    for template in serving_templates_of(workload):
        for container in template.containers:
            yield from _container_models(container, seen)


# vLLM's and SGLang's `--load-format dummy`: weights made up at random in the model's architecture,
# no checkpoint read (a load test), so the model id names a shape and there is nothing to pin.
# https://docs.vllm.ai/en/latest/configuration/engine_args.html (--load-format)
_DUMMY_WEIGHTS = ("--load-format dummy", "--load-format=dummy", "--load_format dummy", "--load_format=dummy")


def _loads_dummy_weights(container: Container) -> bool:
    text = command_text(container)
    return any(flag in text for flag in _DUMMY_WEIGHTS)


def _container_models(container: Container, seen: set[str]) -> Iterator[Violation]:
    if runs_a_simulator(container) or _loads_dummy_weights(container):
        return  # llm-d's inference simulator answers under any name; it loads no model
    for model in models_of(container):
        if model.is_local or model.is_unresolved or model.pinned or model.name in seen or not model.name:
            continue
        if model.path == container.field("image") and _image_floats(container):
            continue  # a NIM image's `:latest`: the model's revision is the image's tag, GP702's finding
        seen.add(model.name)
        yield Violation(model.path, f"{container.label} serves {_describe(model)}", container=container.name)
