"""The ``anarchon`` command line (docs/cli.md).

Every error prints one line, ``anarchon: CODE: message``, and never a
traceback (``ANARCHON_DEBUG=1`` adds it). Exit codes: 0 success, 1 runtime
failure, 2 usage error. Errors that are not anarchon's get a code too:
``ANARCHON_USAGE`` (a bad command line, exit 2), ``ANARCHON_OS_ERROR`` (an
``OSError``, exit 1) and ``ANARCHON_UNEXPECTED`` (anything else, exit 1).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from zoneinfo import ZoneInfo

from anarchon.backend.registry import ENV_VAR, installed_backends, redact_text
from anarchon.cli.demo import run_demo, run_worker
from anarchon.cli.fleet import (
    UsageError,
    add_backend_option,
    add_fleet_commands,
    control_command,
    known_jobs,
    members_command,
    open_backend,
    status_command,
)
from anarchon.cli.output import iso_ms, table
from anarchon.errors import (
    AnarchonError,
    InvalidConfigError,
    InvalidJobError,
    UnsupportedError,
)
from anarchon.scheduler import Scheduler
from anarchon.schedules import Cron, Every

__all__ = ["main"]

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 1, 2


_UsageError = UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, exit 2, no usage dump
        raise _UsageError(message)


def _schedule(expression: str, tz: str) -> Any:

    text = expression.strip()
    if text.startswith("@") or len(text.split()) >= 5:
        return Cron(text, tz=tz)
    try:
        return Every(text)
    except InvalidJobError:
        return Cron(text, tz=tz)


def cmd_next(args: argparse.Namespace) -> int:
    schedule = _schedule(args.expression, args.tz)
    try:
        zone: Any = ZoneInfo(args.tz)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise InvalidJobError(f"unknown time zone {args.tz!r}", field="tz") from None
    cursor = int(datetime.now(timezone.utc).timestamp() * 1000)
    slots: list[int] = []
    for _ in range(args.n):
        slot = schedule.next_after(cursor)
        if slot is None:
            break
        slots.append(slot)
        cursor = slot
    if args.json:
        print(json.dumps([{"slot": s, "utc": iso_ms(s), "local": iso_ms(s, zone)} for s in slots]))
    else:
        print(
            table(
                ["slot (ms)", "UTC", f"local ({args.tz})"],
                [(s, iso_ms(s), iso_ms(s, zone)) for s in slots],
            )
        )
    return EXIT_OK


async def _history(args: argparse.Namespace) -> int:
    backend = await open_backend(args)
    try:
        jobs = await known_jobs(backend, args.jobs)
        found = await backend.history_many(jobs, args.limit)
        records: list[Any] = [record for job in jobs for record in found[job]]
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
            r.job,
            iso_ms(r.slot),
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
        table(
            ["job", "slot (UTC)", "attempt", "status", "reason", "instance", "ms", "kind", "error"],
            rows,
        )
    )
    return EXIT_OK


async def _active(args: argparse.Namespace) -> int:
    backend = await open_backend(args)
    try:
        store = backend.runs
        if store is None:
            raise UnsupportedError(
                f"backend {backend.name!r} has no leases, so no active runs to show"
            )
        runs = [
            (job, run)
            for job in await known_jobs(backend, args.jobs)
            for run in await store.active(job)
        ]
    finally:
        await backend.close()
    if args.json:
        print(
            json.dumps(
                [
                    {"job": job, **{k: v for k, v in r.__dict__.items() if k != "token"}}
                    for job, r in runs
                ]
            )
        )
        return EXIT_OK
    rows = [
        (
            job,
            iso_ms(r.slot),
            r.attempt,
            r.runner,
            iso_ms(r.lease_expires_at),
            "live" if r.live else "expired",
        )
        for job, r in runs
    ]
    print(table(["job", "slot (UTC)", "attempt", "runner", "lease expires", "lease"], rows))
    return EXIT_OK


def cmd_backends(args: argparse.Namespace) -> int:
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
        print(table(["scheme", "class", "package", "version"], rows))
    return EXIT_OK


async def _run_app(args: argparse.Namespace) -> int:
    scheduler = _load_scheduler(args.target, Scheduler)
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


def _load_scheduler(target: str, kind: type[Any]) -> Any:
    """The ``Scheduler`` at ``module:attribute``; a target that is not one is ``InvalidConfigError``."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise _UsageError(f"expected module:attribute, got {target!r}")
    sys.path.insert(0, ".")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing and (module_name == missing or module_name.startswith(f"{missing}.")):
            raise InvalidConfigError(
                f"cannot import {module_name!r} for {target}: no module named {missing!r}"
                " (run from the directory that holds it, or set PYTHONPATH)"
            ) from None
        raise _AppError(f"importing {module_name!r} failed", error) from error
    except Exception as error:
        raise _AppError(f"importing {module_name!r} failed", error) from error
    if not hasattr(module, attribute):
        raise InvalidConfigError(f"module {module_name!r} has no attribute {attribute!r}")
    scheduler = getattr(module, attribute)
    if not isinstance(scheduler, kind):
        raise InvalidConfigError(
            f"{target} is not an anarchon.Scheduler (got {type(scheduler).__name__})"
        )
    return scheduler


