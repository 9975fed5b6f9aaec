from collections.abc import Callable, Iterator
from typing import Any

SOURCE_DIGEST: str

class Unsupported(Exception): ...

def documents(
    text: str, resolve: Callable[[str], Any], bits: int, end: int, last_line: int, max_depth: int
) -> Iterator[tuple[Any, Any, int, int]]: ...
