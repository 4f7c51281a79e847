"""The check shared by the backends' "connections that heal" tests (issue 18).

A scheduler runs a job every 500 ms through a :class:`flow_proxy.FlowProxy`;
the proxy silently kills every established flow; the scheduler must run a
new slot within ``bound_s`` (one heartbeat plus one call timeout, plus slack
for a loaded machine), and every run it started must end up stored as
finished.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from anarchon import Backend, RunContext, Scheduler
from flow_proxy import FlowProxy

__all__ = ["check_heals"]


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    give_up = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < give_up, what
        await asyncio.sleep(0.02)


async def check_heals(
    make_backend: Callable[[int], Backend],
    proxy: FlowProxy,
    *,
    heartbeat_s: float,
    call_timeout_s: float,
    slack_s: float = 3.0,
) -> float:
    """Freeze the proxy's flows mid-run; return seconds until the next run started.

    ``make_backend(port)`` builds the backend pointed at the proxy's port.
    """
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
    scheduler.every(job, "500ms", handler, jitter=0, max_late="30s")
    await scheduler.start()
    try:
        await _until(lambda: len(started) >= 3, 30, "no runs before the fault")
        await _until(lambda: len(ended) < len(started), 5, "no run in flight")
        frozen = proxy.freeze()
        assert frozen > 0, "the backend had no open flow to kill"
        at = time.monotonic()
        await _until(
            lambda: any(t > at + 0.05 for _, t in started),
            heartbeat_s + call_timeout_s + slack_s,
            f"no run within {heartbeat_s} s heartbeat + {call_timeout_s} s call timeout"
            f" + {slack_s} s slack after the flows died",
        )
        healed = min(t for _, t in started if t > at + 0.05) - at
        await asyncio.sleep(1.5)
    finally:
        await scheduler.stop()
    history = await _history(make_backend, proxy, job)
    finished = {slot for slot, status in history if status == "ok"}
    missing = sorted(set(ended) - finished)
    assert not missing, f"runs that finished but were not stored as ok: {missing}"
    return healed


async def _history(
    make_backend: Callable[[int], Backend], proxy: FlowProxy, job: str
) -> list[tuple[int, str]]:
    backend = make_backend(proxy.port)
    await backend.init()
    try:
        return [(r.slot, r.status) for r in await backend.history(job, 1000)]
    finally:
        await backend.close()
