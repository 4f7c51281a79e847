"""The fleet registry and fleet-wide controls as subjects of the backend's stream.

Subjects (docs/backends/nats.md, "Subjects"); ``b64`` is unpadded URL-safe
base64 of the UTF-8 name, so any job or instance id is one subject token:

- ``<prefix>_fleet.d.<b64 job>.<b64 instance>``: one instance's declaration,
  JSON ``{"job", "instance", "f": fingerprint, "s": schedule, "ttl": ms}``;
  ``seen_at`` is the message's stored time (server clock), ``expires_at`` is
  ``seen_at + ttl``. Only the newest message of a subject counts; ``declare``
  purges the subjects of expired entries.
- ``<prefix>_fleet.c.<b64 job>``: a job's control, JSON ``{"job", "p": 0|1,
  "u": skip_until, "by": updated_by, "pa": paused_at, "ra": resumed_at}``;
  ``updated_at`` is the stored time (``pa``/``ra`` may be missing: a control
  stored before they existed).
- ``<prefix>_fleet.m.<b64 instance>``: one live member's record (fleet
  membership, :mod:`anarchon_nats._members`).

Job subjects are ``<prefix><job>.claims`` (two tokens), so these (three and
four tokens under ``_fleet``) never collide with a job's, nor with each other
(the second token tells them apart). A message on them
that is not such JSON is skipped and reported once, by its subject
(:mod:`anarchon.backend.foreign`).
:class:`Fleet` publishes and reads them for the backend.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from anarchon.backend.foreign import report_unreadable, stored_data, stored_flag, stored_int
from anarchon.errors import ForeignDataError
from anarchon.fleet.types import Declaration, JobControl
from nats.aio.client import Client
from nats.js.errors import APIError

from anarchon_nats._clock import Clock, parse_stamp_ms
from anarchon_nats._connection import dumps
from anarchon_nats._store import Store

__all__ = [
    "Fleet",
    "control_of",
    "control_payload",
    "control_subject",
    "declaration_of",
    "declaration_payload",
    "declaration_subject",
    "filters",
    "member_subject",
    "members_filter",
]

log = logging.getLogger("anarchon.nats")

T = TypeVar("T")


def _b64(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def declaration_subject(prefix: str, job: str, instance: str) -> str:
    """The subject of one instance's declaration of ``job``."""
    return f"{prefix}_fleet.d.{_b64(job)}.{_b64(instance)}"


def control_subject(prefix: str, job: str) -> str:
    """The subject of ``job``'s control."""
    return f"{prefix}_fleet.c.{_b64(job)}"


def member_subject(prefix: str, instance: str) -> str:
    """The subject of one instance's membership record."""
    return f"{prefix}_fleet.m.{_b64(instance)}"


def members_filter(prefix: str) -> str:
    """The wildcard subject of every membership record."""
    return f"{prefix}_fleet.m.*"


def filters(prefix: str) -> tuple[str, str]:
    """The wildcard subjects of all declarations and of all controls."""
    return f"{prefix}_fleet.d.*.*", f"{prefix}_fleet.c.*"


def declaration_payload(d: Declaration, ttl_ms: int) -> bytes:
    """The message body of a declaration."""
    return dumps(
        {
            "job": d.job,
            "instance": d.instance_id,
            "f": d.fingerprint,
            "s": d.schedule,
            "ttl": ttl_ms,
        }
    )


def control_payload(c: JobControl) -> bytes:
    """The message body of a control."""
    return dumps(
        {
            "job": c.job,
            "p": 1 if c.paused else 0,
            "u": c.skip_until,
            "by": c.updated_by,
            "pa": c.paused_at,
            "ra": c.resumed_at,
        }
    )


def _ms(value: object) -> int | None:
    return None if value is None else stored_int(value)


def declaration_of(stream: str, subject: str, data: bytes, stored_ms: int) -> Declaration:
    """A stored declaration message as a :class:`Declaration` (``ForeignDataError`` if not ours)."""
    with stored_data(subject, f"a declaration (stream {stream!r})"):
        row = json.loads(data)
        return Declaration(
            str(row["job"]),
            str(row["instance"]),
            str(row["f"]),
            str(row["s"]),
            stored_ms,
            stored_ms + stored_int(row["ttl"]),
        )


