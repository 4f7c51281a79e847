"""Membership's subjects on a real nats-server: what a refresh keeps, purges and leaves alone.

The contract (``MembershipContract`` in test_nats_contract.py) checks the
answers; here, the stream itself: one message per member subject, the
subjects of expired records purged by the next refresh (not by a read), a
purge that never takes a newer record, and ``leave`` on a stream that denies
purges.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import nats
from anarchon_nats import NatsBackend
from anarchon_nats._fleet import member_subject


def _run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(body(), 60))


async def _counts(nats_url: str, stream: str, prefix: str) -> dict[str, int]:
    """Messages per member subject, from the server."""
    nc = await nats.connect(nats_url)
    try:
        request = json.dumps({"subjects_filter": f"{prefix}_fleet.m.*"}).encode()
        reply = await nc.request(f"$JS.API.STREAM.INFO.{stream}", request, timeout=5)
    finally:
        await nc.close()
    subjects: dict[str, int] = (json.loads(reply.data).get("state") or {}).get("subjects") or {}
    return subjects


def test_a_member_subject_keeps_one_message_and_expired_ones_go(
    nats_url: str, stream: str, prefix: str
) -> None:
    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        try:
            for _ in range(5):
                await backend.refresh_member("web-1", "r", 60_000)
            await backend.refresh_member("gone", "r", 50)
            web, gone = member_subject(prefix, "web-1"), member_subject(prefix, "gone")
            assert await _counts(nats_url, stream, prefix) == {web: 1, gone: 1}
            await asyncio.sleep(0.5)
            assert [m.instance_id for m in await backend.members()] == ["web-1"]
            assert gone in await _counts(nats_url, stream, prefix)  # a read purges nothing
            await backend.refresh_member("web-1", "r", 60_000)
            assert await _counts(nats_url, stream, prefix) == {web: 1}
            await backend.leave_member("web-1")
            assert await _counts(nats_url, stream, prefix) == {}
        finally:
            await backend.close()

    _run(body)


def test_pruning_an_expired_record_never_takes_a_newer_one(
    nats_url: str, stream: str, prefix: str
) -> None:
    """A member read expired by one instance refreshes before the purge: its record stays."""

    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        try:
            await backend.refresh_member("late", "old", 50)
            await asyncio.sleep(0.5)
            members = backend._members
            nc = await backend._store.client()
            found = await members._newest(nc, [member_subject(prefix, "late")])
            await backend.refresh_member("late", "new", 60_000)  # between the read and the purge
            now = await backend.now_ms()
            assert await members._answer(nc, found, now, prune=True) == []
            assert [(m.instance_id, m.roster) for m in await backend.members()] == [("late", "new")]
        finally:
            await backend.close()

    _run(body)


def test_leave_on_a_stream_that_denies_purges(nats_url: str, stream: str, prefix: str) -> None:
    """``deny_purge``: leave stores an expired record, so the member drops out at once."""

    async def body() -> None:
        nc = await nats.connect(nats_url)
        try:
            await nc.jetstream().add_stream(name=stream, subjects=[f"{prefix}>"], deny_purge=True)
        finally:
            await nc.close()
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        try:
            await backend.refresh_member("web-1", "r", 60_000)
            answer = await backend.refresh_member("web-2", "r", 60_000)
            assert [m.instance_id for m in answer] == ["web-1", "web-2"]
            await backend.leave_member("web-1")
            assert member_subject(prefix, "web-1") in await _counts(nats_url, stream, prefix)
            assert [m.instance_id for m in await backend.members()] == ["web-2"]
            answer = await backend.refresh_member("web-2", "r", 60_000)
            assert [m.instance_id for m in answer] == ["web-2"]
        finally:
            await backend.close()

    _run(body)
