"""anarchon-redis specifics on real servers: connections, keys, scripts, format, strategy rules.

Every test talks to a real redis-server or valkey-server (``conftest.py``);
inspection goes through a plain redis-py client on the same server.
"""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio
import valkey.asyncio
from anarchon import JobLimits, RunContext, Scheduler
from anarchon.backend.registry import installed_backends, resolve_backend
from anarchon.errors import (
    BackendError,
    BackendUnavailableError,
    DedupeWindowError,
    ForeignDataError,
    InvalidConfigError,
    StoreFormatError,
    UnsupportedError,
)
from anarchon.types import ClaimInput, RunClaim, StoredResult
from anarchon_redis import Lease, RedisBackend, StreamId, ValkeyBackend
from anarchon_redis._client import text
from anarchon_redis._lua import LEASE_SCRIPTS, STREAM_ID_SCRIPTS
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import Server, free_port, start_server

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    """Run one coroutine in a fresh event loop (as the contract suites do)."""

    async def main() -> T:
        return await coro

    return asyncio.run(main())


def backend_for(server: Server, **options: Any) -> RedisBackendBase:
    cls = RedisBackend if server.kind == "redis" else ValkeyBackend
    return cls(server.url, **options)


def inspector(server: Server, db: int = 0) -> redis.Redis:
    """A plain sync redis-py client on the server (works on Valkey too)."""
    return redis.Redis(host="127.0.0.1", port=server.port, db=db, password=server.password)


async def using(backend: RedisBackendBase, body: Callable[[RedisBackendBase], Awaitable[T]]) -> T:
    await backend.init()
    try:
        return await body(backend)
    finally:
        await backend.close()


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key: str) -> int:
    """Redis Cluster's hash slot of a key (hash tags honoured), as in ``keyHashSlot``."""
    raw = key.encode()
    start = raw.find(b"{")
    if start != -1:
        end = raw.find(b"}", start + 1)
        if end > start + 1:
            raw = raw[start + 1 : end]
    return _crc16(raw) % 16384


# Keys ---------------------------------------------------------------------------


def test_lease_keys_match_the_spec_and_share_one_hash_slot(server: Server, prefix: str) -> None:
    job = "nightly-report"

    async def body(b: RedisBackendBase) -> None:
        await b.prepare_job(job, 100)
        runs = b.runs
        assert runs is not None
        now = await b.now_ms()
        slot = now - now % 1000
        claim = RunClaim(job, slot, "tok-1", "inst-a", 60_000)
        assert (await runs.claim(claim)).kind == "won"
        result = StoredResult(slot, "tok-1", "inst-a", "ok", slot, slot + 5)
        assert await runs.finish(job, slot, "tok-1", "ok")
        await b.save_result(job, result, 100)
        await runs.claim(RunClaim(job, slot + 1000, "tok-2", "inst-b", 60_000, overlap=True))
        # The runs stream holds manual runs (a scheduled run's state is its claim record).
        await b.record_manual_run(ClaimInput(job, slot + 2000, "tok-3", "inst-a"))

    run(using(backend_for(server, prefix=prefix), body))
    r = inspector(server)
    found = {text(k): text(r.type(k)) for k in r.scan_iter(match=f"*{prefix}*")}
    tag = "{" + prefix + job + "}"
    assert found == {
        f"{tag}:state": "hash",
        f"{tag}:runs": "stream",
        f"{tag}:results": "zset",
        f"{prefix}format": "string",
    }
    slots = {key_slot(k) for k in found if k != f"{prefix}format"}
    assert len(slots) == 1, "every key of one job must sit in one hash slot"
    assert r.get(f"{prefix}format") == b"1"


