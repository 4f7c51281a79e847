"""Errors of ``NatsBackend``: what is transient, foreign data, and driver errors as ``BackendError``."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats
import nats.errors
import pytest
from anarchon.errors import (
    BackendError,
    BackendUnavailableError,
    ForeignDataError,
    InvalidConfigError,
    StoreFormatError,
)
from anarchon.types import ClaimInput, StoredResult
from anarchon_nats import NatsBackend
from nats.js.errors import APIError, BadRequestError, ServiceUnavailableError
from test_nats_server import lose_answers

T = TypeVar("T")


def _run(body: Callable[[], Awaitable[T]], timeout: float = 60) -> T:
    async def main() -> T:
        return await asyncio.wait_for(body(), timeout)

    return asyncio.run(main())


def _slot() -> int:
    return (time.time_ns() // 1_000_000 // 1000) * 1000 - 10_000


# What is transient --------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        BackendUnavailableError("down"),
        nats.errors.ConnectionClosedError(),
        nats.errors.ConnectionReconnectingError(),
        nats.errors.StaleConnectionError(),
        nats.errors.TimeoutError(),
        nats.errors.NoRespondersError(),
        nats.errors.NoServersError(),
        nats.errors.OutboundBufferLimitError(),
        nats.errors.FlushTimeoutError(),
        asyncio.TimeoutError(),
        ConnectionResetError(),
        ServiceUnavailableError(code=503, description="JetStream system temporarily unavailable"),
        APIError(code=503, err_code=10008, description="JetStream cluster not available"),
    ],
)
def test_connection_loss_timeouts_and_503_are_transient(error: BaseException) -> None:
    assert NatsBackend().is_transient(error)


@pytest.mark.parametrize(
    "error",
    [
        BackendError("refused"),
        ForeignDataError("junk", key="cron.x.claims"),
        InvalidConfigError("bad"),
        StoreFormatError("newer"),
        BadRequestError(code=400, err_code=10054, description="message size exceeds maximum"),
        APIError(code=404, err_code=10059, description="stream not found"),
        nats.errors.BadSubjectError(),
        nats.errors.MaxPayloadError(),
        ValueError("a bug"),
    ],
)
def test_everything_else_reaches_the_user(error: BaseException) -> None:
    assert not NatsBackend().is_transient(error)


# Foreign data ---------------------------------------------------------------------


async def _publish(url: str, subject: str, data: bytes, msg_id: str | None = None) -> None:
    nc = await nats.connect(url)
    try:
        headers = {"Nats-Msg-Id": msg_id} if msg_id else None
        await nc.jetstream().publish(subject, data, headers=headers)
    finally:
        await nc.close()


def test_a_foreign_message_holding_a_claim_id_is_named(
    nats_url: str, stream: str, prefix: str
) -> None:
    """Someone else published with anarchon's message id: on the claims subject or another.

    A duplicate the backend never published is another's claim (false, not
    read). Where it may be its own (a publish whose answer was lost) it is read
    back, and foreign data there is named.
    """

    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        await backend.init()
        slot = _slot()
        claims = f"{prefix}junk.claims"
        elsewhere = f"{prefix}not-anarchon"
        try:
            for n in range(3):
                await _publish(nats_url, claims, b"not json", msg_id=f"{prefix}junk:{slot + n}")
            await _publish(nats_url, elsewhere, b"{}", msg_id=f"{prefix}junk:{slot + 10}")
            assert not await NatsBackend(nats_url, stream=stream, prefix=prefix).claim(
                ClaimInput("junk", slot + 2, "t", "i")
            )
            mine = [ClaimInput("junk", slot + n, "t", "i") for n in (0, 1, 10)]
            lose_answers(backend, mine)
            for call in (
                lambda: backend.claim(mine[0]),
                lambda: backend.claim_many([ClaimInput("junk", slot + 5, "t", "i"), mine[1]]),
            ):
                with pytest.raises(ForeignDataError, match="not an anarchon claim") as caught:
                    await call()
                assert caught.value.key == claims
                assert caught.value.code == "ANARCHON_FOREIGN_DATA"
            with pytest.raises(ForeignDataError, match="did not write") as other:
                await backend.claim_many([mine[2]] * 2)
            assert other.value.key == elsewhere
        finally:
            await backend.close()

    _run(body)


def test_a_foreign_message_in_history_is_skipped_and_named(
    nats_url: str, stream: str, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A message that is not a record: history keeps the readable ones and reports it once."""
    caplog.set_level(logging.WARNING)

    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        slot = _slot()
        try:
            assert await backend.claim(ClaimInput("hist", slot, "t", "i"))
            await backend.save_result("hist", StoredResult(slot, "t", "i", "ok"), 1000)
            assert len(await backend.history("hist", 10)) == 1
            await _publish(nats_url, f"{prefix}hist.results", b"[1, 2]")
            for _ in range(2):
                assert [r.status for r in await backend.history("hist", 10)] == ["ok"]
        finally:
            await backend.close()

    _run(body)
    reports = [
        r for r in caplog.records if r.__dict__.get("foreign_key") == f"{prefix}hist.results"
    ]
    assert len(reports) == 1
    assert "ANARCHON_FOREIGN_DATA" in reports[0].getMessage()
    assert "a result record" in reports[0].getMessage()


# Driver errors ----------------------------------------------------------------------


def test_a_refused_publish_is_a_backend_error_with_the_password_hidden(nats_url: str) -> None:
    """The stream refuses messages this large (err 10054): a coded error naming the URL."""
    tag = uuid.uuid4().hex[:8]
    stream, prefix = f"SMALL{tag.upper()}", f"small{tag}."
    host = nats_url.removeprefix("nats://")
    url = f"nats://cron:hunter2@{host}"

    async def body() -> None:
        nc = await nats.connect(nats_url)
        try:
            await nc.jetstream().add_stream(name=stream, subjects=[f"{prefix}>"], max_msg_size=16)
        finally:
            await nc.close()
        backend = NatsBackend(url, stream=stream, prefix=prefix)
        try:
            with pytest.raises(BackendError) as caught:
                await backend.init()  # the format marker is larger than 16 bytes
        finally:
            await backend.close()
        error = caught.value
        assert error.code == "ANARCHON_BACKEND_ERROR"
        assert "hunter2" not in str(error)
        assert host in str(error)
        assert "10054" in str(error)
        assert isinstance(error.__cause__, APIError)
        assert not backend.is_transient(error)

    _run(body)


def test_a_refused_claim_is_a_backend_error(nats_url: str, stream: str, prefix: str) -> None:
    """The stream's max_msg_size is lowered under a running backend: claims are refused for good."""

    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        await backend.init()
        nc = await nats.connect(nats_url)
        try:
            js = nc.jetstream()
            info = await js.stream_info(stream)
            info.config.max_msg_size = 16
            await js.update_stream(info.config)
        finally:
            await nc.close()
        slot = _slot()
        try:
            for call in (
                lambda: backend.claim(ClaimInput("big", slot, "t", "i")),
                lambda: backend.claim_many(
                    [ClaimInput("big", slot + i, "t", "i") for i in range(3)]
                ),
                lambda: backend.save_result("big", StoredResult(slot, "t", "i", "ok"), 1000),
            ):
                with pytest.raises(BackendError, match=r"refused the (claim|result)") as caught:
                    await call()
                assert not backend.is_transient(caught.value)
        finally:
            await backend.close()

    _run(body)
