"""Image references: `parse_image` on any text, and a round trip of references generated from the
distribution grammar (https://github.com/distribution/reference/blob/main/reference.go):

    reference := name [ ":" tag ] [ "@" digest ]
    name      := [ domain "/" ] path-component *( "/" path-component )
    domain    := host [ ":" port ]             (a registry: holds "." or ":", or is "localhost")
    path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag       := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
    digest    := "sha256:" [a-f0-9]{64}

A reference without a registry is on Docker Hub (`docker.io`), a one-component one under
`library/` (Docker's normalisation, reference/normalize.go).
"""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from gpupolicy.kube.images import DOCKER_HUB, parse_image, tag_valid

PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")

alphanumeric = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=6)
separator = st.sampled_from([".", "_", "__", "-", "--", "---"])


@st.composite
def path_components(draw: st.DrawFn) -> str:
    parts = [draw(alphanumeric)]
    for _ in range(draw(st.integers(0, 2))):
        parts += [draw(separator), draw(alphanumeric)]
    return "".join(parts)


@st.composite
def hosts(draw: st.DrawFn) -> str:
    """A registry host the normalisation recognises: a dotted name, localhost, or an IP."""
    label = st.from_regex(r"[a-zA-Z0-9]([a-zA-Z0-9-]{0,6}[a-zA-Z0-9])?", fullmatch=True)
    kind = draw(st.sampled_from(["dotted", "localhost", "ipv4", "ipv6"]))
    if kind == "dotted":
        host = ".".join(draw(st.lists(label, min_size=2, max_size=4)))
    elif kind == "localhost":
        host = "localhost"
    elif kind == "ipv4":
        host = ".".join(str(draw(st.integers(0, 255))) for _ in range(4))
    else:
        host = draw(st.sampled_from(["[::1]", "[fe80::1]", "[2001:db8::7]"]))
    port = draw(st.none() | st.integers(1, 65535))
    return host if port is None else f"{host}:{port}"


@st.composite
def references(draw: st.DrawFn) -> tuple[str, str, str, str | None, str | None]:
    """(reference, registry, repository, tag, digest) as the normalisation reads them."""
    registry = draw(st.none() | hosts())
    components = draw(st.lists(path_components(), min_size=1, max_size=4))
    if registry is None and len(components) > 1 and ("." in components[0] or components[0] == "localhost"):
        components[0] = components[0].replace(".", "-").replace("localhost", "local")  # else a registry
    path = "/".join(components)
    tag = draw(st.none() | st.from_regex(TAG, fullmatch=True))
    digest = draw(st.none() | st.text("0123456789abcdef", min_size=64, max_size=64).map("sha256:".__add__))
    text = f"{registry}/{path}" if registry else path
    text += f":{tag}" if tag is not None else ""
    text += f"@{digest}" if digest is not None else ""
    if registry is None:
        repository = path if "/" in path else f"library/{path}"
        return text, DOCKER_HUB, repository, tag, digest
    return text, registry.lower(), path, tag, digest


@given(references())
def test_a_valid_reference_round_trips(case: tuple[str, str, str, str | None, str | None]) -> None:
    text, registry, repository, tag, digest = case
    ref = parse_image(text)
    assert ref is not None, text
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry, repository, tag, digest)
    assert ref.name == f"{registry}/{repository}"
    rebuilt = ref.name + (f":{ref.tag}" if ref.tag else "") + (f"@{ref.digest}" if ref.digest else "")
    assert parse_image(rebuilt) == parse_image(rebuilt)  # deterministic
    again = parse_image(rebuilt)
    assert again is not None and (again.registry, again.repository, again.tag, again.digest) == (
        registry,
        repository,
        tag,
        digest,
    )


@given(references())
def test_tags_and_digests_are_detected(case: tuple[str, str, str, str | None, str | None]) -> None:
    text, _, _, tag, digest = case
    ref = parse_image(text)
    assert ref is not None
    assert ref.pinned is (digest is not None)
    assert ref.effective_tag == (tag if tag is not None else None if digest is not None else "latest")
    assert ref.floating is (digest is None and (tag is None or tag == "latest"))
    assert tag is None or tag_valid(tag)


@given(st.text(max_size=80) | st.from_regex(r"[a-z0-9./:@_${}<>\n \t-]{0,60}", fullmatch=True), st.booleans())
def test_any_text_parses_or_is_refused_without_raising(text: str, placeholders: bool) -> None:
    ref = parse_image(text, placeholders=placeholders)
    if ref is None or ref.placeholders:
        return
    assert ref.raw == text.strip()
    for component in ref.repository.split("/"):
        assert PATH_COMPONENT.fullmatch(component), (text, ref.repository)


@given(st.text(max_size=140))
def test_tag_validity_is_the_grammar_in_ascii(text: str) -> None:
    assert tag_valid(text) is bool(TAG.fullmatch(text))
