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
from dataclasses import dataclass

DOCKER_HUB = "docker.io"
DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
OFFICIAL_NAMESPACE = "library"
LATEST = "latest"

_DIGEST = re.compile(r"^(sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_TEMPLATE = re.compile(r"\{\{|\$\{|\$\(|\$[A-Za-z_]|<[A-Za-z_-]+>")
# distribution/reference: path components are lowercase alphanumerics with separators.
_REPOSITORY = re.compile(
    r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$"
)


@dataclass(frozen=True, slots=True)
class ImageRef:
    raw: str
    registry: str  # normalised: docker.io for Docker Hub
    repository: str  # library/nginx, vllm/vllm-openai, nvidia/tritonserver
    tag: str | None
    digest: str | None  # "sha256:…" as written (validity: `digest_valid`)
    registry_explicit: bool  # the reference names its registry

    @property
    def name(self) -> str:
        """The fully qualified repository: `docker.io/library/nginx`."""
        return f"{self.registry}/{self.repository}"

    @property
    def digest_valid(self) -> bool:
        return self.digest is not None and bool(_DIGEST.match(self.digest))

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
        """Resolved by a moving tag: `:latest`, or no tag and no digest."""
        return not self.pinned and self.effective_tag == LATEST


def is_templated(image: str) -> bool:
    """Unrendered Helm/Kustomize/shell placeholders (GP004 reports the file)."""
    return bool(_TEMPLATE.search(image))


def parse_image(image: str) -> ImageRef | None:
    """Parse `image`; None when it is empty, an unrendered template, or not a reference at all
    (`IMAGE_NAME`: a placeholder; repositories are lowercase)."""
    raw = image.strip()
    if not raw or is_templated(raw):
        return None
    rest, _, digest = raw.partition("@")
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, path, explicit = first, remainder, True
    else:
        registry, path, explicit = DOCKER_HUB, rest, False
    tag: str | None = None
    last_slash = path.rfind("/")
    colon = path.rfind(":")
    if colon > last_slash:
        path, tag = path[:colon], path[colon + 1 :]
    if registry.lower() in DOCKER_HUB_ALIASES:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in path:
        path = f"{OFFICIAL_NAMESPACE}/{path}"
    if not _REPOSITORY.match(path):
        return None
    return ImageRef(
        raw=raw,
        registry=registry.lower(),
        repository=path,
        tag=tag if tag else None,
        digest=digest or None,
        registry_explicit=explicit,
    )


def tag_valid(tag: str) -> bool:
    return bool(_TAG.match(tag))


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
