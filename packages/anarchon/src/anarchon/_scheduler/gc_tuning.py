"""Keeping Python's cyclic garbage collector off the hot path of a scheduler with many jobs.

A burst of job-slots allocates a few container objects per slot (the run,
its context, its task) that live until the slot's end is stored, so they
outlive the young generations and are promoted to the oldest one. CPython
then runs full collections, and each of them walks every object of the
process: the jobs, their schedules, the modules, the application's own
data. With 10,000 jobs due together that was about half of the client CPU
per job-slot and the largest part of the start lateness p99
(benchmarks/README.md, "Garbage collection").

``gc.freeze()`` moves every object alive at that moment to a permanent
generation that collections no longer walk; objects created later are
collected as before (docs/scaling.md, "Many jobs in one process"). A
scheduler with at least :data:`FREEZE_MIN_JOBS` jobs does this once per
process, when its first ``start()`` has prepared the jobs, unless it was
created with ``gc_freeze=False``. The cost: garbage cycles made only of
objects that were alive at that moment are never freed (they are the
process's long-lived objects: modules, jobs, configuration).

It also raises the youngest generation's threshold (if it was lower) to
:data:`YOUNG_PER_JOB` allocations per job, between :data:`YOUNG_THRESHOLD`
and :data:`YOUNG_MAX`: a wave of 10,000 slots keeps about 140,000 container
objects alive until its ends are stored. At CPython's default of 700 each
wave ran hundreds of young collections that promote the wave's objects and
trigger the older ones (15 to 30 µs of client CPU per job-slot on Redis and
SQLite, benchmarks/README.md); at a fixed 50,000, every collection still
walked the 50,000 objects of a wave in flight (7 to 14 µs). A threshold
above what a wave keeps alive lets the wave's objects be freed by their
reference counts before any collection sees them. The threshold counts
allocations less deallocations, so it only delays the collection of
garbage cycles. The older generations keep their thresholds.
"""

from __future__ import annotations

import gc
import logging

__all__ = [
    "FREEZE_MIN_JOBS",
    "YOUNG_MAX",
    "YOUNG_PER_JOB",
    "YOUNG_THRESHOLD",
    "freeze_once",
    "young_threshold",
]

FREEZE_MIN_JOBS = 1_000
"""Schedulers with fewer jobs leave the collector alone (its cost per slot is small for them)."""

YOUNG_THRESHOLD = 50_000
"""The least youngest-generation threshold set with the freeze (allocations less deallocations)."""

YOUNG_PER_JOB = 20
"""Youngest-generation threshold per job: above the ~14 container objects a due slot keeps alive."""

YOUNG_MAX = 1_000_000
"""The most: garbage cycles wait for at most this many net allocations."""


def young_threshold(jobs: int) -> int:
    """The youngest generation's threshold for a scheduler of ``jobs`` jobs."""
    return min(YOUNG_MAX, max(YOUNG_THRESHOLD, YOUNG_PER_JOB * jobs))


_frozen = False


def freeze_once(jobs: int, log: logging.Logger) -> bool:
    """``gc.collect()``, ``gc.freeze()`` and a young threshold of at least
    :func:`young_threshold`, once per process, for ``jobs >= FREEZE_MIN_JOBS``.

    Returns True if this call froze the objects alive now.
    """
    global _frozen
    if _frozen or jobs < FREEZE_MIN_JOBS or not gc.isenabled():
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    wanted = young_threshold(jobs)
    if young < wanted:
        gc.set_threshold(wanted, middle, old)
    log.debug(
        "anarchon: %d object(s) moved to the collector's permanent generation",
        gc.get_freeze_count(),
    )
    return True
