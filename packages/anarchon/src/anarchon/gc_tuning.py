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
collected as before (docs/operations.md, "Many jobs in one process"). A
scheduler with at least :data:`FREEZE_MIN_JOBS` jobs does this once per
process, when its first ``start()`` has prepared the jobs, unless it was
created with ``gc_freeze=False``. The cost: garbage cycles made only of
objects that were alive at that moment are never freed (they are the
process's long-lived objects: modules, jobs, configuration).

It also raises the youngest generation's threshold to
:data:`YOUNG_THRESHOLD` allocations (if it was lower): a wave of 10,000
slots allocates about 100,000 container objects, and at CPython's default
of 700 each wave ran hundreds of young collections that promote the wave's
objects and trigger the older ones (15 to 30 µs of client CPU per job-slot
on Redis and SQLite, benchmarks/README.md). The older generations keep
their thresholds.
"""

from __future__ import annotations

import gc
import logging

__all__ = ["FREEZE_MIN_JOBS", "YOUNG_THRESHOLD", "freeze_once"]

FREEZE_MIN_JOBS = 1_000
"""Schedulers with fewer jobs leave the collector alone (its cost per slot is small for them)."""

YOUNG_THRESHOLD = 50_000
"""The youngest generation's threshold set with the freeze (allocations less deallocations)."""

_frozen = False


def freeze_once(jobs: int, log: logging.Logger) -> bool:
    """``gc.collect()``, ``gc.freeze()`` and a young threshold of at least
    :data:`YOUNG_THRESHOLD`, once per process, for ``jobs >= FREEZE_MIN_JOBS``.

    Returns True if this call froze the objects alive now.
    """
    global _frozen
    if _frozen or jobs < FREEZE_MIN_JOBS or not gc.isenabled():
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if young < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    log.debug(
        "anarchon: %d object(s) moved to the collector's permanent generation",
        gc.get_freeze_count(),
    )
    return True
