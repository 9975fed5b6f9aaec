"""Literal credentials: values that are a token, key or password written into a manifest.

Two kinds of evidence, kept apart so false positives stay few:

- the value's own shape: a provider's token format (Hugging Face `hf_…`, OpenAI/Anthropic
  `sk-…`, AWS `AKIA…`, GitHub `ghp_…`/`github_pat_…`, Slack `xox?-…` and webhooks, Google
  `AIza…`, JWTs, PEM private keys). These are specific enough to report wherever they appear;
- the name: `*_TOKEN`, `*_PASSWORD`, `*_SECRET`, `*_KEY`, `*_API_KEY`… with a literal value that
  is not a placeholder (`EMPTY`, `changeme`, `<token>`), a reference (`$(VAR)`, `${VAR}`), a path,
  a URL without credentials, a number or a boolean.

Formats: https://huggingface.co/docs/hub/security-tokens,
https://docs.github.com/en/authentication/keeping-your-account-and-data-secure/about-authentication-to-github#githubs-token-formats,
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids,
https://api.slack.com/authentication/token-types, https://datatracker.ietf.org/doc/html/rfc7519.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gpupolicy.core.bounded_cache import bounded_memo
from gpupolicy.core.immutable import immutable
from gpupolicy.core.linear_regex import LinearPattern, compile_linear
from gpupolicy.kube.placeholders import fill_in


@immutable
class Credential:
    kind: str  # what it looks like: "Hugging Face token", "password"…
    # "value" (its shape), "name" (a credential-named variable), "placeholder", or "parameter" (an
    # Argo workflow's parameter, whose value the Workflow object holds)
    evidence: str

    def describe(self) -> str:
        return self.kind if self.evidence == "value" else f"{self.kind} (by its name)"


# Value shapes, most specific first. Those that can start anywhere in a long run of their own
# characters are RE2 (linear time: gpupolicy/core/linear_regex.py): with Python's re, `-eyJ-eyJ…` or
# `aaaa… ://` took time quadratic in the value. RE2 has no lookbehind: `(?:^|[^…])` instead.
VALUE_PATTERNS: tuple[tuple[str, re.Pattern[str] | LinearPattern], ...] = (
    ("private key", re.compile(r"-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----")),
    ("Hugging Face token", re.compile(r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}")),
    ("Anthropic API key", re.compile(r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI-style API key", re.compile(r"(?<![A-Za-z0-9])sk-(proj-|svcacct-)?[A-Za-z0-9_-]{20,}")),
    (
        "AWS access key id",
        re.compile(r"(?<![A-Z0-9])(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"),
    ),
    (
        "GitHub token",
        re.compile(r"(?<![A-Za-z0-9])(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})"),
    ),
    ("Slack token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}")),
    (
        "Slack webhook URL",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+"),
    ),
    ("Google API key", re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}")),
    (
        "JSON Web Token",
        compile_linear(r"(?:^|[^A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    ("URL with an embedded password", compile_linear(r"[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@$]{3,}@")),
)

# Names: the last word(s) of the variable name, split on `_`, `-`, `.` and camelCase.
_NAME_KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("private", "key"), "private key"),
    (("api", "key"), "API key"),
    (("apikey",), "API key"),
    (("access", "key"), "access key"),
    (("secret", "key"), "secret key"),
    (("secret", "access", "key"), "secret key"),
    (("token",), "token"),
    (("password",), "password"),
    (("passwd",), "password"),
    (("pwd",), "password"),
    (("secret",), "secret"),
    (("key",), "key"),
    (("credentials",), "credentials"),
    (("credential",), "credentials"),
)
_LAST_WORDS = frozenset(suffix[-1] for suffix, _ in _NAME_KINDS)  # a name ending otherwise is no credential
# Names whose last word says the value is *about* a secret, not the secret.
_NOT_SECRET_SUFFIXES = frozenset(
    {"file", "path", "dir", "name", "ref", "id", "url", "uri", "enabled", "enable", "type", "mode", "size",
     "length", "len", "count", "prefix", "header", "env", "var", "location", "arn", "version", "format"}
)  # fmt: skip

_PLACEHOLDERS = frozenset(
    {"", "empty", "none", "null", "nil", "changeme", "change-me", "change_me", "replaceme", "replace-me", "todo",
     "xxx", "xxxx", "dummy", "example", "test", "secret", "password", "token", "your-token", "your_token",
     "yourtoken", "<token>", "redacted", "placeholder", "fake", "unused", "not-used", "n/a", "na", "-", "default"}
)  # fmt: skip
_PLACEHOLDER_SHAPES: tuple[re.Pattern[str] | LinearPattern, ...] = (
    re.compile(r"^<[^>]*>$"),  # <your token>
    re.compile(r"^\$\(?\{?[A-Za-z_][A-Za-z0-9_]*\}?\)?$"),  # $(VAR), ${VAR}, $VAR
    compile_linear(r"\{\{.*\}\}"),  # templates (RE2: `{{{{…` is quadratic in Python's re)
    re.compile(r"^(x+|\*+|\.+|0+)$", re.IGNORECASE),
    re.compile(r"^(your|my|insert|replace|put|add|enter|placeholder)[-_ ]", re.IGNORECASE),
    re.compile(r"(^|[-_])(here|placeholder|changeme)$", re.IGNORECASE),
)
_NUMBER = re.compile(r"^[+-]?[0-9]+(\.[0-9]+)?$")
_BOOLEAN = frozenset({"true", "false", "yes", "no", "on", "off"})
_PATH = re.compile(r"^(/|\./|~/|[A-Za-z]:\\)")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")

MIN_NAMED_SECRET_LENGTH = 6


_WORD_SEPARATORS = re.compile(r"[_\-.\s]+")


def name_words(name: str) -> list[str]:
    return [word.lower() for word in _WORD_SEPARATORS.split(_CAMEL.sub("_", name)) if word]


# Env names repeat across workloads and admissions (HF_TOKEN, CUDA_…); they are also whatever a
# request holds, so what is remembered is bounded in bytes.
@bounded_memo(max_bytes=1 << 20)
def credential_name_kind(name: str) -> str | None:
    """What a variable named `name` holds when it is named like a credential, else None."""
    words = name_words(name)
    if not words or words[-1] in _NOT_SECRET_SUFFIXES or words[-1] not in _LAST_WORDS:
        return None
    for suffix, kind in _NAME_KINDS:
        if tuple(words[-len(suffix) :]) == suffix:
            return kind
    return None


def is_placeholder(value: str) -> bool:
    text = value.strip()
    lowered = text.lower()
    if lowered in _PLACEHOLDERS or lowered in _BOOLEAN:
        return True
    if any(shape.search(text) for shape in _PLACEHOLDER_SHAPES):
        return True
    return bool(_NUMBER.match(text) or _PATH.match(text))


def placeholder_credential(name: str, value: str) -> Credential | None:
    """A credential-named variable whose value is to be filled in at deploy time: `$HF_TOKEN`,
    `${HF_TOKEN}`, `<secret>`, `<your-hf-token>`, `YOUR_TOKEN_HERE`, `changeme`. The credential
    then ends up in the manifest all the same, only later. A reference the kubelet resolves
    (`$(HF_TOKEN)`, from another variable) is not one, nor a declared dummy (`EMPTY`, `none`)."""
    kind = credential_name_kind(name)
    if kind is None:
        return None
    text = value.strip()
    if fill_in(text):
        return Credential(kind, "placeholder")
    if _WORKFLOW_PARAMETER.fullmatch(text):
        return Credential(kind, "parameter")
    return None


# `{{inputs.parameters.wandb_key}}`, `{{workflow.parameters.hf_token}}`: Argo fills a step's text from
# the parameters the Workflow was submitted with, which its object keeps (`argo get`); Argo's secrets
# walkthrough takes credentials from a Secret instead. A literal pattern of one line: linear.
_WORKFLOW_PARAMETER = re.compile(r"\{\{\s*(?:inputs|workflow)\.parameters\.[A-Za-z0-9_.-]{1,128}\s*\}\}")


# Text that every VALUE_PATTERNS match contains (one entry per pattern, in order): a value with
# none of them cannot match, and most values (paths, flags, numbers) are ruled out without a regex.
_REQUIRED_TEXT: tuple[tuple[str, ...], ...] = (
    ("PRIVATE KEY",),
    ("hf_",),
    ("sk-ant-",),
    ("sk-",),
    ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
    ("gh", "github_pat_"),
    ("xox",),
    ("https://hooks.slack.com/services/T",),
    ("AIza",),
    ("eyJ",),
    ("://",),
)


def holds_any_search(texts: Iterable[str]) -> re.Pattern[str]:
    """A search that finds whether a text holds one of `texts`, for a yes or no only: a text
    that holds another of them is left out, and the others are grouped by their first
    character, so that the search tries one branch per first character at a position, not one
    per text (over a vLLM command line, 1.75 us with the 19 texts as alternatives, 1.1 us so;
    timeit)."""
    wanted = set(texts)
    kept = sorted(text for text in wanted if not any(other != text and other in text for other in wanted))
    groups: dict[str, list[str]] = {}
    for text in kept:
        groups.setdefault(text[0], []).append(re.escape(text[1:]))
    return re.compile(
        "|".join(
            re.escape(first) + (rests[0] if len(rests) == 1 else f"(?:{'|'.join(rests)})")
            for first, rests in groups.items()
        )
    )


_ANY_REQUIRED_TEXT = holds_any_search(text for texts in _REQUIRED_TEXT for text in texts)


def value_credential(value: str) -> str | None:
    """The kind of credential `value` contains by its shape alone, or None."""
    if not _ANY_REQUIRED_TEXT.search(value):
        return None
    for kind, pattern in VALUE_PATTERNS:
        if pattern.search(value):
            return kind
    return None


def detect(name: str, value: str) -> Credential | None:
    """Is `name=value` a literal credential? By the value's shape first, then by the name."""
    kind = value_credential(value)
    if kind is not None:
        return Credential(kind, "value")
    named = credential_name_kind(name)
    if named is None:
        return None
    text = value.strip()
    if len(text) < MIN_NAMED_SECRET_LENGTH or is_placeholder(text) or " " in text:
        return None
    if _URL.match(text):  # a URL is a secret only with an embedded password (a value pattern)
        return None
    if names_a_credential_object(text):
        return None
    if named in _NAMEABLE_KINDS and names_a_key(text):
        return None
    if named not in _NEVER_IDENTIFIERS and _CAMEL_IDENTIFIER.fullmatch(text):
        return None  # `SECRET_KEY=accessToken`: the name of a Secret's data key, which a script reads
    return Credential(named, "name")


