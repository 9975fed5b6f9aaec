"""A fast "no schema error at all" for a value that jsonschema would otherwise validate.

jsonschema words our schema errors (the key, the value, the keys allowed), but importing it costs
about a tenth of a second (referencing, attrs, rpds...) — more than the rest of a
`gpupolicy lint one.yaml` start, which validates the shipped default policy and a repository's
`.gpupolicy.yaml` on every run. jsonschema-rs is loaded for the Kubernetes schemas (GP005) anyway
and answers in microseconds. So it answers first, and only a value it does not accept (or cannot
take: a date, a key that is not a string) goes to jsonschema, which then has the final word and
gives the messages. A "yes" here must therefore never be a "no" in jsonschema, which is why:

- `pattern` is run as jsonschema runs it, with Python's `re.search` (the Rust engine's `$` does
  not match before a final newline, and its `\\s` leaves out U+001C..U+001F, which Python's takes);
- every `format` the schema names must come with its check, the one jsonschema is given; a schema
  naming another format gets no precheck at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

# What jsonschema-rs raises for a value it cannot convert to JSON (a date, a key that is not a
# string, a float that JSON cannot write) or nests too deep: jsonschema decides those.
_UNCONVERTIBLE = (ValueError, TypeError, OverflowError, RecursionError)


class _SearchedPattern:
    """The `pattern` keyword with jsonschema's semantics: `re.search`, and only on strings. The
    patterns are the schema's own (a few anchored or one-class expressions), never input."""

    def __init__(self, parent_schema: Mapping[str, Any], value: str, schema_path: list[str | int]) -> None:
        self._pattern = re.compile(value)

    def validate(self, instance: Any) -> None:
        if isinstance(instance, str) and not self._pattern.search(instance):
            raise ValueError(f"does not match {self._pattern.pattern!r}")


def _formats_named(schema: Any) -> Iterator[str]:
    if isinstance(schema, Mapping):
        for key, value in schema.items():
            if key == "format" and isinstance(value, str):
                yield value
            else:
                yield from _formats_named(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _formats_named(item)


def schema_precheck(
    schema: Mapping[str, Any], *, formats: Mapping[str, Callable[[str], bool]]
) -> Callable[[Any], bool]:
    """A test that is True only for a value with no error under `schema` (draft 2020-12, the
    `formats` checked as given); False means "ask jsonschema", not "invalid"."""
    if not set(_formats_named(schema)) <= set(formats):
        return lambda data: False
    import jsonschema_rs  # loaded with the Kubernetes schemas anyway; not by `gpupolicy --help`

    try:
        validator = jsonschema_rs.Draft202012Validator(
            dict(schema),
            formats=dict(formats),
            validate_formats=True,
            keywords={"pattern": _SearchedPattern},
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError):
        return lambda data: False

    def valid(data: Any) -> bool:
        try:
            return bool(validator.is_valid(data))
        except _UNCONVERTIBLE:
            return False

    return valid
