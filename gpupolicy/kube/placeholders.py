"""Deploy-time placeholders in manifest text, told apart from references the cluster fills in.

A manifest meant to be rendered before it is applied (envsubst, sed scripts, kustomize
replacements, Helm, Jinja) holds placeholders: `$IMAGE_URL`, `${REGISTRY}`, `<your-registry>`,
`__IMAGE_TAG__`, `{{ image }}`, `{{ .Values.image }}`, and in an image `{TAG}`. Where the API server takes a field as
literal text (a container's image, an env value), an unrendered placeholder is applied as is.

Not placeholders, because something in the cluster substitutes them: the kubelet's dependent
variables `$(VAR)` (command, args, env) and Tekton's `$(params.x)`; Katib's
`${trialParameters.x}`; Argo's `{{inputs.parameters.x}}`, `{{workflow.name}}`. They are
*references*: a field holding one cannot be judged, but it is not an error either.
https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/

The scan is linear on any input: one pass over candidate characters; every delimiter search is
bounded (`MAX_PLACEHOLDER`), and the few regular expressions match one character class each.
"""

from __future__ import annotations

import re

from gpupolicy.core.immutable import immutable

MAX_PLACEHOLDER = 128  # longest placeholder recognised (a longer `{{ ... }}` is a reference)
EXCERPT = 80  # longest text echoed in a message

