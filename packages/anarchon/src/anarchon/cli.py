"""The ``anarchon`` command line (docs/cli.md). Errors print one line with their code; exit 2 on usage errors."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import signal
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from anarchon.errors import AnarchonError, InvalidJobError

__all__ = ["main"]

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, no usage dump
        raise _UsageError(message)


def _iso(ms: int | None, tz: Any = timezone.utc) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=tz).isoformat(timespec="milliseconds")


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in headers]] + [
        [("-" if c is None else str(c)) for c in r] for r in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip()
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _schedule(expression: str, tz: str) -> Any:
    from anarchon.schedules import Cron, Every

    text = expression.strip()
    if text.startswith("@") or len(text.split()) >= 5:
        return Cron(text, tz=tz)
    try:
        return Every(text)
    except InvalidJobError:
        return Cron(text, tz=tz)


def cmd_next(args: argparse.Namespace) -> int:
    from zoneinfo import ZoneInfo

    schedule = _schedule(args.expression, args.tz)
    try:
        zone: Any = ZoneInfo(args.tz)
    except Exception:
        zone = timezone.utc
    cursor = int(datetime.now(timezone.utc).timestamp() * 1000)
    slots: list[int] = []
    for _ in range(args.n):
        slot = schedule.next_after(cursor)
        if slot is None:
            break
        slots.append(slot)
        cursor = slot
    if args.json:
        print(json.dumps([{"slot": s, "utc": _iso(s), "local": _iso(s, zone)} for s in slots]))
    else:
        print(
            _table(
                ["slot (ms)", "UTC", f"local ({args.tz})"],
                [(s, _iso(s), _iso(s, zone)) for s in slots],
            )
        )
    return EXIT_OK


async def _history(args: argparse.Namespace) -> int:
    from anarchon.registry import resolve_backend

    backend = resolve_backend(args.backend)
    await backend.init()
    try:
        records = await backend.history(args.job, args.limit)
    finally:
        await backend.close()
    if args.json:
        print(
            json.dumps(
                [{**r.__dict__, "scheduled_at": r.scheduled_at.isoformat()} for r in records]
            )
        )
        return EXIT_OK
    rows = [
        (
            _iso(r.slot),
            r.attempt,
            r.status,
            r.reason,
            r.instance_id,
            r.duration_ms,
            "manual" if r.manual else "",
            r.error,
        )
        for r in records
    ]
    print(
        _table(
            ["slot (UTC)", "attempt", "status", "reason", "instance", "ms", "kind", "error"], rows
        )
    )
    return EXIT_OK


async def _active(args: argparse.Namespace) -> int:
    from anarchon.errors import UnsupportedError
    from anarchon.registry import resolve_backend

    backend = resolve_backend(args.backend)
    if backend.runs is None:
        raise UnsupportedError(f"backend {backend.name!r} has no leases, so no active runs to show")
    await backend.init()
    try:
        runs = await backend.runs.active(args.job)
    finally:
        await backend.close()
    if args.json:
        print(json.dumps([{k: v for k, v in r.__dict__.items() if k != "token"} for r in runs]))
        return EXIT_OK
    rows = [
        (
            _iso(r.slot),
            r.attempt,
            r.runner,
            _iso(r.lease_expires_at),
            "live" if r.live else "expired",
        )
        for r in runs
    ]
    print(_table(["slot (UTC)", "attempt", "runner", "lease expires", "lease"], rows))
    return EXIT_OK


def cmd_backends(args: argparse.Namespace) -> int:
    from anarchon.registry import installed_backends

    rows = installed_backends()
    if args.json:
        print(
            json.dumps(
                [
                    dict(zip(("scheme", "target", "distribution", "version"), r, strict=False))
                    for r in rows
                ]
            )
        )
    else:
        print(_table(["scheme", "class", "package", "version"], rows))
    return EXIT_OK


async def _run_app(args: argparse.Namespace) -> int:
    from anarchon.scheduler import Scheduler

    module_name, _, attribute = args.target.partition(":")
    if not module_name or not attribute:
        raise _UsageError(f"expected module:attribute, got {args.target!r}")
    sys.path.insert(0, ".")
    module = importlib.import_module(module_name)
    scheduler = getattr(module, attribute, None)
    if not isinstance(scheduler, Scheduler):
        raise _UsageError(f"{args.target} is not an anarchon.Scheduler")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with scheduler:
        print(
            f"anarchon: running {len(scheduler.jobs)} job(s) as {scheduler.instance_id}; Ctrl-C stops",
            flush=True,
        )
        await stop.wait()
        print("anarchon: stopping with hand-over", flush=True)
    return EXIT_OK


async def _demo(args: argparse.Namespace) -> int:
    from anarchon.demo import run_demo

    if args.instances < 1 or args.seconds <= 0:
        raise _UsageError("--instances must be >= 1 and --seconds > 0")
    return await run_demo(args.instances, args.seconds, args.backend)


async def _demo_worker(args: argparse.Namespace) -> int:
    from anarchon.demo import run_worker

    return await run_worker(args.backend, args.instance, args.until_ms)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``anarchon`` command."""
    parser = _Parser(prog="anarchon", description="Distributed cron for Python.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    demo = sub.add_parser("demo", help="several instances share one job; each slot runs once")
    demo.add_argument("--instances", type=int, default=3)
    demo.add_argument("--seconds", type=float, default=10.0)
    demo.add_argument(
        "--backend", default=None, help="backend URL (default: a temporary SQLite file)"
    )

    worker = sub.add_parser("demo-worker", help=argparse.SUPPRESS)
    worker.add_argument("--backend", required=True)
    worker.add_argument("--instance", required=True)
    worker.add_argument("--until-ms", type=int, required=True)

    nxt = sub.add_parser("next", help="preview the next slots of a cron expression or interval")
    nxt.add_argument("expression")
    nxt.add_argument("--tz", default="UTC")
    nxt.add_argument("-n", type=int, default=10)
    nxt.add_argument("--json", action="store_true")

    history = sub.add_parser("history", help="run history of a job")
    history.add_argument("job")
    history.add_argument("--backend", required=True)
    history.add_argument("--limit", type=int, default=20)
    history.add_argument("--json", action="store_true")

    active = sub.add_parser("active", help="running runs of a job and their leases")
    active.add_argument("job")
    active.add_argument("--backend", required=True)
    active.add_argument("--json", action="store_true")

    backends = sub.add_parser("backends", help="installed backends")
    backends.add_argument("--json", action="store_true")

    run = sub.add_parser("run", help="run module:scheduler until SIGINT/SIGTERM")
    run.add_argument("target")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``anarchon`` command; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        if args.command == "next":
            return cmd_next(args)
        if args.command == "backends":
            return cmd_backends(args)
        runner = {
            "demo": _demo,
            "demo-worker": _demo_worker,
            "history": _history,
            "active": _active,
            "run": _run_app,
        }[args.command]
        return asyncio.run(runner(args))
    except _UsageError as error:
        print(f"anarchon: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except AnarchonError as error:
        print(f"anarchon: {error}", file=sys.stderr)
        return EXIT_USAGE if error.code in _USAGE_CODES else EXIT_RUNTIME
    except KeyboardInterrupt:
        return EXIT_RUNTIME


_USAGE_CODES = frozenset(
    {
        "ANARCHON_INVALID_JOB",
        "ANARCHON_INVALID_CONFIG",
        "ANARCHON_UNKNOWN_BACKEND",
        "ANARCHON_UNSUPPORTED",
    }
)

if __name__ == "__main__":
    raise SystemExit(main())
