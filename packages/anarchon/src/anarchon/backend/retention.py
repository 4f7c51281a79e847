"""How long and how many run records a store keeps: the one retention rule (docs/leases.md).

Every store keeps two kinds of records per job, trimmed by the same rule:

- **History** (claim records and results): about ``history_size`` runs, between
  N and 2N (:func:`history_over` says when a trim is due, :func:`kept_runs`
  how many to keep), and nothing older than ``history_ttl`` when given
  (:func:`ttl_cutoff`). The records of a run still in progress are never
  trimmed.
- **Run state** (what decides claims): kept forever, unless ``check_job`` told
  the store how long late and catch-up claims may still ask for a slot
  (:func:`state_retention_ms`, learnt per job by :class:`StateRetention`); then
  finished state whose slot is older than that window is dropped, down to
  about ``history_size`` entries. Running state is never dropped.

:func:`history_to_keep` and :func:`states_to_drop` apply the rule to records
held in memory (the memory backend); SQL and Redis stores apply it in their
own queries and scripts with the same numbers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from anarchon.types import JobLimits

__all__ = [
    "RETENTION_MARGIN_MS",
    "StateRetention",
    "history_over",
    "history_to_keep",
    "kept_runs",
    "state_retention_ms",
    "states_to_drop",
    "ttl_cutoff",
]

RETENTION_MARGIN_MS = 60_000
"""Extra time finished run state is kept beyond what late and catch-up claims need."""


def state_retention_ms(limits: JobLimits) -> int:
    """How long after its slot a job's finished run state must be kept (ms).

    Late claims may ask for a slot up to ``max_late`` after it, catch-up
    claims up to ``catch_up``, both delayed by up to ``jitter``; plus
    :data:`RETENTION_MARGIN_MS`.

    >>> state_retention_ms(JobLimits("j", 60_000, 1_000, 60_000, 100))
    121000
    """
    return max(limits.max_late_ms, limits.catch_up_ms or 0) + limits.jitter_ms + RETENTION_MARGIN_MS


class StateRetention:
    """Per job, the longest :func:`state_retention_ms` a store was told (by ``check_job``).

    A job declared by several instances with different options keeps its
    state for the longest of their windows.
    """

    __slots__ = ("_by_job",)

    def __init__(self) -> None:
        self._by_job: dict[str, int] = {}

    def learn(self, limits: JobLimits) -> int:
        """Widen ``limits.job``'s window to cover ``limits``; return the window now."""
        kept = max(self._by_job.get(limits.job, 0), state_retention_ms(limits))
        self._by_job[limits.job] = kept
        return kept

    def get(self, job: str) -> int | None:
        """The window of ``job`` in ms, or None (never told: keep its run state)."""
        return self._by_job.get(job)


def kept_runs(history_size: int) -> int:
    """How many runs a trim keeps: ``history_size``, at least 1."""
    return max(int(history_size), 1)


def history_over(count: int, history_size: int) -> bool:
    """True when ``count`` runs (or run states) are more than a trim lets pile up (2N)."""
    return count > 2 * kept_runs(history_size)


def ttl_cutoff(now_ms: int, history_ttl_ms: int | None) -> int | None:
    """Records of slots before this are past ``history_ttl`` (None: no TTL)."""
    return None if history_ttl_ms is None else now_ms - int(history_ttl_ms)


def history_to_keep(
    runs: Mapping[str, tuple[int, int]],
    running: Collection[int],
    history_size: int,
    history_ttl_ms: int | None,
    now_ms: int,
    oldest_slot: int | None,
) -> set[str] | None:
    """The tokens whose records stay, or None when nothing is to be trimmed.

    ``runs`` maps each attempt's token to its ``(slot, attempt)``;
    ``running`` holds the slots whose run is still in progress (never
    trimmed); ``oldest_slot`` is the smallest slot in ``runs`` (kept by the
    caller, so a call without a trim costs no scan). Past the TTL goes first; then, above 2N runs, the N newest
    by ``(slot, attempt)`` stay.
    """
    keep: set[str] | None = None
    cutoff = ttl_cutoff(now_ms, history_ttl_ms)
    if cutoff is not None and oldest_slot is not None and oldest_slot < cutoff:
        keep = {token for token, (slot, _a) in runs.items() if slot >= cutoff or slot in running}
    candidates = runs if keep is None else {t: runs[t] for t in keep}
    if history_over(len(candidates), history_size):
        newest = sorted(candidates.items(), key=lambda item: item[1], reverse=True)
        keep = {token for token, _key in newest[: kept_runs(history_size)]}
        keep.update(token for token, (slot, _a) in candidates.items() if slot in running)
    return keep


def states_to_drop(
    finished: Mapping[int, bool], history_size: int, retention_ms: int, now_ms: int
) -> list[int]:
    """The slots whose run state may go: finished, older than the window, oldest first.

    ``finished`` maps every slot with state to whether its run finished (not
    running); at most enough go to leave ``history_size`` states.
    """
    horizon = now_ms - retention_ms
    removable = sorted(slot for slot, done in finished.items() if done and slot < horizon)
    return removable[: len(finished) - kept_runs(history_size)]
