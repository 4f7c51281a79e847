"""The worker process of the fault scenarios: one scheduler, one interval job, recorded handlers.

``python -m anarchon.testing.scenarios.fault_worker --backend URL --instance ID --job J --out PATH``
runs until SIGTERM. Handlers (``--handler``):

- ``plain``: an async handler that ticks every 100 ms for ``--handler-ms`` and
  then completes; it does not look at its lease.
- ``guarded``: the fenced example of docs/leases.md. It registers its
  ``ctx.fencing_token`` in the shared side-effect file (``--effects``),
  works, asks ``await ctx.still_owner()`` and commits its side effect with the
  fenced UPDATE (:mod:`anarchon.testing.scenarios.fenced_effects`).
- ``naive``: a sync handler (a thread nothing can stop) that registers its
  token and commits through the same fenced UPDATE, but never asks
  ``still_owner()``: its late write is left to the fence.
- ``blocking``: a sync handler that blocks its thread for ``--handler-ms``
  (``time.sleep`` in 100 ms steps, so that it can record that it is alive)
  and ignores cancellation: to the scheduler, a thread it cannot stop.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import signal
import sqlite3
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from anarchon.backend.registry import resolve_backend
from anarchon.testing.scenarios import fenced_effects

if TYPE_CHECKING:
    from anarchon.jobs import Handler

__all__ = ["HANDLERS", "main"]

HANDLERS = ("plain", "guarded", "naive", "blocking")
TICK_MS = 100

STOP_DUMP_AFTER_S = 25.0
"""A worker still stopping after this long prints every thread's stack to stderr."""


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class _Recorder:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, kind: str, ctx: object) -> None:
        from anarchon import RunContext

        assert isinstance(ctx, RunContext)
        self.out.write(f"{kind} {ctx.slot} {ctx.attempt} {ctx.instance_id} {_wall_ms()}\n")


def _handler(args: argparse.Namespace, record: _Recorder) -> Handler:
    from anarchon import RunContext

    run_s = args.handler_ms / 1000
    effects: sqlite3.Connection | None = None
    if args.handler in ("guarded", "naive"):
        effects = fenced_effects.connect(args.effects)

    async def plain(ctx: RunContext) -> None:
        record("begin", ctx)
        end = time.monotonic() + run_s
        while time.monotonic() < end:
            await asyncio.sleep(TICK_MS / 1000)
            record("tick", ctx)
        record("end", ctx)

    async def guarded(ctx: RunContext) -> None:
        assert effects is not None
        if not fenced_effects.register(effects, ctx.run_id, ctx.fencing_key, ctx.instance_id):
            record("abandon", ctx)
            return
        record("begin", ctx)
        end = time.monotonic() + run_s
        while time.monotonic() < end:
            await asyncio.sleep(TICK_MS / 1000)
            record("tick", ctx)
        if not await ctx.still_owner():  # early exit; the fenced write decides
            record("abandon", ctx)
            return
        ok = fenced_effects.commit(effects, ctx.run_id, ctx.fencing_key, ctx.instance_id)
        record("end" if ok else "refused", ctx)

    def naive(ctx: RunContext) -> None:
        assert effects is not None
        if not fenced_effects.register(effects, ctx.run_id, ctx.fencing_key, ctx.instance_id):
            record("abandon", ctx)
            return
        record("begin", ctx)
        end = time.monotonic() + run_s
        while time.monotonic() < end:
            time.sleep(TICK_MS / 1000)
            record("tick", ctx)
        ok = fenced_effects.commit(effects, ctx.run_id, ctx.fencing_key, ctx.instance_id)
        record("end" if ok else "refused", ctx)

    def blocking(ctx: RunContext) -> None:
        record("begin", ctx)
        end = time.monotonic() + run_s
        while time.monotonic() < end:  # ignores ctx.cancelled: nothing can stop this thread
            time.sleep(TICK_MS / 1000)
            record("tick", ctx)
        record("end", ctx)

    handlers: dict[str, Handler] = {
        "plain": plain,
        "guarded": guarded,
        "naive": naive,
        "blocking": blocking,
    }
    return handlers[args.handler]


async def _work(args: argparse.Namespace, out: TextIO) -> None:
    from anarchon import Scheduler

    backend = resolve_backend(args.backend)
    every = f"{args.every_ms}ms"
    late = {"max_late": args.max_late} if args.max_late else {}
    handler = _handler(args, _Recorder(out))
    if args.no_lease:  # a backend without leases refuses every lease option
        scheduler = Scheduler(backend, instance_id=args.instance, stop_grace=args.stop_grace)
        scheduler.every(args.job, every, handler, jitter=0, **late)
    else:
        scheduler = Scheduler(
            backend,
            instance_id=args.instance,
            lease=f"{args.lease_ms}ms",
            heartbeat=f"{args.heartbeat_ms}ms",
            stop_grace=args.stop_grace,
        )
        scheduler.every(args.job, every, handler, jitter=0, overlap=True, max_attempts=3, **late)
    stop = asyncio.Event()
    watchdog: asyncio.Future[None] | None = None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with scheduler:
            out.write(f"start {_wall_ms()}\n")
            await stop.wait()
            out.write(f"stopping {_wall_ms()}\n")
            # A stop that hangs shows where, on stderr (the scenario waits 40 s for the exit).
            faulthandler.dump_traceback_later(STOP_DUMP_AFTER_S)
            watchdog = asyncio.ensure_future(_print_tasks_after(STOP_DUMP_AFTER_S))
    finally:
        await backend.close()
    faulthandler.cancel_dump_traceback_later()
    if watchdog is not None:
        watchdog.cancel()
    out.write(f"stopped {_wall_ms()}\n")


async def _print_tasks_after(delay_s: float) -> None:
    """Every task's stack on stderr after ``delay_s`` (where a hanging stop waits)."""
    await asyncio.sleep(delay_s)
    for task in asyncio.all_tasks():
        print(f"--- task {task.get_name()}", file=sys.stderr)
        task.print_stack(file=sys.stderr)
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker until SIGTERM (the arguments are those of the scenario that starts it)."""
    parser = argparse.ArgumentParser(prog="python -m anarchon.testing.scenarios.fault_worker")
    parser.add_argument("--backend", required=True)
    parser.add_argument("--instance", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--handler", choices=HANDLERS, default="plain")
    parser.add_argument("--effects", default=None)
    parser.add_argument("--handler-ms", type=int, default=1200)
    parser.add_argument("--every-ms", type=int, default=1000)
    parser.add_argument("--max-late", default=None)
    parser.add_argument("--lease-ms", type=int, default=1500)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--stop-grace", type=float, default=1.0)
    parser.add_argument("--no-lease", action="store_true", help="a backend without leases")
    args = parser.parse_args(argv)
    if args.handler in ("guarded", "naive") and not args.effects:
        parser.error(f"--handler {args.handler} needs --effects PATH")
    with open(args.out, "a", buffering=1) as out:
        asyncio.run(_work(args, out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