def control_of(stream: str, subject: str, data: bytes, stored_ms: int) -> JobControl:
    """A stored control message as a :class:`JobControl` (``ForeignDataError`` if not ours)."""
    with stored_data(subject, f"a job's control (stream {stream!r})"):
        row = json.loads(data)
        by = row["by"]
        return JobControl(
            str(row["job"]),
            stored_flag(row["p"]),
            _ms(row["u"]),
            stored_ms,
            None if by is None else str(by),
            paused_at=_ms(row.get("pa")),
            resumed_at=_ms(row.get("ra")),
        )


def _readable(parse: Callable[[], T]) -> T | None:
    try:
        return parse()
    except ForeignDataError as error:
        report_unreadable(error, log)
        return None


class Fleet:
    """The fleet registry and controls of one backend, on its stream's subjects."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._connection = store.connection
        self._stream = store.stream.name
        self._prefix = store.prefix
        self._clock = clock

    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Publish each declaration to its subject; purge the subjects of expired ones."""
        connection = self._connection
        nc = await self._store.client()
        with connection.driver_errors("fleet registry"):
            await asyncio.gather(
                *(
                    connection.publish(
                        nc,
                        declaration_subject(self._prefix, d.job, d.instance_id),
                        declaration_payload(d, ttl_ms),
                        "fleet registry",
                    )
                    for d in declarations
                )
            )
            _, expired = await self._declared(nc)
            for subject in expired:
                try:
                    await connection.api(nc, f"STREAM.PURGE.{self._stream}", {"filter": subject})
                except APIError as error:  # e.g. a stream that denies purges: read filters them
                    log.debug("anarchon: purging %s failed: %s", subject, error)

    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        nc = await self._store.client()
        with self._connection.driver_errors("fleet registry"):
            live, _ = await self._declared(nc)
        return [d for d in live if job is None or d.job == job]

    async def set_control(self, control: JobControl) -> None:
        """Publish the job's control (its stored time is ``updated_at``)."""
        connection = self._connection
        nc = await self._store.client()
        with connection.driver_errors("fleet-wide controls"):
            await connection.publish(
                nc,
                control_subject(self._prefix, control.job),
                control_payload(control),
                "fleet-wide controls",
            )

    async def controls(self) -> dict[str, JobControl]:
        """Every job's newest control."""
        nc = await self._store.client()
        with self._connection.driver_errors("fleet-wide controls"):
            found = await self._newest(nc, filters(self._prefix)[1])
        controls = (
            _readable(partial(control_of, self._stream, s, data, ms)) for s, data, ms in found
        )
        return {c.job: c for c in controls if c is not None}

    async def _declared(self, nc: Client) -> tuple[list[Declaration], list[str]]:
        """Unexpired declarations, and the subjects of expired ones (by the newest stored time)."""
        found = await self._newest(nc, filters(self._prefix)[0])
        if not found:
            return [], []
        now = await self._clock.now_ms()
        live: list[Declaration] = []
        expired: list[str] = []
        for subject, data, ms in found:
            entry = _readable(partial(declaration_of, self._stream, subject, data, ms))
            if entry is None:  # not ours: left as it is
                continue
            if entry.expires_at > now:
                live.append(entry)
            else:
                expired.append(subject)
        return live, expired

    async def _newest(self, nc: Client, wildcard: str) -> list[tuple[str, bytes, int]]:
        """The newest message of each subject matching ``wildcard``: (subject, data, stored ms)."""
        connection = self._connection
        info = await connection.api(
            nc, f"STREAM.INFO.{self._stream}", {"subjects_filter": wildcard}
        )
        subjects = sorted((info.get("state") or {}).get("subjects") or {})
        stored = await asyncio.gather(
            *(connection.get_message(nc, {"last_by_subj": subject}) for subject in subjects)
        )
        out: list[tuple[str, bytes, int]] = []
        for subject, message in zip(subjects, stored, strict=True):
            if message is None:  # purged in between
                continue
            try:
                ms = int(parse_stamp_ms(message.time))
            except ValueError:
                raise ForeignDataError(
                    f"stream {self._stream!r}: the message on {subject!r} has no stored time",
                    key=subject,
                ) from None
            out.append((subject, message.data, ms))
        return out