# A camelCase identifier of words (`accessToken`, `hfApiKey`): what a program calls a field or a
# Secret's data key; a generated key or token mixes in digits and capitals at random. A password
# or a private key may be any word, and stays one. One line, no nested repetition: linear.
_CAMEL_IDENTIFIER = re.compile(r"[a-z]{2,12}(?:[A-Z][a-z]{1,12}){1,3}")
_NEVER_IDENTIFIERS = frozenset({"password", "private key"})


# Kinds whose values are as often names as secrets: a Redis or S3 key's name, etcd's
# ETCD_INITIAL_CLUSTER_TOKEN (a seed for the cluster's IDs, not a secret:
# https://etcd.io/docs/v3.5/op-guide/clustering/). A password stays one whatever it reads as.
_NAMEABLE_KINDS = frozenset({"key", "token"})
_KEY_NAME_SEPARATORS = re.compile(r"[_\-.:/]")
_KEY_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-.:/")


def names_a_key(text: str) -> bool:
    """`kvcache_nodes`, `models/llama-3-8b`, `etcd-cluster-k8s`: a value of a variable named only
    `…_KEY` or `…_TOKEN` that reads as a name (a Redis or S3 object key, a label or partition key,
    etcd's cluster token) — lowercase words, each letters or digits alone or at most three
    characters — not a secret, which is random (`x8f2k9d0a7q1`, base64, hex). A name that says
    which key it is (API, access, secret, private) keeps any such value a credential."""
    if not _KEY_NAME_CHARACTERS.issuperset(text) or not text[:1].isalpha():
        return False
    return all(
        len(word) <= 3 or word.isalpha() or word.isdigit() for word in _KEY_NAME_SEPARATORS.split(text)
    )


