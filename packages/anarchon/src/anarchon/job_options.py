"""The job options as a typed dict, so ``every()``, ``cron()``, ``add()`` and ``at()`` are checked.

``**options: Unpack[JobOptions]`` makes a misspelt option a type-checker error
and lets IDEs complete the names (PEP 692). ``Unpack`` comes from
``typing_extensions`` only while type checking (the core has no runtime
dependencies; type checkers ship ``typing_extensions``). At run time the
options are still validated by :func:`anarchon.jobs.build_job`, with coded
errors (docs/concepts.md, "Job options").
"""

from __future__ import annotations

from typing import Literal, TypedDict

from anarchon.durations import Duration
from anarchon.retry import Retry

__all__ = ["JobOptions"]


class JobOptions(TypedDict, total=False):
    """Options of a job (durations: ``"10s"``, seconds, or a ``timedelta``)."""

    jitter: Duration
    """Random delay per instance before claiming (default 2 s)."""
    max_late: Duration
    """How late a slot may still be claimed (default 60 s)."""
    timeout: Duration | None
    """Cancel the handler after this long (default: none)."""
    history_size: int
    """About how many runs history keeps (default 1000)."""
    history_ttl: Duration | None
    """Drop history older than this (default: none)."""
    overlap: bool
    """Lease backends: allow a slot while an older one still runs (default False)."""
    max_attempts: int
    """Lease backends: starts of a slot after crashes, the first included (default 3)."""
    catch_up: Duration
    """Lease backends: claim the newest missed slot this old on start (default 0)."""
    enabled: bool
    """False: registered, but never scheduled (default True)."""
    retry: Retry | None
    """Run the handler again after an error (docs/retries.md; default: never)."""
    if_uncertain: Literal["skip", "run"]
    """Lease backends: a claim the store won but could not confirm durable is skipped
    (``"skip"``, the default) or run anyway (``"run"``) (docs/durability.md)."""
