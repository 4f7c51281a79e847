"""Contract tests for fleet membership (docs/fleet.md, "Membership").

Override the ``backend`` fixture as for :class:`~anarchon.testing.BackendContract`.
The suite checks ``refresh_member``, ``leave_member`` and ``members``: store
times, expiry, replacement, removal, a large answer and the coded error of
bad input. Each test uses instance ids of its own (a unique tag in front) and
looks only at those, so a store shared with other tests needs no cleanup;
the records a test leaves expire by themselves or are removed at its end.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest

from anarchon.backend import Backend
from anarchon.backend.membership import MAX_ROSTER_CHARS
from anarchon.errors import InvalidConfigError
from anarchon.fleet.types import Member
from anarchon.testing.contracts._support import ContractBase, new_job

__all__ = ["MembershipContract"]


def _mine(tag: str, members: list[Member]) -> list[Member]:
    return [m for m in members if m.instance_id.startswith(tag)]


def _ids(tag: str, members: list[Member]) -> list[str]:
    return [m.instance_id for m in _mine(tag, members)]


def _check_answer(members: list[Member]) -> None:
    """Every answer is sorted by instance id and names each instance once."""
    ids = [m.instance_id for m in members]
    assert ids == sorted(ids), f"members not sorted by instance id: {ids[:10]}"
    assert len(ids) == len(set(ids)), "an instance appears twice in one answer"


class MembershipContract(ContractBase):
    """``refresh_member``/``leave_member``/``members`` of a backend."""

    short_ttl_ms: ClassVar[int] = 400
    """A record TTL short enough to wait out (ms)."""
    expiry_wait_s: ClassVar[float] = 2.0
    """How long past ``short_ttl_ms`` a test waits before it expects the record gone."""
    long_ttl_ms: ClassVar[int] = 120_000
    """A record TTL no test outlives (ms)."""
    clock_margin_ms: ClassVar[int] = 2_000
    """How far ``seen_at`` may lie outside the store-clock readings taken around the refresh."""
    many_members: ClassVar[int] = 200
    """How many members one answer must hold in the large-answer test."""

    def test_refresh_returns_self_on_the_store_clock(self, backend: Backend) -> None:
        """The answer holds this instance, its roster as given, and store times ``ttl_ms`` apart."""

        async def body(b: Backend) -> None:
            tag = new_job("member-self")
            roster = 'sha256:0f"\\é/' + "x" * 10
            before = await b.now_ms()
            answer = await b.refresh_member(f"{tag}-a", roster, self.long_ttl_ms)
            after = await b.now_ms()
            _check_answer(answer)
            mine = _mine(tag, answer)
            assert [m.instance_id for m in mine] == [f"{tag}-a"]
            me = mine[0]
            assert me.roster == roster
            assert me.expires_at - me.seen_at == self.long_ttl_ms
            assert me.seen_at > 1_600_000_000_000  # a store time, not a counter
            if before is not None and after is not None:
                margin = self.clock_margin_ms
                assert before - margin <= me.seen_at <= after + margin, (before, me, after)
            assert _mine(tag, await b.members()) == [me]
            await b.leave_member(f"{tag}-a")

        self.run(backend, body)

    def test_two_instances_see_each_other(self, backend: Backend) -> None:
        """Each refresh answers every live member, the other instance's record included."""

        async def body(b: Backend) -> None:
            tag = new_job("member-two")
            first, second = f"{tag}-a", f"{tag}-b.x y/ü*>"
            assert _ids(tag, await b.refresh_member(second, "r-b", self.long_ttl_ms)) == [second]
            answer = await b.refresh_member(first, "r-a", self.long_ttl_ms)
            _check_answer(answer)
            assert _ids(tag, answer) == [first, second]
            again = await b.refresh_member(second, "r-b", self.long_ttl_ms)
            assert _ids(tag, again) == [first, second]
            assert {m.instance_id: m.roster for m in _mine(tag, again)} == {
                first: "r-a",
                second: "r-b",
            }
            read = await b.members()
            _check_answer(read)
            assert _ids(tag, read) == [first, second]
            for instance in (first, second):
                await b.leave_member(instance)

        self.run(backend, body)

    def test_a_record_expires_after_its_ttl(self, backend: Backend) -> None:
        """A member that stops refreshing drops out after its TTL; one refreshed stays."""

        async def body(b: Backend) -> None:
            tag = new_job("member-expire")
            await b.refresh_member(f"{tag}-gone", "r", self.short_ttl_ms)
            await b.refresh_member(f"{tag}-stays", "r", self.long_ttl_ms)
            await asyncio.sleep(self.short_ttl_ms / 1000 + self.expiry_wait_s)
            assert _ids(tag, await b.members()) == [f"{tag}-stays"]
            await b.leave_member(f"{tag}-stays")

        self.run(backend, body)

    def test_expired_records_are_pruned_from_the_answer(self, backend: Backend) -> None:
        """A refresh after another record expired answers without it, and so do later reads."""

        async def body(b: Backend) -> None:
            tag = new_job("member-prune")
            for name in ("a", "b", "c"):
                await b.refresh_member(f"{tag}-{name}", "r", self.short_ttl_ms)
            await asyncio.sleep(self.short_ttl_ms / 1000 + self.expiry_wait_s)
            answer = await b.refresh_member(f"{tag}-d", "r", self.long_ttl_ms)
            _check_answer(answer)
            assert _ids(tag, answer) == [f"{tag}-d"]
            assert _ids(tag, await b.members()) == [f"{tag}-d"]
            again = await b.refresh_member(f"{tag}-a", "back", self.long_ttl_ms)
            assert _ids(tag, again) == [f"{tag}-a", f"{tag}-d"]  # it may come back
            for name in ("a", "d"):
                await b.leave_member(f"{tag}-{name}")

        self.run(backend, body)

    def test_leave_removes_the_record_and_is_idempotent(self, backend: Backend) -> None:
        """``leave_member`` removes only that record; leaving again, or unknown, is harmless."""

        async def body(b: Backend) -> None:
            tag = new_job("member-leave")
            await b.refresh_member(f"{tag}-a", "r", self.long_ttl_ms)
            await b.refresh_member(f"{tag}-b", "r", self.long_ttl_ms)
            await b.leave_member(f"{tag}-a")
            assert _ids(tag, await b.members()) == [f"{tag}-b"]
            await b.leave_member(f"{tag}-a")
            await b.leave_member(f"{tag}-never-seen")
            assert _ids(tag, await b.members()) == [f"{tag}-b"]
            answer = await b.refresh_member(f"{tag}-b", "r", self.long_ttl_ms)
            assert _ids(tag, answer) == [f"{tag}-b"]
            await b.leave_member(f"{tag}-b")
            assert _ids(tag, await b.members()) == []

        self.run(backend, body)

    def test_a_new_roster_replaces_the_old(self, backend: Backend) -> None:
        """Refreshing with another roster leaves one record, with the new roster and times."""

        async def body(b: Backend) -> None:
            tag = new_job("member-roster")
            first = _mine(tag, await b.refresh_member(f"{tag}-a", "old", self.long_ttl_ms))
            await asyncio.sleep(0.02)
            other_ttl = self.long_ttl_ms // 2
            second = _mine(tag, await b.refresh_member(f"{tag}-a", "new", other_ttl))
            assert len(first) == 1
            assert len(second) == 1
            assert second[0].roster == "new"
            assert second[0].seen_at >= first[0].seen_at
            assert second[0].expires_at - second[0].seen_at == other_ttl
            assert [m.roster for m in _mine(tag, await b.members())] == ["new"]
            await b.leave_member(f"{tag}-a")

        self.run(backend, body)

    def test_many_members_in_one_answer(self, backend: Backend) -> None:
        """``many_members`` instances: every refresh and read answers all of them, sorted."""

        async def body(b: Backend) -> None:
            tag = new_job("member-many")
            names = [f"{tag}-{i:04d}" for i in range(self.many_members)]
            for start in range(0, len(names), 20):
                chunk = names[start : start + 20]
                answers = await asyncio.gather(
                    *(b.refresh_member(n, f"r{n[-4:]}", self.long_ttl_ms) for n in chunk)
                )
                for name, answer in zip(chunk, answers, strict=True):
                    _check_answer(answer)
                    seen = set(_ids(tag, answer))
                    assert name in seen
                    assert seen >= set(names[:start]), "an earlier member is missing"
            final = await b.refresh_member(names[0], "r0000", self.long_ttl_ms)
            _check_answer(final)
            assert _ids(tag, final) == names
            read = await b.members()
            _check_answer(read)
            assert _ids(tag, read) == names
            assert {m.roster for m in _mine(tag, read)} == {f"r{n[-4:]}" for n in names}
            for start in range(0, len(names), 20):
                await asyncio.gather(*(b.leave_member(n) for n in names[start : start + 20]))
            assert _ids(tag, await b.members()) == []

        self.run(backend, body)

    def test_bad_input_raises_the_coded_error(self, backend: Backend) -> None:
        """An empty instance id, a TTL that is not positive, a roster too long: coded, nothing stored."""

        async def body(b: Backend) -> None:
            tag = new_job("member-bad")
            bad_calls = [
                ("", "r", self.long_ttl_ms),
                (f"{tag}-zero", "r", 0),
                (f"{tag}-negative", "r", -5),
                (f"{tag}-long", "x" * (MAX_ROSTER_CHARS + 1), self.long_ttl_ms),
            ]
            for instance, roster, ttl in bad_calls:
                with pytest.raises(InvalidConfigError) as raised:
                    await b.refresh_member(instance, roster, ttl)
                assert raised.value.code == "ANARCHON_INVALID_CONFIG"
            with pytest.raises(InvalidConfigError):
                await b.leave_member("")
            assert _ids(tag, await b.members()) == []
            edge = "y" * MAX_ROSTER_CHARS
            answer = await b.refresh_member(f"{tag}-edge", edge, self.long_ttl_ms)
            assert [m.roster for m in _mine(tag, answer)] == [edge]
            await b.leave_member(f"{tag}-edge")

        self.run(backend, body)
