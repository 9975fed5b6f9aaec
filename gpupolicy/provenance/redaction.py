"""Redaction of what provenance must never keep: env values and secret-looking strings.

Every env entry's `value` is replaced (whatever it holds: an inline value is where people put
tokens, and an experiment's knobs are better declared in labels or the experiment ConfigMap);
`valueFrom` references are kept, they name a Secret without holding it. Elsewhere a string is
redacted when its key says it is a secret (`password`, `token`, `apiKey` …), when it is the
`value`/`values` of a pair whose `key`/`name` says so (a toleration `{key: password, value: …}`),
or when its text looks like a credential (well-known token formats, private keys, bearer tokens,
credentials in URLs, `--token=…` arguments, `token=…` and `password: …` in comments). The record is redacted before it is stored *and* before the pod
template is hashed, so neither the database nor the spool file ever holds the original.

Cost: a record holds a few hundred strings, and almost none of them is a credential. Each string
is first checked against `_MAYBE_SECRET` (asked of RE2 first: `_may_hold_secret`), one pass of one alternation of literals that every
credential pattern below must contain (a necessary condition, not a detector: it also fires on
`passthrough` or `token-path`); only a string that passes it goes through the patterns, applied
one after the other as before. So redaction replaces exactly what it replaced before, at about a
tenth of the cost. Whoever adds a pattern must add its required literal to `_MAYBE_SECRET`, and
in lower case to `_MAYBE_SECRET_FOLDED` (`test_prefilter_is_a_necessary_condition` checks the list,
`test_folded_prefilter_answers_as_the_prefilter` the two against each other).
"""

from __future__ import annotations

import re
import sys
from typing import Any

from gpupolicy.core.bounded_cache import BoundedCache
from gpupolicy.core.linear_regex import compile_linear

REDACTED = "<redacted>"
# The webhook parses JSON up to 1,024 levels (orjson), and each level here costs Python stack
# frames: an object nested that deep would raise RecursionError while its record is built (an
# HTTP 500 instead of a decision). The loader's default `limits.maxDepth` is 200; past as many
# levels a record keeps this marker instead of the value.
MAX_REDACTED_DEPTH = 200
TOO_DEEP = "<redacted: nested deeper than 200 levels>"

# Keys whose string values are secrets whatever they look like.
_SECRET_KEY = re.compile(
    r"(pass(word|wd|phrase)?|secret|token|api[-_.]?key|access[-_.]?key|private[-_.]?key|"
    r"credential|auth(orization)?|bearer|session[-_.]?key|client[-_.]?secret|signing[-_.]?key)",
    re.IGNORECASE,
)
# Keys that hold references or names, never the secret itself (`secretName`, `tokenPath` …).
_REFERENCE_KEY = re.compile(r"(name|ref|path|file|mount|key[-_.]?ref|secretRef|valueFrom)$", re.IGNORECASE)

# The patterns below scan request content (arguments, annotations, any string of the object): they
# run on RE2, in time linear in the text (gpupolicy/core/linear_regex.py). With Python's backtracking
# `re`, a 100 KB argument of `--passpass…` or `-eyJ-eyJ…` took 55 s. RE2 has no lookbehind: where
# a pattern needs "not preceded by", it matches the preceding character in a group and keeps it.

# Credential formats: vendor prefixes, JWTs, PEM private keys, AWS access key ids.
_TOKEN_PATTERNS = tuple(
    compile_linear(pattern)
    for pattern in (
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)(-----END [A-Z ]*PRIVATE KEY-----|$)",
        r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b",
        r"\bglpat-[A-Za-z0-9_-]{16,}\b",
        r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b",
        r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",
        r"\bhf_[A-Za-z0-9]{20,}\b",
        # `sk-…` not inside an image path or host name: the character before it (`before`, kept
        # by the replacement) is none of / . : @ -
        r"(?P<before>^|[^/.:@-])\bsk-[A-Za-z0-9_-]{20,}\b",
        r"\bAIza[0-9A-Za-z_-]{30,}\b",
        r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b",
        r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}",
    )
)
_OPENAI_KEY = _TOKEN_PATTERNS[6]


