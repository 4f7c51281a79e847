"""Connections that heal: the check every networked backend's heal tests call.

A scheduler runs a job every 500 ms through a
:class:`~anarchon.testing.scenarios.proxy.FaultProxy`, then the proxy injects a fault
while a run is in flight:

- ``dead_flows``: every established connection goes silently dead (a NAT
  forgot the flows) while new connections work;
- ``blackhole``: nothing is forwarded on any connection, old or new, for
  ``outage_s``; then the proxy heals.

The scheduler must start a new run within ``bound_s`` of the moment the
store is reachable again (the fault for ``dead_flows``, the heal for
``blackhole``), and every run whose handler finished must be stored ``ok``.
:func:`check_heals` returns the measured time and the slots lost.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from anarchon.backend import Backend
from anarchon.context import RunContext
from anarchon.scheduler import Scheduler
from anarchon.testing.scenarios.proxy import FaultProxy

__all__ = ["FAULTS", "HealResult", "check_heals"]

FAULTS = ("dead_flows", "blackhole")
"""The faults :func:`check_heals` injects."""

PERIOD_MS = 500
"""The job's period."""


@dataclass(frozen=True)
class HealResult:
    """What one fault cost."""

    fault: str
    recovered_s: float
    """From the store being reachable again to the next run's start."""
    slots_lost: int
    """Slots due from the fault until shortly before the end that are not stored ``ok``."""
    unstored: list[int]
    """Slots whose handler finished but which are not stored ``ok`` (must be empty)."""
    reconnected: bool
    """True if the backend opened a connection after the fault."""


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= give_up:
            raise AssertionError(what)
        await asyncio.sleep(0.02)


async def check_heals(
    make_backend: Callable[[int], Backend],
    proxy: FaultProxy,
    *,
    fault: str = "dead_flows",
    heartbeat_s: float,
    call_timeout_s: float,
    outage_s: float = 3.0,
    slack_s: float = 3.0,
) -> HealResult:
    """Inject ``fault`` mid-run; assert recovery within one heartbeat plus one call timeout (plus slack).

    ``make_backend(port)`` builds the backend pointed at ``port`` (the proxy's).
    Raises AssertionError when the bound is missed or a finished run is not stored.
    """
    if fault not in FAULTS:
        raise ValueError(f"unknown fault {fault!r}; expected one of {FAULTS}")
    job = f"heal-{uuid.uuid4().hex[:8]}"
    started: list[tuple[int, float]] = []
    ended: list[int] = []

    async def handler(ctx: RunContext) -> None:
        started.append((ctx.slot, time.monotonic()))
        await asyncio.sleep(0.2)
        ended.append(ctx.slot)

    backend = make_backend(proxy.port)
    lease_s = max(3 * heartbeat_s, 3.0)
    if backend.runs is not None:
        scheduler = Scheduler(
            backend,
            instance_id="healer",
            stop_grace=5,
            lease=f"{int(lease_s * 1000)}ms",
            heartbeat=f"{int(heartbeat_s * 1000)}ms",
        )
    else:  # claim-only backends have no lease options
        scheduler = Scheduler(backend, instance_id="healer", stop_grace=5)
    scheduler.every(job, f"{PERIOD_MS}ms", handler, jitter=0, max_late="30s")
    bound = heartbeat_s + call_timeout_s + slack_s
    await scheduler.start()
    try:
        await _until(lambda: len(started) >= 3, 30, "no runs before the fault")
        await _until(lambda: len(ended) < len(started), 5, "no run in flight")
        accepted = proxy.accepted
        fault_ms = time.time() * 1000
        if fault == "dead_flows":
            killed = proxy.kill_flows()
            if killed == 0:
                raise AssertionError("the backend had no open connection to kill")
        else:
            proxy.blackhole()
            await asyncio.sleep(outage_s)
            proxy.heal()
        reachable = time.monotonic()
        await _until(
            lambda: any(t > reachable + 0.05 for _, t in started),
            bound,
            f"{fault}: no run within {heartbeat_s} s heartbeat + {call_timeout_s} s call"
            f" timeout + {slack_s} s slack after the store was reachable again",
        )
        first = min((slot, t) for slot, t in started if t > reachable + 0.05)
        await asyncio.sleep(1.5)
        end_ms = time.time() * 1000 - 1000  # slots after this may not have run yet
    finally:
        await scheduler.stop()
    history = await _history(make_backend, proxy, job)
    finished = {slot for slot, status in history if status == "ok"}
    unstored = sorted(set(ended) - finished)
    if unstored:
        raise AssertionError(f"runs that finished but were not stored as ok: {unstored}")
    lowest = (int(fault_ms) // PERIOD_MS + 1) * PERIOD_MS
    due = range(lowest, int(end_ms) + 1, PERIOD_MS)
    lost = sum(1 for slot in due if slot not in finished)
    return HealResult(
        fault=fault,
        recovered_s=first[1] - reachable,
        slots_lost=lost,
        unstored=unstored,
        reconnected=proxy.accepted > accepted,
    )


async def _history(
    make_backend: Callable[[int], Backend], proxy: FaultProxy, job: str
) -> list[tuple[int, str]]:
    backend = make_backend(proxy.port)
    await backend.init()
    try:
        return [(r.slot, r.status) for r in await backend.history(job, 1000)]
    finally:
        await backend.close()
