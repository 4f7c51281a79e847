"""What a fault scenario counts, from the records its handlers write (wall-clock ms).

A worker's handler writes lines to its instance's record file: ``begin``,
a ``tick`` every 100 ms while it is alive and running, and ``end`` when it
*completed* (a plain handler reached its end; a fenced handler's side effect
was committed). A fenced handler also writes ``refused`` (its commit was
refused by the fence) or ``abandon`` (``ctx.still_owner()`` said no, or its
token was refused at registration).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from anarchon.testing.fleet import read_history
from anarchon.testing.scenarios import fenced_effects

__all__ = ["Attempt", "FaultReport", "attempts", "build_report", "lines"]

TICK_MS = 100


@dataclass
class Attempt:
    """One attempt of one slot on one instance, as its handler recorded it."""

    slot: int
    attempt: int
    instance: str
    begin: int
    records: list[int] = field(default_factory=list)
    completed_at: int | None = None
    refused: int = 0

    @property
    def completed(self) -> bool:
        """The handler completed (for a fenced handler: its side effect was committed)."""
        return self.completed_at is not None

    @property
    def end(self) -> int:
        """The last moment the handler is known to have been alive."""
        return max(self.records, default=self.begin)


@dataclass
class FaultReport:
    """What a scenario measured; ``clean`` when nothing went wrong.

    - ``duplicates``: slots *completed as owner* more than once. A completion
      counts as the owner's when no later attempt of the slot had begun by
      then. This is the at-least-once edge of leases: an attempt that
      completed, then lost its lease before ``finish`` reached the store, and
      a backup that ran the slot again.
    - ``zombies``: slots completed by an attempt *after* a later attempt of
      the slot had begun: a paused or cut-off runner whose handler finished
      beside its replacement. Such a completion is not counted as a duplicate
      (the replacement's run is the slot's run; the zombie's result is not
      stored), but it is counted here, and its live time in ``overlaps``:
      an unguarded handler's side effect happened twice.
    - ``overlaps``: slots where two attempts were alive at the same time (a
      record of one attempt, its start, a tick every 100 ms or its end, falls
      inside another attempt's interval; a frozen or dead process writes no
      ticks, so it is not counted as alive).
    - ``fenced_commits_by_stale``: fenced side effects (``fenced_effects``)
      committed by an attempt after an attempt with a higher fencing token
      had registered its token (its first step): what fencing must prevent.
    - ``refused_writes``: commits the fence refused (late writes kept out).
    - ``lost``: slots whose handler completed but the store's history has no
      ``ok`` result for them.
    - ``missed``: slots of the observed window that no handler started (a slot
      the store recorded ``skipped`` is not missed).
    - ``unfinished``: slots of the window that began but whose handler never
      completed on any instance (a crashed run nobody took over; on backends
      without leases that is the documented loss of a crashed run).
    - ``slots``: the slots of the observed window; ``completed_slots``: the
      slots (in or out of the window) whose handler completed somewhere.
    - ``fault_slot``, ``victim``: the slot the faulty instance was running and
      that instance; ``fault_history``: the store's history of that slot,
      ``(attempt, instance, status, reason)`` by attempt.
    - ``lost_at_fault``: the lost results of runs the faulty instance completed
      in the second before the fault: the run ended, but the fault came before
      its result was written (the scheduler stores ``finish`` and the history
      record in two store calls, so a ``kill -9`` between them loses the
      record of a run the store counts as finished).
    - ``recovery_s``: the time from the fault until another instance began the
      slot the faulty instance was running (None: none did within 15 s).
    """

    scenario: str
    duplicates: dict[int, int] = field(default_factory=dict)
    zombies: list[int] = field(default_factory=list)
    overlaps: list[int] = field(default_factory=list)
    fenced_commits_by_stale: list[str] = field(default_factory=list)
    refused_writes: int = 0
    lost: list[int] = field(default_factory=list)
    missed: list[int] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    recovery_s: float | None = None
    slots: int = 0
    completed_slots: int = 0
    fault_slot: int | None = None
    victim: str | None = None
    fault_history: list[tuple[int, str, str, str | None]] = field(default_factory=list)
    lost_at_fault: list[int] = field(default_factory=list)

    @property
    def clean_but_cut_results(self) -> bool:
        """``clean`` except for ``lost_at_fault`` (results the fault cut off, see above)."""
        return set(self.lost) <= set(self.lost_at_fault) and not (
            self.duplicates
            or self.zombies
            or self.overlaps
            or self.fenced_commits_by_stale
            or self.missed
            or self.unfinished
        )

    @property
    def clean(self) -> bool:
        """No duplicates, zombies, overlaps, stale commits, lost, missed or unfinished slots."""
        return not (
            self.duplicates
            or self.zombies
            or self.overlaps
            or self.fenced_commits_by_stale
            or self.lost
            or self.missed
            or self.unfinished
        )

    def assert_taken_over(self) -> None:
        """A lease store after a ``kill -9``: the other instance took the slot over as attempt 2.

        A ``kill -9`` between a run's finish and its history write loses that record (an
        open gap, docs/faults.md "What we test"): allowed, counted, nothing else is.
        """
        assert self.slots > 0, self.summary()
        assert self.clean_but_cut_results, self.summary()
        assert self.recovery_s is not None, self.summary()
        other = "w1" if self.victim == "w0" else "w0"
        assert self.fault_history == [
            (1, self.victim, "interrupted", "lease_lost"),
            (2, other, "ok", None),
        ], self.summary()

    def assert_lost_running_slot_only(self) -> None:
        """A claim-only store (no leases) after a ``kill -9``: the killed run is lost, no more."""
        assert self.slots > 0, self.summary()
        assert self.recovery_s is None, "a claim-only store took a run over"
        assert self.fault_slot in self.unfinished, self.summary()
        assert len(self.unfinished) <= 2, self.summary()  # the victim's running slots
        assert self.duplicates == {}, self.summary()
        assert self.zombies == [], self.summary()
        assert self.overlaps == [], self.summary()
        assert self.lost == [], self.summary()
        assert self.missed == [], self.summary()

    def assert_handed_over(self) -> None:
        """``stop()`` of the runner: its runs were handed over and each slot ran once."""
        assert self.recovery_s is not None, self.summary()
        assert self.slots > 0, self.summary()
        assert self.clean, self.summary()

    def assert_guarded_commits_nothing(self) -> None:
        """A fenced handler paused past its lease: nothing committed after it resumed."""
        assert self.recovery_s is not None, self.summary()
        assert self.fenced_commits_by_stale == [], self.summary()
        assert self.zombies == [], self.summary()
        assert self.duplicates == {}, self.summary()
        assert self.lost == [], self.summary()
        assert self.missed == [], self.summary()
        assert self.unfinished == [], self.summary()

    def assert_naive_write_refused(self) -> None:
        """A handler that never asks ``still_owner()``, paused past its lease: the fence refused it."""
        assert self.recovery_s is not None, self.summary()
        assert self.refused_writes >= 1, self.summary()
        assert self.fenced_commits_by_stale == [], self.summary()
        assert self.zombies == [], self.summary()
        assert self.duplicates == {}, self.summary()

    def summary(self) -> str:
        """One line with every count, for an assertion message or a report table."""
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.2f} s"
        return (
            f"{self.scenario}: {self.slots} slots observed, {self.completed_slots} completed;"
            f" duplicates {len(self.duplicates)} "
            f"{sorted(self.duplicates)}; zombies {len(self.zombies)} {self.zombies}; "
            f"overlaps {len(self.overlaps)} {self.overlaps}; fenced commits by stale "
            f"{len(self.fenced_commits_by_stale)}; refused writes {self.refused_writes}; "
            f"lost results {len(self.lost)} {self.lost} (at the fault: {self.lost_at_fault});"
            f" missed slots {len(self.missed)} "
            f"{self.missed}; unfinished {len(self.unfinished)} {self.unfinished}; "
            f"recovery {recovery}"
        )


def lines(path: Path, kind: str | None = None) -> list[list[str]]:
    """The records of one file, split; only those of ``kind`` if given."""
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if kind is None or (r and r[0] == kind)]


def attempts(outs: Sequence[Path]) -> list[Attempt]:
    """Every attempt the handlers recorded in ``outs``."""
    found: dict[tuple[int, int, str], Attempt] = {}
    for out in outs:
        for row in lines(out):
            if row[0] not in ("begin", "tick", "end", "refused", "abandon"):
                continue
            slot, attempt, instance, at = int(row[1]), int(row[2]), row[3], int(row[4])
            key = (slot, attempt, instance)
            if row[0] == "begin":
                found[key] = Attempt(slot, attempt, instance, at)
                continue
            if key not in found:
                continue
            found[key].records.append(at)
            if row[0] == "end":
                found[key].completed_at = at
            elif row[0] == "refused":
                found[key].refused += 1
    return list(found.values())


def _stale_commits(effects_path: Path | None) -> list[str]:
    if effects_path is None:
        return []
    registered: dict[str, list[fenced_effects.Effect]] = defaultdict(list)
    stale: list[str] = []
    for effect in fenced_effects.read_log(effects_path):
        if effect.kind == "register":
            registered[effect.run_id].append(effect)
        elif any(
            r.supersedes(effect) and r.at_ms <= effect.at_ms for r in registered[effect.run_id]
        ):
            stale.append(f"{effect.run_id}#{effect.fence}")
    return stale


def build_report(
    scenario: str,
    outs: Sequence[Path],
    url: str,
    job: str,
    window: tuple[int, int],
    every_ms: int,
    effects_path: Path | None = None,
    fault: tuple[int, str, int] | None = None,
) -> FaultReport:
    """Count what went wrong in the slots of ``window`` (wall-clock ms, first and last).

    ``fault`` is ``(slot, instance, at_ms)``: the slot the faulty instance was
    running, that instance and when the fault was injected.
    """
    found = attempts(outs)
    report = FaultReport(scenario)
    fault_ms: int | None = None
    if fault is not None:
        report.fault_slot, report.victim, fault_ms = fault
    by_slot: dict[int, list[Attempt]] = defaultdict(list)
    for a in found:
        by_slot[a.slot].append(a)
        report.refused_writes += a.refused
    for slot, runs in by_slot.items():
        owner = 0
        for a in runs:
            if a.completed_at is None:
                continue
            done_at = a.completed_at
            if any(b.attempt > a.attempt and b.begin <= done_at for b in runs):
                report.zombies.append(slot)
            else:
                owner += 1
        if owner > 1:
            report.duplicates[slot] = owner
        for a in runs:
            points = [a.begin, *a.records]
            if any(b.begin <= p <= b.end for b in runs if b is not a for p in points):
                report.overlaps.append(slot)
                break
    report.completed_slots = sum(1 for runs in by_slot.values() if any(a.completed for a in runs))
    report.fenced_commits_by_stale = _stale_commits(effects_path)
    history = read_history(url, job, 1000)
    ok = {r.slot for r in history if r.status == "ok"}
    skipped = {r.slot for r in history if r.status == "skipped"}
    report.fault_history = sorted(
        (r.attempt, r.instance_id, r.status, r.reason)
        for r in history
        if r.slot == report.fault_slot and not r.manual
    )
    report.lost = sorted(
        s for s, runs in by_slot.items() if any(a.completed for a in runs) and s not in ok
    )
    if fault_ms is not None:
        report.lost_at_fault = [
            s
            for s in report.lost
            if any(
                a.instance == report.victim
                and a.completed_at is not None
                and fault_ms - 1000 <= a.completed_at <= fault_ms
                for a in by_slot[s]
            )
        ]
    first, last = window
    expected = range(first - first % every_ms + every_ms, last - last % every_ms, every_ms)
    report.slots = len(expected)
    report.missed = [s for s in expected if s not in by_slot and s not in skipped]
    report.unfinished = [
        s for s in expected if s in by_slot and not any(a.completed for a in by_slot[s])
    ]
    report.zombies = sorted(set(report.zombies))
    report.overlaps.sort()
    return report