def test_stream_id_keys_match_the_spec(server: Server, prefix: str) -> None:
    job = "tick"

    async def body(b: RedisBackendBase) -> None:
        now = await b.now_ms()
        slot = now - now % 1000
        claim = ClaimInput(job, slot, "tok-1", "inst-a")
        assert await b.claim(claim)
        await b.save_result(job, StoredResult(slot, "tok-1", "inst-a", "ok", slot, slot + 1), 100)
        manual = ClaimInput(job, now, "tok-m", "inst-a")
        assert await b.record_manual_run(manual) is None

    run(using(backend_for(server, strategy="stream-id", prefix=prefix), body))
    r = inspector(server)
    found = {text(k): text(r.type(k)) for k in r.scan_iter(match=f"{prefix}*")}
    assert found == {
        f"{prefix}{job}:runs": "stream",
        f"{prefix}{job}:manual": "stream",
        f"{prefix}{job}:results": "zset",
        f"{prefix}format": "string",
    }
    entries: Any = r.xrange(f"{prefix}{job}:runs")
    entry_id, fields = entries[0]
    assert text(entry_id).endswith("-0")
    assert fields[b"token"] == b"tok-1"


# Store format -----------------------------------------------------------------------


def test_a_newer_store_format_is_refused(server: Server, prefix: str) -> None:
    r = inspector(server)
    r.set(f"{prefix}format", "2")
    backend = backend_for(server, prefix=prefix)
    with pytest.raises(StoreFormatError) as caught:
        run(backend.init())
    assert caught.value.code == "ANARCHON_STORE_FORMAT"
    assert f"{prefix}format" in str(caught.value)
    assert backend._conn is None
    r.set(f"{prefix}format", "1")
    run(using(backend_for(server, prefix=prefix), lambda b: b.now_ms()))


@pytest.mark.parametrize("marker", ["{bad", "1e400", "1.0", "0"])
def test_a_store_format_marker_anarchon_did_not_write_is_foreign_data(
    server: Server, prefix: str, marker: str
) -> None:
    r = inspector(server)
    r.set(f"{prefix}format", marker)
    backend = backend_for(server, prefix=prefix)
    with pytest.raises(ForeignDataError) as caught:
        run(backend.init())
    assert caught.value.key == f"{prefix}format"
    assert backend._conn is None


# Scripts ------------------------------------------------------------------------------


def _commandstats(r: redis.Redis) -> dict[str, int]:
    stats = r.info("commandstats")
    return {name: int(value["calls"]) for name, value in stats.items()}


@pytest.mark.parametrize("strategy", ["lease", "stream-id"])
def test_scripts_are_loaded_once_and_sent_with_evalsha(
    redis_server: Server, prefix: str, strategy: str
) -> None:
    r = inspector(redis_server)
    scripts = LEASE_SCRIPTS if strategy == "lease" else STREAM_ID_SCRIPTS

    async def body(b: RedisBackendBase) -> None:
        base = await b.now_ms() - 100_000
        for i in range(20):
            claim = ClaimInput("job", base + i * 1000, f"t{i}", "inst")
            assert await b.claim(claim)
            result = StoredResult(claim.slot, claim.token, "inst", "ok", claim.slot, claim.slot)
            await b.save_result("job", result, 5, 60_000)

    r.config_resetstat()
    run(using(backend_for(redis_server, strategy=strategy, prefix=prefix), body))
    calls = _commandstats(r)
    assert calls.get("cmdstat_eval", 0) == 0, "scripts go by EVALSHA, never EVAL"
    assert calls.get("cmdstat_script|load", calls.get("cmdstat_script", 0)) == len(scripts)
    assert calls.get("cmdstat_evalsha", 0) >= 20
    assert all(r.script_exists(*[s.sha for s in scripts]))


def test_noscript_after_a_flush_loads_the_script_again(server: Server, prefix: str) -> None:
    r = inspector(server)

    async def body(b: RedisBackendBase) -> None:
        runs = b.runs
        assert runs is not None
        now = await b.now_ms()
        r.script_flush()
        outcome = await runs.claim(RunClaim("job", now - now % 1000, "tok", "inst", 30_000))
        assert outcome.kind == "won"
        assert await runs.heartbeat("job", now - now % 1000, "nope", 1000) is False

    run(using(backend_for(server, prefix=prefix), body))
    assert all(r.script_exists(LEASE_SCRIPTS[0].sha))


