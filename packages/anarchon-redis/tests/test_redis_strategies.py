"""The ``idmp`` and ``script`` strategies on real servers: settings, server check, trimming.

``idmp`` runs on Redis 8.6 (``redis86_server``); against Redis 7 and Valkey it
fails in ``start()`` with a message naming the other strategies.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
from anarchon import JobLimits, RunContext, Scheduler
from anarchon.errors import (
    AnarchonError,
    DedupeWindowError,
    InvalidConfigError,
    UnsupportedError,
)
from anarchon.types import ClaimInput, StoredResult
from anarchon_redis import Idmp, RedisBackend, Script, StreamId, ValkeyBackend
from anarchon_redis._client import text
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Server

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    """Run one coroutine in a fresh event loop."""

    async def main() -> T:
        return await coro

    return asyncio.run(main())


async def using(backend: RedisBackendBase, body: Callable[[RedisBackendBase], Awaitable[T]]) -> T:
    await backend.init()
    try:
        return await body(backend)
    finally:
        await backend.close()


def inspector(server: Server) -> redis.Redis:
    """A plain sync redis-py client on the server."""
    return redis.Redis(host="127.0.0.1", port=server.port)


async def _handler(ctx: RunContext) -> None:
    return None


# Settings ---------------------------------------------------------------------------------


def test_typed_settings_and_dedupe_windows() -> None:
    assert Idmp() == Idmp(duration_sec=300, max_size=1000)
    assert Script().window_ms == 300_000
    idmp = RedisBackend("redis://127.0.0.1:1/0", strategy="idmp")
    assert idmp.dedupe_window_ms == 300_000
    assert idmp.runs is None
    assert RedisBackend("redis://h", strategy=Idmp(duration_sec=60)).dedupe_window_ms == 60_000
    script = ValkeyBackend("valkey://h", strategy=Script(window_ms=600_000))
    assert script.dedupe_window_ms == 600_000
    assert script.runs is None
    for bad in (
        lambda: Idmp(duration_sec=0),
        lambda: Idmp(duration_sec=86_401),
        lambda: Idmp(max_size=0),
        lambda: Idmp(max_size=10_001),
        lambda: Script(window_ms=0),
    ):
        with pytest.raises(InvalidConfigError) as caught:
            bad()
        assert caught.value.code == "ANARCHON_INVALID_CONFIG"
    with pytest.raises(TypeError):
        Script(duration_sec=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Idmp(window_ms=5)  # type: ignore[call-arg]


def test_url_options_a_strategy_does_not_take_are_refused() -> None:
    backend = RedisBackend.from_url("redis://h/0?strategy=script&window_ms=600000")
    assert backend.strategy == Script(window_ms=600_000)
    backend = RedisBackend.from_url("redis://h/0?strategy=idmp&duration_sec=60&max_size=50")
    assert backend.strategy == Idmp(duration_sec=60, max_size=50)
    for url in (
        "redis://h/0?strategy=script&duration_sec=60",
        "redis://h/0?strategy=idmp&window_ms=600000",
        "redis://h/0?strategy=stream-id&max_size=5",
        "redis://h/0?strategy=lease&max_size=5",
        "redis://h/0?strategy=idmp&max_size=0",
        "redis://h/0?strategy=script&window_ms=soon",
    ):
        with pytest.raises(InvalidConfigError) as caught:
            RedisBackend.from_url(url)
        assert caught.value.code == "ANARCHON_INVALID_CONFIG", url


def test_valkey_backend_refuses_idmp_at_construction() -> None:
    for strategy in ("idmp", Idmp()):
        with pytest.raises(AnarchonError) as caught:
            ValkeyBackend("valkey://h", strategy=strategy)
        assert "script" in str(caught.value)
    with pytest.raises(AnarchonError):
        ValkeyBackend.from_url("valkey://h?strategy=idmp")


def test_lease_options_are_refused() -> None:
    for strategy in ("script", "idmp"):
        backend = RedisBackend("redis://127.0.0.1:1/0", strategy=strategy)
        scheduler = Scheduler(backend, instance_id="x")
        for option in ({"overlap": True}, {"max_attempts": 2}, {"catch_up": "5m"}):
            with pytest.raises(UnsupportedError):
                scheduler.every(f"j-{uuid.uuid4().hex[:6]}", "1s", _handler, **option)
        with pytest.raises(UnsupportedError):
            Scheduler(RedisBackend("redis://h", strategy=strategy), lease="10s")
        scheduler.every("plain", "1s", _handler)


def test_window_rules() -> None:
    short = RedisBackend("redis://h", strategy=Script(window_ms=120_000))
    Scheduler(short, instance_id="a").every("ok", "1s", _handler, max_late="1m")
    with pytest.raises(DedupeWindowError):
        Scheduler(short, instance_id="a").every("late", "1s", _handler, max_late="3m")
    small = RedisBackend("redis://h", strategy=Idmp(max_size=50))
    with pytest.raises(DedupeWindowError, match="max_size"):
        small.check_job(JobLimits("j", 1000, 2000, 60_000, 10))
    small.check_job(JobLimits("j", 10_000, 2000, 60_000, 10))


# Server check -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["redis", "valkey"])
def test_idmp_without_server_support_fails_in_start(
    kind: str, request: pytest.FixtureRequest
) -> None:
    """``RedisBackend(strategy="idmp")`` on Redis 7 or Valkey: start() names the others."""
    server: Server = request.getfixturevalue(f"{kind}_server")
    backend = RedisBackend(f"redis://127.0.0.1:{server.port}/0", strategy="idmp")
    scheduler = Scheduler(backend, instance_id="a")
    scheduler.every("idmp-job", "1s", _handler)

    async def start() -> None:
        await scheduler.start()
        await scheduler.stop()

    with pytest.raises(UnsupportedError) as caught:
        run(start())
    message = str(caught.value)
    assert caught.value.code == "ANARCHON_UNSUPPORTED"
    assert "8.6" in message
    for other in ("lease", "stream-id", "script"):
        assert other in message
    assert backend._conn is None  # the client it opened was closed


def test_idmp_runs_on_redis_86(redis86_server: Server) -> None:
    backend = RedisBackend(redis86_server.url, strategy="idmp")

    async def body(b: RedisBackendBase) -> str | None:
        return b.server

    found = run(using(backend, body))
    assert found is not None
    assert found.startswith("redis 8.")


# idmp specifics --------------------------------------------------------------------------


def test_idmp_xadd_and_xcfgset_only_at_creation(redis86_server: Server, prefix: str) -> None:
    """The stream gets XCFGSET once; another instance's other settings leave it alone."""
    job = "cfg"
    first = RedisBackend(
        redis86_server.url, strategy=Idmp(duration_sec=120, max_size=500), prefix=prefix
    )
    other = RedisBackend(
        redis86_server.url, strategy=Idmp(duration_sec=600, max_size=900), prefix=prefix
    )

    async def body(b: RedisBackendBase) -> None:
        await b.prepare_job(job, 100)
        assert await b.claim(ClaimInput(job, 1000, "tok-a", "a"))

    async def body_other(b: RedisBackendBase) -> None:
        await b.prepare_job(job, 100)
        assert not await b.claim(ClaimInput(job, 1000, "tok-b", "b"))
        assert await b.claim(ClaimInput(job, 1000, "tok-a", "a"))  # a retry wins again

    run(using(first, body))
    run(using(other, body_other))
    r = inspector(redis86_server)
    info = r.xinfo_stream(f"{prefix}{job}:runs")
    assert info["idmp-duration"] == 120
    assert info["idmp-maxsize"] == 500
    assert info["iids-duplicates"] == 2
    assert info["length"] == 1
    entry = r.xrange(f"{prefix}{job}:runs")[0][1]
    assert entry[b"token"] == b"tok-a"
    assert entry[b"slot"] == b"1000"


