"""A cancelled ``history()`` ends cancelled, even when the connection closes before it resumes.

nats-py's ``Subscription.next_msg`` turns the ``CancelledError`` it receives into
``ConnectionClosedError`` when the connection is closed by then. That is what
happens to ``anarchon status`` when one job's status fails: the CLI closes the
backend while the other jobs' history reads wait for a message, and
``asyncio.run`` then cancels them. A cancelled task that ends with an
exception instead is one nobody retrieves: "Task exception was never
retrieved" when it is collected.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from typing import Any

import pytest
from anarchon.types import ClaimInput
from anarchon_nats import NatsBackend

if sys.version_info < (3, 11):  # Task.cancelling() tells a cancellation apart
    pytest.skip("needs asyncio.Task.cancelling() (Python 3.11)", allow_module_level=True)


def _waiting_in_next_msg(backend: NatsBackend) -> bool:
    """True while a subscription of the backend's connection has a ``next_msg`` call pending."""
    nc = backend._nc
    return nc is not None and any(sub._pending_next_msgs_calls for sub in nc._subs.values())


async def test_history_cancelled_while_the_connection_closes_ends_cancelled(
    nats_url: str, stream: str, prefix: str
) -> None:
    loop = asyncio.get_running_loop()
    # Garbage left by earlier tests on this worker (an unclosed client of another
    # store's test) is collected now, so the handler below sees only this test's.
    gc.collect()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    backend = NatsBackend(nats_url, stream=stream, prefix=prefix)
    try:
        await backend.init()
        await backend.prepare_job("job", 100)
        for slot in range(3):
            assert await backend.claim(ClaimInput("job", slot * 1000, f"t{slot}", "i"))
        nc = backend._nc
        assert nc is not None

        reading = loop.create_task(backend.history("job", 10))
        # The read publishes its pull request and waits for the server's answer in
        # next_msg: the answer needs a round trip, so it is seen waiting there.
        deadline = time.monotonic() + 10
        while not _waiting_in_next_msg(backend):
            assert not reading.done(), reading
            assert time.monotonic() < deadline, "history() never waited in next_msg"
            await asyncio.sleep(0)
        # No await in between: the read is suspended in next_msg when it is cancelled,
        # and the connection is closed (synchronously, at the start of close()) before
        # the read resumes.
        reading.cancel()
        closing = loop.create_task(nc.close())
        await asyncio.wait([reading, closing])

        ended_cancelled = reading.cancelled()
        # As a caller that cancels and forgets the task: nothing may be reported when it
        # goes (without the fix: "Task exception was never retrieved").
        del reading
        gc.collect()
        assert [context["message"] for context in reported] == []
        assert ended_cancelled
    finally:
        loop.set_exception_handler(previous)
        await backend.close()
