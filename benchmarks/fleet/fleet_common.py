"""Pieces of ``benchmarks/fleet/fleet.py`` shared by its worker processes (standard library only).

The APScheduler worker runs in its own virtual environment without anarchon,
so this module imports nothing outside the standard library.

A worker process records, for every handler start, ``(job index, slot ms,
lateness ms)`` in memory; a :class:`Sampler` thread reads the process's CPU
time (``time.process_time()``: user + system of every thread) and the
worker's store counters at instants fixed by the parent, even while the event
loop is busy. At the end the worker writes one JSON document (see
:func:`write_result`).
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Counters = Callable[[], dict[str, float]]
"""A snapshot of a worker's own store counters (round trips, statements, ...)."""


def wall_ms() -> float:
    """Wall-clock milliseconds since the epoch (the stores run on this host: one clock)."""
    return time.time_ns() / 1_000_000


class Sampler(threading.Thread):
    """Reads CPU time and counters at given wall-clock instants, in a thread of its own."""

    def __init__(self, instants: Sequence[float], counters: Counters | None = None) -> None:
        super().__init__(name="fleet-sampler", daemon=True)
        self.instants = list(instants)
        self.counters = counters or dict
        self.samples: list[dict[str, Any]] = []

    def run(self) -> None:
        for at in self.instants:
            delay = at - time.time()
            if delay > 0:
                time.sleep(delay)
            self.samples.append(
                {
                    "at": at,
                    "wall": time.time(),
                    "cpu": time.process_time(),
                    "counters": dict(self.counters()),
                }
            )


def signal_ready(out: str) -> None:
    """Tell the parent this worker's scheduler runs (``<out>.ready``)."""
    with open(f"{out}.ready", "w") as f:
        f.write(str(time.time()))


def signal_stopped(out: str) -> None:
    """Tell the parent this worker's scheduler has stopped (``<out>.stopped``)."""
    with open(f"{out}.stopped", "w") as f:
        f.write(str(time.time()))


def read_plan(path: str) -> dict[str, Any] | None:
    """The parent's plan (sample instants, stop time), or None while it is not written."""
    try:
        with open(path) as f:
            plan: dict[str, Any] = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return plan


def write_result(path: str, result: dict[str, Any]) -> None:
    """Write a worker's result atomically (a reader never sees half a file)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, separators=(",", ":"))
    os.replace(tmp, path)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of already sorted values; NaN when empty."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


@dataclass
class Tally:
    """Handler starts of the measured window, across every process of one run."""

    jobs: int
    slots: list[int]
    """The slots (ms) of the measured window; every job has each of them."""
    starts: dict[tuple[int, int], int] = field(default_factory=dict)
    lateness_ms: list[float] = field(default_factory=list)

    def add(self, records: Iterable[Sequence[float]]) -> None:
        """Count ``(job, slot, lateness)`` records; those outside the window are ignored."""
        window = set(self.slots)
        for job, slot, late in records:
            key = (int(job), int(slot))
            if key[1] not in window:
                continue
            self.starts[key] = self.starts.get(key, 0) + 1
            self.lateness_ms.append(float(late))

    @property
    def expected(self) -> int:
        """Job-slots due in the window."""
        return self.jobs * len(self.slots)

    @property
    def distinct(self) -> int:
        """Job-slots of the window that started at least once."""
        return len(self.starts)

    @property
    def duplicates(self) -> int:
        """Extra starts: a job-slot started ``n > 1`` times counts ``n - 1``."""
        return sum(n - 1 for n in self.starts.values() if n > 1)

    @property
    def missed(self) -> int:
        """Job-slots of the window that never started before the workers stopped."""
        return self.expected - self.distinct

    def lateness(self) -> tuple[float, float, float]:
        """p50, p99 and max of start lateness (ms), over every start in the window."""
        ordered = sorted(self.lateness_ms)
        return (
            percentile(ordered, 0.50),
            percentile(ordered, 0.99),
            ordered[-1] if ordered else math.nan,
        )


def window_slots(first_ms: int, count: int, every_ms: int) -> list[int]:
    """``count`` slots from ``first_ms``, ``every_ms`` apart."""
    return [first_ms + i * every_ms for i in range(count)]


def aligned_start(now_s: float, startup_s: float, every_s: float) -> float:
    """The first slot boundary (s) at least ``startup_s + every_s`` from now.

    One whole burst runs before the window (warm-up: connections, caches).
    """
    earliest = now_s + startup_s + every_s
    return math.ceil(earliest / every_s) * every_s