def test_idmp_creates_its_stream_at_claim_too(redis86_server: Server, prefix: str) -> None:
    backend = RedisBackend(redis86_server.url, strategy=Idmp(duration_sec=77), prefix=prefix)

    async def body(b: RedisBackendBase) -> None:
        assert await b.claim(ClaimInput("fresh", 5000, "t1", "a"))
        assert not await b.claim(ClaimInput("fresh", 5000, "t2", "b"))

    run(using(backend, body))
    info = inspector(redis86_server).xinfo_stream(f"{prefix}fresh:runs")
    assert info["idmp-duration"] == 77


# Trimming ---------------------------------------------------------------------------------


def _dedupe_server(strategy: str, request: pytest.FixtureRequest) -> Server:
    server: Server = request.getfixturevalue(
        "redis86_server" if strategy == "idmp" else "valkey_server"
    )
    return server


@pytest.mark.parametrize("strategy", ["script", "idmp"])
def test_trimming_keeps_what_deduplication_needs(
    strategy: str, request: pytest.FixtureRequest, prefix: str
) -> None:
    """History shows about history_size runs, but every claim of the window stays claimed."""
    server = _dedupe_server(strategy, request)
    cls = ValkeyBackend if server.kind == "valkey" else RedisBackend
    backend = cls(server.url, strategy=strategy, prefix=prefix)
    job, size = "trim", 5

    async def body(b: RedisBackendBase) -> None:
        await b.prepare_job(job, size)
        now = await b.now_ms()
        slots = [now - 30_000 + i * 1000 for i in range(30)]
        tokens = {}
        for slot in slots:
            token = uuid.uuid4().hex
            tokens[slot] = token
            assert await b.claim(ClaimInput(job, slot, token, "a", size))
            await b.save_result(
                job,
                StoredResult(slot, token, "a", "ok", slot, slot + 1, None, 1),
                size,
                100,
            )
        await asyncio.sleep(0.2)
        last = now + 5_000
        assert await b.claim(ClaimInput(job, last, "t-last", "a", size))
        await b.save_result(
            job, StoredResult(last, "t-last", "a", "ok", last, last, None, 1), size, 100
        )
        records = await b.history(job, 100)
        assert [r.slot for r in records] == [last], "history_ttl hides the old runs"
        for slot in slots:  # ... but they are still claimed
            assert not await b.claim(ClaimInput(job, slot, "intruder", "b", size))
            assert await b.claim(ClaimInput(job, slot, tokens[slot], "a", size))

    run(using(backend, body))
    r = inspector(server)
    assert r.xlen(f"{prefix}{job}:runs") == 31
    assert int(text(r.get(f"{prefix}{job}:trimmed"))) > now_hint(r)


