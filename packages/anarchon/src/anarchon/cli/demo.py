"""``anarchon demo``: several instances declare the same 1 s job; each slot runs once.

By default the instances are separate OS processes sharing one SQLite file (the
embedded store, from ``anarchon[sqlite]``); with ``--backend URL`` they share
that store instead. ``memory://`` cannot cross processes, so a memory demo runs
the instances in one process.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone

from anarchon.backend.registry import redact_url, resolve_backend
from anarchon.context import RunContext
from anarchon.scheduler import Scheduler

__all__ = ["run_demo", "run_worker"]

JOB = "demo-tick"
INSTALL_SQLITE = 'pip install "anarchon[sqlite]"'


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def _declare(scheduler: Scheduler, emit: Callable[[int, str], None]) -> None:
    def tick(ctx: RunContext) -> None:
        emit(ctx.slot, ctx.instance_id)

    scheduler.every(JOB, "1s", tick, jitter="300ms")


async def run_worker(backend: str, instance: str, until_ms: int) -> int:
    """One demo instance (a child process): run the job until ``until_ms``, print each run."""
    scheduler = Scheduler(backend, instance_id=instance, stop_grace="2s")
    _declare(scheduler, lambda slot, who: print(f"RUN {slot} {who} {os.getpid()}", flush=True))
    async with scheduler:
        await asyncio.sleep(max(0.0, until_ms / 1000 - time.time()))
    return 0


def _sqlite_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("anarchon_sql", "aiosqlite"))


async def run_demo(instances: int, seconds: float, backend: str | None) -> int:
    """Run the demo and print a summary; 0 when every slot ran exactly once."""
    if backend is None:
        if not _sqlite_available():
            print(
                "anarchon demo: separate processes share the embedded SQLite store, which needs"
                f" anarchon-sql: {INSTALL_SQLITE}\n"
                "running the instances in one process on memory:// instead"
            )
            return await _in_process(instances, seconds)
        folder = tempfile.mkdtemp(prefix="anarchon-demo-")
        backend = f"sqlite:///{os.path.join(folder, 'demo.db')}"
    if backend.startswith("memory:"):
        return await _in_process(instances, seconds, backend)
    resolve_backend(backend)  # a bad URL fails here, with its code, before any process starts
    return await _processes(instances, seconds, backend)


async def _processes(instances: int, seconds: float, backend: str) -> int:
    until_ms = int((time.time() + 1.5 + seconds) * 1000)  # 1.5 s for the processes to start
    print(
        f"{instances} processes share {redact_url(backend)}; each declares job {JOB!r} every 1s;"
        f" running {seconds:g}s ..."
    )
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "anarchon.cli",
            "demo-worker",
            "--backend",
            backend,
            "--instance",
            f"demo-{n + 1}",
            "--until-ms",
            str(until_ms),
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(instances)
    ]
    runs: list[tuple[int, str]] = []

    async def follow(child: asyncio.subprocess.Process) -> None:
        assert child.stdout is not None
        async for raw in child.stdout:
            fields = raw.decode().split()
            if len(fields) == 4 and fields[0] == "RUN":
                slot, instance, pid = int(fields[1]), fields[2], fields[3]
                runs.append((slot, instance))
                print(f"  slot {_clock(slot)}  ran on {instance} (pid {pid})", flush=True)

    await asyncio.gather(*(follow(child) for child in children))
    codes = [await child.wait() for child in children]
    if any(codes):
        print(f"FAIL: a demo process exited with {codes}")
        return 1
    return _summary(runs)


async def _in_process(instances: int, seconds: float, backend: str = "memory://") -> int:
    store = resolve_backend(backend)
    schedulers = [Scheduler(store, instance_id=f"demo-{n + 1}") for n in range(instances)]
    runs: list[tuple[int, str]] = []

    def emit(slot: int, instance: str) -> None:
        runs.append((slot, instance))
        print(f"  slot {_clock(slot)}  ran on {instance}", flush=True)

    for scheduler in schedulers:
        _declare(scheduler, emit)
    print(
        f"{instances} instances in one process share {backend}; job {JOB!r} every 1s; running {seconds:g}s ..."
    )
    for scheduler in schedulers:
        await scheduler.start()
    try:
        await asyncio.sleep(seconds)
    finally:
        for scheduler in schedulers:
            await scheduler.stop()
    return _summary(runs)


def _summary(runs: list[tuple[int, str]]) -> int:
    counts = Counter(slot for slot, _ in runs)
    doubles = sorted(slot for slot, count in counts.items() if count > 1)
    ordered = sorted(counts)
    missing = (len(range(ordered[0], ordered[-1] + 1, 1000)) - len(ordered)) if ordered else 0
    winners = Counter(instance for _, instance in runs)
    print(
        f"summary: {len(counts)} slots, {len(runs)} runs, duplicates={len(doubles)},"
        f" missing={missing}; runs per instance: {dict(sorted(winners.items()))}"
    )
    if not runs or doubles or missing:
        print("FAIL: a slot ran twice or was skipped" if runs else "FAIL: nothing ran")
        return 1
    print("OK: every slot ran exactly once")
    return 0
