"""Aggregated log lines for overlap skips: one line per job per minute, with a count.

A fleet under ``overlap=False`` with a slow run can skip a slot of every job
every second; one INFO line per skipped slot buried everything else (35,721
lines in 40 s in one trial). The first skip of a job is logged at once; the
skips after it are counted and logged, with their count, on the first skip
at least :data:`SKIP_LOG_INTERVAL_S` after the previous line.
"""

from __future__ import annotations

import logging

from anarchon.clock import Clock

__all__ = ["SKIP_LOG_INTERVAL_S", "SkipLog"]

SKIP_LOG_INTERVAL_S = 60.0
"""At most one overlap-skip line per job in this many seconds."""


class SkipLog:
    """Counts overlap skips per job and logs them at most once per interval."""

    __slots__ = ("_clock", "_log", "_pending")

    def __init__(self, clock: Clock, log: logging.Logger) -> None:
        self._clock = clock
        self._log = log
        self._pending: dict[str, tuple[float, int]] = {}
        """Per job: monotonic time of its last line, skips counted since."""

    def skipped(self, job: str, slot: int) -> None:
        """Note that ``slot`` of ``job`` was skipped because an earlier run holds its lease."""
        now = self._clock.monotonic()
        last = self._pending.get(job)
        if last is None or now - last[0] >= SKIP_LOG_INTERVAL_S:
            count = 1 if last is None else last[1] + 1
            self._log.info(
                "anarchon: %s: %d slot(s) skipped (latest %d): an earlier run still holds its"
                " lease (overlap=False); further skips are counted, one line per %.0f s",
                job,
                count,
                slot,
                SKIP_LOG_INTERVAL_S,
            )
            self._pending[job] = (now, 0)
        else:
            self._pending[job] = (last[0], last[1] + 1)

    def pending(self, job: str) -> int:
        """Skips of ``job`` counted but not logged yet."""
        last = self._pending.get(job)
        return 0 if last is None else last[1]
