"""What the tests' polling loops share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def gathered(into: list[T], more: Iterable[T]) -> list[T]:
    """``into`` with ``more`` added: in a ``wait_until`` predicate, what every poll brought so far
    (``lambda: gathered(found, poll())``, or ``len(gathered(...)) >= n``)."""
    into.extend(more)
    return into
