"""The backend's JetStream stream: created, brought to the backend's settings, format-checked.

:class:`Stream` knows the settings (duplicate window, per-subject limit,
replicas), what each job asks of them (claims kept per window, runs kept),
and whether the stream on the server has been brought to them
(docs/backends/nats.md, "The stream"). The rule of how many runs a job keeps
is :func:`job_history_cap`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from anarchon.backend import DEFAULT_HISTORY_SIZE, STORE_FORMAT
from anarchon.backend.foreign import stored_data, stored_int
from anarchon.errors import (
    BackendUnavailableError,
    InvalidConfigError,
    StoreFormatError,
    UnsupportedError,
)
from nats.aio.client import Client
from nats.js.errors import APIError

from anarchon_nats._config import (
    FORMAT_TOKEN,
    claims_needed,
    new_stream_config,
    plan_stream_update,
)
from anarchon_nats._connection import Connection, dumps
from anarchon_nats._errors import (
    ERR_STREAM_NAME_IN_USE,
    ERR_STREAM_NOT_FOUND,
    ERR_WRONG_LAST_SEQUENCE,
    api_error,
)

__all__ = ["Stream", "job_history_cap"]

log = logging.getLogger("anarchon.nats")

_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_UNLIMITED = 2**62


def job_history_cap(job: str, history_size: int, stream_limit: int) -> int:
    """How many runs ``job`` keeps when it asks for ``history_size`` on a stream keeping ``stream_limit``.

    The stream keeps history per subject for the whole stream, so a job asking
    for more than the stream's limit is refused (``UnsupportedError``). The job
    option's default (1000) is not a request: a job that leaves it alone gets
    the stream-wide limit. ``JobLimits`` cannot tell an explicit 1000 from the
    default, so an explicit 1000 is taken as the default too.
    """
    if history_size > stream_limit and history_size != DEFAULT_HISTORY_SIZE:
        raise UnsupportedError(
            f"job {job!r}: history_size {history_size} is above the stream-wide limit"
            f" {stream_limit}; NATS keeps history per subject for the whole stream:"
            f" use NatsBackend(history_size={history_size})"
        )
    return min(history_size, stream_limit)


class Stream:
    """The stream's settings, what the jobs need of it, and the requests that apply them.

    ``limit`` is the per-subject limit the stream on the server has (as last
    seen); ``reconciled`` tells whether this backend brought the stream to its
    settings since it connected.
    """

    def __init__(
        self,
        connection: Connection,
        *,
        prefix: str,
        duplicate_window_ms: int,
        history_size: int,
        replicas: int | None,
    ) -> None:
        self._connection = connection
        self.name = connection.stream
        self.prefix = prefix
        self.duplicate_window_ms = duplicate_window_ms
        self.history_size = history_size
        self.replicas = replicas
        self.limit = 0
        self.reconciled = False
        self._needs: dict[str, int] = {}
        self._job_history: dict[str, int] = {}

    # What the jobs need ------------------------------------------------------------

    def keep_history(self, job: str, history_size: int) -> None:
        """Record how many runs ``job`` keeps (see :func:`job_history_cap`)."""
        self._job_history[job] = job_history_cap(job, history_size, self.history_size)

    def need_claims(self, job: str, period_ms: int) -> None:
        """Record how many claims of ``job`` the duplicate window spans."""
        self._needs[job] = claims_needed(float(self.duplicate_window_ms), period_ms)

    def history_cap(self, job: str) -> int:
        """How many runs ``job``'s history shows (the stream's limit for a job not seen here)."""
        return self._job_history.get(job, self.history_size)

    def per_subject_limit(self) -> int:
        """The stream's ``max_msgs_per_subject``: ``history_size``, raised for the fastest job."""
        return max([self.history_size, *self._needs.values()])

    # Requests --------------------------------------------------------------------

    async def ensure(self, nc: Client) -> None:
        """Create the stream if missing; bring an existing one to ours (docs/backends/nats.md).

        An existing stream is changed only by a backend that knows its jobs
        (``check_job`` or ``prepare_job`` ran): a process that only reads
        history, such as ``anarchon history``, knows no job periods and must not
        lower a limit a fast job of the fleet needs. Such a backend reconciles
        the stream on its first ``prepare_job`` instead.
        """
        api = self._connection.api
        await api(nc, "INFO")  # JetStream is enabled for this account
        self.reconciled = False
        limit = self.per_subject_limit()
        info = await self._info(nc)
        if info is None:
            config = new_stream_config(
                self.name, self.prefix, self.duplicate_window_ms, limit, self.replicas
            )
            try:
                await api(nc, f"STREAM.CREATE.{self.name}", config)
                self.limit = limit
                self.reconciled = True
                log.info("anarchon: created JetStream stream %s (%s>)", self.name, self.prefix)
                return
            except APIError as error:
                if error.err_code != ERR_STREAM_NAME_IN_USE:
                    raise InvalidConfigError(
                        f"cannot create stream {self.name!r} on {self._connection.shown}:"
                        f" {error.description}"
                    ) from error
            info = await self._info(nc)  # another instance created it meanwhile
            if info is None:  # pragma: no cover - deleted again in between
                raise BackendUnavailableError(f"stream {self.name!r} vanished while creating it")
        if self._job_history:
            await self._update(nc, info["config"], limit)
            self.reconciled = True
        else:
            current = int(info["config"].get("max_msgs_per_subject") or -1)
            self.limit = current if current > 0 else _UNLIMITED

    async def _info(self, nc: Client) -> dict[str, Any] | None:
        try:
            return await self._connection.api(nc, f"STREAM.INFO.{self.name}")
        except APIError as error:
            if error.err_code == ERR_STREAM_NOT_FOUND:
                return None
            raise

    async def _update(self, nc: Client, current: dict[str, Any], limit: int) -> None:
        plan = plan_stream_update(
            current,
            prefix=self.prefix,
            window_ms=self.duplicate_window_ms,
            per_subject=limit,
            replicas=self.replicas,
        )
        if plan.changes:
            try:
                await self._connection.api(nc, f"STREAM.UPDATE.{self.name}", plan.config)
            except APIError as error:
                raise InvalidConfigError(
                    f"cannot update stream {self.name!r} on {self._connection.shown}"
                    f" ({'; '.join(plan.changes)}): {error.description}"
                ) from error
            log.info(
                "anarchon: updated JetStream stream %s: %s", self.name, "; ".join(plan.changes)
            )
        self.limit = int(plan.config.get("max_msgs_per_subject") or limit)

    async def reconcile(self, nc: Client, raise_only: bool) -> None:
        """Apply the stream rules now (``raise_only``: just raise a too small per-subject limit).

        The caller holds the init lock.
        """
        needed = self.per_subject_limit()
        if raise_only and self.limit >= needed:
            return
        info = await self._info(nc)
        if info is None:
            raise BackendUnavailableError(
                f"stream {self.name!r} is gone from {self._connection.shown}"
            )
        current = int(info["config"].get("max_msgs_per_subject") or -1)
        if raise_only and (current == -1 or current >= needed):
            self.limit = _UNLIMITED if current == -1 else current
            return
        await self._update(nc, info["config"], needed)
        self.reconciled = True

    async def check_format(self, nc: Client) -> None:
        """Refuse a newer store format; write ours if there is none.

        A marker that is not ``{"format": <n>}`` is ``ForeignDataError`` naming its subject.
        """
        connection = self._connection
        subject = f"{self.prefix}{FORMAT_TOKEN}"
        for _ in range(3):
            found_message = await connection.get_message(nc, {"last_by_subj": subject})
            if found_message is not None:
                data = found_message.data
                with stored_data(subject, f"a store format marker (stream {self.name!r})"):
                    found = stored_int(json.loads(data)["format"])  # refuses 1e400, 1.5, true
                    if found < 1:
                        raise ValueError(f"no store format is {found}")
                if found > STORE_FORMAT:
                    raise StoreFormatError(
                        f"stream {self.name!r} holds store format {found}; this version of"
                        f" anarchon-nats reads format {STORE_FORMAT} at most: upgrade anarchon-nats"
                    )
                return
            marker = dumps({"format": STORE_FORMAT, "writer": "anarchon-nats"})
            body = await connection.request(
                nc, subject, marker, "format marker", headers={_EXPECTED_LAST_SUBJECT_SEQ: "0"}
            )
            problem = api_error(body)
            if problem is None:
                return
            if problem.err_code != ERR_WRONG_LAST_SEQUENCE:  # else: written by another instance
                if problem.code == 503:
                    raise BackendUnavailableError(
                        f"JetStream at {connection.shown} is unavailable: {problem.description}"
                    ) from problem
                raise problem
        raise StoreFormatError(f"could not read or write the store format marker on {subject}")
