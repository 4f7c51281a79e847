"""The fleet commands of the ``anarchon`` CLI (docs/cli.md): ``status``, ``pause``, ``resume``, ``skip``.

Also the helpers every store command shares: the backend URL from
``--backend`` or ``ANARCHON_BACKEND_URL``, and the check that job names are
known (declared by the fleet, or with history).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from anarchon.backend.base import Backend
from anarchon.backend.registry import ENV_VAR, redact_url, resolve_backend
from anarchon.cli.output import table
from anarchon.errors import InvalidConfigError, UnsupportedError
from anarchon.fleet.controls import pause_job, resume_job, skip_slots
from anarchon.fleet.fingerprints import parse_schedule
from anarchon.fleet.status import JobStatus, fleet_status, unknown_jobs_error

__all__ = [
    "UsageError",
    "add_backend_option",
    "add_fleet_commands",
    "backend_url",
    "known_jobs",
    "open_backend",
]

_BY = "cli"


class UsageError(Exception):
    """A bad command line (``ANARCHON_USAGE``, exit 2)."""


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    """``--backend URL`` (default: ``ANARCHON_BACKEND_URL``)."""
    parser.add_argument("--backend", default=None, help=f"backend URL (default: ${ENV_VAR})")


def backend_url(args: argparse.Namespace) -> str:
    """``--backend``, else ``ANARCHON_BACKEND_URL``; a usage error when neither is set."""
    url = getattr(args, "backend", None) or os.environ.get(ENV_VAR, "").strip()
    if not url:
        raise UsageError(f"no backend: pass --backend URL or set {ENV_VAR}")
    args.backend = url  # so errors are redacted with it
    return str(url)


async def open_backend(args: argparse.Namespace) -> Backend:
    """The backend of the command line, initialised."""
    backend = resolve_backend(backend_url(args))
    await backend.init()
    return backend


async def known_jobs(backend: Backend, names: Sequence[str]) -> list[str]:
    """``names``, or every declared job when empty; an unknown name raises ``ANARCHON_UNKNOWN_JOB``.

    A name is known when an instance declares it or the store has history of it
    (so a stopped fleet's history stays readable).
    """
    try:
        declared = sorted({d.job for d in await backend.declarations()})
    except UnsupportedError:
        if not names:
            raise UnsupportedError(
                f"backend {backend.name!r} has no fleet registry: name the job(s)"
            ) from None
        return list(names)
    if not names:
        return declared
    unknown = [n for n in names if n not in declared and not await backend.history(n, 1)]
    if unknown:
        raise unknown_jobs_error(unknown, declared)
    return list(dict.fromkeys(names))


def add_fleet_commands(sub: Any) -> None:
    """Add ``status``, ``pause``, ``resume`` and ``skip`` to the subparsers ``sub``."""
    status = sub.add_parser("status", help="every job the fleet declares, and its state")
    status.add_argument("jobs", nargs="*", metavar="JOB")
    add_backend_option(status)
    status.add_argument("--json", action="store_true")
    status.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=2.0,
        default=None,
        metavar="SECONDS",
        help="refresh every SECONDS (default 2) until interrupted",
    )
    for name, text in (
        ("pause", "pause a job on every instance"),
        ("resume", "resume a paused job on every instance"),
        ("skip", "skip the next slot(s) of a job on every instance"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("job")
        add_backend_option(command)
        command.add_argument("--json", action="store_true")
        if name == "skip":
            command.add_argument("--count", type=int, default=1)


def _iso(ms: int | None, zone: str | None = None) -> str:
    if ms is None:
        return "-"
    tz: Any = timezone.utc
    if zone:
        try:
            tz = ZoneInfo(zone)
        except (KeyError, ValueError, OSError):
            tz = timezone.utc
    try:
        return datetime.fromtimestamp(ms / 1000, tz=tz).isoformat(timespec="seconds")
    except (ValueError, OverflowError, OSError):
        return "(outside years 1-9999)"


def _status_rows(statuses: Sequence[JobStatus]) -> list[list[object]]:
    rows: list[list[object]] = []
    for s in statuses:
        last = s.last_run
        rows.append(
            [
                s.job,
                s.schedule,
                _iso(s.next_slot, s.zone),
                "-"
                if last is None
                else f"{last.status}{f' ({last.reason})' if last.reason else ''}",
                "-" if last is None else last.instance_id,
                s.live_leases,
                ",".join(i.instance_id for i in s.instances),
                "paused" if s.paused else "-",
                "-" if not s.drift else " ".join(f"{fp}:{n}" for fp, n in s.drift.items()),
            ]
        )
    return rows


async def status_command(args: argparse.Namespace) -> int:
    """``anarchon status [JOB...] [--json] [--watch [SECONDS]]``."""
    if args.watch is not None and not args.watch > 0:
        raise InvalidConfigError(f"--watch must be a positive number of seconds, got {args.watch}")
    backend = await open_backend(args)
    try:
        while True:
            statuses = await fleet_status(backend, args.jobs or None)
            if args.json:
                print(json.dumps([s.to_dict() for s in statuses]), flush=True)
            else:
                if args.watch is not None and sys.stdout.isatty():
                    print("\033[2J\033[H", end="")
                headers = [
                    "job",
                    "schedule",
                    "next slot",
                    "last run",
                    "by",
                    "leases",
                    "instances",
                    "paused",
                    "drift",
                ]
                print(table(headers, _status_rows(statuses)), flush=True)
            if args.watch is None:
                return 0
            await asyncio.sleep(args.watch)
    finally:
        await backend.close()


async def control_command(args: argparse.Namespace) -> int:
    """``anarchon pause|resume|skip JOB``: set the fleet-wide control of a declared job."""
    backend = await open_backend(args)
    first: int | None = None
    try:
        declared = await backend.declarations()
        names = sorted({d.job for d in declared})
        if args.job not in names:
            raise unknown_jobs_error([args.job], names)
        if args.command == "pause":
            control = await pause_job(backend, args.job, _BY)
        elif args.command == "resume":
            control = await resume_job(backend, args.job, _BY)
        else:
            texts = {d.schedule for d in declared if d.job == args.job}
            if len(texts) > 1:
                raise InvalidConfigError(
                    f"job {args.job!r} has schedule drift ({', '.join(sorted(texts))}):"
                    " cannot tell which slot is next"
                )
            schedule = parse_schedule(texts.pop())
            control, first = await skip_slots(backend, args.job, schedule, args.count, _BY)
    finally:
        await backend.close()
    if args.json:
        shown = dict(control.__dict__)
        if first is not None:
            shown["first_skipped"] = first
        print(json.dumps(shown))
    else:
        state = "paused" if control.paused else "running"
        skip = ""
        if args.command == "skip" and control.skip_until is not None and first is not None:
            slots = (
                f"the slot {_iso(first)}"
                if first == control.skip_until
                else f"the slots from {_iso(first)} to {_iso(control.skip_until)}"
            )
            skip = f", skips {slots} (UTC; earlier ones may be claimed already)"
        print(f"{args.job}: {state}{skip} (store {redact_url(args.backend)})")
    return 0
