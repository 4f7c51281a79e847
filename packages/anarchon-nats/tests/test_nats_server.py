"""``NatsBackend`` against a real nats-server: the stream, the format marker, connections, errors."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats
import pytest
from anarchon import RunContext, Scheduler
from anarchon.backend.registry import resolve_backend
from anarchon.errors import (
    BackendUnavailableError,
    ForeignDataError,
    InvalidConfigError,
    StoreFormatError,
    UnsupportedError,
)
from anarchon.types import ClaimInput, JobLimits, ResultWrite, StoredResult
from anarchon_nats import NatsBackend
from anarchon_nats._config import claims_needed
from anarchon_testservers.nats import NatsServer, find_nats_server, free_port, start_server
from nats.aio.client import Client

T = TypeVar("T")


def _run(body: Callable[[], Awaitable[T]], timeout: float = 60) -> T:
    async def main() -> T:
        return await asyncio.wait_for(body(), timeout)

    return asyncio.run(main())


def _token() -> str:
    return uuid.uuid4().hex


def _slot() -> int:
    return (time.time_ns() // 1_000_000 // 1000) * 1000 - 10_000


async def _config(url: str, stream: str) -> dict[str, Any]:
    nc = await nats.connect(url)
    try:
        info = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
        body: dict[str, Any] = json.loads(info.data)
        config: dict[str, Any] = body["config"]
        return config
    finally:
        await nc.close()


async def _make_stream(url: str, **config: Any) -> None:
    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(**config)
    finally:
        await nc.close()


async def _init_close(backend: NatsBackend, job: str | None = "a-job") -> None:
    """Start ``backend`` as a scheduler does: its job is checked first, then ``init()``."""
    if job is not None:
        backend.check_job(JobLimits(job, 60_000, 2_000, 60_000, 1000))
    await backend.init()
    await backend.close()


# The stream ---------------------------------------------------------------------


def test_new_stream_has_our_settings(nats_url: str, stream: str, prefix: str) -> None:
    backend = NatsBackend(nats_url, stream=stream, prefix=prefix, duplicate_window_ms=90_000)
    _run(lambda: _init_close(backend))
    config = _run(lambda: _config(nats_url, stream))
    assert config["subjects"] == [f"{prefix}>"]
    assert config["duplicate_window"] == 90_000 * 1_000_000
    assert config["max_msgs_per_subject"] == 1000
    assert config["num_replicas"] == 1
    assert config["retention"] == "limits"
    assert config["storage"] == "file"
    assert config["discard"] == "old"


def _existing(url: str, stream: str, prefix: str, **overrides: Any) -> None:
    config: dict[str, Any] = {
        "name": stream,
        "subjects": [f"{prefix}>"],
        "duplicate_window": 120.0,
        "max_msgs_per_subject": 5,
        "max_age": 3600.0,
        "description": "made by hand",
        "max_bytes": 10_000_000,
    }
    config.update(overrides)
    _run(lambda: _make_stream(url, **config))


def test_existing_stream_gets_our_duplicate_window(nats_url: str, stream: str, prefix: str) -> None:
    _existing(nats_url, stream, prefix, max_msgs_per_subject=1000)
    _run(lambda: _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix)))
    config = _run(lambda: _config(nats_url, stream))
    assert config["duplicate_window"] == 300_000 * 1_000_000
    assert config["max_msgs_per_subject"] == 1000


@pytest.mark.parametrize("existing", [5, 50_000, -1])
def test_existing_stream_gets_our_per_subject_limit(
    nats_url: str, stream: str, prefix: str, existing: int
) -> None:
    _existing(nats_url, stream, prefix, max_msgs_per_subject=existing, duplicate_window=300.0)
    _run(lambda: _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix, history_size=200)))
    config = _run(lambda: _config(nats_url, stream))
    assert config["max_msgs_per_subject"] == 200
    assert config["duplicate_window"] == 300_000 * 1_000_000


def test_existing_stream_gets_our_subjects_added(nats_url: str, stream: str, prefix: str) -> None:
    other = f"o{uuid.uuid4().hex[:8]}.>"
    _existing(nats_url, stream, prefix, subjects=[other, f"{prefix}only.>"])
    _run(lambda: _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix)))
    config = _run(lambda: _config(nats_url, stream))
    assert config["subjects"] == [other, f"{prefix}>"], "ours added, theirs kept, covered folded"


def test_existing_stream_already_covering_our_subjects_is_kept(nats_url: str, stream: str) -> None:
    top = f"o{uuid.uuid4().hex[:8]}"
    _existing(nats_url, stream, f"{top}.", subjects=[f"{top}.>"])
    backend = NatsBackend(nats_url, stream=stream, prefix=f"{top}.cron.")
    _run(lambda: _init_close(backend))
    assert _run(lambda: _config(nats_url, stream))["subjects"] == [f"{top}.>"]


def test_existing_stream_keeps_its_other_settings_and_replicas(
    nats_url: str, stream: str, prefix: str
) -> None:
    _existing(nats_url, stream, prefix)
    before = _run(lambda: _config(nats_url, stream))
    _run(lambda: _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix)))
    after = _run(lambda: _config(nats_url, stream))
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed == {"duplicate_window", "max_msgs_per_subject"}
    assert after["description"] == "made by hand"
    assert after["max_age"] == 3600 * 10**9
    assert after["max_bytes"] == 10_000_000
    assert after["num_replicas"] == 1, "replicas are changed only when given"


def test_a_reader_leaves_an_existing_stream_alone_until_it_prepares_a_job(
    nats_url: str, stream: str, prefix: str
) -> None:
    """``anarchon history`` knows no job periods: it must not lower a limit a fast job needs."""
    _existing(nats_url, stream, prefix, max_msgs_per_subject=5000, duplicate_window=300.0)
    reader = NatsBackend(nats_url, stream=stream, prefix=prefix)

    async def body() -> tuple[int, int]:
        await reader.init()
        assert await reader.history("any", 10) == []
        untouched = int((await _config(nats_url, stream))["max_msgs_per_subject"])
        await reader.prepare_job("now-a-runner", 1000)
        updated = int((await _config(nats_url, stream))["max_msgs_per_subject"])
        await reader.close()
        return untouched, updated

    assert _run(body) == (5000, 1000)


def test_matching_stream_is_not_updated(
    nats_url: str, stream: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
    _run(lambda: _init_close(backend))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="anarchon.nats"):
        _run(lambda: _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix)))
    assert not [r for r in caplog.records if "updated" in r.getMessage()]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_age": 60.0, "duplicate_window": 30.0}, "max_age"),
        ({"retention": "workqueue"}, "retention"),
    ],
)
def test_unsafe_existing_stream_is_refused(
    nats_url: str, stream: str, prefix: str, overrides: dict[str, Any], message: str
) -> None:
    _existing(nats_url, stream, prefix, **overrides)
    with pytest.raises(InvalidConfigError, match=message):
        _run(lambda: _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix)))


def test_subjects_taken_by_another_stream_is_invalid_config(
    nats_url: str, stream: str, prefix: str
) -> None:
    _existing(nats_url, stream, prefix)
    other = f"X{stream}"
    with pytest.raises(InvalidConfigError, match="cannot create stream"):
        _run(lambda: _init_close(NatsBackend(nats_url, stream=other, prefix=prefix)))


def test_fast_job_raises_the_limit_before_and_after_init(
    nats_url: str, stream: str, prefix: str
) -> None:
    backend = NatsBackend(
        nats_url, stream=stream, prefix=prefix, duplicate_window_ms=60_000, history_size=20
    )
    backend.check_job(JobLimits("every-second", 1000, 0, 10_000, 20))

    async def body() -> tuple[int, int]:
        await backend.init()  # creates the stream with the limit the known job needs
        first = int((await _config(nats_url, stream))["max_msgs_per_subject"])
        backend.check_job(JobLimits("every-100ms", 100, 0, 1_000, 20))
        await backend.prepare_job("every-100ms", 20)
        second = int((await _config(nats_url, stream))["max_msgs_per_subject"])
        await backend.close()
        return first, second

    first, second = _run(body)
    assert first == claims_needed(60_000, 1000)
    assert second == claims_needed(60_000, 100)


def test_prepare_job_refuses_a_bigger_history(nats_url: str) -> None:
    backend = NatsBackend(nats_url, history_size=10)

    async def body() -> None:
        await backend.init()
        try:
            await backend.prepare_job("big", 11)
        finally:
            await backend.close()

    with pytest.raises(UnsupportedError):
        _run(body)


# The store format marker ----------------------------------------------------------


def test_format_marker_is_written_once(nats_url: str, stream: str, prefix: str) -> None:
    async def body() -> list[int]:
        for _ in range(3):
            await _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix))
        nc = await nats.connect(nats_url)
        try:
            js = nc.jetstream()
            msg = await js.get_last_msg(stream, f"{prefix}_format")
            assert msg.data is not None
            assert json.loads(msg.data)["format"] == 1
            info = await js.stream_info(stream, subjects_filter=f"{prefix}_format")
            return list((info.state.subjects or {}).values())
        finally:
            await nc.close()

    assert _run(body) == [1]


@pytest.mark.parametrize(
    "marker",
    [b'{"format": 2}', b"not json", b'{"format": 1e400}', b'{"format": 1.5}', b'{"format": 0}'],
)
def test_newer_or_unreadable_format_is_refused(
    nats_url: str, stream: str, prefix: str, marker: bytes
) -> None:
    """A newer format is ``ANARCHON_STORE_FORMAT``; a marker anarchon did not write is foreign data."""

    async def body() -> None:
        await _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix))
        nc = await nats.connect(nats_url)
        try:
            await nc.jetstream().publish(f"{prefix}_format", marker)
        finally:
            await nc.close()
        await _init_close(NatsBackend(nats_url, stream=stream, prefix=prefix))

    with pytest.raises((StoreFormatError, ForeignDataError)) as caught:
        _run(body)
    if marker == b'{"format": 2}':
        assert caught.value.code == "ANARCHON_STORE_FORMAT"
    else:
        assert isinstance(caught.value, ForeignDataError), caught.value
        assert caught.value.key == f"{prefix}_format"


# Connections ----------------------------------------------------------------------


def test_unreachable_server_is_unavailable_with_the_password_hidden() -> None:
    port = free_port()
    url = f"nats://admin:hunter2@127.0.0.1:{port}?stream=X"
    backend = resolve_backend(url)
    started = time.monotonic()
    with pytest.raises(BackendUnavailableError) as caught:
        _run(backend.init)
    assert time.monotonic() - started < 10
    error = caught.value
    assert error.code == "ANARCHON_BACKEND_UNAVAILABLE"
    assert "hunter2" not in str(error)
    assert f"nats://admin:***@127.0.0.1:{port}" in str(error)
    assert isinstance(error.__cause__, OSError), repr(error.__cause__)


def test_users_connection_is_used_and_never_closed(nats_url: str) -> None:
    async def body() -> None:
        nc = await nats.connect(nats_url)
        try:
            backend = NatsBackend(connection=nc)
            await backend.init()
            slot = _slot()
            assert await backend.claim(ClaimInput("own-conn", slot, _token(), "a"))
            await backend.close()
            assert nc.is_connected, "the user's connection must stay open"
            await backend.init()  # usable again
            assert not await backend.claim(ClaimInput("own-conn", slot, _token(), "b"))
            await backend.close()
            assert nc.is_connected
        finally:
            await nc.close()

    _run(body)


def test_a_closed_users_connection_is_unavailable(nats_url: str) -> None:
    async def body() -> None:
        nc = await nats.connect(nats_url)
        await nc.close()
        await NatsBackend(connection=nc).init()

    with pytest.raises(BackendUnavailableError):
        _run(body)


def test_server_without_jetstream_is_unavailable(tmp_path: Any) -> None:
    port = free_port()
    plain = NatsServer(
        find_nats_server(),
        port,
        "",
        str(tmp_path / "plain.log"),
        ["-a", "127.0.0.1", "-p", str(port)],
        name="plain",
    )
    plain.start()
    try:
        with pytest.raises(BackendUnavailableError, match="JetStream"):
            _run(NatsBackend(plain.url).init, timeout=60)
    finally:
        plain.kill()


def test_outage_surfaces_as_unavailable_and_recovers(tmp_path: Any) -> None:
    """Kill the server under a running backend: calls raise, then work again after restart."""
    server, root = start_server(str(tmp_path))
    backend = NatsBackend(server.url, request_timeout=0.5)

    async def body() -> None:
        await backend.init()
        first = ClaimInput("outage", _slot(), _token(), "a")
        assert await backend.claim(first)
        await asyncio.get_running_loop().run_in_executor(None, server.kill)
        for call in (
            lambda: backend.claim(ClaimInput("outage", _slot() + 1000, _token(), "a")),
            lambda: backend.save_result(
                "outage", StoredResult(first.slot, first.token, "a", "ok"), 1000
            ),
            lambda: backend.history("outage", 10),
            lambda: backend.claim_many(
                [ClaimInput("outage", _slot() + 1000 * i, _token(), "a") for i in range(2, 5)]
            ),
            lambda: backend.save_results(
                [ResultWrite("outage", StoredResult(first.slot, first.token, "a", "ok"))] * 2
            ),
            backend.now_ms,
        ):
            with pytest.raises(BackendUnavailableError) as caught:
                await call()
            assert backend.is_transient(caught.value)
        await asyncio.get_running_loop().run_in_executor(None, server.start)
        deadline = time.monotonic() + 20
        while True:  # the client reconnects by itself; the scheduler would retry like this
            try:
                assert await backend.claim(first), "the claim survived the restart"
                break
            except BackendUnavailableError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        assert not await backend.claim(ClaimInput("outage", first.slot, _token(), "b"))
        await backend.close()

    try:
        _run(body)
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)


# Claims ------------------------------------------------------------------------------


def test_claim_answers_across_connections(nats_url: str, prefix: str, stream: str) -> None:
    async def body() -> None:
        a = NatsBackend(nats_url, stream=stream, prefix=prefix)
        b = NatsBackend(nats_url, stream=stream, prefix=prefix)
        await a.init()
        await b.init()
        slot = _slot()
        mine, theirs = ClaimInput("x", slot, _token(), "a"), ClaimInput("x", slot, _token(), "b")
        answers = await asyncio.gather(a.claim(mine), b.claim(theirs))
        assert sorted(answers) == [False, True]
        winner, loser = (a, mine), (b, theirs)
        if answers[1]:
            winner, loser = (b, theirs), (a, mine)
        assert await winner[0].claim(winner[1]), "retried by the backend that stored it"
        # Another backend cannot know the claim is its own: false (never a second run).
        assert not await loser[0].claim(winner[1])
        assert not await winner[0].claim(loser[1])
        await a.close()
        await b.close()

    _run(body)


def test_two_prefixes_on_one_stream_never_share_a_claim(nats_url: str, stream: str) -> None:
    """Message ids are per stream: the same job and slot under two prefixes are two claims."""
    tag = uuid.uuid4().hex[:8]

    async def body() -> list[bool]:
        apps = [
            NatsBackend(nats_url, stream=stream, prefix=f"a{tag}."),
            NatsBackend(nats_url, stream=stream, prefix=f"b{tag}.cron."),
        ]
        slot = _slot()
        answers = []
        for i, app in enumerate(apps):
            app.check_job(JobLimits("report", 60_000, 2_000, 60_000, 1000))
            await app.init()
            answers.append(await app.claim(ClaimInput("report", slot, _token(), f"app{i}")))
            answers.append(await app.claim(ClaimInput("report", slot, _token(), f"other{i}")))
        config = await _config(nats_url, stream)
        assert config["subjects"] == [f"a{tag}.>", f"b{tag}.cron.>"]
        for app in apps:
            await app.close()
        return answers

    assert _run(body) == [True, False, True, False]


def test_message_ids(nats_url: str, stream: str) -> None:
    """``<job>:<slot>`` with the default prefix, ``<prefix><job>:<slot>`` with another."""
    job, slot, other = f"ids-{uuid.uuid4().hex[:8]}", _slot(), f"p{uuid.uuid4().hex[:8]}."

    async def body() -> list[str]:
        ids = []
        for backend, stream_name in (
            (NatsBackend(nats_url), "CRON"),
            (NatsBackend(nats_url, stream=stream, prefix=other), stream),
        ):
            await backend.init()
            assert await backend.claim(ClaimInput(job, slot, _token(), "a"))
            await backend.close()
            nc = await nats.connect(nats_url)
            msg = await nc.jetstream().get_last_msg(stream_name, f"{backend.prefix}{job}.claims")
            await nc.close()
            ids.append((msg.headers or {}).get("Nats-Msg-Id", ""))
        return ids

    assert _run(body) == [f"{job}:{slot}", f"{other}{job}:{slot}"]


def lose_answers(backend: NatsBackend, claims: list[ClaimInput]) -> None:
    """Put ``backend`` in the state of having published ``claims`` without hearing back.

    White box: a lost answer cannot be produced on demand on a healthy
    loopback connection (``test_a_batch_retried_after_the_server_died_answers_the_same``
    produces real ones by killing the server mid-batch).
    """
    for claim in claims:
        _subject, _payload, headers = backend._claims.request(claim)
        assert headers is not None
        backend._claims.unsure[headers["Nats-Msg-Id"]] = claim.token


def test_claim_whose_message_is_gone_is_not_run(nats_url: str, stream: str, prefix: str) -> None:
    """The id is remembered but the message was purged.

    The backend that stored the claim knows it is its own: its retry is true.
    A claim whose answer was lost can only be proven by reading it back; gone,
    no one can prove it, and no one runs it.
    """

    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        await backend.init()
        first = ClaimInput("purged", _slot(), _token(), "a")
        assert await backend.claim(first)
        lost = ClaimInput("purged", first.slot + 1000, _token(), "a")
        elsewhere = NatsBackend(nats_url, stream=stream, prefix=prefix)
        assert await elsewhere.claim(lost)  # stored, but the answer reached someone else
        await elsewhere.close()
        lose_answers(backend, [lost])
        nc = await nats.connect(nats_url)
        await nc.jetstream().purge_stream(stream, subject=f"{prefix}purged.claims")
        await nc.close()
        assert await backend.claim(first)
        assert not await backend.claim(ClaimInput("purged", first.slot, _token(), "b"))
        assert await backend.claim_many([first, first]) == [True, True]
        assert not await backend.claim(lost)
        assert not await backend.claim(ClaimInput("purged", lost.slot, _token(), "b"))
        await backend.close()

    _run(body)


def test_history_reads_more_than_one_batch_and_caps_at_the_jobs_size(
    nats_url: str, stream: str, prefix: str
) -> None:
    """1,400 messages on a job's subjects (two pull batches); a job's own history_size caps the view."""
    runs = 700

    async def body() -> tuple[int, int, list[int]]:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        await backend.init()
        base = _slot() - runs * 1000
        for i in range(runs):
            slot = base + i * 1000
            claim = ClaimInput("busy", slot, _token(), f"i{i % 3}")
            assert await backend.claim(claim)
            result = StoredResult(slot, claim.token, claim.instance_id, "ok", slot, slot + 5)
            await backend.save_result("busy", result, 1000)
        everything = await backend.history("busy", 5000)
        await backend.prepare_job("busy", 25)  # this job asks for 25 runs of history
        capped = await backend.history("busy", 5000)
        await backend.close()
        return len(everything), len(capped), [r.slot for r in capped]

    total, capped, slots = _run(body)
    assert total == runs
    assert capped == 25
    assert slots == sorted(slots, reverse=True)


def test_duplicate_window_is_how_long_a_claim_is_remembered(
    nats_url: str, stream: str, prefix: str
) -> None:
    """Past the window the same slot can be claimed again: why jitter + max_late must stay below it."""

    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix, duplicate_window_ms=500)
        await backend.init()
        slot = _slot()
        assert await backend.claim(ClaimInput("window", slot, _token(), "a"))
        assert not await backend.claim(ClaimInput("window", slot, _token(), "b"))
        await asyncio.sleep(1.0)
        assert await backend.claim(ClaimInput("window", slot, _token(), "c"))
        await backend.close()

    _run(body)


# The scheduler on NATS ---------------------------------------------------------------


def test_scheduler_runs_jobs_and_manual_runs(nats_url: str, stream: str, prefix: str) -> None:
    async def body() -> None:
        ran: list[int] = []
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        scheduler = Scheduler(backend, instance_id="solo")

        async def tick(ctx: RunContext) -> None:
            ran.append(ctx.slot)
            if len(ran) == 2:
                raise RuntimeError("second run fails")

        scheduler.every("tick", "200ms", tick, jitter=0)
        async with scheduler:
            await asyncio.sleep(1.5)
            manual = await scheduler.run_now("tick")
        records = await scheduler.history("tick", 100)
        assert manual.manual
        assert manual.status in ("ok", "error")
        by_slot = {r.slot: r for r in records if not r.manual}
        assert set(ran) - {manual.slot} <= set(by_slot) | {manual.slot}
        assert len([r for r in records if r.manual]) == 1
        assert {r.status for r in by_slot.values()} <= {"ok", "error", "running"}
        assert any(r.status == "error" and "second run fails" in (r.error or "") for r in records)
        assert (await scheduler.last_run("tick")) is not None
        await backend.close()

    _run(body)


def test_scheduler_with_a_url_closes_its_backend(nats_url: str, stream: str, prefix: str) -> None:
    async def body() -> None:
        scheduler = Scheduler(f"{nats_url}?stream={stream}&prefix={prefix}", instance_id="u")
        scheduler.every("url-job", "1h", lambda ctx: None, jitter=0)
        async with scheduler:
            backend = scheduler.backend
            assert isinstance(backend, NatsBackend)
            nc = backend._nc
            assert isinstance(nc, Client)
            assert nc.is_connected
        assert nc.is_closed

    _run(body)
