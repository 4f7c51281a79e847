"""Which Redis errors are transient (retried) and which reach the user, on real servers.

- transient: connection refused or lost, timeouts, ``BUSY`` (a long script),
  ``READONLY`` (a write to a replica: a fail-over), and the driver's classes
  for ``LOADING``, ``TRYAGAIN``, ``CLUSTERDOWN``, ``MASTERDOWN`` and a full
  connection pool;
- ``WRONGTYPE`` at a key of ours: ``ForeignDataError`` naming the key, from
  ``init()`` and ``prepare_job()``;
- any other driver error (a database index out of range, a refused password):
  ``BackendError`` naming the URL with the password hidden, the driver's error
  as ``__cause__``;
- settings a strategy does not take, and ``Lease(window_ms=1)``:
  ``InvalidConfigError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
import redis
import redis.exceptions as rex
from anarchon.errors import (
    BackendError,
    BackendUnavailableError,
    ForeignDataError,
    InvalidConfigError,
    StoreFormatError,
)
from anarchon.types import ClaimInput, RunClaim
from anarchon_redis import Idmp, Lease, RedisBackend, Script, StreamId, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase
from anarchon_redis.strategies import UnknownSettingError
from anarchon_testservers.redis import Server, free_port, start_server

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro

    return asyncio.run(main())


def _backend(server: Server, strategy: str = "lease", **kw: Any) -> RedisBackendBase:
    cls = RedisBackend if server.kind != "valkey" else ValkeyBackend
    return cls(server.url, strategy=strategy, prefix=f"e{uuid.uuid4().hex[:8]}:", **kw)


async def _closing(backend: RedisBackendBase, coro: Awaitable[T]) -> T:
    try:
        return await coro
    finally:
        await backend.close()


# Transient ------------------------------------------------------------------------------


def test_an_unreachable_server_is_transient() -> None:
    backend = RedisBackend(f"redis://:pw-123@127.0.0.1:{free_port()}/0")
    with pytest.raises(BackendUnavailableError) as caught:
        run(backend.init())
    assert backend.is_transient(caught.value)
    assert "pw-123" not in str(caught.value)


def test_a_busy_server_is_transient(redis_server: Server) -> None:
    """A script running past ``busy-reply-threshold`` makes every other call answer ``BUSY``."""
    admin = redis.Redis(host="127.0.0.1", port=redis_server.port)
    admin.config_set("lua-time-limit", 50)
    blocker = redis.Redis(host="127.0.0.1", port=redis_server.port, socket_timeout=30)
    started = threading.Event()

    def block() -> None:
        started.set()
        # A read-only endless loop, so SCRIPT KILL can end it; its error is expected.
        with contextlib.suppress(rex.ResponseError):
            blocker.eval("local i = 0 while true do i = i + 1 end", 0)

    thread = threading.Thread(target=block)
    backend = _backend(redis_server)

    async def body() -> None:
        await backend.init()  # connected, scripts loaded, before the server turns busy
        thread.start()
        started.wait()
        await asyncio.sleep(0.3)
        runs = backend.runs
        assert runs is not None
        with pytest.raises(BackendUnavailableError) as caught:
            await runs.claim(RunClaim("j", 1000, "t", "w", 1000))
        assert "BUSY" in str(caught.value)
        assert backend.is_transient(caught.value)

    try:
        run(_closing(backend, body()))
    finally:
        killer = redis.Redis(host="127.0.0.1", port=redis_server.port)
        deadline = time.monotonic() + 10
        while thread.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(rex.ResponseError):
                killer.script_kill()
            thread.join(0.2)
        admin.config_set("lua-time-limit", 5000)


def test_a_write_to_a_replica_is_transient(redis_server: Server) -> None:
    """``READONLY``: the node became a replica (a fail-over); the claim must be retried."""
    replica = start_server("redis", extra=["--replicaof", "127.0.0.1", str(redis_server.port)])
    try:
        backend = _backend(replica)

        async def claim() -> bool:
            return await backend.claim(ClaimInput("j", 1000, "t", "w"))

        with pytest.raises(BackendUnavailableError) as caught:
            run(_closing(backend, claim()))
        assert "READONLY" in str(caught.value) or "read only" in str(caught.value).lower()
        assert backend.is_transient(caught.value)
    finally:
        replica.stop()


@pytest.mark.parametrize(
    "error",
    [
        rex.ConnectionError("Connection reset by peer"),
        rex.TimeoutError("Timeout reading from socket"),
        rex.BusyLoadingError("Redis is loading the dataset in memory"),
        rex.TryAgainError("Multiple keys request during rehashing of slot"),
        rex.ClusterDownError("The cluster is down"),
        rex.MasterDownError("Link with MASTER is down and replica-serve-stale-data is set to 'no'"),
        rex.ReadOnlyError("You can't write against a read only replica."),
        rex.ResponseError("BUSY Redis is busy running a script."),
        rex.ResponseError("LOADING Redis is loading the dataset in memory"),
        rex.MaxConnectionsError("Too many connections"),
        ConnectionResetError(104, "Connection reset by peer"),
        asyncio.TimeoutError(),
    ],
    ids=lambda e: type(e).__name__,
)
def test_transient_driver_errors(error: BaseException) -> None:
    assert RedisBackend("redis://127.0.0.1:1/0").is_transient(error)


@pytest.mark.parametrize(
    "error",
    [
        rex.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        rex.ResponseError("ERR DB index is out of range"),
        rex.ResponseError("ERR unknown command 'XCFGSET'"),
        rex.AuthenticationError("invalid username-password pair or user is disabled."),
        rex.NoPermissionError("this user has no permissions to run the 'evalsha' command"),
        rex.DataError("Invalid input of type: 'dict'"),
        ForeignDataError("x", key="k"),
        BackendError("x"),
        InvalidConfigError("x"),
        StoreFormatError("x"),
        ValueError("x"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_other_errors_reach_the_user(error: BaseException) -> None:
    assert not RedisBackend("redis://127.0.0.1:1/0").is_transient(error)


# Foreign data ---------------------------------------------------------------------------


def test_a_foreign_format_marker_is_named(server: Server) -> None:
    backend = _backend(server)
    redis.Redis(host="127.0.0.1", port=server.port).hset(backend.prefix + "format", "a", "b")
    with pytest.raises(ForeignDataError) as caught:
        run(_closing(backend, backend.init()))
    assert caught.value.key == backend.prefix + "format"
    assert caught.value.code == "ANARCHON_FOREIGN_DATA"
    assert not backend.is_transient(caught.value)


@pytest.mark.parametrize(
    ("strategy", "suffix", "brace"),
    [("lease", ":state", True), ("lease", ":runs", True), ("stream-id", ":runs", False)],
)
def test_a_foreign_key_of_a_job_is_named_by_prepare_job(
    server: Server, strategy: str, suffix: str, brace: bool
) -> None:
    backend = _backend(server, strategy)
    base = backend.prefix + "nightly"
    key = ("{" + base + "}" if brace else base) + suffix
    redis.Redis(host="127.0.0.1", port=server.port).set(key, "someone else's")

    async def body() -> None:
        await backend.init()
        await backend.prepare_job("nightly", 10)

    with pytest.raises(ForeignDataError) as caught:
        run(_closing(backend, body()))
    assert caught.value.key == key
    assert key in str(caught.value)


def test_wrongtype_later_in_a_script_is_foreign_data(redis_server: Server) -> None:
    """A key overwritten after ``prepare_job``: the claim's error names the job's keys."""
    backend = _backend(redis_server)

    async def body() -> None:
        await backend.init()
        await backend.prepare_job("j", 10)
        state = "{" + backend.prefix + "j}:state"
        redis.Redis(host="127.0.0.1", port=redis_server.port).set(state, "x")
        with pytest.raises(ForeignDataError) as caught:
            await backend.claim(ClaimInput("j", 1000, "t", "w"))
        assert state in str(caught.value)

    run(_closing(backend, body()))


# Driver errors that are not anarchon's --------------------------------------------------


def test_a_database_index_out_of_range_names_the_url_without_the_password() -> None:
    server = start_server("redis", password="hunter2-secret")
    try:
        url = f"redis://:hunter2-secret@127.0.0.1:{server.port}/99"
        backend = RedisBackend(url)
        with pytest.raises(BackendError) as caught:
            run(_closing(backend, backend.init()))
        message = str(caught.value)
        assert caught.value.code == "ANARCHON_BACKEND_ERROR"
        assert "hunter2-secret" not in message
        assert f"redis://:***@127.0.0.1:{server.port}/99" in message
        assert isinstance(caught.value.__cause__, rex.ResponseError)
        assert not backend.is_transient(caught.value)
    finally:
        server.stop()


# Settings -------------------------------------------------------------------------------


def test_lease_refuses_a_window_of_one_ms() -> None:
    with pytest.raises(InvalidConfigError, match="window_ms"):
        Lease(window_ms=1)
    with pytest.raises(InvalidConfigError, match="window_ms"):
        RedisBackend.from_url("redis://127.0.0.1:1/0?strategy=lease&window_ms=1")
    assert Lease(window_ms=60_000).window_ms == 60_000


@pytest.mark.parametrize(
    ("cls", "setting"),
    [
        (Lease, {"duration_sec": 5}),
        (Lease, {"max_size": 5}),
        (StreamId, {"window_ms": 1}),
        (Script, {"duration_sec": 5}),
        (Idmp, {"window_ms": 1}),
    ],
)
def test_settings_classes_refuse_settings_they_do_not_take(
    cls: type[Any], setting: dict[str, Any]
) -> None:
    with pytest.raises(UnknownSettingError) as caught:
        cls(**setting)
    assert caught.value.code == "ANARCHON_INVALID_CONFIG"
    assert isinstance(caught.value, TypeError)
    assert next(iter(setting)) in str(caught.value)


def test_a_url_setting_of_another_strategy_is_refused() -> None:
    with pytest.raises(InvalidConfigError):
        RedisBackend.from_url("redis://127.0.0.1:1/0?strategy=lease&duration_sec=5")


def test_start_raises_foreign_data_naming_the_key(redis_server: Server) -> None:
    """``Scheduler.start()`` with a job whose key holds foreign data raises within a second.

    Needs the scheduler to retry only what ``backend.is_transient`` calls
    transient; a scheduler that retries every error hangs here.
    """
    from anarchon import RunContext, Scheduler

    backend = _backend(redis_server)
    key = "{" + backend.prefix + "nightly}:state"
    redis.Redis(host="127.0.0.1", port=redis_server.port).set(key, "someone else's")

    async def handler(ctx: RunContext) -> None:
        raise AssertionError(f"{ctx.job} must not run")

    async def main() -> None:
        scheduler = Scheduler(backend, instance_id="foreign")
        scheduler.every("nightly", "1h", handler)
        try:
            with pytest.raises(ForeignDataError) as caught:
                await asyncio.wait_for(scheduler.start(), 5)
            assert caught.value.key == key
        finally:
            await scheduler.stop()
            await backend.close()

    run(main())
