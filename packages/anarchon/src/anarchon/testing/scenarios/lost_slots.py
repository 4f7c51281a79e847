"""What a fleet loses to a crashed or paused process, or to a short store outage.

:func:`kill_and_pause_fleet` runs ``processes`` scheduler processes with
``jobs`` jobs every ``every_ms`` each (default lease), ``kill -9``s one of
them ``kill_after_ms`` into a wave and, ``pause_after_s`` later, SIGSTOPs
another for ``pause_s`` before SIGCONT. Each victim is the process that
holds the most at that moment: the runner of the wave being started (for
the kill) and of the next wave, claimed ahead (for the pause), as the store
shows for the first job (a wave tends to be won whole by the process that
claims first); the first and second process when the store shows none. It reports the job-slots of the
common window that never ran, those that ran twice, and how long after the
kill each job ran again (docs/faults.md, "A crash in a wave")::

    report = kill_and_pause_fleet("redis://127.0.0.1:6379/0", tmp_path=tmp_path)
    assert report.lost_share <= 0.005, report.summary()

:func:`restart_store_fleet` runs ``jobs`` one-second jobs on ``processes``
processes and calls ``down()`` then, ``outage_s`` later, ``up()`` (a store
server killed and started again on its port): it reports the slots lost
after the outage and how soon after ``up()`` returned every job ran again.

Both need no pytest and block for about ``startup_s + window_s`` seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from anarchon.backend.registry import resolve_backend
from anarchon.testing.fleet import FleetResult, start_fleet

__all__ = ["CrashWaveReport", "RestartReport", "kill_and_pause_fleet", "restart_store_fleet"]


@dataclass
class CrashWaveReport:
    """What :func:`kill_and_pause_fleet` measured (times in ms since the epoch)."""

    jobs: int
    processes: int
    every_ms: int
    killed_at: int
    paused_at: int
    resumed_at: int
    job_slots: int
    """Job-slots of the common window (jobs x slots)."""
    lost: int
    """Job-slots of the window that never ran."""
    twice: int
    """Job-slots of the window that ran more than once."""
    back_after_ms: list[int] = field(default_factory=list)
    """Per job: from the kill to the start of its first run of a slot due after the kill."""
    lost_jobs: int = 0
    """Jobs that lost at least one slot."""
    takeovers: int = 0
    """Runs of the window that were a later attempt (a backup took the slot over)."""
    victims: tuple[int, int] = (0, 1)
    """The processes killed and paused."""
    result: FleetResult | None = None

    @property
    def lost_share(self) -> float:
        """``lost / job_slots``."""
        return self.lost / self.job_slots if self.job_slots else 1.0

    @property
    def back_within_ms(self) -> int:
        """The longest a job waited, from the kill, for a run to start."""
        return max(self.back_after_ms, default=-1)

    def summary(self) -> str:
        """One line of figures."""
        return (
            f"{self.processes} processes x {self.jobs} jobs every {self.every_ms} ms:"
            f" {self.lost} of {self.job_slots} job-slots lost ({100 * self.lost_share:.2f} %,"
            f" {self.lost_jobs} jobs), {self.twice} ran twice; every job ran again within"
            f" {self.back_within_ms / 1000:.2f} s of the kill (killed proc-{self.victims[0]},"
            f" paused proc-{self.victims[1]}; {self.takeovers} runs taken over)"
        )


def kill_and_pause_fleet(
    backend: str,
    *,
    tmp_path: Path | str,
    processes: int = 4,
    jobs: int = 2000,
    every_ms: int = 2000,
    window_s: float = 30.0,
    startup_s: float = 30.0,
    kill_after_ms: int = 150,
    pause_after_s: float = 3.75,
    pause_s: float = 10.0,
    before_s: float = 6.0,
    scheduler_options: Mapping[str, object] | None = None,
) -> CrashWaveReport:
    """Run the fleet, ``kill -9`` process 0 in a wave and SIGSTOP process 1 later; report."""
    fleet = start_fleet(
        backend,
        tmp_path=tmp_path,
        processes=processes,
        jobs=jobs,
        every_ms=every_ms,
        jitter_ms=0,
        window_s=window_s,
        startup_s=startup_s,
        scheduler_options=scheduler_options,
        log_level="WARNING",
    )
    first_job = fleet.jobs[0]
    reader = _Reader(backend)
    try:
        with fleet:
            fleet.wait_started(startup_s + 30)
            time.sleep(before_s)
            now = time.time() * 1000
            wave = (int(now) // every_ms + 1) * every_ms
            _sleep_until_ms(wave + kill_after_ms // 3)
            killed = reader.runner_of(first_job, wave, processes, default=0)
            _sleep_until_ms(wave + kill_after_ms)
            os.kill(fleet.procs[killed].pid, signal.SIGKILL)
            killed_at = int(time.time() * 1000)
            paused_at_ms = killed_at + int(pause_after_s * 1000)
            nxt = (paused_at_ms // every_ms + 1) * every_ms  # claimed ahead by now
            _sleep_until_ms(paused_at_ms - 60)
            paused = reader.runner_of(first_job, nxt, processes, default=1, not_=killed)
            _sleep_until_ms(paused_at_ms)
            victim = fleet.procs[paused].pid
            os.kill(victim, signal.SIGSTOP)
            paused_at = int(time.time() * 1000)
            try:
                time.sleep(pause_s)
            finally:
                os.kill(victim, signal.SIGCONT)
            resumed_at = int(time.time() * 1000)
            result = fleet.wait()
    finally:
        reader.close()
    report = _report(result, jobs, processes, every_ms, killed_at, paused_at, resumed_at)
    report.victims = (killed, paused)
    return report


def _sleep_until_ms(at_ms: int) -> None:
    time.sleep(max(0.0, at_ms / 1000 - time.time()))


class _Reader:
    """A store connection of the scenario's own, opened once (each look costs one call)."""

    def __init__(self, backend: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.store = resolve_backend(backend)
        self.loop.run_until_complete(self.store.init())

    def runner_of(
        self, job: str, slot: int, processes: int, *, default: int, not_: int = -1
    ) -> int:
        """The process (``proc-<i>``) holding ``job``'s ``slot`` in the store, else ``default``."""
        runs = self.store.runs
        runner = None
        if runs is not None:
            try:
                active = self.loop.run_until_complete(runs.active(job))
                runner = next((a.runner for a in active if a.slot == slot), None)
            except Exception:  # only a choice of victim: the default will do
                runner = None
        if runner is not None and runner.startswith("proc-"):
            index = int(runner.removeprefix("proc-"))
            if 0 <= index < processes and index != not_:
                return index
        return default if default != not_ else (not_ + 1) % processes

    def close(self) -> None:
        """Close the connection and the loop."""
        try:
            self.loop.run_until_complete(self.store.close())
        finally:
            self.loop.close()


def _report(
    result: FleetResult,
    jobs: int,
    processes: int,
    every_ms: int,
    killed_at: int,
    paused_at: int,
    resumed_at: int,
) -> CrashWaveReport:
    window = result.window
    names = result.job_names()
    lost = twice = lost_jobs = 0
    takeovers = sum(1 for r in result.runs if r.attempt > 1 and window and r.slot >= window[0])
    back: list[int] = []
    for name in names:
        ran = result.ran(name)
        missing = sum(1 for slot in window if ran[slot] == 0)
        lost += missing
        lost_jobs += missing > 0
        twice += sum(1 for slot in window if ran[slot] > 1)
        after = [  # a slot due after the kill: a late attempt of an older one does not count
            r.started_ms
            for r in result.runs_of(name)
            if r.started_ms is not None and r.slot > killed_at
        ]
        back.append(min(after) - killed_at if after else 10**9)
    return CrashWaveReport(
        jobs=jobs,
        processes=processes,
        every_ms=every_ms,
        killed_at=killed_at,
        paused_at=paused_at,
        resumed_at=resumed_at,
        job_slots=len(window) * len(names),
        lost=lost,
        twice=twice,
        back_after_ms=back,
        lost_jobs=lost_jobs,
        takeovers=takeovers,
        result=result,
    )


@dataclass
class RestartReport:
    """What :func:`restart_store_fleet` measured (times in ms since the epoch)."""

    jobs: int
    down_at: int
    up_at: int
    lost_during: int
    """Job-slots due while the store was down that never ran."""
    lost_after: int
    """Job-slots due after the store answered again that never ran (a delayed finish)."""
    twice: int
    """Job-slots of the window that ran more than once."""
    resumed_after_ms: list[int] = field(default_factory=list)
    """Per job: from ``up()`` returning to the first start of one of its runs."""
    result: FleetResult | None = None

    @property
    def resumed_within_ms(self) -> int:
        """The longest a job waited, from ``up()``, for a run to start."""
        return max(self.resumed_after_ms, default=-1)

    def summary(self) -> str:
        """One line of figures."""
        return (
            f"{self.jobs} jobs, outage {(self.up_at - self.down_at) / 1000:.2f} s:"
            f" {self.lost_after} job-slots lost after it, {self.lost_during} due during it,"
            f" {self.twice} ran twice; every job ran again within"
            f" {self.resumed_within_ms / 1000:.2f} s of the store answering"
        )


def restart_store_fleet(
    backend: str,
    *,
    tmp_path: Path | str,
    down: Callable[[], None],
    up: Callable[[], None],
    processes: int = 2,
    jobs: int = 200,
    every_ms: int = 1000,
    outage_s: float = 2.5,
    before_s: float = 4.0,
    window_s: float = 14.0,
    startup_s: float = 20.0,
    scheduler_options: Mapping[str, object] | None = None,
) -> RestartReport:
    """Run the fleet; ``down()``, wait ``outage_s``, ``up()``; report what was lost."""
    fleet = start_fleet(
        backend,
        tmp_path=tmp_path,
        processes=processes,
        jobs=jobs,
        every_ms=every_ms,
        jitter_ms=0,
        window_s=window_s,
        startup_s=startup_s,
        scheduler_options=scheduler_options,
        log_level="WARNING",
    )
    with fleet:
        fleet.wait_started(startup_s + 30)
        time.sleep(before_s)
        down()
        down_at = int(time.time() * 1000)
        time.sleep(outage_s)
        up()
        up_at = int(time.time() * 1000)
        result = fleet.wait()
    window = result.window
    lost_during = lost_after = twice = 0
    resumed: list[int] = []
    for name in result.job_names():
        ran = result.ran(name)
        lost_during += sum(1 for s in window if down_at <= s < up_at and ran[s] == 0)
        lost_after += sum(1 for s in window if s >= up_at and ran[s] == 0)
        twice += sum(1 for s in window if ran[s] > 1)
        after = [
            r.started_ms
            for r in result.runs_of(name)
            if r.started_ms is not None and r.started_ms >= up_at
        ]
        resumed.append(min(after) - up_at if after else 10**9)
    return RestartReport(
        jobs=jobs,
        down_at=down_at,
        up_at=up_at,
        lost_during=lost_during,
        lost_after=lost_after,
        twice=twice,
        resumed_after_ms=resumed,
        result=result,
    )