def test_now_ms_reads_the_server_clock(server: Server, prefix: str) -> None:
    r = inspector(server)

    async def body(b: RedisBackendBase) -> tuple[int, int, int]:
        sec, usec = r.time()
        before = sec * 1000 + usec // 1000
        now = await b.now_ms()
        sec, usec = r.time()
        return before, now, sec * 1000 + usec // 1000

    before, now, after = run(using(backend_for(server, prefix=prefix), body))
    assert before <= now <= after
    if server.kind == "redis":
        r.config_resetstat()
        run(using(backend_for(server, prefix=prefix), lambda b: b.now_ms()))
        assert _commandstats(r).get("cmdstat_time", 0) >= 1


# Connections --------------------------------------------------------------------------


def test_url_with_user_password_and_db(tmp_path: Path) -> None:
    server = start_server("redis", password="s3cret-pw")
    try:
        url = f"redis://default:s3cret-pw@127.0.0.1:{server.port}/3?prefix=acl:"
        backend = resolve_backend(url)
        assert isinstance(backend, RedisBackend)
        assert "s3cret-pw" not in repr(backend)
        assert backend.prefix == "acl:"

        async def body(b: RedisBackendBase) -> bool:
            now = await b.now_ms()
            return await b.claim(ClaimInput("job", now - now % 1000, "tok", "inst"))

        assert run(using(backend, body))
        assert inspector(server, db=3).exists("{acl:job}:state") == 1
        assert inspector(server, db=0).exists("{acl:job}:state") == 0

        wrong = RedisBackend(f"redis://default:wrong-pw@127.0.0.1:{server.port}/3")
        # A refused password is not an outage: retrying cannot help, so it reaches the user.
        with pytest.raises(BackendError) as caught:
            run(wrong.init())
        assert not wrong.is_transient(caught.value)
        assert "wrong-pw" not in str(caught.value)
        assert "***" in str(caught.value)
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["redis", "valkey"])
def test_unreachable_server_hides_the_password(kind: str) -> None:
    port = free_port()
    url = f"{kind}://admin:hunter2@127.0.0.1:{port}/0"
    backend = resolve_backend(url)
    with pytest.raises(BackendUnavailableError) as caught:
        run(backend.init())
    error = caught.value
    assert error.code == "ANARCHON_BACKEND_UNAVAILABLE"
    assert "hunter2" not in str(error)
    assert f"{kind}://admin:***@127.0.0.1:{port}/0" in str(error)
    assert error.__cause__ is not None, "the driver error is chained"


def test_options_mapping_opens_and_closes_its_own_client(server: Server, prefix: str) -> None:
    r = inspector(server)
    cls = RedisBackend if server.kind == "redis" else ValkeyBackend
    backend = cls({"host": "127.0.0.1", "port": server.port, "db": 1}, prefix=prefix)
    name = f"anarchon-test-{uuid.uuid4().hex[:6]}"

    async def body(b: RedisBackendBase) -> None:
        await b.claim(ClaimInput("job", 1_000_000, "tok", "inst"))
        conn = b._conn
        assert conn is not None
        assert conn.owned
        await conn.execute("CLIENT", "SETNAME", name)
        assert name.encode() in r.client_list().__repr__().encode()

    run(using(backend, body))
    assert inspector(server, db=1).exists("{" + prefix + "job}:state") == 1
    assert all(c.get("name") != name for c in r.client_list()), "close() must close our client"


