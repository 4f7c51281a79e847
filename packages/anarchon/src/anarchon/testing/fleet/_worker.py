"""One process of a fleet: ``python -m anarchon.testing.fleet worker ...`` (see the package)."""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import importlib
import json
import logging
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from anarchon.backend import Backend
from anarchon.backend.registry import resolve_backend
from anarchon.clock import SkewedClock
from anarchon.context import RunContext
from anarchon.scheduler import Scheduler
from anarchon.testing.fleet._records import job_names

__all__ = ["main"]

CLOSE_S = 10.0
"""How long a worker waits for its backend to close; longer fails the process (exit 1)."""

UNTIL_POLL_S = 0.2
"""How often a worker looks at its ``--until-file``."""

HANG_DUMP_S = 30.0
"""A worker still alive this long after its end prints its threads and tasks.

:meth:`Fleet.wait` kills workers 40 s after the fleet's end; the dump before
that says where a worker hung (a stop that did not return, a close that did
not end), in the stderr the failure shows.
"""


# Worker --------------------------------------------------------------------------


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key, value


def _build_backend(args: argparse.Namespace) -> Backend:
    if args.backend is not None:
        return resolve_backend(args.backend)
    module_name, sep, name = args.factory.partition(":")
    if not sep:
        raise SystemExit(f"--factory must be module:function, got {args.factory!r}")
    built = getattr(importlib.import_module(module_name), name)(**dict(args.factory_arg))
    if not isinstance(built, Backend):
        raise SystemExit(f"{args.factory} returned {type(built).__name__}, not a Backend")
    return built


def _record(out: IO[str], text: str) -> None:
    out.write(text + "\n")


async def _store_ms(backend: Backend) -> int:
    """The store's time; this machine's when the store has no clock or does not answer in 10 s.

    A transient error (the store's own timeout, on a starved machine) counts as no answer: this
    read only marks the worker's window, the scheduler's runs are what the fleet checks.
    """
    try:
        now = await asyncio.wait_for(backend.now_ms(), CLOSE_S)
    except TimeoutError:
        print(f"fleet worker: the store's clock did not answer within {CLOSE_S} s", file=sys.stderr)
        now = None
    except Exception as error:
        if not backend.is_transient(error):
            raise
        print(f"fleet worker: the store's clock did not answer: {error}", file=sys.stderr)
        now = None
    return now if now is not None else time.time_ns() // 1_000_000


async def _work(args: argparse.Namespace, out: IO[str]) -> None:
    backend = _build_backend(args)
    # Every process races for every slot unless the caller asks for candidates.
    options: dict[str, Any] = {"stop_grace": 2, "candidates": None, **dict(args.scheduler_option)}
    if args.clock_skew_ms:
        options["clock"] = SkewedClock(args.clock_skew_ms)
    scheduler = Scheduler(backend, instance_id=args.instance, **options)
    handler_s = args.handler_ms / 1000

    async def handler(ctx: RunContext) -> None:
        started = time.time_ns() // 1_000_000
        _record(out, f"run {ctx.slot} {ctx.attempt} {ctx.instance_id} {started} {ctx.job}")
        if handler_s:
            await asyncio.sleep(handler_s)

    for name in job_names(args.job, args.jobs):
        scheduler.every(name, args.every, handler, jitter=args.jitter, **dict(args.job_option))
    watchdog: threading.Timer | None = None
    try:
        async with scheduler:
            _record(out, f"start {await _store_ms(backend)}")
            await _sleep_until(args.until_ms / 1000, args.until_file)
            watchdog = _hang_watchdog(asyncio.get_running_loop(), time.time() + HANG_DUMP_S)
            _record(out, f"stop {await _store_ms(backend)}")
    finally:
        try:
            await asyncio.wait_for(backend.close(), CLOSE_S)
        except TimeoutError:
            print(f"fleet worker: backend.close() did not end within {CLOSE_S} s", file=sys.stderr)
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()


async def _sleep_until(until: float, until_file: str | None) -> None:
    """Sleep until wall time ``until``, or the earlier time ``until_file`` names (epoch ms)."""
    while (left := until - time.time()) > 0:
        await asyncio.sleep(min(left, UNTIL_POLL_S))
        if until_file is not None:
            until = min(until, _read_until(Path(until_file)))


def _read_until(path: Path) -> float:
    try:
        return int(path.read_text()) / 1000
    except (OSError, ValueError):
        return float("inf")  # not written yet (or half written)


def _hang_watchdog(loop: asyncio.AbstractEventLoop, at: float) -> threading.Timer:
    """A timer that, at wall time ``at``, prints every thread's stack and every task's."""

    def print_tasks() -> None:
        for task in asyncio.all_tasks(loop):
            print(f"task {task.get_name()}:", file=sys.stderr)
            task.print_stack(file=sys.stderr)

    def dump() -> None:
        print("fleet worker still alive after its end: its threads and tasks", file=sys.stderr)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        loop.call_soon_threadsafe(print_tasks)

    timer = threading.Timer(max(0.0, at - time.time()), dump)
    timer.daemon = True
    timer.start()
    return timer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m anarchon.testing.fleet",
        description="One process of an anarchon fleet test (see anarchon.testing.fleet).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="run one scheduler until --until-ms")
    where = worker.add_mutually_exclusive_group(required=True)
    where.add_argument("--backend", help="the store's URL")
    where.add_argument("--factory", help="module:function returning a Backend")
    worker.add_argument("--factory-arg", type=_key_value, action="append", default=[])
    worker.add_argument("--instance", required=True, help="the scheduler's instance_id")
    worker.add_argument("--job", required=True, help="the job's name")
    worker.add_argument("--until-ms", type=int, required=True, help="wall time to stop at")
    worker.add_argument("--until-file", help="a file that may name an earlier stop (epoch ms)")
    worker.add_argument("--out", required=True, help="the file to append records to")
    worker.add_argument("--every", default="200ms", help="the job's interval")
    worker.add_argument("--jitter", default="50ms", help="the job's jitter")
    worker.add_argument("--handler-ms", type=int, default=0, help="how long each run sleeps")
    worker.add_argument("--jobs", type=int, default=1, help="identical jobs (NAME-0 ...)")
    worker.add_argument("--clock-skew-ms", type=int, default=0, help="shift the scheduler's clock")
    worker.add_argument("--scheduler-option", type=_key_value, action="append", default=[])
    worker.add_argument("--job-option", type=_key_value, action="append", default=[])
    worker.add_argument("--log-level", default="WARNING")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``worker`` runs one fleet process. Returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with open(args.out, "a", buffering=1) as out:
        asyncio.run(_work(args, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
