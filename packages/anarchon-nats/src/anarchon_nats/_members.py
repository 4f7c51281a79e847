"""Fleet membership on the backend's stream (docs/backends/nats.md, "Subjects"; docs/fleet.md, "Membership").

One subject per instance, ``<prefix>_fleet.m.<b64 instance>`` (the
:mod:`anarchon_nats._fleet` naming), holding JSON ``{"instance", "r": roster,
"ttl": ms}``. ``seen_at`` is the message's stored time (the store clock, as
for the fleet registry), ``expires_at`` is ``seen_at + ttl``; only the newest
message of a subject counts.

A refresh publishes the record, then, at once: lists the member subjects
(``STREAM.INFO`` with a subject filter), reads its own message back (its
stored time is "now") and purges the older messages of its own subject; then
reads the newest message of every other member subject in one pipelined
round. Three round trips whatever the number of jobs; the subjects of expired
records are purged as they are found (a stream that denies purges keeps them,
and readers skip them). ``leave`` purges the instance's subject. A message
that is not such a record is skipped and reported once, by its subject
(:mod:`anarchon.backend.foreign`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from anarchon.backend.foreign import report_unreadable, stored_data, stored_int
from anarchon.backend.membership import live_members
from anarchon.errors import ForeignDataError
from anarchon.fleet.types import Member
from nats.aio.client import Client
from nats.js.errors import APIError

from anarchon_nats._clock import Clock, parse_stamp_ms
from anarchon_nats._connection import API, Stored, dumps, stored
from anarchon_nats._errors import ERR_NOT_FOUND_MSG, api_error
from anarchon_nats._fleet import member_subject, members_filter
from anarchon_nats._pipeline import BATCH_CHUNK
from anarchon_nats._store import Store

__all__ = ["Members", "member_of", "member_payload"]

log = logging.getLogger("anarchon.nats")

_WHAT = "fleet membership"

_Found = tuple[str, bytes, int, int]
"""The newest message of a member subject: subject, data, stored time (ms), stream sequence."""


def member_payload(instance_id: str, roster: str, ttl_ms: int) -> bytes:
    """The message body of a membership record."""
    return dumps({"instance": instance_id, "r": roster, "ttl": ttl_ms})


def member_of(stream: str, subject: str, data: bytes, stored_ms: int) -> Member:
    """A stored membership message as a :class:`Member` (``ForeignDataError`` if not ours)."""
    with stored_data(subject, f"a member record (stream {stream!r})"):
        row = json.loads(data)
        instance, roster = row["instance"], row["r"]
        if not isinstance(instance, str) or not isinstance(roster, str):
            raise TypeError(f"instance or r is not a string: {instance!r}, {roster!r}")
        return Member(instance, roster, stored_ms, stored_ms + stored_int(row["ttl"]))


class Members:
    """The membership records of one backend, on its stream's subjects."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self._store = store
        self._connection = store.connection
        self._stream = store.stream.name
        self._prefix = store.prefix
        self._clock = clock

    async def refresh(self, instance_id: str, roster: str, ttl_ms: int) -> list[Member]:
        """Publish this instance's record; every live member (expired subjects purged)."""
        connection = self._connection
        nc = await self._store.client()
        own = member_subject(self._prefix, instance_id)
        with connection.driver_errors(_WHAT):
            seq = await connection.publish(
                nc, own, member_payload(instance_id, roster, ttl_ms), _WHAT
            )
            subjects, mine, _ = await asyncio.gather(
                self._subjects(nc),
                connection.get_message(nc, {"seq": seq}),
                self._purge(nc, {"filter": own, "seq": seq}),
            )
            if mine is None:  # purged in between (a leave of the same instance id)
                return await self._read(nc, await self._clock.now_ms(), prune=True)
            now = self._stamp(own, mine)
            found = await self._newest(nc, [s for s in subjects if s != own])
            found.append((own, mine.data, now, seq))
            return await self._answer(nc, found, now, prune=True)

    async def leave(self, instance_id: str) -> None:
        """Purge this instance's subject; where purges are denied, store an expired record."""
        connection = self._connection
        nc = await self._store.client()
        own = member_subject(self._prefix, instance_id)
        with connection.driver_errors(_WHAT):
            try:
                await connection.api(nc, f"STREAM.PURGE.{self._stream}", {"filter": own})
            except APIError as error:
                log.debug("anarchon: purging %s failed (%s): storing an expired record", own, error)
                await connection.publish(nc, own, member_payload(instance_id, "", 0), _WHAT)

    async def members(self) -> list[Member]:
        """Every live member at the store clock's now (nothing is purged)."""
        nc = await self._store.client()
        now = await self._clock.now_ms()
        with self._connection.driver_errors(_WHAT):
            return await self._read(nc, now, prune=False)

    async def _read(self, nc: Client, now: int, *, prune: bool) -> list[Member]:
        found = await self._newest(nc, await self._subjects(nc))
        return await self._answer(nc, found, now, prune=prune)

    async def _answer(
        self, nc: Client, found: list[_Found], now: int, *, prune: bool
    ) -> list[Member]:
        """The live members of ``found`` at ``now``; with ``prune``, expired records purged.

        A purge removes the expired message and the older ones of its subject, never a
        newer one: a member that refreshed meanwhile keeps its new record.
        """
        readable: list[Member] = []
        expired: list[tuple[str, int]] = []
        for subject, data, ms, seq in found:
            try:
                member = member_of(self._stream, subject, data, ms)
            except ForeignDataError as error:  # not ours: left as it is
                report_unreadable(error, log)
                continue
            readable.append(member)
            if member.expires_at <= now:
                expired.append((subject, seq))
        if prune and expired:
            await asyncio.gather(
                *(self._purge(nc, {"filter": s, "seq": seq + 1}) for s, seq in expired)
            )
        return live_members(readable, now)

    async def _subjects(self, nc: Client) -> list[str]:
        info = await self._connection.api(
            nc, f"STREAM.INFO.{self._stream}", {"subjects_filter": members_filter(self._prefix)}
        )
        return sorted((info.get("state") or {}).get("subjects") or {})

    async def _purge(self, nc: Client, request: dict[str, Any]) -> None:
        """A purge that may fail (a stream that denies purges): readers skip what it leaves."""
        try:
            await self._connection.api(nc, f"STREAM.PURGE.{self._stream}", request)
        except APIError as error:
            log.debug("anarchon: purging %s failed: %s", request.get("filter"), error)

    def _stamp(self, subject: str, message: Stored) -> int:
        try:
            return int(parse_stamp_ms(message.time))
        except ValueError:
            raise ForeignDataError(
                f"stream {self._stream!r}: the message on {subject!r} has no stored time",
                key=subject,
            ) from None

    async def _newest(self, nc: Client, subjects: Sequence[str]) -> list[_Found]:
        """The newest message of each subject, read in pipelined rounds."""
        connection = self._connection
        get = f"{API}.STREAM.MSG.GET.{self._stream}"
        out: list[_Found] = []
        for start in range(0, len(subjects), BATCH_CHUNK):
            chunk = subjects[start : start + BATCH_CHUNK]
            replies = await connection.send(
                nc, [(get, dumps({"last_by_subj": s}), None) for s in chunk], _WHAT
            )
            for subject, msg in zip(chunk, replies, strict=True):
                body = connection.answer(msg, _WHAT)
                problem = api_error(body)
                if problem is not None:
                    if problem.err_code == ERR_NOT_FOUND_MSG or problem.code == 404:
                        continue  # purged in between
                    raise connection.answer_error(problem, _WHAT)
                message = stored(body)
                seq = int(body["message"].get("seq") or 0)
                out.append((subject, message.data, self._stamp(subject, message), seq))
        return out
