"""The NATS store clock: ``now_ms()`` is the time JetStream stamps on a stored message."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats
import pytest
from anarchon import RunContext, Scheduler
from anarchon.clock import SkewedClock
from anarchon_nats import NatsBackend
from anarchon_nats._clock import parse_stamp_ms

T = TypeVar("T")


def _run(body: Callable[[], Awaitable[T]], timeout: float = 60) -> T:
    async def main() -> T:
        return await asyncio.wait_for(body(), timeout)

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1970-01-01T00:00:00Z", 0.0),
        ("1970-01-01T00:00:01.5Z", 1500.0),
        ("2026-12-01T10:16:08.456492642Z", 1796120168456.492642),
        ("2026-12-01T12:16:08.456Z", 1796127368456.0),
        ("2026-12-01T12:16:08.456+02:00", 1796120168456.0),
        ("2026-12-01T05:16:08.456-05:00", 1796120168456.0),
    ],
)
def test_stamps_parse_to_ms(text: str, ms: float) -> None:
    assert parse_stamp_ms(text) == pytest.approx(ms, abs=1e-3)


@pytest.mark.parametrize("text", ["", "yesterday", "2026-12-01T10:16:08", "2026-12-01 x"])
def test_other_text_is_not_a_stamp(text: str) -> None:
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_stamp_ms(text)


def test_now_ms_is_the_servers_clock(nats_url: str, stream: str, prefix: str) -> None:
    """The server runs on this machine: its clock is ours, to within a few ms.

    Each reading is one empty message on ``<prefix>_clock``; job history never
    sees it.
    """

    async def body() -> None:
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        readings: list[tuple[float, int, float]] = []
        try:
            for _ in range(5):
                before = time.time() * 1000
                now = await backend.now_ms()
                after = time.time() * 1000
                readings.append((before, now, after))
            assert await backend.history("_clock", 10) == []
        finally:
            await backend.close()
        for before, now, after in readings:
            assert before - 5 <= now <= after, (before, now, after)  # never ahead
        stamps = [now for _before, now, _after in readings]
        assert stamps == sorted(stamps)
        nc = await nats.connect(nats_url)
        try:
            info = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=5)
            state = json.loads(info.data)["state"]
            assert state["messages"] == 1 + 5  # the format marker and five clock messages
        finally:
            await nc.close()

    _run(body)


@pytest.mark.parametrize("skew_ms", [15_000, -15_000])
def test_a_skewed_instance_runs_on_the_servers_time(
    nats_url: str, stream: str, prefix: str, skew_ms: int
) -> None:
    """An instance whose clock is 15 s off starts each slot at its slot by the server's clock."""

    async def body() -> list[tuple[int, int]]:
        starts: list[tuple[int, int]] = []
        backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
        scheduler = Scheduler(backend, instance_id="skewed", clock=SkewedClock(skew_ms))

        async def tick(ctx: RunContext) -> None:
            starts.append((ctx.slot, time.time_ns() // 1_000_000))

        scheduler.every("tick", "250ms", tick, jitter=0)
        try:
            async with scheduler:
                await asyncio.sleep(2.0)
        finally:
            await backend.close()
        return starts

    starts = _run(body)
    assert len(starts) >= 5
    late = [started - slot for slot, started in starts]
    assert min(late) >= 0, late  # never early by the server's (this machine's) clock
    assert max(late) < 1_000, late  # and not 15 s late either
