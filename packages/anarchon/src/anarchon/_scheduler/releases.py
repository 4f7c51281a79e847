"""Hand-overs in batches: many leases released together (``RunStore.release_many``).

``stop()`` hands over every run it will not finish: claims answered ``won``
after it began, and runs claimed ahead that did not start within
``stop_grace``. In the middle of a wave that is thousands of runs; released
one store call each, they kept ``stop()`` busy for seconds. Here they go in
chunks of ``release_many``, the chunks under the in-flight bound, each chunk
retried with the same tokens (a release is repeat-safe: a retried release
answers True again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from anarchon._scheduler.run_state import Run
from anarchon._scheduler.store_batches import StoreBatches, chunks
from anarchon._scheduler.store_retry import GAVE_UP, StorePolicy
from anarchon.types import RunKey

__all__ = ["release_runs"]


async def release_runs(
    batches: StoreBatches, policy: StorePolicy, runs: Sequence[Run]
) -> list[bool]:
    """Release each run's lease; per run, True if the store released it (or had already)."""
    if not runs:
        return []

    async def chunk_of(part: Sequence[Run]) -> list[bool]:
        keys = [RunKey(run.job.name, run.slot, run.token) for run in part]
        try:
            got = await policy.call(lambda: batches.release_many(keys), gated=False)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            policy.report("release", error)
            return [False] * len(part)
        if got is GAVE_UP or len(got) != len(part):
            return [False] * len(part)
        return [ok is True for ok in got]

    answers = await asyncio.gather(*(chunk_of(part) for part in chunks(runs)))
    return [ok for part in answers for ok in part]
