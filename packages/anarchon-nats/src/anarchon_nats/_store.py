"""The one owner of a NATS backend's state: its connection, its stream and whether it is ready.

:class:`Store` starts the backend (connect, create or update the stream,
check the store format) once, under one lock, and hands the connected client
to the backend's parts (claims, history, fleet, clock); it also names each
job's subjects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import nats.errors
from anarchon.backend import InitOnce
from anarchon.errors import BackendUnavailableError
from nats.aio.client import Client

from anarchon_nats._config import check_job_name
from anarchon_nats._connection import Connection
from anarchon_nats._durability import check_server, report
from anarchon_nats._prefixes import check_prefix
from anarchon_nats._stream import Stream

__all__ = ["Store"]

log = logging.getLogger("anarchon.nats")

_INIT_RETRY_S = 15.0
"""How long ``init()`` waits for JetStream to become ready (a cluster electing leaders)."""
_NO_JETSTREAM_S = 2.0
"""How long ``init()`` waits when nothing answers JetStream requests at all (not enabled)."""


class Store:
    """The connection, the stream and the init state of one backend.

    ``id_prefix`` goes in front of ``<job>:<slot>`` in claim message ids.
    """

    def __init__(
        self, connection: Connection, stream: Stream, *, id_prefix: str, durability: str = "fast"
    ) -> None:
        self.connection = connection
        self.durability = durability
        self.stream = stream
        self.prefix = stream.prefix
        self.id_prefix = id_prefix
        self._ready = False
        self._init = InitOnce()
        self._subjects: dict[str, tuple[str, str]] = {}

    # Starting ------------------------------------------------------------------

    async def init(self) -> None:
        """Connect, create or update the stream and check the store format. Idempotent."""
        await self._init.run(self._connected, self._start)

    def _connected(self) -> bool:
        nc = self.connection.nc
        return self._ready and nc is not None and not nc.is_closed

    async def _start(self) -> None:
        self._ready = False
        opened = await self.connection.open()
        try:
            check_server(opened, self.durability, self.connection.shown)
            with self.connection.driver_errors("start"):
                await self._retrying(lambda: self.stream.ensure(opened))
                await self._retrying(lambda: self.stream.check_format(opened))
                await self._retrying(
                    lambda: check_prefix(
                        opened,
                        self.stream.name,
                        self.prefix,
                        self.stream.replicas or 1,
                        self.connection.shown,
                    )
                )
                info = await self.connection.api(opened, f"STREAM.INFO.{self.stream.name}")
                report(info, self.durability, self.stream.name, self.connection.shown)
        except BaseException:
            await self.close()
            raise
        self._ready = True

    async def _retrying(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run an ``init()`` step, waiting out a JetStream that is not ready yet (a cluster)."""
        started = time.monotonic()
        delay = 0.05
        while True:
            try:
                return await step()
            except BackendUnavailableError as error:
                cause = error.__cause__
                no_js = isinstance(cause, nats.errors.NoRespondersError)
                waited = time.monotonic() + delay - started
                if waited > (_NO_JETSTREAM_S if no_js else _INIT_RETRY_S):
                    if no_js:
                        raise BackendUnavailableError(
                            f"JetStream does not answer at {self.connection.shown}: is it"
                            " enabled (nats-server -js) and does the cluster have a leader?"
                        ) from cause
                    raise
                log.debug("anarchon: JetStream not ready at %s: %s", self.connection.shown, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def client(self) -> Client:
        """The connected client, after ``init()`` if the backend is not ready (or was closed)."""
        connection = self.connection
        nc = connection.nc
        if nc is not None and self._ready and not nc.is_closed:
            return nc
        if nc is None or not self._ready:
            await self.init()
        else:  # closed
            if not connection.owned:
                raise BackendUnavailableError(
                    "the NATS connection passed as connection= has been closed"
                )
            self._ready = False
            await self.init()
        nc = connection.nc
        assert nc is not None
        return nc

    async def close(self) -> None:
        """Close the connection if the backend opened it; the next call starts again."""
        self._ready = False
        await self.connection.close()

    # Jobs ----------------------------------------------------------------------

    def job_subjects(self, job: str) -> tuple[str, str]:
        """``job``'s claims and results subjects (its name is checked on first use)."""
        subjects = self._subjects.get(job)
        if subjects is None:
            check_job_name(job)
            subjects = (f"{self.prefix}{job}.claims", f"{self.prefix}{job}.results")
            self._subjects[job] = subjects
        return subjects

    async def prepare_job(self, job: str, history_size: int) -> None:
        """Check the job's name and history size; apply the stream rules if not done yet."""
        self.job_subjects(job)
        self.stream.keep_history(job, history_size)
        await self.client()
        with self.connection.driver_errors("stream update"):
            if not self.stream.reconciled:
                await self._reconcile(raise_only=False)
            elif self.stream.per_subject_limit() > self.stream.limit:
                await self._reconcile(raise_only=True)

    async def _reconcile(self, raise_only: bool) -> None:
        nc = await self.client()
        async with self._init.lock():
            await self.stream.reconcile(nc, raise_only)
