"""Caches bounded in bytes, for everything remembered across objects and admission requests.

A cache keyed by what a request holds (a resource name, an env name, a quantity, an annotation)
grows with every distinct value an API client sends: an entry limit (`functools.lru_cache`'s
`maxsize`) bounds the count but not the size — 4,096 entries of 1 MB names are 4 GB, and the
webhook's memory limit is 512 Mi. `BoundedCache` holds at most `max_bytes` of estimated key and
value size: an entry that would not fit alone is not remembered at all (computed each time),
and older entries make room for newer ones (first in, first out: a hit is one `dict.get`, with
no bookkeeping, which matters on the review path; the entries that repeat come back at once).

Sizes are estimates, cheap and on the safe side: `sys.getsizeof` of strings and bytes (their
real footprint, found in constant time), containers and dataclasses summed over their items,
and `ENTRY_OVERHEAD` per entry for the dictionary slot and the bookkeeping.
"""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar, cast

from gpupolicy.core.immutable import field_values

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")

ENTRY_OVERHEAD = 120  # bytes: a dict slot, the size record, a small object's header
_MAX_DEPTH = 8  # nested containers deeper than this count as one small object each


def estimate_size(value: object, _depth: int = 0) -> int:
    """An upper-leaning estimate of what `value` holds in memory, in bytes."""
    if isinstance(value, str | bytes):
        return sys.getsizeof(value)
    if _depth >= _MAX_DEPTH:
        return ENTRY_OVERHEAD
    if isinstance(value, tuple | list | frozenset | set):
        return sys.getsizeof(value) + sum(estimate_size(item, _depth + 1) for item in value)
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(
            estimate_size(key, _depth + 1) + estimate_size(item, _depth + 1) for key, item in value.items()
        )
    fields = field_values(value)
    if fields is not None:
        return sys.getsizeof(value) + sum(estimate_size(item, _depth + 1) for item in fields.values())
    return sys.getsizeof(value)


_MISSING: Any = object()


class BoundedCache(Generic[K, V]):
    """A mapping of at most `max_bytes` (estimated); see the module docstring.

    `get(key, default)` is the dictionary's own `get` (no Python frame on a hit); `put` takes a
    lock, so threads (the linter's workers, the webhook's thread pool) may share one cache."""

    def __init__(self, *, max_bytes: int, size_of: Callable[[K, V], int] | None = None) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self.max_bytes = max_bytes
        self._size_of = size_of or (lambda key, value: estimate_size(key) + estimate_size(value))
        self._data: dict[K, V] = {}
        self._sizes: dict[K, int] = {}  # insertion order: the oldest entry first
        self._bytes = 0
        self._lock = threading.Lock()
        self.get = self._data.get

    @property
    def nbytes(self) -> int:
        """The estimated size of what the cache holds now (never above `max_bytes`)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def put(self, key: K, value: V, *, replace: bool = False) -> V:
        """Remember `value` for `key` when it fits in the budget; returns `value`. A key already
        held keeps its value (two threads computed the same thing) unless `replace` says the new
        value is to be kept instead (the old one no longer answers)."""
        size = self._size_of(key, value) + ENTRY_OVERHEAD
        with self._lock:
            if key in self._sizes:
                if not replace:
                    return value
                self._bytes -= self._sizes.pop(key)
                del self._data[key]
            if size > self.max_bytes:
                return value  # larger than the whole cache: computed again when asked again
            while self._bytes + size > self.max_bytes:
                oldest = next(iter(self._sizes))
                self._bytes -= self._sizes.pop(oldest)
                del self._data[oldest]
            self._data[key] = value
            self._sizes[key] = size
            self._bytes += size
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._sizes.clear()
            self._bytes = 0


def bounded_memo(*, max_bytes: int) -> Callable[[Callable[P, V]], Callable[P, V]]:
    """`functools.lru_cache` for functions of hashable positional arguments, bounded in bytes:
    the key is the argument (a function of one) or the tuple of them. Results are remembered,
    exceptions are not. The cache is the wrapper's `cache` attribute."""

    def decorate(function: Callable[P, V]) -> Callable[P, V]:
        cache: BoundedCache[Any, V] = BoundedCache(max_bytes=max_bytes)
        get, put = cache.get, cache.put
        call: Callable[..., V] = function

        # A function of one argument is most of them, and the hottest (a quantity, an env name):
        # its wrapper takes no tuple and does no counting.
        def memoised_one(argument: Any) -> V:
            found = get(argument, _MISSING)
            return put(argument, call(argument)) if found is _MISSING else found

        def memoised(*arguments: Any) -> V:
            found = get(arguments, _MISSING)
            return put(arguments, call(*arguments)) if found is _MISSING else found

        wrapper: Any = memoised_one if _takes_one_argument(function) else memoised
        functools.update_wrapper(wrapper, function)
        wrapper.cache = cache
        return cast("Callable[P, V]", wrapper)

    return decorate


def _takes_one_argument(function: Callable[..., Any]) -> bool:
    parameters = list(inspect.signature(function).parameters.values())
    return len(parameters) == 1 and parameters[0].kind in (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )
