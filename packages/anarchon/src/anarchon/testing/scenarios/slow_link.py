"""The slow-finish check: a run ends when its handler ends, for the whole fleet.

Two schedulers run one job every ``period_ms`` with ``overlap=False`` (the
default) against one store, each through its own
:class:`~anarchon.testing.scenarios.proxy.FaultProxy`:

- ``slow`` has a ``rtt_ms`` round trip (its replies are held ``rtt_ms``), and
  a handler of ``slow_handler_s``: when it wins a slot, its handler ends
  before the next slot but its ``finish()`` lands after the other instance's
  claim of that next slot;
- ``fast`` has a plain link and a short handler. It starts once ``slow``
  has started its first run, so that first slot is ``slow``'s for sure;
  later slots go to whichever claim lands first (mostly ``fast``).

Without the overlap re-check the next slot's claim is answered ``overlap`` and written
``skipped``: every slot after one the slow instance ran was lost. With
:attr:`~anarchon.RunClaim.overlap_wait` the claim is re-checked until the
slow finish lands, and the slot runs. :func:`check_slow_finish` returns what
the store's history shows; ``wait=False`` runs the same fleet with the
re-checks turned off (the behaviour of a store without ``overlap_wait``), for
the before/after table of ``scripts/network_faults.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from anarchon.backend import Backend
from anarchon.context import RunContext
from anarchon.scheduler import Scheduler
from anarchon.testing.scenarios.proxy import FaultProxy

__all__ = ["SlowLinkResult", "check_slow_finish"]


@dataclass(frozen=True)
class SlowLinkResult:
    """What the history of the job shows over the checked slots."""

    slots: int
    """Slots from the first run to the last one that had time to run."""
    ran: int
    """Slots with exactly one run, finished ``ok``."""
    skipped_overlap: int
    """Slots written ``skipped`` (overlap)."""
    duplicates: int
    """Slots with more than one started attempt."""
    waits: int
    """``overlap`` answers that were re-checked instead of written ``skipped``."""
    by_instance: dict[str, int]
    """Slots run by each instance."""
    twice: dict[int, list[str]] = field(default_factory=dict)
    """The records (``instance status reason``) of each slot that started more than once."""

    @property
    def lost(self) -> int:
        """Slots that did not run (skipped or missing)."""
        return self.slots - self.ran


class _Waits(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "still live; re-checking" in record.getMessage():
            self.count += 1


async def check_slow_finish(
    make_backend: Callable[[int], Backend],
    target_host: str,
    target_port: int,
    *,
    seconds: float = 12.0,
    period_ms: int = 4000,
    rtt_ms: int = 1000,
    slow_handler_s: float = 1.6,
    wait: bool = True,
) -> SlowLinkResult:
    """Run the two-instance fleet for ``seconds``; return the history's counts.

    ``make_backend(port)`` builds a backend (a lease store) reaching the
    store at ``127.0.0.1:port`` (a proxy's port).
    """
    job = f"slow-link-{uuid.uuid4().hex[:8]}"
    slow_proxy = FaultProxy(target_host, target_port).start()
    fast_proxy = FaultProxy(target_host, target_port).start()
    waits = _Waits()
    slow_ran = asyncio.Event()
    schedulers: list[Scheduler] = []
    try:
        for name, proxy, hold_s in (
            ("slow", slow_proxy, slow_handler_s),
            ("fast", fast_proxy, 0.05),
        ):
            backend = make_backend(proxy.port)
            if backend.runs is None:
                raise ValueError("check_slow_finish needs a lease store (backend.runs)")
            if not wait:
                backend.runs.overlap_wait = False  # as a store without overlap_wait
            logger = logging.getLogger(f"anarchon.scheduler.slow-link.{name}")
            logger.setLevel(logging.DEBUG)
            logger.addHandler(waits)
            scheduler = Scheduler(
                backend,
                instance_id=name,
                lease="6s",
                heartbeat="2s",
                stop_grace="5s",
                control_cache="60s",  # no fleet-controls read before claims: the link decides
                logger=logger,
            )
            handler = _sleeper(hold_s, slow_ran if name == "slow" else None)
            scheduler.every(job, f"{period_ms}ms", handler, jitter=0, overlap=False)
            schedulers.append(scheduler)
        slow, fast = schedulers
        await slow.start()  # tables and functions are created before the link slows
        slow_proxy.latency(0, return_ms=rtt_ms)
        started = time.time()
        await asyncio.wait_for(slow_ran.wait(), 15)
        await fast.start()
        await asyncio.sleep(max(0.0, seconds - (time.time() - started)))
        stopped = time.time()
    finally:
        slow_proxy.heal()  # the window is over: stop over a plain link
        fast_proxy.heal()
        for scheduler in schedulers:
            await scheduler.stop()
        for name in ("slow", "fast"):
            logging.getLogger(f"anarchon.scheduler.slow-link.{name}").removeHandler(waits)
        slow_proxy.stop()
        fast_proxy.stop()
    return await _count(make_backend, target_port, job, started, stopped, period_ms, waits.count)


def _sleeper(
    seconds: float, ran: asyncio.Event | None
) -> Callable[[RunContext], Coroutine[Any, Any, None]]:
    async def handler(ctx: RunContext) -> None:
        if ran is not None:
            ran.set()
        await asyncio.sleep(seconds)

    return handler


async def _count(
    make_backend: Callable[[int], Backend],
    port: int,
    job: str,
    started: float,
    stopped: float,
    period_ms: int,
    waits: int,
) -> SlowLinkResult:
    backend = make_backend(port)
    await backend.init()
    try:
        records = await backend.history(job, 1000)
    finally:
        await backend.close()
    first_ok = [r.slot for r in records if r.status == "ok"]
    if not first_ok:
        raise AssertionError(f"no run of {job} finished in {stopped - started:.1f} s")
    first = min(first_ok)
    # The last slot that had a period and a second to run before the fleet stopped.
    last = int((stopped - 1.0) * 1000) - period_ms
    checked = [r for r in records if first <= r.slot <= last]
    slots = (last - first) // period_ms + 1 if last >= first else 0
    starts = Counter(r.slot for r in checked if r.status != "skipped")
    ok = Counter(r.slot for r in checked if r.status == "ok")
    by_instance = Counter(r.instance_id for r in checked if r.status == "ok")
    return SlowLinkResult(
        slots=slots,
        ran=sum(1 for slot, n in ok.items() if n == 1 and starts[slot] == 1),
        skipped_overlap=sum(1 for r in checked if r.status == "skipped" and r.reason == "overlap"),
        duplicates=sum(1 for n in starts.values() if n > 1),
        waits=waits,
        by_instance=dict(by_instance),
        twice={
            slot: [f"{r.instance_id} {r.status} {r.reason}" for r in checked if r.slot == slot]
            for slot, n in starts.items()
            if n > 1
        },
    )
