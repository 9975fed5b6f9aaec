"""Image reference parsing: registries with ports, localhost, Docker Hub defaults, tags and digests."""

from __future__ import annotations

import pytest

from gpupolicy.kube.images import parse_image, registry_allowed, tag_valid

DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "registry", "repository", "tag", "digest"),
    [
        ("nginx", "docker.io", "library/nginx", None, None),
        ("nginx:1.27", "docker.io", "library/nginx", "1.27", None),
        ("vllm/vllm-openai:v0.8.5", "docker.io", "vllm/vllm-openai", "v0.8.5", None),
        ("docker.io/vllm/vllm-openai", "docker.io", "vllm/vllm-openai", None, None),
        ("index.docker.io/library/busybox:1.37", "docker.io", "library/busybox", "1.37", None),
        ("registry.example.com:5000/team/app", "registry.example.com:5000", "team/app", None, None),
        ("registry.example.com:5000/team/app:2.1", "registry.example.com:5000", "team/app", "2.1", None),
        (
            f"registry.example.com:5000/team/app:2.1@{DIGEST}",
            "registry.example.com:5000",
            "team/app",
            "2.1",
            DIGEST,
        ),
        (f"localhost/app@{DIGEST}", "localhost", "app", None, DIGEST),
        ("localhost:5000/app:dev", "localhost:5000", "app", "dev", None),
        ("nvcr.io/nvidia/tritonserver:25.01-py3", "nvcr.io", "nvidia/tritonserver", "25.01-py3", None),
        ("us-docker.pkg.dev/proj/repo/img:tag", "us-docker.pkg.dev", "proj/repo/img", "tag", None),
        ("[::1]:5000/app:1", "[::1]:5000", "app", "1", None),
    ],
)
def test_parse(image: str, registry: str, repository: str, tag: str | None, digest: str | None) -> None:
    ref = parse_image(image)
    assert ref is not None
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)


def test_pinned_and_floating() -> None:
    pinned = parse_image(f"vllm/vllm-openai:latest@{DIGEST}")
    assert pinned is not None and pinned.pinned and not pinned.floating
    assert parse_image("vllm/vllm-openai:latest").floating  # type: ignore[union-attr]
    assert parse_image("vllm/vllm-openai").floating  # type: ignore[union-attr]
    untagged_port = parse_image("registry.example.com:5000/app")
    assert untagged_port is not None and untagged_port.floating and untagged_port.effective_tag == "latest"
    short = parse_image("app:1@sha256:1234")
    assert short is not None and not short.pinned and not short.digest_valid and not short.floating


@pytest.mark.parametrize(
    ("tag", "floating"),
    [("admission-amd64-latest", True), ("cuda12_latest", True), ("latest-gpu", True), ("main", True), ("v1.7.0", False),
     ("nightly", False), ("latestfix", False), ("notlatest", False),
     # LocalAI's master builds of each flavour move with the branch; a commit's or a build's do not.
     ("master-cublas-cuda12", True), ("master-sycl-f32-ffmpeg-core", True), ("main-3f2a9c1", False),
     ("main-3f2a9c1-cuda", False), ("develop-20240101", False), ("mainline", False), ("main-1.2.3", False)],
)  # fmt: skip
def test_a_flavours_rolling_tag_floats_as_latest(tag: str, floating: bool) -> None:
    """YuniKorn's `apache/yunikorn:admission-amd64-latest` is the latest build of one flavour."""
    ref = parse_image(f"apache/yunikorn:{tag}")
    assert ref is not None and ref.floating is floating


@pytest.mark.parametrize(
    ("digest", "valid"),
    [
        (DIGEST, True),
        ("sha384:" + "0" * 96, True),
        ("sha512:" + "f" * 128, True),
        ("sha256:" + "A" * 64, False),  # the grammar's hex is lower case
        (DIGEST + "0", False),
        ("sha1:" + "a" * 40, False),
        ("${DIGEST}", False),
    ],
)
def test_digest_validity_is_read_when_parsed(digest: str, valid: bool) -> None:
    ref = parse_image(f"nvcr.io/nim/llm:1.0@{digest}", placeholders=True)
    assert ref is not None and ref.digest_valid is valid and ref.pinned is valid


@pytest.mark.parametrize(
    "image", ["", "  ", "{{ .Values.image }}", "${IMAGE}", "$IMAGE_URL", "IMAGE_NAME", "<image>"]
)
def test_not_a_reference(image: str) -> None:
    assert parse_image(image) is None


