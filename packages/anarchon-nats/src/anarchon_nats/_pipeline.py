"""Many requests on one NATS connection: published back to back, their answers awaited together.

nats-py's ``request()`` waits for one answer per call, so pipelining it needs
one asyncio task per request. :class:`Pipeline` instead keeps one wildcard
subscription per connection (``<inbox>.>``), publishes a whole chunk of
requests with replies ``<inbox>.<batch>.<index>`` and waits once for the
chunk: one future per chunk, not per request. The batch members of
:class:`~anarchon_nats.NatsBackend` (``claim_many``, ``save_results``) use it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from anarchon_nats._frames import Request, write_frames

__all__ = ["BATCH_CHUNK", "Pipeline", "Request"]

log = logging.getLogger("anarchon.nats")

BATCH_CHUNK = 500
"""Items per pipelined round of ``claim_many`` / ``save_results``: requests in flight at once."""


class _Batch:
    """The answers of one chunk of requests, by index."""

    __slots__ = ("answers", "done", "left")

    def __init__(self, size: int, done: asyncio.Future[None]) -> None:
        self.answers: list[Msg | None] = [None] * size
        self.left = size
        self.done = done

    def arrive(self, index: int, msg: Msg) -> None:
        if 0 <= index < len(self.answers) and self.answers[index] is None:
            self.answers[index] = msg
            self.left -= 1
            if self.left == 0:
                self.finish()

    def finish(self) -> None:
        """All answers are in, or time is up."""
        if not self.done.done():
            self.done.set_result(None)


class Pipeline:
    """Requests published back to back on one connection, answered through one subscription."""

    def __init__(self) -> None:
        self._nc: Client | None = None
        self._sub: Subscription | None = None
        self._base = ""
        self._batches: dict[str, _Batch] = {}
        self._counter = 0
        self.heard_at = float("-inf")
        """Monotonic time of the last answer this pipeline received (``-inf``: none yet)."""

    async def _inbox(self, nc: Client) -> str:
        """The reply prefix on ``nc``; subscribes on first use (and after a new connection)."""
        if self._nc is nc and self._sub is not None:
            return self._base
        await self.close()
        base = nc.new_inbox()
        self._sub = await nc.subscribe(f"{base}.>", cb=self._on_reply)
        self._nc, self._base = nc, base
        return base

    async def _on_reply(self, msg: Msg) -> None:
        self.heard_at = time.monotonic()
        _, batch_id, index = msg.subject.rsplit(".", 2)
        batch = self._batches.get(batch_id)
        if batch is not None:
            batch.arrive(int(index), msg)

    async def requests(
        self, nc: Client, requests: Sequence[Request], timeout: float
    ) -> list[Msg | None]:
        """Publish every request, then wait up to ``timeout`` s for all answers.

        Returns the answers in request order; ``None`` where none came in time.
        Driver errors while publishing (connection closed, buffer full) are
        raised as they are, after nothing more is sent.
        """
        if not requests:
            return []
        base = await self._inbox(nc)
        self._counter += 1
        batch_id = str(self._counter)
        loop = asyncio.get_running_loop()
        batch = _Batch(len(requests), loop.create_future())
        self._batches[batch_id] = batch
        reply = f"{base}.{batch_id}."
        timer: asyncio.TimerHandle | None = None
        try:
            if not await write_frames(nc, requests, reply):
                for index, (subject, payload, headers) in enumerate(requests):
                    await nc.publish(subject, payload, reply=f"{reply}{index}", headers=headers)
            # One timer and one future per chunk (no task): time up finishes the batch.
            timer = loop.call_later(timeout, batch.finish)
            await batch.done
        finally:
            if timer is not None:
                timer.cancel()
            del self._batches[batch_id]
        return batch.answers

    async def close(self) -> None:
        """Drop the reply subscription (on a connection that is still open)."""
        sub, nc = self._sub, self._nc
        self._sub, self._nc, self._base = None, None, ""
        if sub is not None and nc is not None and not nc.is_closed:
            try:
                await sub.unsubscribe()
            except Exception as error:  # pragma: no cover - the connection is going away
                log.debug("anarchon: dropping the NATS reply subscription failed: %r", error)