_OBJECT_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


def names_a_credential_object(text: str) -> bool:
    """`volcano-admission-secret`, `hf-token`, `registry.credentials`: a Kubernetes object's name
    (lowercase RFC 1123 words) with a credential word among its words — the Secret a program
    is told to read or write (`--secret volcano-admission-secret`), not a credential itself, which
    does not spell out what it is. https://kubernetes.io/docs/concepts/overview/working-with-objects/names/"""
    if not _OBJECT_NAME_CHARACTERS.issuperset(text) or not text[:1].isalnum() or not text[-1:].isalnum():
        return False
    words = text.replace(".", "-").split("-")
    return len(words) > 1 and all(words) and not _LAST_WORDS.isdisjoint(words)


# Command-line flags whose next argument is a credential (`--api-key sk-…`, `--token=…`).
SECRET_FLAGS = frozenset(
    {
        "--api-key",
        "--token",
        "--hf-token",
        "--password",
        "--secret",
        "--access-key",
        "--secret-key",
        "--auth-token",
    }
)


# Any of SECRET_FLAGS in a text (literals: searched in linear time).
_ANY_SECRET_FLAG = re.compile("|".join(re.escape(flag) for flag in sorted(SECRET_FLAGS)))


def detect_in_arguments(arguments: list[str]) -> list[tuple[int, Credential]]:
    """Credentials in a command/args list: values of secret flags, and token-shaped words."""
    found: list[tuple[int, Credential]] = []
    # No argument holds a token shape unless the arguments together hold one's required text,
    # nor starts with a secret flag unless they hold its text: most command lines hold neither,
    # and are then not walked argument by argument.
    joined = "\n".join(arguments)
    shapes = _ANY_REQUIRED_TEXT.search(joined) is not None
    if not shapes and _ANY_SECRET_FLAG.search(joined) is None:
        return found
    for index, argument in enumerate(arguments):
        flag, equals, inline = argument.partition("=") if argument.startswith("--") else ("", "", "")
        if flag in SECRET_FLAGS:  # every one a long option: other arguments are not split
            value = inline if equals else (arguments[index + 1] if index + 1 < len(arguments) else "")
            where = index if equals else index + 1
            hit = detect(flag.lstrip("-").replace("-", "_"), value)
            if hit is not None:
                found.append((where, hit))
                continue
        kind = value_credential(argument) if shapes else None
        if kind is not None and all(where != index for where, _ in found):
            found.append((index, Credential(kind, "value")))
    return found


assert len(_REQUIRED_TEXT) == len(VALUE_PATTERNS), "one required-text entry per value pattern"