@pytest.mark.parametrize(
    ("image", "tag", "registry_known", "version_known"),
    [
        ("<your-registry>/image:latest", "latest", False, True),
        ("${REGISTRY}/vllm:latest", "latest", False, True),
        ("$IMAGE_URL", None, False, False),
        ("nvcr.io/${TEAM}/tritonserver:24.05-py3", "24.05-py3", True, True),
        ("nvcr.io/nvidia/tritonserver:${TAG}", "${TAG}", True, False),
        ("ghcr.io/org/app@__DIGEST__", None, True, False),
        ("{{ .Values.image }}", None, False, False),
    ],
)
def test_placeholders_leave_the_other_parts_to_read(
    image: str, tag: str | None, registry_known: bool, version_known: bool
) -> None:
    assert parse_image(image) is None  # without placeholders=True: not a reference
    ref = parse_image(image, placeholders=True)
    assert ref is not None and ref.tag == tag
    assert (ref.registry_known, ref.version_known) == (registry_known, version_known)


@pytest.mark.parametrize("image", ["$(params.image)", "{{inputs.parameters.image}}", "${REGISTRY}/App:1"])
def test_references_and_broken_names_stay_unparsed(image: str) -> None:
    assert parse_image(image, placeholders=True) is None


def test_name_is_fully_qualified() -> None:
    assert parse_image("busybox").name == "docker.io/library/busybox"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("image", "allowed", "expected"),
    [
        ("nvcr.io/nvidia/cuda:12.8.0-base", ["nvcr.io"], True),
        ("vllm/vllm-openai:v0.8.5", ["docker.io/vllm"], True),
        ("vllmx/vllm-openai:v0.8.5", ["docker.io/vllm"], False),
        ("busybox:1.37", ["docker.io/library"], True),
        ("busybox:1.37", ["index.docker.io/library"], True),
        ("registry.example.com:5000/a:1", ["registry.example.com:5000"], True),
        ("registry.example.com/a:1", ["registry.example.com:5000"], False),
        ("us-docker.pkg.dev/p/r/i:1", ["*.pkg.dev"], True),
        ("ghcr.io/org/x:1", ["nvcr.io", "ghcr.io/other"], False),
    ],
)
def test_registry_allowed(image: str, allowed: list[str], expected: bool) -> None:
    ref = parse_image(image)
    assert ref is not None
    assert registry_allowed(ref, allowed) is expected


@pytest.mark.parametrize("image", ["ab\n:tag", "team/app\n@sha256:" + "a" * 64, "nginx\n"])
def test_a_newline_inside_the_name_is_no_reference(image: str) -> None:
    """`$` matches before a final newline: the grammar is matched whole (`ab\\n` was a repository)."""
    assert parse_image(image + ":x" if image.endswith("\n") else image) is None


@pytest.mark.parametrize(
    ("tag", "valid"), [("v1", True), ("_x.y-z", True), ("v1\n", False), ("¹", False), ("vé", False)]
)
def test_tags_are_the_grammar_in_ascii(tag: str, valid: bool) -> None:
    """The grammar's `\\w` is Go's, ASCII only (Python's also takes "¹" and "é")."""
    assert tag_valid(tag) is valid


@pytest.mark.parametrize(
    ("image", "floating"),
    [
        ("ghcr.io/open-webui/pipelines:main", True),  # every push to main retags it
        ("example.com/app:Master", True),
        ("gcr.io/xl-ml-test/tensorflow:nightly", False),  # a release channel, chosen as one
        ("nginx:stable", False),
        ("vllm/vllm-openai:v0.10.0", False),
        ("vllm/vllm-openai", True),
    ],
)
def test_a_branchs_tag_floats_as_latest(image: str, floating: bool) -> None:
    ref = parse_image(image)
    assert ref is not None and ref.floating is floating


@pytest.mark.parametrize(
    ("image", "known"),
    [("${REGISTRY}train:latest", True), ("${REGISTRY}${IMAGE}:latest", True), ("${REGISTRY}/train:latest", True),
     ("${REGISTRY}train", False), ("train:${TAG}", False), ("train:v1-${SUFFIX}", False)],
)  # fmt: skip
def test_a_placeholder_before_the_tags_colon_leaves_the_tag_known(image: str, known: bool) -> None:
    """aws-do-ray's `${REGISTRY}aws-ray-custom:latest`: the registry prefix is glued to the name,
    and the tag written after the colon is the tag."""
    ref = parse_image(image, placeholders=True)
    assert ref is not None and ref.version_known is known
