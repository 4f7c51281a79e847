"""Membership outside the contract: a backend without it, the input checks, the memory store's clock.

The contract suite (``MembershipContract``) runs on every backend in its
package's tests; here: a third-party-style backend answers ``UnsupportedError``,
:func:`anarchon.backend.membership.check_refresh` refuses what no store should
hold, and the memory backend judges expiry on its store clock and is shared
by every resolution of one ``memory://name``.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from anarchon.backend.membership import (
    MAX_MEMBER_TTL_MS,
    MAX_ROSTER_CHARS,
    check_member_id,
    check_refresh,
    live_members,
)
from anarchon.backend.memory import MemoryBackend
from anarchon.backend.registry import resolve_backend
from anarchon.errors import InvalidConfigError, UnsupportedError
from anarchon.fleet.types import Member
from anarchon.testing import FakeClock
from plain_backend import PlainBackend


def test_a_backend_without_membership_raises_unsupported() -> None:
    """A backend written before membership: each member raises ``ANARCHON_UNSUPPORTED`` naming it."""

    async def main() -> None:
        backend = PlainBackend()
        calls = [
            lambda: backend.refresh_member("i-1", "r", 1_000),
            lambda: backend.leave_member("i-1"),
            backend.members,
        ]
        for call in calls:
            with pytest.raises(UnsupportedError) as raised:
                await call()
            assert raised.value.code == "ANARCHON_UNSUPPORTED"
            assert "'plain'" in raised.value.message

    asyncio.run(main())


@pytest.mark.parametrize(
    ("instance_id", "roster", "ttl_ms", "words"),
    [
        ("", "r", 1_000, "non-empty"),
        (None, "r", 1_000, "string"),
        (7, "r", 1_000, "string"),
        ("i\x00d", "r", 1_000, "NUL"),
        ("i-\ud800", "r", 1_000, "surrogate"),
        ("i-1", None, 1_000, "roster must be a string"),
        ("i-1", "x" * (MAX_ROSTER_CHARS + 1), 1_000, "at most 128"),
        ("i-1", "r\x00", 1_000, "NUL"),
        ("i-1", "r", 0, "between 1"),
        ("i-1", "r", -1, "between 1"),
        ("i-1", "r", MAX_MEMBER_TTL_MS + 1, "between 1"),
        ("i-1", "r", 1.5, "integer"),
        ("i-1", "r", True, "integer"),
        ("i-1", "r", "1000", "integer"),
    ],
)
def test_check_refresh_refuses_bad_input(
    instance_id: object, roster: object, ttl_ms: object, words: str
) -> None:
    with pytest.raises(InvalidConfigError) as raised:
        check_refresh(instance_id, roster, ttl_ms)
    assert raised.value.code == "ANARCHON_INVALID_CONFIG"
    assert words in raised.value.message


def test_check_refresh_takes_the_edges() -> None:
    check_refresh("i", "", 1)
    check_refresh("ü-" * 100, "é" * MAX_ROSTER_CHARS, MAX_MEMBER_TTL_MS)
    assert check_member_id("web-1") == "web-1"


def test_live_members_drops_expired_and_sorts() -> None:
    records = [Member("b", "r", 0, 100), Member("a", "r", 0, 101), Member("c", "r", 0, 99)]
    assert [m.instance_id for m in live_members(records, 100)] == ["a"]
    assert [m.instance_id for m in live_members(records, 50)] == ["a", "b", "c"]


def test_memory_expiry_follows_the_store_clock() -> None:
    """With a fake store clock a record expires when the clock passes it, not the wall clock."""

    async def main() -> None:
        clock = FakeClock(1_700_000_000_000)
        backend = MemoryBackend(clock)
        first = await backend.refresh_member("a", "r1", 5_000)
        assert first == [Member("a", "r1", 1_700_000_000_000, 1_700_000_005_000)]
        clock.advance("4999ms")
        assert [m.instance_id for m in await backend.members()] == ["a"]
        answer = await backend.refresh_member("b", "r2", 5_000)
        assert [m.instance_id for m in answer] == ["a", "b"]
        clock.advance("1ms")  # a's expires_at: no longer live
        assert [m.instance_id for m in await backend.members()] == ["b"]
        assert "a" in backend._state.members  # a read drops nothing
        answer = await backend.refresh_member("b", "r2", 5_000)
        assert answer == [Member("b", "r2", 1_700_000_005_000, 1_700_000_010_000)]
        assert list(backend._state.members) == ["b"]  # the refresh dropped it

    asyncio.run(main())


def test_named_memory_backends_share_members() -> None:
    """Every ``memory://name`` of a process is one store: schedulers in it see each other."""

    async def main() -> None:
        name = f"members-{uuid.uuid4().hex[:8]}"
        one = resolve_backend(f"memory://{name}")
        two = resolve_backend(f"memory://{name}")
        other = resolve_backend(f"memory://{name}-elsewhere")
        await one.refresh_member("web-1", "r", 60_000)
        answer = await two.refresh_member("web-2", "r", 60_000)
        assert [m.instance_id for m in answer] == ["web-1", "web-2"]
        assert await other.members() == []
        await two.leave_member("web-1")
        assert [m.instance_id for m in await one.members()] == ["web-2"]

    asyncio.run(main())