class _AppError(Exception):
    """An error raised by the application's own code, with where it happened."""

    def __init__(self, context: str, error: BaseException) -> None:
        super().__init__(context)
        self.context = context
        self.error = error


async def _demo(args: argparse.Namespace) -> int:
    if args.instances < 1 or args.seconds <= 0:
        raise _UsageError("--instances must be >= 1 and --seconds > 0")
    return await run_demo(args.instances, args.seconds, args.backend)


async def _demo_worker(args: argparse.Namespace) -> int:
    return await run_worker(args.backend, args.instance, args.until_ms)


def _version() -> str:
    try:
        return version("anarchon")
    except PackageNotFoundError:
        return "unknown"


def _add_dashboard(sub: Any) -> None:
    dashboard = sub.add_parser("dashboard", help="serve the status page (needs anarchon[web])")
    dashboard.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND_URL"))
    dashboard.add_argument("--host", default="127.0.0.1")
    dashboard.add_argument("--port", type=int, default=8080)
    dashboard.add_argument("--read-only", action="store_true", help="no pause/resume buttons")
    dashboard.add_argument("--job", action="append", default=[], help="a job to show (repeatable)")
    dashboard.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        help="a Host name the page answers (repeatable; .example.com for subdomains, * for any)",
    )
    dashboard.add_argument(
        "--trusted-origin",
        action="append",
        default=[],
        help="another origin allowed to POST (repeatable), e.g. https://ops.example.com",
    )
    dashboard.add_argument(
        "--allow-writes-without-token",
        action="store_true",
        help="buttons for anyone who reaches the page when ANARCHON_DASHBOARD_TOKEN is not set",
    )
    dashboard.add_argument(
        "--hide-errors", action="store_true", help="show handlers' error text only with the token"
    )


