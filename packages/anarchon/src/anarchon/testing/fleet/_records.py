"""What the processes of a fleet recorded (:class:`FleetResult`), and the checks on it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from anarchon.types import RunRecord

__all__ = ["EDGE_SLOTS", "FleetResult", "FleetRun", "job_names", "parse_records"]

EDGE_SLOTS = 3
"""Slots left out at each end of the common window (processes starting or stopping)."""

STDERR_TAIL = 6000
"""How much of a failed process's stderr an assertion message shows."""


def job_names(job: str, jobs: int = 1) -> list[str]:
    """The names of a fleet's jobs: ``[job]``, or ``job-0`` ... ``job-<jobs-1>``."""
    return [job] if jobs == 1 else [f"{job}-{k}" for k in range(jobs)]


# Records -------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetRun:
    """One run a process recorded: ``run <slot> <attempt> <instance> [<started_ms> <job>]``.

    ``started_ms`` is the recording machine's true wall clock when the handler
    started; ``job`` is None for the fleet's only job.
    """

    slot: int
    attempt: int
    instance: str
    started_ms: int | None = None
    job: str | None = None


@dataclass
class FleetResult:
    """What the processes of one fleet recorded, and the checks on it.

    ``starts`` and ``stops`` hold one store time (ms) per process that got that
    far; ``runs`` every run of every process; ``history`` the store's records
    of the job when a reader was given (else ``None``).
    """

    job: str
    processes: int
    every_ms: int
    window_s: float
    starts: list[int] = field(default_factory=list)
    stops: list[int] = field(default_factory=list)
    runs: list[FleetRun] = field(default_factory=list)
    returncodes: list[int | None] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    history: list[RunRecord] | None = None
    elapsed_s: float = 0.0
    jobs: list[str] = field(default_factory=list)
    """Every job of the fleet (empty: just ``job``)."""
    history_s: float = 0.0
    """How long reading ``history`` took (included in ``elapsed_s``)."""

    _index: tuple[tuple[int, int], dict[str, list[FleetRun]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def job_names(self) -> list[str]:
        """The fleet's jobs: ``jobs``, or ``[job]``."""
        return list(self.jobs) or [self.job]

    def runs_of(self, job: str) -> list[FleetRun]:
        """The runs of ``job`` (grouped once per state of ``runs``: thousands of jobs stay fast)."""
        key = (id(self.runs), len(self.runs))
        if self._index is None or self._index[0] != key:
            grouped: dict[str, list[FleetRun]] = {}
            for run in self.runs:
                grouped.setdefault(run.job or self.job, []).append(run)
            self._index = (key, grouped)
        return self._index[1].get(job, [])

    @property
    def window(self) -> list[int]:
        """The slots due while every process was running, ``EDGE_SLOTS`` in from each end.

        Empty when not every process wrote its ``start`` and ``stop`` lines.
        """
        if not self.starts or not self.stops:
            return []
        first = (max(self.starts) // self.every_ms + EDGE_SLOTS) * self.every_ms
        last = (min(self.stops) // self.every_ms - EDGE_SLOTS) * self.every_ms
        return list(range(first, last + 1, self.every_ms))

    @property
    def common_s(self) -> float:
        """How long the window is, in seconds (first to last slot)."""
        window = self.window
        return (window[-1] - window[0]) / 1000 if len(window) > 1 else 0.0

    def ran(self, job: str | None = None) -> Counter[int]:
        """How many times each slot of the window ran for ``job`` (default: the first job)."""
        window = self.window
        if not window:
            return Counter()
        job = job or self.job_names()[0]
        return Counter(r.slot for r in self.runs_of(job) if window[0] <= r.slot <= window[-1])

    def duplicates(self, job: str | None = None) -> dict[int, int]:
        """Slots of the window that ran more than once for ``job``, with their count."""
        return {slot: n for slot, n in sorted(self.ran(job).items()) if n > 1}

    def missed(self, job: str | None = None) -> list[int]:
        """Slots of the window that never ran for ``job``."""
        ran = self.ran(job)
        return [slot for slot in self.window if ran[slot] == 0]

    def early(self, tolerance_ms: int = 0) -> list[FleetRun]:
        """Runs whose handler started more than ``tolerance_ms`` before their slot.

        Judged by ``started_ms`` (the true wall clock of the recording machine):
        meaningful when the store's clock is this machine's, a store on this host.
        """
        return [
            r
            for r in self.runs
            if r.started_ms is not None and r.started_ms < r.slot - tolerance_ms
        ]

    def problems(self, *, min_window_s: float | None = None, min_instances: int = 2) -> list[str]:
        """Every failed check, as messages (empty when the fleet ran each slot exactly once).

        ``min_window_s`` is how long all processes must have run together
        (default: the fleet's ``window_s``); ``min_instances`` how many
        processes must have won slots of the window (capped at ``processes``).
        """
        failed = [
            f"process {i} exited with {code}:\n{self.stderr[i][-STDERR_TAIL:]}"
            for i, code in enumerate(self.returncodes)
            if code != 0
        ]
        if failed:
            return failed  # the records of a crashed fleet say nothing more
        problems: list[str] = []
        for what, seen in (("start", self.starts), ("stop", self.stops)):
            if len(seen) != self.processes:
                problems.append(f"{len(seen)} of {self.processes} processes wrote {what!r}")
        if problems:
            return problems
        needed = self.window_s if min_window_s is None else min_window_s
        if self.common_s < needed:
            spread = (max(self.starts) - min(self.starts)) / 1000
            problems.append(
                f"processes ran together for only {self.common_s:.1f} s (< {needed:.1f} s);"
                f" their starts spread over {spread:.1f} s: raise startup_s"
            )
        window = self.window
        for job in self.job_names():
            label = "" if len(self.job_names()) == 1 else f"job {job}: "
            duplicates = self.duplicates(job)
            if duplicates:
                problems.append(
                    f"{label}{len(duplicates)} slots ran more than once: "
                    + ", ".join(f"{slot} x{n}" for slot, n in list(duplicates.items())[:20])
                )
            missed = self.missed(job)
            if missed:
                problems.append(
                    f"{label}{len(missed)} of {len(window)} slots never ran: {missed[:20]}"
                )
            if len(problems) >= 20:
                problems.append("(further jobs not listed)")
                break
        retried = [r for r in self.runs if r.attempt != 1 and self._in(window, r.slot)]
        if retried:
            problems.append(f"{len(retried)} runs were not a first attempt: {retried[:10]}")
        unexplained = self._edge_retries_not_handed_over(window)
        if unexplained:
            problems.append(
                f"{len(unexplained)} runs outside the window were not a first attempt and the"
                f" history has no hand-over of the attempt before: {unexplained[:10]}"
            )
        if window:
            instances = {r.instance for r in self.runs if window[0] <= r.slot <= window[-1]}
            wanted = min(min_instances, self.processes)
            if len(instances) < wanted:
                problems.append(
                    f"only {sorted(instances)} won slots of the window: the race was not exercised"
                )
        if self.history is not None and window:
            problems.extend(self._history_problems(window))
        return problems

    @staticmethod
    def _in(window: list[int], slot: int) -> bool:
        return bool(window) and window[0] <= slot <= window[-1]

    def _edge_retries_not_handed_over(self, window: list[int]) -> list[FleetRun]:
        """Second attempts at the edges, unless history shows the attempt before handed over.

        A stopping process hands over the runs it claimed ahead and did not start
        within ``stop_grace``; a process still running takes them as the next
        attempt. Without a history the edges are not checked.
        """
        if self.history is None:
            return []
        single = self.job_names()[0] if len(self.job_names()) == 1 else None
        handed = {
            (single or r.job, r.slot, r.attempt) for r in self.history if r.reason == "handed_over"
        }
        return [
            r
            for r in self.runs
            if r.attempt != 1
            and not self._in(window, r.slot)
            and (single or r.job, r.slot, r.attempt - 1) not in handed
        ]

    def _history_problems(self, window: list[int]) -> list[str]:
        assert self.history is not None
        problems: list[str] = []
        names = self.job_names()
        by_job: dict[str, list[RunRecord]] = {}
        for record in self.history:
            if window[0] <= record.slot <= window[-1]:
                by_job.setdefault(record.job if len(names) > 1 else names[0], []).append(record)
        for job in names:
            label = "" if len(names) == 1 else f"job {job}: "
            found = [
                f"{label}{text}"
                for text in self._job_history_problems(job, window, by_job.get(job, []))
            ]
            problems.extend(found)
            if len(problems) >= 20:
                problems.append("(further jobs not listed)")
                break
        return problems

    def _job_history_problems(
        self, job: str, window: list[int], in_window: list[RunRecord]
    ) -> list[str]:
        problems: list[str] = []
        per_slot = Counter(r.slot for r in in_window)
        absent = [slot for slot in window if per_slot[slot] == 0]
        if absent:
            problems.append(f"history lacks {len(absent)} slots of the window: {absent[:20]}")
        twice = {slot: n for slot, n in sorted(per_slot.items()) if n > 1}
        if twice:
            problems.append(f"history has {len(twice)} slots more than once: {twice}")
        stray = sorted(set(per_slot) - set(window))
        if stray:
            problems.append(f"history has slots not on the schedule: {stray[:20]}")
        statuses = Counter(r.status for r in in_window)
        if set(statuses) - {"ok"}:
            problems.append(f"history has runs that did not end ok: {dict(statuses)}")
        winner = {r.slot: r.instance for r in self.runs_of(job)}
        differ = [
            (r.slot, r.instance_id, winner.get(r.slot))
            for r in in_window
            if r.instance_id != winner.get(r.slot)
        ]
        if differ:
            problems.append(
                f"history names another instance than the one that ran"
                f" (slot, history, run): {differ[:10]}"
            )
        return problems

    def assert_exactly_once(
        self, *, min_window_s: float | None = None, min_instances: int = 2
    ) -> None:
        """Raise :class:`AssertionError` listing every failed check of :meth:`problems`."""
        problems = self.problems(min_window_s=min_window_s, min_instances=min_instances)
        if problems:
            raise AssertionError(
                f"fleet {self.job!r} ({self.processes} processes, every {self.every_ms} ms):\n- "
                + "\n- ".join(problems)
            )

    def summary(self) -> str:
        """One line: processes, window, runs and winners."""
        window = set(self.window)
        winners = Counter(r.instance for r in self.runs if r.slot in window)
        jobs = "" if len(self.job_names()) == 1 else f" x {len(self.job_names())} jobs"
        return (
            f"{self.processes} processes, {len(window)} slots{jobs} in {self.common_s:.1f} s,"
            f" {len(self.runs)} runs, wins per instance {dict(sorted(winners.items()))},"
            f" {self.elapsed_s:.1f} s in all ({self.history_s:.1f} s reading history)"
        )


def parse_records(paths: Sequence[Path | str], result: FleetResult) -> FleetResult:
    """Add the ``start``/``run``/``stop`` lines of the worker files ``paths`` to ``result``.

    A missing file adds nothing (its process never started). Raises
    :class:`ValueError` for a line that is not one of the three.
    """
    for path in map(Path, paths):
        if not path.exists():
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            fields = line.split()
            if not fields:
                continue
            try:
                if fields[0] == "start" and len(fields) == 2:
                    result.starts.append(int(fields[1]))
                    continue
                if fields[0] == "stop" and len(fields) == 2:
                    result.stops.append(int(fields[1]))
                    continue
                if fields[0] == "run" and len(fields) == 4:
                    result.runs.append(FleetRun(int(fields[1]), int(fields[2]), fields[3]))
                    continue
                if fields[0] == "run" and len(fields) == 6:
                    slot, attempt, instance, started, job = fields[1:]
                    result.runs.append(
                        FleetRun(int(slot), int(attempt), instance, int(started), job)
                    )
                    continue
            except ValueError:
                pass
            raise ValueError(f"{path}:{number}: not a fleet record: {line!r}")
    return result