# user:password@ in a URL: keep the user and host, drop the password.
_URL_CREDENTIALS = compile_linear(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\s]+):[^@/\s]+@")
# --token=x, --password x, -p=x … in arguments; `KEY=secret` in shell strings.
_FLAG_VALUE = compile_linear(
    r"(?P<flag>--?[A-Za-z0-9-]*(pass(word)?|secret|token|api-?key|access-key|credentials?)[A-Za-z0-9-]*)"
    r"(?P<sep>=|\s+)(?P<value>[^\s\"']+)",
    ignore_case=True,
)
# `NAME=value`, `name: value` and `"name": "value"` where the name ends in a credential word
# (`HF_TOKEN=…` in a shell string, `# token=…` or `password: …` in a comment of an annotation,
# `X-Amz-Security-Token=…` in a URL). The word ends the name or is followed by `-`, `_` or `.`:
# `max_tokens: 512`, `tokenizer: …` and `passthrough: true` are kept. A colon needs a space after
# it (YAML's rule), so `token-service:v1` in an image is kept too.
_ASSIGNMENT = compile_linear(
    r"(?P<name>[A-Za-z0-9_.-]*"
    r"(pass(word|wd|phrase)?|secret|token|api[-_]?key|(access|private|secret|session|signing)[-_]?key|"
    r"credentials?|signature)"
    r"([-_.][A-Za-z0-9_.-]*)?)"
    r"(?P<sep>([\"']\s*:\s*|[\"']?\s*=\s*|\s*:\s+)[\"']?)"
    r"(?P<value>[^\s\"';&|,{}\[\]]+)",
    ignore_case=True,
)


# A literal every match of a pattern above contains (case-insensitive where the pattern is):
# PEM header; GitHub, GitLab, Slack, AWS, Hugging Face, OpenAI, Google prefixes; JWT header;
# `bearer`; `://` of a URL; the words of _FLAG_VALUE and _ASSIGNMENT.
# (Python's re, like _SECRET_KEY and _REFERENCE_KEY: alternations of short literals, which try a
# bounded set of bounded strings at each position, so linear in the text.)
_MAYBE_SECRET = re.compile(
    r"-----BEGIN |gh[pousr]_|github_pat_|glpat-|xox[abprs]-|AKIA|ASIA|hf_|sk-|AIza|eyJ|://|"
    r"(?i:bearer|pass|secret|token|api[-_]?key|(access|private|session|signing)[-_]?key|credential|signature)"
)
# The shortest string any pattern can match (`PASS=x`, an _ASSIGNMENT): shorter ones are kept.
_MIN_SECRET_LENGTH = 6

# _MAYBE_SECRET's literals in lower case, searched with RE2 in the case-folded text: the same
# question asked about ten times faster (Python's re scans case-insensitive alternations one
# position at a time: 40 µs for a 270-character finding message in the admission log line, 200 µs
# for a 2,000-character annotation; this, 2-5 µs). It matches wherever _MAYBE_SECRET does
# (`str.casefold` maps every character that re's IGNORECASE takes for an ASCII letter to that
# letter, but for the two below), and a little more (`Asia`, matched only in upper case there):
# it rejects what is clean, and _MAYBE_SECRET still decides the rest, so every string gets the
# answer it got before.
_MAYBE_SECRET_FOLDED = compile_linear(
    r"-----begin |gh[pousr]_|github_pat_|glpat-|xox[abprs]-|akia|asia|hf_|sk-|aiza|eyj|://|"
    r"bearer|pass|secret|token|api[-_]?key|(access|private|session|signing)[-_]?key|credential|signature"
)
# re's IGNORECASE matches `i` with the dotted capital I and the dotless i, whose case folds are
# not `i` (`i̇` and `ı`): a text holding either goes to _MAYBE_SECRET directly.
_DOTTED_CAPITAL_I, _DOTLESS_I = "\u0130", "\u0131"


def _may_hold_secret(text: str) -> bool:
    """Whether `text` holds one of _MAYBE_SECRET's literals (see _MAYBE_SECRET_FOLDED)."""
    if (
        _MAYBE_SECRET_FOLDED.search(text.casefold()) is None
        and _DOTTED_CAPITAL_I not in text
        and _DOTLESS_I not in text
    ):
        return False
    return _MAYBE_SECRET.search(text) is not None


