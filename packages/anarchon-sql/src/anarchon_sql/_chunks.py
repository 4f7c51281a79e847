"""How the batch members split their items (chunks of ``batch_size``) and order them (by job)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["by_job", "chunks"]

Item = TypeVar("Item")


def chunks(items: Sequence[Item], size: int) -> list[Sequence[Item]]:
    """``items`` in consecutive pieces of at most ``size``."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def by_job(jobs: Sequence[str]) -> list[int]:
    """Indexes in the order a chunk is worked: by job, request order within a job.

    Two chunks that lock the same jobs then take the locks in the same order.
    """
    return sorted(range(len(jobs)), key=lambda i: jobs[i])
