"""Container image references: registry (with port, or localhost), repository, tag and digest.

The grammar is the distribution project's (`reference/reference.go`) and the normalisation is
Docker's (`reference/normalize.go`): the first path component is a registry only when it holds a
`.` or a `:` or is `localhost`; otherwise the image is on Docker Hub, `docker.io`, and a
single-component name lives under `library/`. A tag follows the last `:` after the last `/`,
so `registry:5000/team/app` has a port and no tag; a digest follows `@`.
https://github.com/distribution/reference/blob/main/reference.go
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

from gpupolicy.core.immutable import immutable
from gpupolicy.kube.placeholders import scan, symbolic_name, symbolic_parts

DOCKER_HUB = "docker.io"
DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
OFFICIAL_NAMESPACE = "library"
LATEST = "latest"
# Tags that name a branch, moved by every push to it as `latest` is (a CI's
# `type=ref,event=branch` tag: `:main`). A release channel (`:nightly`, `:stable`) is chosen as one:
# a nightly test runs the nightly build on purpose.
MOVING_TAGS = frozenset({LATEST, "main", "master", "develop", "dev", "head"})

# Images written to be replaced before the pod runs, never pulled: a kustomization's replacements
# target (`replaced-by-kustomize`, ODH's `placeholder`, written over from params.env), and Istio's
# `auto`, which its sidecar injector replaces in a gateway (IST0146: "The auto image is a
# placeholder"). GP004 names the former; the latter is the injector's.
PLACEHOLDER_IMAGES = frozenset(
    {
        "placeholder",
        "image-placeholder",
        "replaced-by-kustomize",
        "replace-me",
        "replaceme",
        "changeme",
        "todo",
    }
)
STAND_IN_IMAGES = PLACEHOLDER_IMAGES | {"auto"}


# A variant's rolling tag (`admission-amd64-latest`, `cuda12_latest`, TorchServe's `latest-gpu`):
# `latest` of one build flavour, written after the flavour or before it.
ROLLING_SUFFIXES = ("-latest", "_latest", ".latest")
ROLLING_PREFIXES = ("latest-", "latest_", "latest.")


def moving_tag(tag: str) -> bool:
    """Whether a tag moves with every push: `latest`, a branch's name, or a flavour's `…-latest`
    or `master-…`."""
    return tag.lower() in MOVING_TAGS or rolling_tag(tag)


def rolling_tag(tag: str) -> bool:
    lowered = tag.lower()
    return (
        lowered.endswith(ROLLING_SUFFIXES) or lowered.startswith(ROLLING_PREFIXES) or _branch_flavour(lowered)
    )


# A branch's build of one flavour, moved by every push to the branch as the bare branch tag is:
# LocalAI's `master-cublas-cuda12`. A branch name followed by a commit (`main-3f2a9c1`) or a build
# number or date (`dev-20240101`) names one build, which does not move.
_BRANCH_FLAVOUR = re.compile(r"(?:main|master|develop)[-_.]([a-z0-9]+)")
_COMMIT_OR_NUMBER = re.compile(r"[0-9a-f]{7,40}|[0-9]+")


def _branch_flavour(lowered: str) -> bool:
    found = _BRANCH_FLAVOUR.match(lowered)
    return found is not None and _COMMIT_OR_NUMBER.fullmatch(found.group(1)) is None


# Matched whole (`fullmatch`): `$` also matches before a final newline, so `^…$` took "ab\n" as a
# repository. The grammar's `\w` is Go's, ASCII only: Python's `\w` also takes "¹" and "é".
_DIGEST = re.compile(r"sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128}")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
# distribution/reference: path components are lowercase alphanumerics with separators.
_REPOSITORY = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*")


@immutable
class ImageRef:
    raw: str
    registry: str  # normalised: docker.io for Docker Hub
    repository: str  # library/nginx, vllm/vllm-openai, nvidia/tritonserver
    tag: str | None
    digest: str | None  # "sha256:…" as written (validity: `digest_valid`)
    registry_explicit: bool  # the reference names its registry
    placeholders: tuple[str, ...] = ()  # deploy-time placeholders it holds (`parse_image(placeholders=True)`)
    registry_known: bool = True  # False: a placeholder may stand for the registry
    version_known: bool = True  # False: a placeholder may stand for the tag or digest
    # `digest` is a well-formed content digest: matched once, when parsed (`pinned` and
    # `floating` are asked of every image by GP701 and GP702; the match took 1 us a time).
    digest_valid: bool = False

    @property
    def name(self) -> str:
        """The fully qualified repository: `docker.io/library/nginx`."""
        return f"{self.registry}/{self.repository}"

    @property
    def pinned(self) -> bool:
        """Pinned by a well-formed content digest: the kubelet pulls exactly these bytes."""
        return self.digest_valid

    @property
    def effective_tag(self) -> str | None:
        """The tag the runtime resolves: `latest` when neither tag nor digest is given."""
        if self.tag is not None:
            return self.tag
        return None if self.digest is not None else LATEST

    @property
    def floating(self) -> bool:
        """Resolved by a moving tag: `:latest` or a branch's (`:main`), or no tag and no digest."""
        tag = self.effective_tag
        return not self.pinned and tag is not None and moving_tag(tag)


