"""The fleet commands of the ``anarchon`` CLI (docs/cli.md): ``status``, ``members``, ``pause``,
``resume``, ``skip``.

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
from anarchon.fleet.status import (
    JobStatus,
    MemberStatus,
    fleet_members,
    fleet_status,
    store_now_ms,
    unknown_jobs_error,
)

__all__ = [
    "UsageError",
    "add_backend_option",
    "add_fleet_commands",
    "backend_url",
    "known_jobs",
    "members_command",
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
    """Add ``status``, ``members``, ``pause``, ``resume`` and ``skip`` to the subparsers ``sub``."""
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
    members = sub.add_parser("members", help="the live instances and what they are candidates of")
    add_backend_option(members)
    members.add_argument("--json", action="store_true")
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
                ",".join(s.candidates) or "-",
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
                    "candidates",
                    "paused",
                    "drift",
                ]
                print(table(headers, _status_rows(statuses)), flush=True)
            if args.watch is None:
                return 0
            await asyncio.sleep(args.watch)
    finally:
        await backend.close()


NO_MEMBERSHIP_HINT = (
    "keeps no membership records: every instance claims every job-slot"
    ' (docs/scaling.md, "Candidates")'
)
NO_MEMBERS_HINT = (
    "no live members: no instance is running, or they run with candidates=None"
    " (which writes no membership record)"
)


def _seconds(ms: int) -> str:
    return f"{max(ms, 0) / 1000:.1f}s"


def _member_rows(members: Sequence[MemberStatus], now: int) -> list[list[object]]:
    return [
        [
            m.instance_id,
            "-" if m.k is None else m.k,
            m.group,
            f"{_seconds(now - m.seen_at)} ago",
            _seconds(m.expires_at - now),
            "-" if m.candidate_of is None else m.candidate_of,
        ]
        for m in members
    ]


async def members_command(args: argparse.Namespace) -> int:
    """``anarchon members [--json]``: the live members of the fleet (docs/fleet.md, "Membership").

    A backend without membership records, or a fleet with none, is one hint
    line and exit 0 (with ``--json``: ``[]``, and the hint on stderr).
    """
    backend = await open_backend(args)
    members: list[MemberStatus] = []
    now = 0
    hint: str | None = None
    try:
        try:
            members = await fleet_members(backend)
        except UnsupportedError:
            hint = f"anarchon: backend {backend.name!r} {NO_MEMBERSHIP_HINT}"
        else:
            if members:
                now = await store_now_ms(backend)
            else:
                hint = f"anarchon: {NO_MEMBERS_HINT}"
    finally:
        await backend.close()
    if args.json:
        print(json.dumps([m.to_dict() for m in members]), flush=True)
        if hint is not None:
            print(hint, file=sys.stderr)
    elif hint is not None:
        print(hint)
    else:
        headers = ["instance", "k", "roster", "seen", "expires in", "candidate of"]
        print(table(headers, _member_rows(members, now)))
    return 0


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
