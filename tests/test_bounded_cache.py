"""BoundedCache and bounded_memo: what the caches on the request path are built on."""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass

import pytest

from gpupolicy.core.bounded_cache import ENTRY_OVERHEAD, BoundedCache, bounded_memo, estimate_size


def test_the_oldest_entries_make_room_and_the_budget_is_never_passed() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_bytes=10_000)
    for index in range(1000):
        assert cache.put(f"key-{index:04d}-" + "x" * 200, index) == index
        assert cache.nbytes <= 10_000
    assert 0 < len(cache) < 1000
    assert cache.get("key-0999-" + "x" * 200) == 999  # the newest stay
    assert cache.get("key-0000-" + "x" * 200) is None  # the oldest went first
    assert cache.nbytes == sum(
        estimate_size(key) + estimate_size(cache.get(key)) + ENTRY_OVERHEAD for key in cache._data
    )


def test_an_entry_larger_than_the_budget_is_computed_not_remembered() -> None:
    cache: BoundedCache[str, str] = BoundedCache(max_bytes=4096)
    cache.put("small", "value")
    huge = "k" * 1_000_000
    assert cache.put(huge, "value") == "value"
    assert huge not in cache
    assert cache.get("small") == "value"  # and it evicted nothing


def test_a_held_key_keeps_its_value_unless_told_to_replace_it() -> None:
    cache: BoundedCache[str, str] = BoundedCache(max_bytes=4096)
    cache.put("pod", "first")
    assert cache.put("pod", "second") == "second" and cache.get("pod") == "first"
    cache.put("pod", "third, longer", replace=True)
    assert cache.get("pod") == "third, longer" and len(cache) == 1
    assert cache.nbytes == estimate_size("pod") + estimate_size("third, longer") + ENTRY_OVERHEAD
    cache.put("pod", "x" * 10_000, replace=True)  # too large: the old value no longer answers either
    assert "pod" not in cache and cache.nbytes == 0


def test_none_is_a_value_like_any_other() -> None:
    cache: BoundedCache[str, None] = BoundedCache(max_bytes=4096)
    missing = object()
    assert cache.get("cpu", missing) is missing
    cache.put("cpu", None)
    assert "cpu" in cache and cache.get("cpu", missing) is None


def test_sizes_count_what_strings_hold_and_what_containers_and_dataclasses_hold() -> None:
    @dataclass(frozen=True)
    class Named:
        name: str

    text = "€" * 1000  # two bytes a character in CPython's compact form (beyond Latin-1)
    assert estimate_size(text) == sys.getsizeof(text) >= 2000
    assert estimate_size((text, text)) >= 4000
    assert estimate_size({"k": [text]}) >= 2000
    assert estimate_size(Named(text)) >= 2000
    assert estimate_size(b"x" * 5000) >= 5000


def test_clear_empties_it_and_the_fast_get_still_reads_it() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_bytes=4096)
    get = cache.get
    cache.put("a", 1)
    cache.clear()
    assert (len(cache), cache.nbytes, get("a")) == (0, 0, None)
    cache.put("b", 2)
    assert get("b") == 2


def test_bounded_memo_remembers_results_not_errors_within_its_budget() -> None:
    calls: list[str] = []

    @bounded_memo(max_bytes=50_000)
    def shout(text: str) -> str:
        calls.append(text)
        if not text:
            raise ValueError("empty")
        return text.upper()

    assert shout("gpu") == "GPU" and shout("gpu") == "GPU"
    assert calls == ["gpu"]
    for _ in range(2):
        with pytest.raises(ValueError):
            shout("")
    assert calls == ["gpu", "", ""]
    for index in range(500):
        shout(f"{index}-" + "n" * 1000)
    cache: BoundedCache[str, str] = shout.cache  # type: ignore[attr-defined]
    assert cache.nbytes <= 50_000


def test_bounded_memo_keys_several_arguments_by_their_tuple() -> None:
    @bounded_memo(max_bytes=10_000)
    def join(a: str, b: str) -> str:
        return a + b

    assert join("a", "b") == "ab" and join("b", "a") == "ba"
    assert ("a", "b") in join.cache  # type: ignore[attr-defined]


def test_threads_sharing_a_cache_keep_it_consistent() -> None:
    cache: BoundedCache[str, int] = BoundedCache(max_bytes=20_000)

    def fill(offset: int) -> None:
        for index in range(2000):
            key = f"{offset}-{index}"
            cache.put(key, index)
            cache.get(key)

    threads = [threading.Thread(target=fill, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert cache.nbytes <= 20_000
    assert set(cache._data) == set(cache._sizes)
    assert cache.nbytes == sum(cache._sizes.values())


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        BoundedCache(max_bytes=0)