@pytest.mark.parametrize("kind", ["redis", "valkey"])
def test_the_users_client_is_used_and_never_closed(
    kind: str, redis_server: Server, valkey_server: Server, prefix: str
) -> None:
    server = redis_server if kind == "redis" else valkey_server

    async def main() -> None:
        client: Any
        if kind == "redis":
            client = redis.asyncio.Redis(host="127.0.0.1", port=server.port, decode_responses=True)
            backend: RedisBackendBase = RedisBackend(client, prefix=prefix)
        else:
            client = valkey.asyncio.Valkey(host="127.0.0.1", port=server.port)
            backend = ValkeyBackend(client, prefix=prefix)
        try:
            await backend.init()
            assert backend._conn is not None
            assert not backend._conn.owned
            now = await backend.now_ms()
            slot = now - now % 1000
            assert await backend.claim(ClaimInput("job", slot, "tok", "inst"))
            await backend.save_result(
                "job", StoredResult(slot, "tok", "inst", "ok", slot, slot), 10
            )
            records = await backend.history("job", 5)
            assert [(r.slot, r.status) for r in records] == [(slot, "ok")]
            await backend.close()
            assert await client.ping(), "the user's client must stay open after close()"
        finally:
            await client.aclose()

    asyncio.run(main())


def test_a_sync_client_is_refused() -> None:
    with pytest.raises(InvalidConfigError, match="asyncio"):
        RedisBackend(redis.Redis())
    with pytest.raises(InvalidConfigError, match="not a Redis client"):
        RedisBackend(object())