def now_hint(r: redis.Redis) -> int:
    """The server's clock minus a minute, in ms (the trimmed horizon is later than this)."""
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000 - 60_000


def test_script_refuses_a_slot_older_than_its_window(valkey_server: Server, prefix: str) -> None:
    backend = ValkeyBackend(valkey_server.url, strategy=Script(window_ms=70_000), prefix=prefix)

    async def body(b: RedisBackendBase) -> None:
        now = await b.now_ms()
        assert not await b.claim(ClaimInput("old", now - 80_000, "t", "a"))
        assert await b.claim(ClaimInput("old", now - 60_000, "t", "a"))

    run(using(backend, body))


def test_script_old_claims_go_once_the_window_has_passed(redis_server: Server, prefix: str) -> None:
    """Beyond window_ms and beyond history, a claim is deleted from the stream."""
    r = inspector(redis_server)
    key = f"{prefix}gone:runs"
    seconds, _ = r.time()
    old = (int(seconds) - 200) * 1000
    r.xadd(key, {"slot": old, "token": "x", "instance": "a", "at": old}, id=f"{old}-0")
    backend = RedisBackend(redis_server.url, strategy=Script(window_ms=100_000), prefix=prefix)

    async def body(b: RedisBackendBase) -> None:
        now = await b.now_ms()
        assert await b.claim(ClaimInput("gone", now, "t", "a"))
        await b.save_result("gone", StoredResult(now, "t", "a", "ok", now, now, None, 1), 1, 1000)

    run(using(backend, body))
    assert [e[1][b"token"] for e in r.xrange(key)] == [b"t"]


def test_keys_of_the_claim_only_strategies(server: Server, prefix: str) -> None:
    cls = ValkeyBackend if server.kind == "valkey" else RedisBackend
    backend = cls(server.url, strategy="script", prefix=prefix)

    async def body(b: RedisBackendBase) -> Any:
        now = await b.now_ms()
        assert await b.claim(ClaimInput("k", now, "t", "a"))
        await b.record_manual_run(ClaimInput("k", now, "m", "a"))
        # A TTL well above the test's length: the point is which keys exist.
        await b.save_result("k", StoredResult(now, "t", "a", "ok", now, now, None, 1), 1, 3_600_000)
        return None

    run(using(backend, body))
    keys = sorted(text(k) for k in inspector(server).keys(f"{prefix}*"))
    assert keys == sorted(
        [
            f"{prefix}format",
            f"{prefix}k:runs",
            f"{prefix}k:manual",
            f"{prefix}k:results",
            f"{prefix}k:trimmed",
        ]
    )
    assert StreamId() != Script()