def parse_image(image: str, *, placeholders: bool = False) -> ImageRef | None:
    """Parse `image`; None when it is empty or not a reference at all (`IMAGE_NAME`: repositories
    are lowercase), or holds a reference the cluster fills in (Tekton `$(params.image)`, Argo
    `{{inputs.parameters.image}}`). A deploy-time placeholder (`${REGISTRY}/vllm:latest`) makes it
    None too, unless `placeholders`: then the parts the placeholders leave intact are parsed and
    the others are marked unknown (`registry_known`, `version_known`)."""
    raw = image.strip()
    if not raw or raw.lower() in STAND_IN_IMAGES:
        return None
    found = scan(raw)
    if found.references or (found.spans and not placeholders):
        return None
    spans = found.spans
    if placeholders and not raw.islower() and not symbolic_name(raw):
        # `YOUR_REGISTRY/app:latest`: what the all-capitals parts leave intact is still read.
        extra = [
            (start, end)
            for start, end in symbolic_parts(raw)
            if not any(start < other_end and other_start < end for other_start, other_end in spans)
        ]
        spans = tuple(sorted((*spans, *extra)))
    # Each placeholder is masked with a run of "a" of its length: the reference grammar then
    # reads around it, and every offset still points into `raw`.
    pieces, previous = [], 0
    for start, end in spans:
        pieces += [raw[previous:start], "a" * (end - start)]
        previous = end
    masked = "".join(pieces) + raw[previous:]
    # An all-capitals part ends at a `/`, `.` or `:`: unlike `app${TAG}`, it holds no tag or digest.
    return _parse(raw, masked, spans, version_spans=found.spans)


def _parse(
    raw: str,
    masked: str,
    spans: tuple[tuple[int, int], ...],
    *,
    version_spans: tuple[tuple[int, int], ...] | None = None,
) -> ImageRef | None:
    at = masked.find("@")
    name_end = at if at >= 0 else len(masked)
    slash = masked.find("/", 0, name_end)
    first = masked[:slash]
    if slash >= 0 and ("." in first or ":" in first or first == "localhost"):
        registry, path_start, explicit = raw[:slash], slash + 1, True
    else:
        registry, path_start, explicit = DOCKER_HUB, 0, False
    last_slash = masked.rfind("/", path_start, name_end)
    colon = masked.rfind(":", max(last_slash + 1, path_start), name_end)
    path_end = colon if colon >= 0 else name_end
    path, masked_path = raw[path_start:path_end], masked[path_start:path_end]
    tag = raw[colon + 1 : name_end] if colon >= 0 else None
    if registry.lower() in DOCKER_HUB_ALIASES:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in masked_path:
        path, masked_path = f"{OFFICIAL_NAMESPACE}/{path}", f"{OFFICIAL_NAMESPACE}/{masked_path}"
    if not _REPOSITORY.fullmatch(masked_path):
        return None

    # A placeholder in the first component may hold a registry host; one in the last component, a
    # tag or digest; one after `@`, the digest.
    first_end = slash if slash >= 0 else name_end
    last_start = last_slash + 1 if last_slash >= 0 else path_start
    digest = raw[at + 1 :] if at >= 0 and at + 1 < len(raw) else None
    versions = spans if version_spans is None else version_spans
    # `${REGISTRY}app:latest`: a placeholder before the tag's colon cannot hold the tag written after it.
    version_known = (
        not _touched(versions, colon, len(raw))
        if colon >= 0
        else not _touched(versions, last_start, len(raw))
    )
    return ImageRef(
        raw=raw,
        registry=registry.lower(),
        repository=path,
        tag=tag if tag else None,
        digest=digest,
        registry_explicit=explicit,
        placeholders=tuple(raw[start:end] for start, end in spans) if spans else (),
        registry_known=not spans or not _touched(spans, 0, first_end),
        version_known=version_known,
        digest_valid=digest is not None and _DIGEST.fullmatch(digest) is not None,
    )


def _touched(spans: tuple[tuple[int, int], ...], start: int, end: int) -> bool:
    """Whether a placeholder span overlaps `start:end`."""
    return any(span_start < end and start < span_end for span_start, span_end in spans)


def tag_valid(tag: str) -> bool:
    return bool(_TAG.fullmatch(tag))


def normalise_allow_entry(entry: str) -> str:
    """`nginx`-style shorthands in an allow list mean what they mean in an image reference:
    `docker.io/vllm` stays, `index.docker.io/x` becomes `docker.io/x`."""
    entry = entry.strip().rstrip("/")
    host, slash, rest = entry.partition("/")
    if host.lower() in DOCKER_HUB_ALIASES:
        return f"{DOCKER_HUB}{slash}{rest}"
    return entry


def registry_allowed(ref: ImageRef, allowed: Iterable[str]) -> bool:
    """Whether `ref` comes from an allowed source. An entry is a registry host (`nvcr.io`,
    `registry.local:5000`, a glob like `*.pkg.dev`), or a host with a path prefix matched on
    whole path components (`docker.io/vllm` allows `vllm/vllm-openai`, not `vllmx/…`)."""
    for raw_entry in allowed:
        entry = normalise_allow_entry(raw_entry)
        if not entry:
            continue
        host, slash, prefix = entry.partition("/")
        if not fnmatch.fnmatchcase(ref.registry, host.lower()):
            continue
        if not slash or ref.repository == prefix or ref.repository.startswith(prefix + "/"):
            return True
    return False


# A build for CPUs of a GPU program, named so by its tag or repository: Hugging Face's TGI for Xeon
# (`text-generation-inference:2.4.0-intel-cpu`, "Using TGI with Intel CPUs"), vLLM's CPU image
# (`vllm-openai-cpu`), `…:latest-cpu`. `cpu` as a word of the name: `cpus` or `cpuset` are not.
_BUILD_WORDS = re.compile(r"[-_.]")


def cpu_build(ref: ImageRef) -> bool:
    """Whether the image is a CPU build: `cpu` is a word of its tag or of its repository's last
    component (words are separated by `-`, `_` and `.`)."""
    last = ref.repository.rsplit("/", 1)[-1]
    return any("cpu" in _BUILD_WORDS.split(part.lower()) for part in (last, ref.tag or ""))
