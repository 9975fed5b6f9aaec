"""The path a custom rule's violation points at, as the engine's JSON path tuple.

Rules write it as a list (`["spec", "containers", 0, "image"]`, what Rego builds naturally) or as
a field path (`spec.containers[0].resources.limits["nvidia.com/gpu"]`, what a VAP's `fieldPath`
holds; a leading `$.` or `.` is allowed). A path that cannot be read points at the object.
"""

from __future__ import annotations

from typing import Any

from gpupolicy.core.findings import JsonPath

MAX_STEPS = 64


def path_of(value: Any) -> JsonPath:
    if isinstance(value, list | tuple):
        steps: list[str | int] = []
        for step in value[:MAX_STEPS]:
            if isinstance(step, bool) or not isinstance(step, str | int | float):
                return ()
            if isinstance(step, float):  # JSON numbers from an engine may come back as 0.0
                if not step.is_integer():
                    return ()
                step = int(step)
            steps.append(step)
        return tuple(steps)
    if isinstance(value, str):
        return parse_field_path(value)
    return ()


def parse_field_path(text: str) -> JsonPath:
    """`a.b[0]["c.d"]['e']` -> ("a", "b", 0, "c.d", "e"); () when it is not such a path."""
    steps: list[str | int] = []
    index, size = 0, len(text)
    if text.startswith("$"):
        index = 1
    while index < size and len(steps) < MAX_STEPS:
        char = text[index]
        if char == ".":
            index += 1
            continue
        if char == "[":
            close = _closing(text, index)
            if close < 0:
                return ()
            inner = text[index + 1 : close].strip()
            if inner[:1] in "\"'" and inner[-1:] == inner[:1] and len(inner) >= 2:
                steps.append(inner[1:-1])
            elif inner.isdigit():
                steps.append(int(inner))
            else:
                return ()
            index = close + 1
            continue
        end = index
        while end < size and text[end] not in ".[":
            end += 1
        steps.append(text[index:end])
        index = end
    return tuple(steps)


def _closing(text: str, start: int) -> int:
    quote = text[start + 1 : start + 2]
    if quote in ("'", '"'):
        end = text.find(quote, start + 2)
        return text.find("]", end) if end >= 0 else -1
    return text.find("]", start)
