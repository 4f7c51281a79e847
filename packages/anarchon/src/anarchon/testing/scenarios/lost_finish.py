"""A lost finish: a failover to an asynchronous replica that missed the last writes.

A fleet of ``processes`` x ``jobs`` runs every ``every_ms``. Mid-window the
caller's ``cut()`` stops replication (the replica misses what follows); 500 ms
later its ``fail_over()`` kills the primary, promotes the replica and points
the fleet's address at it. Claims and finishes of those 500 ms are gone from
the store the fleet now uses: finished runs show ``running`` with a lease
nobody renews, and claimed runs have no state at all.

The report counts what that costs (docs/durability.md, "Healing"):

- ``duplicates``: slots that ran twice (a finished slot run again);
- ``longest_gap``: the most consecutive slots one job missed;
- ``stuck``: runs of the window that history shows ``running`` at the end
  (a completed run that stays ``running`` for ever).

The store-specific parts (which servers, how to cut and fail over) are the
caller's: see the Redis and PostgreSQL backends' failover tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from anarchon.testing.fleet import FleetSpec

__all__ = ["LostFinishReport", "run_lost_finish"]

CUT_BEFORE_KILL_S = 0.5
"""How long before the primary dies replication is cut: the writes lost in the failover."""


@dataclass
class LostFinishReport:
    """What a lost-finish round cost (see the module's docstring)."""

    jobs: int
    slots: int
    """Job-slots checked: the fleet's window x jobs."""
    missed: int = 0
    unrecorded: int = 0
    """Runs of the window that started but have no history record at all."""
    duplicates: dict[str, list[int]] = field(default_factory=dict)
    longest_gap: int = 0
    stuck: list[tuple[str, int]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line of counts."""
        dup = sum(len(slots) for slots in self.duplicates.values())
        return (
            f"lost finish: {self.jobs} jobs, {self.slots} job-slots; missed {self.missed};"
            f" duplicates {dup} in {len(self.duplicates)} jobs; longest gap {self.longest_gap}"
            f" slots; stuck running {len(self.stuck)}; runs missing from history {self.unrecorded}"
        )

    def assert_healed(self) -> None:
        """No finished slot ran again, no job skipped more than one slot, nothing stuck."""
        assert self.slots > 0, "the fleet's window was empty: " + " | ".join(self.stderr)[-2000:]
        assert not self.duplicates, self.summary()
        assert self.longest_gap <= 1, self.summary()
        assert not self.stuck, self.summary()
        assert self.unrecorded == 0, self.summary()


def run_lost_finish(
    url: str,
    *,
    tmp_path: Path | str,
    cut: Callable[[], None],
    fail_over: Callable[[], None],
    reader: Callable[[], str] | None = None,
    processes: int = 3,
    jobs: int = 200,
    every_ms: int = 1000,
    handler_ms: int = 200,
    window_s: float = 16.0,
    fault_after_s: float = 6.0,
    cut_phase_ms: int = 100,
    scheduler_options: Mapping[str, object] | None = None,
) -> LostFinishReport:
    """Run the fleet on ``url``, cut and fail over mid-window; count the damage.

    ``reader()`` gives the URL to read history from after the failover
    (default ``url``, which the caller re-points at the promoted replica).
    The cut falls ``cut_phase_ms`` after a slot boundary: with the default
    (100 ms, handlers of 200 ms) the wave's claims have replicated and its
    finishes are lost.
    """
    spec = FleetSpec(
        backend=url,
        tmp_path=tmp_path,
        processes=processes,
        jobs=jobs,
        every_ms=every_ms,
        jitter_ms=0,
        handler_ms=handler_ms,
        window_s=window_s,
        startup_s=10.0,
        scheduler_options=scheduler_options,
    )
    with spec.start() as fleet:
        fleet.wait_started(spec.startup_s)
        time.sleep(fault_after_s)
        now_ms = time.time() * 1000
        time.sleep(((cut_phase_ms - now_ms) % every_ms) / 1000)
        cut()
        time.sleep(CUT_BEFORE_KILL_S)
        fail_over()
        result = fleet.wait(reader=reader() if reader is not None else url)
    names = result.job_names()
    report = LostFinishReport(
        jobs=len(names), slots=len(result.window) * len(names), stderr=result.stderr
    )
    window = result.window
    for name in names:
        missed = result.missed(name)
        report.missed += len(missed)
        report.longest_gap = max(report.longest_gap, _longest_run(missed, every_ms))
        duplicates = sorted(result.duplicates(name))
        if duplicates:
            report.duplicates[name] = duplicates
    if window:
        history = result.history or []
        report.stuck = sorted(
            (record.job, record.slot)
            for record in history
            if record.status == "running" and window[0] <= record.slot <= window[-1]
        )
        recorded = {(record.job, record.slot) for record in history}
        report.unrecorded = sum(
            1 for name in names for slot in result.ran(name) if (name, slot) not in recorded
        )
    return report


def _longest_run(slots: list[int], every_ms: int) -> int:
    """The longest streak of consecutive slots in ``slots`` (sorted)."""
    longest = streak = 0
    previous: int | None = None
    for slot in slots:
        streak = streak + 1 if previous is not None and slot - previous == every_ms else 1
        longest = max(longest, streak)
        previous = slot
    return longest