_CANDIDATE = re.compile(r"[$<{_]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UPPER_RUN = re.compile(r"[A-Z0-9_]+")
_ANGLE_NAME = re.compile(r"[A-Za-z0-9 _.-]+")
_SHELL_OPERATORS = frozenset(":-=?+")  # ${VAR:-default}, ${VAR-default}, ${VAR:=x}, ${VAR:?msg}, ${VAR:+x}


@immutable
class Scan:
    spans: tuple[tuple[int, int], ...]  # the placeholders, as (start, end) offsets
    references: bool  # holds a reference the cluster fills in (`$(VAR)`, `${a.b}`, `{{a.b}}`)

    def texts(self, text: str) -> list[str]:
        return [text[start:end] for start, end in self.spans]


NO_PLACEHOLDERS = Scan((), False)  # what most texts hold: one value, not one per scan


def scan(text: str, *, strict: bool = True) -> Scan:
    """The placeholders and references in `text`. `strict` (for images, where `<` and `>` cannot
    occur) takes every `<name>`; otherwise a short lowercase `<pad>` or `<s>` (tokenizer special
    tokens in env values) is text, not a placeholder."""
    if _CANDIDATE.search(text) is None:
        return NO_PLACEHOLDERS
    spans: list[tuple[int, int]] = []
    references = False
    position = 0
    while True:
        candidate = _CANDIDATE.search(text, position)
        if candidate is None:
            break
        start = candidate.start()
        end, reference = _placeholder_at(text, start, strict)
        references = references or reference
        if end > start:
            spans.append((start, end))
            position = end
        else:
            position = start + 1
    return Scan(tuple(spans), references)


def _placeholder_at(text: str, start: int, strict: bool) -> tuple[int, bool]:
    """(end of the placeholder starting at `start`, or `start`; whether it is a reference)."""
    char = text[start]
    if char == "$":
        return _dollar(text, start)
    if char == "<":
        return _angle(text, start, strict), False
    if char == "{":
        return _braces(text, start, strict)
    return _dunder(text, start), False


def _dollar(text: str, start: int) -> tuple[int, bool]:
    following = text[start + 1 : start + 2]
    if following == "(":
        return start, True  # $(VAR): the kubelet's (or Tekton's) reference
    if following == "{":
        name = _IDENTIFIER.match(text, start + 2, start + 2 + MAX_PLACEHOLDER)
        if name is None:
            return start, False
        after = text[name.end() : name.end() + 1]
        if after == "}":
            return name.end() + 1, False
        if after and after in _SHELL_OPERATORS:
            close = text.find("}", name.end(), name.end() + MAX_PLACEHOLDER)
            return (close + 1, False) if close >= 0 else (start, False)
        return start, after in (".", "[")  # ${trialParameters.lr}: Katib's reference
    if start > 0 and text[start - 1] == "$":
        return start, False  # `$$`: an escaped dollar
    name = _IDENTIFIER.match(text, start + 1)
    return (name.end(), False) if name is not None else (start, False)


def _angle(text: str, start: int, strict: bool) -> int:
    close = text.find(">", start + 1, start + 2 + MAX_PLACEHOLDER)
    if close < 0:
        return start
    name = text[start + 1 : close]
    if not name.strip() or _ANGLE_NAME.fullmatch(name) is None:
        return start  # `<|im_start|>`, `</s>`, `<>`: not a name
    if not strict and len(name) < 5 and name.islower() and name.isalpha():
        return start  # `<s>`, `<pad>`, `<unk>`, `<eos>`: tokenizer special tokens
    return close + 1


def _braces(text: str, start: int, strict: bool) -> tuple[int, bool]:
    if text[start + 1 : start + 2] != "{":
        # `{TAG}`, which a `sed 's/{TAG}/…/'` step fills in: a name in single braces, taken where
        # braces cannot occur (an image reference); elsewhere it is a program's own format string.
        name = _IDENTIFIER.match(text, start + 1, start + 1 + MAX_PLACEHOLDER) if strict else None
        if name is not None and text[name.end() : name.end() + 1] == "}":
            return name.end() + 1, False
        return start, False
    close = text.find("}}", start + 2, start + 4 + MAX_PLACEHOLDER)
    if close < 0:
        return start, False
    inner = text[start + 2 : close].strip().strip("-").strip()
    if inner.startswith((".", "$")) or _IDENTIFIER.fullmatch(inner):
        return close + 2, False  # Helm `{{ .Values.image }}`, Jinja `{{ image }}`
    return start, bool(inner)  # Argo `{{inputs.parameters.image}}`, `{{workflow.name}}`


def _dunder(text: str, start: int) -> int:
    """`__IMAGE_TAG__`: two underscores, capitals, digits and underscores, two underscores."""
    if text[start : start + 2] != "__" or (
        start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_")
    ):
        return start
    run = _UPPER_RUN.match(text, start, start + 4 + MAX_PLACEHOLDER)
    assert run is not None  # it starts with "__"
    end = run.end()
    body = text[start + 2 : end - 2]
    if end - start < 5 or not text.endswith("__", start, end) or not any(c.isalpha() for c in body):
        return start
    if end < len(text) and text[end].isalnum():
        return start
    return end


def whole(value: str, *, strict: bool = False) -> str | None:
    """The placeholder `value` consists of (surrounding white space aside), else None."""
    text = value.strip()
    if not text or len(text) > MAX_PLACEHOLDER + 4:
        return None
    found = scan(text, strict=strict)
    if len(found.spans) == 1 and found.spans[0] == (0, len(text)):
        return text
    return None


# What someone writes where the real value goes at deploy time, besides template placeholders:
# `changeme`, `your-node-name`, `insert-your-token-here`. Patterns of one short anchored run: linear.
_FILL_IN_WORDS = frozenset(
    {"changeme", "change-me", "change_me", "replaceme", "replace-me", "replace_me", "your-token", "your_token",
     "yourtoken", "todo"}
)  # fmt: skip
_FILL_IN_PREFIX = re.compile(r"^(your|insert|replace|put|enter|paste|placeholder)[-_ ]", re.IGNORECASE)
_FILL_IN_SUFFIX = re.compile(r"[-_ ](here|placeholder|changeme)$", re.IGNORECASE)


def fill_in(value: str) -> bool:
    """Whether `value` is written to be filled in: a placeholder as a whole (`<node-name>`,
    `${HF_TOKEN}`) or words that say so (`changeme`, `your-node-name`, `insert-token-here`)."""
    text = value.strip()
    return (
        whole(text) is not None
        or text.lower() in _FILL_IN_WORDS
        or _FILL_IN_PREFIX.search(text) is not None
        or _FILL_IN_SUFFIX.search(text) is not None
    )


def braced(value: str) -> str | None:
    """The first `${VAR}` in a value (the form envsubst fills in); None when there is none."""
    if "${" not in value:
        return None
    for text in scan(value, strict=False).texts(value):
        if text.startswith("${") and not _scheme_reference(text):
            return text
    return None


def _scheme_reference(text: str) -> bool:
    """`${env:CLUSTER_NAME}`, `${file:/run/secret}`: a program's own reference by scheme (the
    OpenTelemetry collector's configuration syntax), which no shell or envsubst writes: a
    lowercase scheme, a colon, then a name or path (not a shell modifier such as `:-`, `:=`)."""
    scheme, colon, rest = text[2:].partition(":")
    return bool(colon and scheme.isalpha() and scheme.islower() and (rest[:1].isalpha() or rest[:1] == "/"))


def field_placeholder(value: str) -> str | None:
    """The placeholder GP004 reports in a field the API server takes literally (a name, a
    quantity, a selector): the whole value, or a `${VAR}` or a `<name>` in it (`gs://<bucket>/v1`:
    no URI, name or quantity holds `<`). Rules that judge such a field leave a value holding one to
    GP004 (one problem, one finding)."""
    return whole(value) or braced(value) or angled(value)


# `<gpt-fast-url>`, `<BUCKET_NAME>`: a bounded word in angle brackets. Linear: no nested repetition.
_ANGLED = re.compile(r"<[A-Za-z][A-Za-z0-9_.-]{0,63}>")


def angled(value: str) -> str | None:
    """The first `<name>` in a value, where a word to fill in stands inside a literal one."""
    if "<" not in value:
        return None
    found = _ANGLED.search(value)
    return found.group(0) if found is not None else None


def quantity_placeholder(value: str) -> bool:
    """Whether a quantity field holds what GP004 reports: a placeholder, or an all-capitals name
    (`NUM_GPUS`: a quantity starts with a digit, a sign or a point, as `32G` does)."""
    return field_placeholder(value) is not None or symbolic_quantity(value)


def symbolic_quantity(value: str) -> bool:
    text = value.strip()
    return symbolic_name(text) and (text[0].isalpha() or text[0] == "_")


def symbolic_name(text: str) -> bool:
    """`IMAGE_NAME`, `IMG_PLACEHOLDER`: an all-capitals identifier where an image reference must
    stand. Repository names are lower case (distribution's reference grammar), so this can only
    be a name for something still to be filled in."""
    return 3 <= len(text) <= MAX_PLACEHOLDER and _UPPER_RUN.fullmatch(text) is not None and not text.isdigit()


def symbolic_parts(image: str) -> list[tuple[int, int]]:
    """Spans of the all-capitals names in an image's registry and repository (`YOUR_REGISTRY/app`,
    `ACCOUNT_ID.dkr.ecr.REGION.amazonaws.com/trainer`, `registry.example.com/MY_IMAGE:latest`):
    a registry's host and a repository are lower case in practice and by distribution's grammar
    (a path component: `[a-z0-9]+`; `_` never in a host), so such a part is a name still to fill in.
    The tag (after the repository's `:`) and the digest may hold capitals and are not read."""
    at = image.find("@")
    name = image[:at] if at >= 0 else image
    colon = name.find(":", name.rfind("/") + 1)
    end = colon if colon >= 0 else len(name)
    if name[:end].islower() or not any(char.isupper() for char in name[:end]):
        return []  # no capital: no such part (one pass in C for most images)
    spans, start = [], 0
    for index in range(end + 1):
        if index == end or name[index] in "/.:":
            if symbolic_name(name[start:index]):
                spans.append((start, index))
            start = index + 1
    return spans


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """`text` cut to `limit` characters for a message: its start and its end (where an image's
    tag is), with an ellipsis for the middle."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head) :]}"