_SIZE_OF_TRUE = sys.getsizeof(True)

# Strings known to need no redaction (image names, label values, node selectors come back with
# every admission): a lookup instead of a search. Only clean strings of at most _CLEAN_MAX_LENGTH
# characters, never one that was redacted: those the prefilter rejects, and those it let through
# that the patterns then left as they were (`HF_TOKEN`, `hf-token`, `--max-tokens=512` in every
# Pod of an inference server: each was two dozen RE2 calls per record, half its redaction).
# Each entry counted as `estimate_size` counts it (the string's size and True's), in one call: a
# clean string new with every admission (a Pod's name) is put each time.
_CLEAN: BoundedCache[str, bool] = BoundedCache(
    max_bytes=2 << 20, size_of=lambda text, _: sys.getsizeof(text) + _SIZE_OF_TRUE
)
_CLEAN_MAX_LENGTH = 256
# is_secret_key's answers for the keys seen, so that redact's loop tests a key with one lookup.
# Both are bounded in bytes: keys and values come from objects (label keys, CRD fields).
_KEY_IS_SECRET: BoundedCache[str, bool] = BoundedCache(max_bytes=2 << 20)


def is_secret_key(key: str) -> bool:
    secret = _KEY_IS_SECRET.get(key)
    if secret is None:
        secret = _KEY_IS_SECRET.put(key, bool(_SECRET_KEY.search(key)) and not _REFERENCE_KEY.search(key))
    return secret


# Strings of hex digits, `-`, `.`, `:`, `+`, `T` and `Z` alone: uids, times, resource versions,
# digests, what every admission brings new (so never remembered, only searched: 5 µs each).
# Every pattern needs a letter outside them (`s`, `k`, `r`, `y`, `/`, `_` …: see _MAYBE_SECRET;
# `test_harmless_alphabet_holds_no_secret` checks it), so such a string is kept as it is. (A
# class repeated: linear.)
_HARMLESS = re.compile(r"[0-9A-Fa-f.:+TZ-]*")


def redact_text(text: str) -> str:
    """`text` with every credential-looking part replaced by `<redacted>`."""
    if len(text) < _MIN_SECRET_LENGTH or _CLEAN.get(text) or _HARMLESS.fullmatch(text):
        return text
    if not _may_hold_secret(text):  # no pattern can match: none of their literals is there
        if len(text) <= _CLEAN_MAX_LENGTH:
            _CLEAN.put(text, True)
        return text
    redacted = _redact_text_fully(text)
    if redacted == text and len(text) <= _CLEAN_MAX_LENGTH:  # the patterns found nothing in it
        _CLEAN.put(text, True)
    return redacted


def _redact_text_fully(text: str) -> str:
    """The patterns, one after the other (later ones see earlier replacements)."""
    for pattern in _TOKEN_PATTERNS:
        if pattern is _OPENAI_KEY:
            text = pattern.sub(lambda match: f"{match['before']}{REDACTED}", text)
        else:
            text = pattern.sub(REDACTED, text)
    text = _URL_CREDENTIALS.sub(lambda match: f"{match['scheme']}{match['user']}:{REDACTED}@", text)
    text = _FLAG_VALUE.sub(lambda match: f"{match['flag']}{match['sep']}{REDACTED}", text)
    return _ASSIGNMENT.sub(lambda match: f"{match['name']}{match['sep']}{REDACTED}", text)


def redact_env(entries: Any) -> Any:
    """An env list with every `value` replaced; names and `valueFrom` references kept."""
    if not isinstance(entries, list):
        return entries
    redacted = []
    for entry in entries:
        if isinstance(entry, dict):
            entry = {key: (REDACTED if key == "value" else value) for key, value in entry.items()}
        redacted.append(entry)
    return redacted


