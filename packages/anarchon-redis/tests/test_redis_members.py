"""Membership's key on a real Redis and Valkey: what a refresh stores, prunes and leaves alone.

The contract (``MembershipContract`` in test_redis_contracts.py) checks the
answers; here, the hash itself: one field per instance in ``<prefix>members``,
expired fields deleted by the next refresh (not by a read), a field anarchon
did not write left in place and reported once, and the key of another type
refused with ``ANARCHON_FOREIGN_DATA`` naming it. And what operators see of
them: ``anarchon members`` and the candidates of ``anarchon status``, run as a
real subprocess against a live fleet.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time

import pytest
from anarchon import RunContext, Scheduler
from anarchon._core import rendezvous_candidates
from anarchon.errors import ForeignDataError
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Server


def _backend(server: Server, prefix: str) -> RedisBackendBase:
    cls = ValkeyBackend if server.kind == "valkey" else RedisBackend
    return cls(server.url, prefix=prefix)


def test_a_refresh_writes_one_field_and_prunes_expired_ones(server: Server, prefix: str) -> None:
    async def main() -> None:
        backend = _backend(server, prefix)
        await backend.init()
        try:
            conn = await backend.connection()
            key = prefix + "members"
            await backend.refresh_member("gone", "r", 1_000)
            answer = await backend.refresh_member("web-1", "digest", 60_000)
            raw = await conn.execute("HGET", key, "web-1")
            stored = json.loads(raw)
            assert stored == {"r": "digest", "seen": answer[-1].seen_at, "exp": stored["exp"]}
            assert stored["exp"] - stored["seen"] == 60_000
            await asyncio.sleep(2.5)
            assert [m.instance_id for m in await backend.members()] == ["web-1"]
            assert await conn.execute("HEXISTS", key, "gone") == 1  # a read deletes nothing
            await backend.refresh_member("web-1", "digest", 60_000)
            assert await conn.execute("HEXISTS", key, "gone") == 0
            await backend.leave_member("web-1")
            assert await conn.execute("EXISTS", key) == 0
        finally:
            await backend.close()

    asyncio.run(main())


def test_a_foreign_field_is_left_alone_and_reported_once(
    server: Server, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)

    async def main() -> None:
        backend = _backend(server, prefix)
        await backend.init()
        try:
            conn = await backend.connection()
            key = prefix + "members"
            await conn.execute("HSET", key, "odd", '{"exp": "soon"}', "odder", "[]")
            for _ in range(3):
                answer = await backend.refresh_member("web-1", "r", 60_000)
                assert [m.instance_id for m in answer] == ["web-1"]
            assert [m.instance_id for m in await backend.members()] == ["web-1"]
            assert await conn.execute("HGET", key, "odd") is not None
            reported = [
                str(r.__dict__["foreign_key"])
                for r in caplog.records
                if r.__dict__.get("foreign_key") is not None
            ]
            assert sorted(reported) == [f"{key}[odd]", f"{key}[odder]"]
        finally:
            await backend.close()

    asyncio.run(main())


def test_a_members_key_of_another_type_is_foreign_data(server: Server, prefix: str) -> None:
    async def main() -> None:
        backend = _backend(server, prefix)
        await backend.init()
        try:
            conn = await backend.connection()
            key = prefix + "members"
            await conn.execute("SET", key, "not a hash")
            calls = [
                lambda: backend.refresh_member("web-1", "r", 60_000),
                backend.members,
                lambda: backend.leave_member("web-1"),
            ]
            for call in calls:
                with pytest.raises(ForeignDataError) as raised:
                    await call()
                assert raised.value.key == key
        finally:
            await backend.close()

    asyncio.run(main())


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anarchon.cli", *args], capture_output=True, text=True, timeout=60
    )


def test_the_cli_shows_the_live_members_and_each_jobs_candidates(
    redis_server: Server, prefix: str
) -> None:
    """Three schedulers on one Redis: ``members`` lists them, ``status`` names each job's
    two candidates, and both match what each scheduler holds in its timetable."""
    url = f"{redis_server.url}?prefix={prefix}"
    names = ["web-0", "web-1", "web-2"]
    jobs = [f"job-{j}" for j in range(6)]

    async def tick(ctx: RunContext) -> None:
        return None

    def held(scheduler: Scheduler) -> set[str]:
        assert scheduler._parts is not None
        return {name for name in jobs if name in scheduler._parts.wakeups.timetable}

    async def main() -> None:
        fleet = [
            Scheduler(RedisBackend(redis_server.url, prefix=prefix), instance_id=n) for n in names
        ]
        for scheduler in fleet:
            for name in jobs:
                scheduler.every(name, "500ms", tick)
            await scheduler.start()
        try:
            deadline = time.monotonic() + 30
            expected = {n: set(rendezvous_candidates(names, n, 2)) for n in jobs}
            while any(held(s) != {n for n in jobs if s.instance_id in expected[n]} for s in fleet):
                assert time.monotonic() < deadline, "the fleet did not settle in 30 s"
                await asyncio.sleep(0.1)
            # in a thread: the schedulers keep refreshing their records meanwhile
            members = await asyncio.to_thread(_cli, "members", "--backend", url, "--json")
            table = await asyncio.to_thread(_cli, "members", "--backend", url)
            status = await asyncio.to_thread(_cli, "status", "--backend", url, "--json")
            counts = [len(held(s)) for s in fleet]
        finally:
            for scheduler in fleet:
                await scheduler.stop()
        assert members.returncode == 0, members.stderr
        rows = json.loads(members.stdout)
        assert [r["instance_id"] for r in rows] == names
        assert [r["candidate_of"] for r in rows] == counts
        assert {r["k"] for r in rows} == {2}
        assert table.returncode == 0, table.stderr
        assert [line.split()[0] for line in table.stdout.splitlines()[2:]] == names
        assert status.returncode == 0, status.stderr
        shown = {r["job"]: set(r["candidates"]) for r in json.loads(status.stdout)}
        assert shown == expected

    asyncio.run(main())
    after = _cli("members", "--backend", url)  # every instance left on stop
    assert after.returncode == 0, after.stderr
    assert after.stdout.startswith("anarchon: no live members")
