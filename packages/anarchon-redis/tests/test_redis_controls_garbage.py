"""Garbage in the controls on a real Redis: pauses hold, the CLI keeps working (docs/fleet.md).

One field the scheduler did not write (``HSET <prefix>controls zzz "{bad"``)
used to turn every pause off on a restarted instance and fail ``status``,
``pause`` and ``resume``; a controls key of another type made a restarted
instance run every job as if nothing were paused.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import time
import uuid

import pytest
from anarchon import RunContext, Scheduler
from anarchon._scheduler import fleet_sync
from anarchon.fleet.controls import pause_job
from anarchon_redis import RedisBackend
from anarchon_testservers.redis import Server

CLI = [sys.executable, "-m", "anarchon.cli"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)


def test_a_restarted_instance_honours_every_readable_pause_beside_garbage(
    redis_server: Server,
) -> None:
    prefix = f"g{uuid.uuid4().hex[:8]}:"
    url = f"{redis_server.url}?prefix={prefix}"
    ran: list[str] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.job)

    def make() -> Scheduler:
        scheduler = Scheduler(RedisBackend(redis_server.url, prefix=prefix), instance_id="r")
        for name in ("paused-1", "paused-2", "free"):
            scheduler.every(name, "200ms", tick, jitter=0)
        return scheduler

    async def main() -> None:
        first = make()
        await first.start()  # declares the jobs
        await first.pause("paused-1")
        await first.pause("paused-2")
        await first.stop()
        backend = RedisBackend(redis_server.url, prefix=prefix)
        await backend.init()
        conn = await backend.connection()
        await conn.execute("HSET", prefix + "controls", "zzz", "{bad", "zzy", '{"p":1e400}')
        await backend.close()
        ran.clear()
        restarted = make()  # as in a deploy
        await restarted.start()
        await asyncio.sleep(1.5)
        await restarted.stop()

    asyncio.run(main())
    assert "paused-1" not in ran
    assert "paused-2" not in ran
    assert ran.count("free") >= 2  # the other jobs run
    status = _cli("status", "--backend", url, "--json")
    assert status.returncode == 0, status.stderr
    rows = {row["job"]: row for row in json.loads(status.stdout)}
    assert rows["paused-1"]["paused"] is True
    assert rows["free"]["paused"] is False
    for command in ("pause", "resume"):
        done = _cli(command, "free", "--backend", url)
        assert done.returncode == 0, done.stderr
    assert "zzz" in status.stderr or "zzz" in _cli("status", "--backend", url).stderr


def test_controls_that_cannot_be_read_hold_claims_until_they_can(
    redis_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """A controls key of another type: nothing runs; once it is readable, the pause holds."""
    prefix = f"h{uuid.uuid4().hex[:8]}:"
    ran: list[str] = []
    caplog.set_level(logging.WARNING, logger="anarchon")

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.job)

    async def main() -> None:
        backend = RedisBackend(redis_server.url, prefix=prefix)
        await backend.init()
        conn = await backend.connection()
        await conn.execute("SET", prefix + "controls", "not a hash")
        scheduler = Scheduler(RedisBackend(redis_server.url, prefix=prefix), instance_id="h")
        scheduler.every("held", "200ms", tick, jitter=0)
        scheduler.every("other", "200ms", tick, jitter=0)
        await scheduler.start()
        await asyncio.sleep(1.0)
        assert ran == [], "claimed while the controls could not be read"
        # The pause replaces the bad key in one step (RENAME), so no read sees neither.
        staging = RedisBackend(redis_server.url, prefix="staging-" + prefix)
        await staging.init()
        await pause_job(staging, "held", by="test")
        await staging.close()
        await conn.execute("RENAME", "staging-" + prefix + "controls", prefix + "controls")
        await asyncio.sleep(3.0)  # the retry backoff reaches 2 s
        await scheduler.stop()
        await backend.close()

    asyncio.run(main())
    assert "held" not in ran
    assert "other" in ran
    messages = [r.getMessage() for r in caplog.records]
    assert any("holding claims" in m for m in messages), messages
    assert any("controls read: claiming" in m for m in messages), messages


def test_after_the_wait_an_instance_claims_without_controls_and_says_so(
    redis_server: Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The wait is bounded (``CONTROLS_WAIT_S``, shortened here): then jobs run, with an ERROR."""
    monkeypatch.setattr(fleet_sync, "CONTROLS_WAIT_S", 0.5)
    prefix = f"w{uuid.uuid4().hex[:8]}:"
    ran: list[str] = []
    caplog.set_level(logging.WARNING, logger="anarchon")

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.job)

    async def main() -> None:
        backend = RedisBackend(redis_server.url, prefix=prefix)
        await backend.init()
        conn = await backend.connection()
        await conn.execute("SET", prefix + "controls", "not a hash")
        await backend.close()
        scheduler = Scheduler(RedisBackend(redis_server.url, prefix=prefix), instance_id="w")
        scheduler.every("job", "200ms", tick, jitter=0)
        await scheduler.start()
        await asyncio.sleep(1.5)
        await scheduler.stop()

    asyncio.run(main())
    assert ran.count("job") >= 2
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any("claiming without them" in m for m in errors), errors


