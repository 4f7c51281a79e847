"""A wall-clock step on one instance (an NTP step) against a real backend (docs/concepts.md, "The store clock").

Two schedulers share the backend; one instance's wall clock jumps ``step_ms``
forward mid-run. Store time is the store clock at the last sync plus
monotonic time, so nothing changes: no slot runs early, none twice, none is
lost, and the stepped instance keeps claiming.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable

from anarchon.backend import Backend
from anarchon.clock import SystemClock
from anarchon.context import RunContext
from anarchon.scheduler import Scheduler

__all__ = ["SteppedClock", "check_wall_clock_step"]


class SteppedClock(SystemClock):
    """The system clock whose wall time steps ``step_ms`` forward at ``step_at`` (monotonic)."""

    def __init__(self, step_ms: int, step_at: float) -> None:
        self.step_ms = step_ms
        self.step_at = step_at

    def now_ms(self) -> int:
        """Wall time, ``step_ms`` ahead once ``step_at`` has passed."""
        stepped = time.monotonic() >= self.step_at
        return super().now_ms() + (self.step_ms if stepped else 0)


async def check_wall_clock_step(
    make_backend: Callable[[], Backend],
    *,
    step_ms: int = 40_000,
    every: str = "100ms",
    seconds: float = 2.0,
) -> None:
    """Run the scenario; raise AssertionError naming what went wrong.

    ``make_backend`` returns a fresh backend object for each instance (the
    same store). The handler records the true wall time it started at, which
    on a store of this machine is the store's clock.
    """
    period = int(every.removesuffix("ms"))
    ran: list[tuple[int, str, int]] = []

    async def tick(ctx: RunContext) -> None:
        ran.append((ctx.slot, ctx.instance_id, time.time_ns() // 1_000_000))

    clock = SteppedClock(step_ms, time.monotonic() + seconds * 0.3)
    # Both race for every slot (no candidates): each must keep winning some.
    stepped = Scheduler(make_backend(), instance_id="stepped", clock=clock, candidates=None)
    steady = Scheduler(make_backend(), instance_id="steady", candidates=None)
    for scheduler in (stepped, steady):
        scheduler.every("tick", every, tick, jitter="20ms")
    await stepped.start()
    await steady.start()
    try:
        await asyncio.sleep(seconds)
    finally:
        await stepped.stop()
        await steady.stop()
    assert clock.now_ms() - time.time() * 1000 > step_ms - 1_000, "the clock did not step"
    slots = Counter(slot for slot, _i, _at in ran)
    assert len(slots) >= int(seconds * 1000 / period * 0.6), f"too few slots ran: {len(slots)}"
    twice = {slot: n for slot, n in slots.items() if n > 1}
    assert twice == {}, f"slots ran twice: {twice}"
    early = [(slot, at) for slot, _i, at in ran if at < slot]
    assert early == [], f"slots ran before their time: {early[:5]}"
    ordered = sorted(slots)
    expected = list(range(ordered[0], ordered[-1] + period, period))
    missing = sorted(set(expected) - set(ordered))
    assert missing == [], f"slots were lost: {missing[:5]}"
    assert {i for _s, i, _at in ran} == {"stepped", "steady"}, "one instance never ran a slot"
    after = [slot for slot, i, _at in ran if i == "stepped" and slot > ordered[0] + seconds * 500]
    assert after, "the stepped instance stopped claiming after its clock stepped"