def redact(value: Any, key: str | None = None, _depth: int = 0) -> Any:
    """A deep copy of `value` with env values and secret-looking strings redacted; what nests
    deeper than `MAX_REDACTED_DEPTH` is replaced by `TOO_DEEP`."""
    if isinstance(value, str):
        if value and key is not None and value != REDACTED and is_secret_key(key):
            return REDACTED
        return redact_text(value)
    if isinstance(value, dict):
        return TOO_DEEP if _depth >= MAX_REDACTED_DEPTH else _redact_mapping(value, _depth + 1)
    if isinstance(value, list):
        return TOO_DEEP if _depth >= MAX_REDACTED_DEPTH else _redact_list(value, key, _depth + 1)
    return value


def _redact_list(items: list[Any], key: str | None, depth: int) -> list[Any]:
    """`redact` of a list's items under `key`, with strings (arguments, values of a selector
    requirement) decided in the loop as `_redact_mapping` decides them: whether `key` sounds
    secret is asked once for the list."""
    clean = _CLEAN.get
    secret: bool | None = None
    result: list[Any] = []
    for item in items:
        if isinstance(item, str):
            if item and key is not None and item != REDACTED:
                if secret is None:
                    secret = is_secret_key(key)
                if secret:
                    result.append(REDACTED)
                    continue
            result.append(item if len(item) < _MIN_SECRET_LENGTH or clean(item) else redact_text(item))
        elif item is None or type(item) in _KEPT_AS_THEY_ARE:
            result.append(item)
        elif type(item) is dict:  # `redact(item, key, depth)` of a mapping, without its call
            result.append(TOO_DEEP if depth >= MAX_REDACTED_DEPTH else _redact_mapping(item, depth + 1))
        else:
            result.append(redact(item, key, depth))
    return result


# Mappings that name a pair with one field and hold its value in another: a toleration
# (`key`, `value`), a node selector requirement (`key`, `values`), a sysctl or a CRD's parameter
# (`name`, `value`). When the named key sounds secret, the value is a secret however it looks.
_PAIR_NAME_FIELDS = ("key", "name")
_PAIR_VALUE_FIELDS = frozenset({"value", "values"})
# Numbers and booleans (exactly these types): `redact` returns them as they are.
_KEPT_AS_THEY_ARE = frozenset({int, float, bool})


def secret_pair_name(mapping: dict[Any, Any]) -> str | None:
    """The secret-sounding name of a key/value pair held in `mapping` (`{key: password, value: …}`),
    else None."""
    for field in _PAIR_NAME_FIELDS:
        name = mapping.get(field)
        if isinstance(name, str) and is_secret_key(name):
            return name
    return None


def _redact_mapping(mapping: dict[Any, Any], depth: int) -> dict[str, Any]:
    """`redact` of a mapping, with the string values (most of a record) decided in the loop:
    the same tests as `redact` and `redact_text`, without two calls per value."""
    result: dict[str, Any] = {}
    known_key = _KEY_IS_SECRET.get
    clean = _CLEAN.get
    # Two lookups, not `_PAIR_VALUE_FIELDS.intersection(mapping)`: a set made of every mapping's keys.
    pair_name = secret_pair_name(mapping) if "value" in mapping or "values" in mapping else None
    for child_key, child in mapping.items():
        name = child_key if isinstance(child_key, str) else str(child_key)
        if pair_name is not None and name in _PAIR_VALUE_FIELDS:
            result[name] = redact(child, pair_name, depth)  # redacted as if under the key it names
            continue
        if isinstance(child, str):
            if child and child != REDACTED:
                secret = known_key(name)
                if secret is None:
                    secret = is_secret_key(name)
                if secret:
                    result[name] = REDACTED
                    continue
            result[name] = child if len(child) < _MIN_SECRET_LENGTH or clean(child) else redact_text(child)
            continue
        if child is None or type(child) in _KEPT_AS_THEY_ARE:  # what `redact` returns as it is
            result[name] = child
            continue
        if type(child) is dict:  # `redact(child, name, depth)` of a mapping, without its call
            result[name] = TOO_DEEP if depth >= MAX_REDACTED_DEPTH else _redact_mapping(child, depth + 1)
            continue
        if name == "env" and isinstance(child, list):
            child = redact_env(child)
        result[name] = redact(child, name, depth)
    return result