def test_a_garbage_trimmed_key_is_reported_not_raised(
    redis_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    """``strategy=script``: ``<job>:trimmed`` holding ``1e400`` (which Lua reads as inf)."""
    from anarchon.types import ClaimInput, StoredResult

    prefix = f"t{uuid.uuid4().hex[:8]}:"
    caplog.set_level(logging.WARNING)

    async def main() -> list[int]:
        backend = RedisBackend(redis_server.url, prefix=prefix, strategy="script")
        await backend.init()
        try:
            await backend.prepare_job("job", 2)
            conn = await backend.connection()
            await conn.execute("SET", f"{prefix}job:trimmed", "1e400")
            base = (time.time_ns() // 1_000_000_000 - 20) * 1000  # within the window
            for n in range(12):  # trims run as results are saved
                slot = base + n * 1000
                assert await backend.claim(ClaimInput("job", slot, f"t{n}", "i", 2))
                await backend.save_result("job", StoredResult(slot, f"t{n}", "i", "ok"), 2)
            return [r.slot for r in await backend.history("job", 10)]
        finally:
            await backend.close()

    slots = asyncio.run(main())
    assert slots
    reported = {r.__dict__.get("foreign_key") for r in caplog.records}
    assert f"{prefix}job:trimmed" in reported


@pytest.mark.parametrize("garbage", ["{bad", '"text"', "[]", '{"a":"x","t":1}', "1e400"])
def test_every_run_state_script_names_the_key_of_garbage_run_state(
    redis_server: Server, garbage: str
) -> None:
    """Garbage in a slot's run state (``strategy=lease``): every script that reads it (claim,
    heartbeat, finish, finish+save, retry, release, active) answers ``ANARCHON_FOREIGN_DATA``
    naming the state key, never ``ANARCHON_BACKEND_ERROR``."""
    from anarchon.errors import ForeignDataError
    from anarchon.types import RunClaim, RunFinish, RunRetry

    prefix = f"s{uuid.uuid4().hex[:8]}:"

    async def main() -> dict[str, ForeignDataError | object]:
        backend = RedisBackend(redis_server.url, prefix=prefix, strategy="lease")
        await backend.init()
        try:
            await backend.prepare_job("job", 10)
            runs = backend.runs
            assert runs is not None
            slot = (time.time_ns() // 1_000_000_000) * 1000
            conn = await backend.connection()
            state = "{" + prefix + "job}:state"
            await conn.execute("HSET", state, str(slot), garbage, "~act", str(slot))
            calls = {
                "claim": lambda: runs.claim(RunClaim("job", slot, "t", "i", 30_000)),
                "heartbeat": lambda: runs.heartbeat("job", slot, "t", 30_000),
                "finish": lambda: runs.finish("job", slot, "t", "ok"),
                "retry": lambda: runs.retry(RunRetry("job", slot, "t", "t2", "i", 30_000, 3)),
                "release": lambda: runs.release("job", slot, "t"),
                "active": lambda: runs.active("job"),
                "finish_many": lambda: runs.finish_many(
                    [RunFinish("job", slot, "t", "ok"), RunFinish("job", slot, "t", "ok")]
                ),
            }
            answers: dict[str, ForeignDataError | object] = {}
            for name, call in calls.items():
                try:
                    answers[name] = await call()
                except ForeignDataError as error:
                    answers[name] = error
            return {"state": state, **answers}
        finally:
            await backend.close()

    answers = asyncio.run(main())
    state = answers.pop("state")
    for name, answer in answers.items():
        assert isinstance(answer, ForeignDataError), (name, answer)
        assert answer.key == state, (name, answer.key, str(answer))
        assert state in str(answer), (name, str(answer))


@pytest.mark.parametrize(
    ("field", "garbage"),
    [
        ("~act", "x,y"),
        ("~act", "1e400"),
        ("~n", "1e400"),
        ("~n", "{bad"),
        ("~ttl", "nan"),
        ("~keep", "1e400"),
        ("~keep", "0x10"),
        ("~st", "1e400"),
        ("~st", "inf"),
    ],
)
def test_garbage_bookkeeping_fields_are_foreign_data(
    redis_server: Server, field: str, garbage: str
) -> None:
    """Bookkeeping fields that are not what the scripts write: ``ANARCHON_FOREIGN_DATA``.

    Lua's ``tonumber`` takes ``1e400``, ``nan``, ``inf`` and ``0x10``; the
    scripts take only the decimal whole numbers they write. Nothing of the
    claim is written before the error.
    """
    from anarchon.errors import ForeignDataError
    from anarchon.types import RunClaim

    prefix = f"b{uuid.uuid4().hex[:8]}:"

    async def main() -> tuple[str, BaseException | None]:
        backend = RedisBackend(redis_server.url, prefix=prefix, strategy="lease")
        await backend.init()
        state = "{" + prefix + "job}:state"
        try:
            await backend.prepare_job("job", 10)
            runs = backend.runs
            assert runs is not None
            conn = await backend.connection()
            slot = (time.time_ns() // 1_000_000_000) * 1000
            await conn.execute("HSET", state, field, garbage)
            if field == "~st":  # read only when run state is to be trimmed, on a due write
                old = '{"a":1,"t":"t","s":"finished","r":"i","l":0,"b":0,"m":1,"x":0,"f":0}'
                olds = [v for n in range(1, 40) for v in (str(slot - 1000 * n), old)]
                await conn.execute("HSET", state, *olds, "~n", 720_719)
            before = await conn.execute("HGETALL", state)
            try:
                if field == "~keep":  # read when a job is prepared
                    await backend.prepare_job("job", 10)
                else:  # a new run: its claim reads ~act (overlap), ~n and ~ttl, then trims
                    await runs.claim(RunClaim("job", slot, "t", "i", 30_000, history_size=10))
            except ForeignDataError as error:
                assert await conn.execute("HGETALL", state) == before, "written before the error"
                return state, error
            return state, None
        finally:
            await backend.close()

    state, error = asyncio.run(main())
    assert isinstance(error, ForeignDataError), error
    assert error.key == state, str(error)
    assert f"{state}[{field}]" in str(error), str(error)