async def _dashboard(args: argparse.Namespace) -> int:
    if not args.backend:
        raise InvalidConfigError("give --backend or set ANARCHON_BACKEND_URL")
    try:
        # Lazy: uvicorn and starlette are the optional extra anarchon[web], not needed by
        # any other command.
        import uvicorn

        from anarchon.web import BackendSource, create_app
    except ImportError as error:
        raise UnsupportedError(
            f"the dashboard needs anarchon[web] ({error.name} is missing)"
        ) from None
    token = os.environ.get("ANARCHON_DASHBOARD_TOKEN") or None
    source = BackendSource(args.backend, jobs=args.job)
    app = create_app(
        source,
        token=token,
        read_only=args.read_only,
        allow_writes_without_token=args.allow_writes_without_token,
        allowed_hosts=args.allowed_host,
        trusted_origins=args.trusted_origin,
        hide_errors=args.hide_errors,
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    )
    if args.read_only or (token is None and not args.allow_writes_without_token):
        mode = "read-only"
    else:
        mode = "writes need the token" if token is not None else "writes open to anyone"
    print(f"anarchon dashboard on http://{args.host}:{args.port}/ ({mode})", flush=True)
    try:
        await server.serve()
    finally:
        await source.close()
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``anarchon`` command."""
    parser = _Parser(prog="anarchon", description="Distributed cron for Python.")
    parser.add_argument("--version", action="version", version=f"anarchon {_version()}")
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

    history = sub.add_parser("history", help="run history of jobs (default: all declared)")
    history.add_argument("jobs", nargs="*", metavar="JOB")
    add_backend_option(history)
    history.add_argument("--limit", type=int, default=20)
    history.add_argument("--json", action="store_true")

    active = sub.add_parser("active", help="running runs of jobs and their leases")
    active.add_argument("jobs", nargs="*", metavar="JOB")
    add_backend_option(active)
    active.add_argument("--json", action="store_true")

    add_fleet_commands(sub)

    backends = sub.add_parser("backends", help="installed backends")
    backends.add_argument("--json", action="store_true")

    run = sub.add_parser("run", help="run module:scheduler until SIGINT/SIGTERM")
    run.add_argument("target")
    _add_dashboard(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``anarchon`` command; returns the exit code.

    Every error becomes one line ``anarchon: CODE: message`` on stderr
    (secrets of ``--backend`` hidden), see :func:`_report`.
    """
    backend_url: str | None = None
    args: argparse.Namespace | None = None
    try:
        args = build_parser().parse_args(argv)
        backend_url = getattr(args, "backend", None) or os.environ.get(ENV_VAR, "").strip() or None
        if args.command == "next":
            return cmd_next(args)
        if args.command == "backends":
            return cmd_backends(args)
        runner = {
            "demo": _demo,
            "demo-worker": _demo_worker,
            "history": _history,
            "active": _active,
            "status": status_command,
            "members": members_command,
            "pause": control_command,
            "resume": control_command,
            "skip": control_command,
            "run": _run_app,
            "dashboard": _dashboard,
        }[args.command]
        return asyncio.run(runner(args))
    except KeyboardInterrupt:
        watching = getattr(args, "watch", None) is not None  # Ctrl-C is how --watch ends
        return EXIT_OK if watching else EXIT_RUNTIME
    except Exception as error:
        return _report(error, backend_url)


def _report(error: Exception, backend_url: str | None) -> int:
    """Print ``error`` as one coded line and return the exit code."""
    context = ""
    cause: BaseException = error
    if isinstance(error, _AppError):
        context, cause = f"{error.context}: ", error.error
    if isinstance(cause, _UsageError):
        code, text, status = "ANARCHON_USAGE", str(cause), EXIT_USAGE
    elif isinstance(cause, AnarchonError):
        code, text = cause.code, cause.message
        status = EXIT_USAGE if cause.code in _USAGE_CODES else EXIT_RUNTIME
    elif isinstance(cause, OSError):
        code, text, status = "ANARCHON_OS_ERROR", _describe(cause), EXIT_RUNTIME
    else:
        code, text, status = "ANARCHON_UNEXPECTED", _describe(cause), EXIT_RUNTIME
    line = " ".join(f"{context}{text}".split())
    if backend_url:
        line = redact_text(line, backend_url)
    print(f"anarchon: {code}: {line}", file=sys.stderr)
    if os.environ.get("ANARCHON_DEBUG"):
        traceback.print_exception(cause, file=sys.stderr)
    return status


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


_USAGE_CODES = frozenset(
    {
        "ANARCHON_INVALID_JOB",
        "ANARCHON_INVALID_CONFIG",
        "ANARCHON_UNKNOWN_BACKEND",
        "ANARCHON_UNSUPPORTED",
        "ANARCHON_UNKNOWN_JOB",
    }
)
