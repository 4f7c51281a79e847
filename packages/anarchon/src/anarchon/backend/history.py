"""History merging (docs/concepts.md, "History"): claim records plus stored results become run records.

The merge itself runs in the compiled core (:func:`anarchon._core.build_history`);
this module turns its tuples into :class:`~anarchon.types.RunRecord` objects.
"""

from __future__ import annotations

from collections.abc import Sequence

from anarchon import _core
from anarchon.types import ClaimRecord, RunRecord, StoredResult

__all__ = ["DEFAULT_HISTORY_SIZE", "build_history"]

DEFAULT_HISTORY_SIZE = 1000
"""Runs of a job a store keeps when the job does not set ``history_size``.

A backend that sizes its storage before it knows a job's options (e.g. the
per-subject limit of a NATS stream) starts from this; it is also the default of
the job option (``anarchon.jobs.DEFAULTS["history_size"]``).
"""


def build_history(
    job: str,
    claims: Sequence[ClaimRecord],
    results: Sequence[StoredResult],
    limit: int,
) -> list[RunRecord]:
    """Merge ``claims`` and ``results`` of ``job`` into at most ``limit`` records, newest first.

    Claims and results are matched by token (one record per attempt). A claim
    with no result is ``running``; a result with no claim (a skipped run, or a
    claim the store already trimmed) still appears. When a token has several
    results, a final status wins over ``running``, then the latest
    ``finished_at``. Records are ordered by slot, then attempt, newest first.

    Any objects with the fields of :class:`ClaimRecord` / :class:`StoredResult`
    are accepted, so a backend may pass its own row types.
    """
    if limit <= 0:
        return []
    rows = _core.build_history(claims, results, limit)
    return [
        RunRecord(
            job=job,
            slot=slot,
            instance_id=instance_id,
            status=status,
            reason=reason,
            attempt=attempt,
            manual=manual,
            started_at=started_at,
            finished_at=finished_at,
            duration_ms=duration_ms,
            error=error,
        )
        for (
            slot,
            instance_id,
            status,
            reason,
            attempt,
            manual,
            started_at,
            finished_at,
            duration_ms,
            error,
        ) in rows
    ]
