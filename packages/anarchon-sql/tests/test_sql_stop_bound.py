"""``stop()`` fits in a container's grace period: with the store down it returns within
``stop_grace`` plus one call timeout (docs/leases.md, "Stopping").

The store goes down behind a TCP proxy of this test that blackholes: it keeps
every connection open, accepts new ones, and forwards nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from anarchon import RunContext, Scheduler


class BlackholeProxy:
    """A TCP proxy to ``host:port`` in a thread; :meth:`blackhole` stops all forwarding."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self.holes = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        assert self._ready.wait(5), "the proxy did not start"

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if self.holes.is_set():  # swallowed: the peer waits for ever
                    await asyncio.Event().wait()
                writer.write(data)
                await writer.drain()
        writer.close()

    def blackhole(self) -> None:
        self.holes.set()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@pytest.fixture
def pg_proxy(pg_dsn: str) -> Iterator[tuple[BlackholeProxy, str]]:
    parts = urlsplit(pg_dsn)
    assert parts.hostname is not None
    assert parts.port is not None
    proxy = BlackholeProxy(parts.hostname, parts.port)
    netloc = parts.netloc.rsplit(":", 1)[0] + f":{proxy.port}"
    yield proxy, urlunsplit(parts._replace(netloc=netloc))
    proxy.close()


async def test_stop_with_postgres_down_returns_within_grace_plus_one_call(
    pg_proxy: tuple[BlackholeProxy, str],
) -> None:
    proxy, url = pg_proxy
    scheduler = Scheduler(
        f"{url}?table_prefix=stopbound_",
        instance_id="stopper",
        lease="3s",
        heartbeat="1s",
        stop_grace="1s",
    )
    ran: list[int] = []

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    scheduler.every("tick", "500ms", tick, jitter=0)
    await scheduler.start()
    deadline = time.monotonic() + 10
    while not ran:
        assert time.monotonic() < deadline, "nothing ran through the proxy"
        await asyncio.sleep(0.05)
    proxy.blackhole()
    await asyncio.sleep(2.0)  # claims are now retrying through the outage
    t0 = time.monotonic()
    await scheduler.stop()
    took = time.monotonic() - t0
    bound = 1.0 + scheduler.call_timeout_s
    print(f"stop() took {took:.2f} s with the store blackholed (bound {bound:.1f} s)")
    assert took <= bound + 0.5, f"stop() took {took:.2f} s, over {bound} s"