def test_tls_urls(tmp_path: Path) -> None:
    """``rediss://`` (redis-py) and ``valkeys://`` (valkey-py) against a TLS-only redis-server."""
    ca_key, ca, key, csr, cert = (
        tmp_path / n for n in ("ca.key", "ca.pem", "s.key", "s.csr", "s.pem")
    )

    def sh(*args: str) -> None:
        subprocess.run(args, cwd=tmp_path, check=True, capture_output=True, timeout=60)

    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
       "/CN=anarchon-test-ca", "-keyout", str(ca_key), "-out", str(ca))  # fmt: skip
    sh("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
       "-keyout", str(key), "-out", str(csr))  # fmt: skip
    ext = tmp_path / "ext.cnf"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")
    sh("openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
       "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(cert))  # fmt: skip
    os.chmod(key, 0o644)
    tls_port = free_port()
    server = start_server(
        "redis",
        extra=["--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file",
               str(key), "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"],
    )  # fmt: skip
    try:
        for url in (
            f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={ca}&prefix=tls-redis:",
            f"valkeys://127.0.0.1:{tls_port}/0?ssl_ca_certs={ca}&prefix=tls-valkey:",
        ):
            backend = resolve_backend(url)

            async def body(b: RedisBackendBase) -> bool:
                now = await b.now_ms()
                return await b.claim(ClaimInput("job", now - now % 1000, uuid.uuid4().hex, "i"))

            assert run(using(backend, body)), url  # type: ignore[arg-type]
        untrusted = RedisBackend(f"rediss://127.0.0.1:{tls_port}/0")
        with pytest.raises(BackendUnavailableError):
            run(untrusted.init())
    finally:
        server.stop()


# Outages ------------------------------------------------------------------------------------


def test_an_outage_raises_backend_unavailable_and_recovery_is_automatic(tmp_path: Path) -> None:
    server = start_server("redis", appendonly=True)
    try:

        async def main() -> None:
            backend = RedisBackend(server.url, prefix="outage:")
            await backend.init()
            runs = backend.runs
            assert runs is not None
            try:
                now = await backend.now_ms()
                first = RunClaim("job", now - now % 1000, "tok-a", "inst", 30_000)
                assert (await runs.claim(first)).kind == "won"
                server.kill()
                with pytest.raises(BackendUnavailableError) as caught:
                    await runs.claim(RunClaim("job", first.slot + 1000, "tok-b", "inst", 30_000))
                assert isinstance(caught.value.__cause__, redis.ConnectionError)
                with pytest.raises(BackendUnavailableError):
                    await backend.history("job", 10)
                server.start()  # same port and data: the claim was persisted
                again = await runs.claim(first)
                assert again.kind == "won", "the acknowledged claim survived the crash"
                other = await runs.claim(RunClaim("job", first.slot, "tok-c", "inst-2", 30_000))
                assert other.kind == "running"
            finally:
                await backend.close()

        asyncio.run(main())
    finally:
        server.stop()


# Strategy rules ------------------------------------------------------------------------------


def test_strategy_rules_and_dedupe_windows() -> None:
    lease = RedisBackend("redis://127.0.0.1:1/0")
    assert lease.runs is not None
    assert math.isfinite(lease.dedupe_window_ms)
    assert lease.dedupe_window_ms == Lease().window_ms
    short = RedisBackend("redis://127.0.0.1:1/0", strategy=Lease(window_ms=600_000))
    assert short.dedupe_window_ms == 600_000
    stream = RedisBackend("redis://127.0.0.1:1/0", strategy="stream-id")
    assert stream.runs is None
    assert stream.dedupe_window_ms == math.inf
    assert isinstance(stream.strategy, StreamId)

    async def handler(ctx: RunContext) -> None:
        return None

    scheduler = Scheduler(stream, instance_id="x")
    for option in ({"overlap": True}, {"max_attempts": 2}, {"catch_up": "5m"}):
        with pytest.raises(UnsupportedError):
            scheduler.every(f"job-{uuid.uuid4().hex[:6]}", "1s", handler, **option)
    scheduler.every("plain", "1s", handler)
    with pytest.raises(UnsupportedError):
        Scheduler(RedisBackend("redis://127.0.0.1:1/0", strategy="stream-id"), lease="10s")
    with pytest.raises(UnsupportedError):
        stream.check_job(JobLimits("j", 1000, 0, 1000, 10, overlap=True))

    leased = Scheduler(short, instance_id="y", lease="5s")
    leased.every("ok", "1s", handler, max_late="5m", catch_up="5m")
    with pytest.raises(DedupeWindowError):
        leased.every("too-late", "1s", handler, max_late="10m")
    with pytest.raises(DedupeWindowError):
        leased.every("catch-up", "1s", handler, max_late="1m", catch_up="20m")


def test_strategy_settings_are_typed() -> None:
    with pytest.raises(TypeError):
        StreamId(window_ms=5)  # type: ignore[call-arg]
    with pytest.raises(InvalidConfigError):
        Lease(window_ms=0)
    with pytest.raises(InvalidConfigError, match="unknown strategy"):
        RedisBackend("redis://h", strategy="nope")
    with pytest.raises(InvalidConfigError, match="lease"):
        RedisBackend.from_url("redis://h?strategy=stream-id&window_ms=5")
    with pytest.raises(InvalidConfigError, match="number"):
        RedisBackend.from_url("redis://h?window_ms=soon")
    with pytest.raises(InvalidConfigError):
        RedisBackend.from_url("redis://h?no_such_option=1")
    with pytest.raises(InvalidConfigError):
        RedisBackend("redis://h", prefix="a{b}:")
    with pytest.raises(InvalidConfigError):
        RedisBackend("valkey://h")
    backend = RedisBackend.from_url("redis://h/2?strategy=lease&window_ms=60000&socket_timeout=3")
    assert backend.strategy == Lease(window_ms=60_000)
    assert backend.url == "redis://h/2?socket_timeout=3"
    assert ValkeyBackend.from_url("valkey://h?strategy=stream-id").strategy == StreamId()


def test_entry_points() -> None:
    rows = {scheme: (target, dist) for scheme, target, dist, _v in installed_backends()}
    for scheme in ("redis", "rediss"):
        assert rows[scheme] == ("anarchon_redis:RedisBackend", "anarchon-redis")
    for scheme in ("valkey", "valkeys"):
        assert rows[scheme] == ("anarchon_redis:ValkeyBackend", "anarchon-redis")
    assert isinstance(resolve_backend("rediss://h:1/0"), RedisBackend)
    assert isinstance(resolve_backend("valkeys://h:1/0?strategy=stream-id"), ValkeyBackend)


# Retention -----------------------------------------------------------------------------------


def test_lease_trimming_keeps_running_runs_and_bounds_state(server: Server, prefix: str) -> None:
    """History N..3N and bounded run state, but a run still in progress keeps everything.

    Trimming is amortised (checked every min(16, N) writes), so the bound is 2N
    plus at most one check's worth of writes.
    """
    size = 5
    job = "busy"

    async def body(b: RedisBackendBase) -> None:
        runs = b.runs
        assert runs is not None
        now = await b.now_ms()
        base = now - now % 1000 - 200_000
        old = RunClaim(
            job, base, "old-token", "inst-old", 3_600_000, overlap=True, history_size=size
        )
        assert (await runs.claim(old)).kind == "won"
        for i in range(1, 60):
            slot = base + i * 1000
            token = f"t{i}"
            claim = RunClaim(job, slot, token, "inst", 60_000, overlap=True, history_size=size)
            assert (await runs.claim(claim)).kind == "won"
            assert await runs.finish(job, slot, token, "ok")
            await b.save_result(job, StoredResult(slot, token, "inst", "ok", slot, slot + 1), size)
        records = await b.history(job, 1000)
        finished = [r for r in records if r.slot != base]
        assert size <= len(finished) <= 3 * size
        assert all(r.status == "ok" for r in finished)
        assert [r.slot for r in finished][:size] == [
            base + i * 1000 for i in range(59, 59 - size, -1)
        ]
        assert [(r.slot, r.status) for r in records if r.slot == base] == [(base, "running")]
        assert [a.slot for a in await runs.active(job)] == [base]

    run(using(backend_for(server, strategy=Lease(window_ms=60_000), prefix=prefix), body))
    r = inspector(server)
    tag = "{" + prefix + job + "}"
    state = {text(k) for k in r.hkeys(f"{tag}:state")}
    run_fields = {k for k in state if not k.startswith("~")}
    assert len(run_fields) <= 3 * size + 1, f"run state not trimmed: {len(run_fields)} runs kept"
    assert any(k.endswith(str(0)) for k in run_fields)
    # The run still in progress is the only one ~act lists.
    assert [int(s) for s in text(r.hget(f"{tag}:state", "~act")).split(",")] == [
        min(int(k) for k in run_fields)
    ]


@pytest.mark.parametrize("strategy", ["lease", "stream-id"])
def test_trimming_never_shows_a_finished_run_as_running(
    server: Server, prefix: str, strategy: str
) -> None:
    """Scheduled and manual runs mixed, history trimmed by size: every kept run is finished."""
    size = 4
    job = "mixed"

    async def body(b: RedisBackendBase) -> None:
        now = await b.now_ms()
        base = now - now % 1000 - 100_000
        for i in range(30):
            slot = base + i * 1000
            claim = ClaimInput(job, slot, f"s{i}", "inst", size)
            assert await b.claim(claim)
            await b.save_result(
                job, StoredResult(slot, claim.token, "inst", "ok", slot, slot), size
            )
            manual = ClaimInput(job, slot + 500, f"m{i}", "inst", size)
            await b.record_manual_run(manual)
            result = StoredResult(slot + 500, manual.token, "inst", "ok", slot, slot, manual=True)
            await b.save_result(job, result, size)
        records = await b.history(job, 1000)
        assert size <= len(records) <= 4 * size
        assert {r.status for r in records} == {"ok"}, records

    run(using(backend_for(server, strategy=strategy, prefix=prefix), body))


def test_stream_id_refuses_a_stale_slot_and_answers_a_retry(server: Server, prefix: str) -> None:
    async def body(b: RedisBackendBase) -> None:
        now = await b.now_ms()
        slot = now - now % 1000
        first = ClaimInput("job", slot, "tok-1", "a")
        assert await b.claim(first)
        assert await b.claim(first), "a retried claim wins again"
        assert not await b.claim(ClaimInput("job", slot, "tok-2", "b"))
        assert await b.claim(ClaimInput("job", slot + 1000, "tok-3", "b"))
        assert not await b.claim(ClaimInput("job", slot - 1000, "tok-4", "c")), "stale slot"
        assert await b.claim(first), "the retry is still recognised after a newer slot"
        # History TTL trims everything old but the newest claim, which de-duplication needs.
        result = StoredResult(slot + 1000, "tok-3", "b", "ok", slot, slot)
        await asyncio.sleep(0.05)
        await b.save_result("job", result, 10, history_ttl_ms=1)
        assert not await b.claim(ClaimInput("job", slot + 1000, "tok-5", "d"))
        assert await b.claim(ClaimInput("job", slot + 1000, "tok-3", "b"))

    run(using(backend_for(server, strategy="stream-id", prefix=prefix), body))


def test_the_longest_retention_any_instance_needs_is_kept(server: Server, prefix: str) -> None:
    """One instance's long ``max_late`` protects run state from another's shorter view."""
    job = "shared"
    size = 3

    async def needs_long(b: RedisBackendBase) -> None:
        b.check_job(JobLimits(job, 1000, 2000, 600_000, size))
        await b.prepare_job(job, size)

    run(using(backend_for(server, prefix=prefix), needs_long))
    tag = "{" + prefix + job + "}"
    assert inspector(server).hget(f"{tag}:state", "~keep") == str(600_000 + 2000 + 60_000).encode()

    async def claims(b: RedisBackendBase) -> None:
        runs = b.runs
        assert runs is not None
        now = await b.now_ms()
        base = now - now % 1000 - 120_000  # two minutes ago: inside the 11 minutes kept
        for i in range(30):
            slot = base + i * 1000
            claim = RunClaim(job, slot, f"t{i}", "inst", 60_000, overlap=True, history_size=size)
            assert (await runs.claim(claim)).won
            assert await runs.finish(job, slot, claim.token, "ok")

    # This instance knows nothing of the job's needs and would keep state only 60 s.
    run(using(backend_for(server, strategy=Lease(window_ms=60_000), prefix=prefix), claims))
    kept = [k for k in inspector(server).hkeys(f"{tag}:state") if not text(k).startswith("~")]
    assert len(kept) == 30, "state a late claim may need was trimmed"


def test_a_store_of_the_previous_layout_is_upgraded_by_prepare_job(
    server: Server, prefix: str
) -> None:
    """0.1.0 kept runs not ended in ``:active`` and every slot in ``:slots``; both are folded in.

    The run the old set lists is still live: after ``prepare_job`` it is
    active, blocks an ``overlap=False`` claim of the next slot, and finishes.
    """
    job = "legacy"
    tag = "{" + prefix + job + "}"
    r = inspector(server)
    now_ms = int(r.time()[0]) * 1000
    slot = now_ms - now_ms % 1000 - 10_000
    old = slot - 1000
    # As 0.1.0 wrote them (cjson key order, not encode_state's).
    r.hset(
        f"{tag}:state",
        mapping={
            str(slot): (
                f'{{"t":"tok-old","a":1,"s":"running","r":"inst-old","l":{now_ms + 600_000},'
                f'"b":{slot},"m":1,"x":0}}'
            ),
            str(old): (
                f'{{"t":"tok-done","a":1,"s":"finished","r":"inst-old","l":{old + 5000},'
                f'"b":{old},"m":1,"x":0,"f":{old + 10},"o":"ok"}}'
            ),
        },
    )
    r.sadd(f"{tag}:active", str(slot), str(old))
    r.zadd(f"{tag}:slots", {str(slot): slot, str(old): old})

    async def body(b: RedisBackendBase) -> None:
        await b.prepare_job(job, 100)
        runs = b.runs
        assert runs is not None
        assert [(a.slot, a.token, a.live) for a in await runs.active(job)] == [
            (slot, "tok-old", True)
        ]
        blocked = await runs.claim(RunClaim(job, slot + 1000, "tok-new", "inst-new", 60_000))
        assert blocked.kind == "overlap"
        assert blocked.runner == "inst-old"
        assert await runs.finish(job, slot, "tok-old", "ok")
        assert await runs.active(job) == []
        after = await runs.claim(RunClaim(job, slot + 2000, "tok-next", "inst-new", 60_000))
        assert after.kind == "won"

    run(using(backend_for(server, prefix=prefix), body))
    assert r.exists(f"{tag}:active", f"{tag}:slots") == 0
    assert text(r.hget(f"{tag}:state", "~act")) == str(slot + 2000)
