"""``NatsBackend``: claims by de-duplicated publish on NATS JetStream (docs/backends/nats.md).

A claim publishes the claim record to ``<prefix><job>.claims`` with the header
``Nats-Msg-Id: <job>:<slot>``. Within the stream's duplicate window JetStream
stores only the first message with an id, and the stream (its leader, in a
cluster) orders publishes, so exactly one publisher gets an acknowledgement
that is not a duplicate: that instance wins. A duplicate acknowledgement names
the sequence of the stored message; a backend remembers the claims it stored
and the publishes it got no answer to, so a retried claim (same token) is
still recognised as the winner's (read back only when its answer was lost).

Results go to ``<prefix><job>.results``; history reads both subjects of a job
with a short-lived consumer and merges them with :func:`anarchon.build_history`.
``now_ms()`` is the server's clock: the time JetStream stamps on a message
published to ``<prefix>_clock``. ``claim_many`` and ``save_results`` pipeline
their publishes on the one connection. There are no leases (``runs`` is None).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, ClassVar, NamedTuple

import nats.errors
from anarchon.backend import STORE_FORMAT, Backend
from anarchon.errors import (
    BackendError,
    BackendUnavailableError,
    DedupeWindowError,
    ForeignDataError,
    InvalidConfigError,
    StoreFormatError,
    UnsupportedError,
)
from anarchon.fleet_types import Declaration, JobControl
from anarchon.history import build_history
from anarchon.jobs import DEFAULTS
from anarchon.registry import redact_url
from anarchon.result_json import result_json
from anarchon.types import (
    ClaimInput,
    ClaimRecord,
    JobLimits,
    ResultWrite,
    RunRecord,
    StoredResult,
)
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import APIError

from anarchon_nats import _fleet
from anarchon_nats._clock import CLOCK_TOKEN, parse_stamp_ms
from anarchon_nats._config import (
    FORMAT_TOKEN,
    check_job_name,
    check_prefix,
    check_stream_name,
    claims_needed,
    new_stream_config,
    parse_url,
    plan_stream_update,
)
from anarchon_nats._errors import UNREACHABLE, api_error, is_transient_error
from anarchon_nats._pipeline import Pipeline, Request

__all__ = ["NatsBackend"]

log = logging.getLogger("anarchon.nats")

DEFAULT_SERVERS = "nats://localhost:4222"
DEFAULT_PREFIX = "cron."

_API = "$JS.API"
_MSG_ID = "Nats-Msg-Id"
_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"

# JetStream error codes (nats-server errors.json).
_ERR_NOT_FOUND_MSG = 10037
_ERR_STREAM_NAME_IN_USE = 10058
_ERR_STREAM_NOT_FOUND = 10059
_ERR_WRONG_LAST_SEQUENCE = 10071
_ERR_DUPLICATE_IN_PROCESS = 10158

DEFAULT_PING_INTERVAL_S = 5.0
"""``ping_interval`` of connections the backend opens (nats-py: 120 s), unless given."""
DEFAULT_MAX_OUTSTANDING_PINGS = 2
"""``max_outstanding_pings`` of connections the backend opens, unless given."""
RECONNECT_AFTER_TIMEOUTS = 3
"""Requests in a row without an answer after which the backend forces a reconnect."""

_INIT_RETRY_S = 15.0
"""How long ``init()`` waits for JetStream to become ready (a cluster electing leaders)."""
_NO_JETSTREAM_S = 2.0
"""How long ``init()`` waits when nothing answers JetStream requests at all (not enabled)."""
_HISTORY_BATCH = 1000
_MANY_JOBS = 8
"""``history_many`` of this many jobs or more reads all jobs through one consumer."""
_JOB_HISTORY_DEFAULT = int(DEFAULTS["history_size"])
_UNLIMITED = 2**62
BATCH_CHUNK = 500
MEMORY = 65_536
"""Claims a backend remembers (its own stored claims, and publishes it got no answer to)."""
"""Items per pipelined round of ``claim_many`` / ``save_results``: requests in flight at once."""
_STATUS = "Status"
_STORED_ACK = re.compile(rb'\{"stream":"[^"\\]*","seq":([1-9][0-9]*)\}')
"""A publish acknowledgement of a newly stored message (no duplicate, no error): the hot path."""

_UNREACHABLE = UNREACHABLE
_api_error = api_error


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class _Stored(NamedTuple):
    """A message as ``STREAM.MSG.GET`` returns it."""

    subject: str
    data: bytes
    time: str


def _stored(body: dict[str, Any]) -> _Stored:
    message = body["message"]
    raw = message.get("data")
    return _Stored(
        str(message.get("subject", "")),
        base64.b64decode(raw) if raw else b"",
        str(message.get("time", "")),
    )


class NatsBackend(Backend):
    """Exactly-once claims on NATS JetStream by de-duplicated publish (no leases).

    >>> backend = NatsBackend("nats://localhost:4222", stream="CRON", prefix="cron.")
    >>> backend = NatsBackend.from_url("nats://user:pass@n1:4222,n2:4222?stream=BILLING&replicas=3")

    :param servers: a URL or a list of URLs (credentials in the URL are used);
        ignored when ``connection`` is given.
    :param connection: a connected nats-py client the user owns: used as is and
        never closed by the backend.
    :param stream: the JetStream stream holding claims and results (created on
        ``init()`` if missing, covering ``<prefix>>``).
    :param prefix: subject prefix, tokens ending in ``.``; job ``j`` uses
        ``<prefix>j.claims`` and ``<prefix>j.results``.
    :param duplicate_window_ms: the stream's duplicate window: how long a claim
        is remembered. Every job's ``jitter + max_late`` must be below it.
    :param history_size: the stream's per-subject limit (runs kept per job); it
        is stream-wide, so a job asking for more is refused (a job left at the
        option's default, 1000, gets this limit instead). It is raised when a
        fast job needs more to keep every claim younger than the window.
    :param replicas: stream replicas; new streams default to 1 and an existing
        stream is changed only when this is given.

    An existing stream with other settings is brought to these (window,
    per-subject limit, subjects, replicas when given) by a backend that runs
    jobs; a backend that only reads history leaves it alone.
    :param request_timeout: seconds to wait for each JetStream answer.
    :param connect_options: passed to ``nats.connect`` (``user_credentials``,
        ``nkeys_seed``, ``token``, ``tls`` (an ``ssl.SSLContext``),
        ``tls_hostname``, ``name``, ``connect_timeout``, callbacks, ...).
    """

    name: ClassVar[str] = "nats"

    def __init__(
        self,
        servers: str | Sequence[str] = DEFAULT_SERVERS,
        connection: Client | None = None,
        stream: str = "CRON",
        prefix: str = DEFAULT_PREFIX,
        duplicate_window_ms: int = 300_000,
        history_size: int = 1000,
        replicas: int | None = None,
        *,
        request_timeout: float = 5.0,
        **connect_options: Any,
    ) -> None:
        server_list = [servers] if isinstance(servers, str) else [str(s) for s in servers]
        if not server_list or not all(isinstance(s, str) and s for s in server_list):
            raise InvalidConfigError("servers must be a URL or a non-empty list of URLs")
        if connection is not None:
            if server_list != [DEFAULT_SERVERS]:
                raise InvalidConfigError("pass either servers= or connection=, not both")
            if connect_options:
                raise InvalidConfigError(
                    "connection options ("
                    + ", ".join(sorted(connect_options))
                    + ") cannot be used with connection=: the connection is already made"
                )
        self.servers: list[str] = server_list
        self.connection = connection
        self.stream = check_stream_name(stream)
        self.prefix = check_prefix(prefix)
        # Message ids are unique per stream, not per subject. With the default
        # prefix the id is "<job>:<slot>"; any other prefix goes in front of it,
        # so applications sharing one stream under different prefixes never
        # share an id (job names have no ".", so the two forms never meet).
        self._id_prefix = "" if prefix == DEFAULT_PREFIX else prefix
        if (
            isinstance(duplicate_window_ms, bool)
            or not isinstance(duplicate_window_ms, int)
            or duplicate_window_ms < 100
        ):
            raise InvalidConfigError(
                f"duplicate_window_ms must be an integer >= 100, got {duplicate_window_ms!r}"
            )
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 1:
            raise InvalidConfigError(f"history_size must be an integer >= 1, got {history_size!r}")
        if replicas is not None and (
            isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= 5
        ):
            raise InvalidConfigError(f"replicas must be an integer from 1 to 5, got {replicas!r}")
        if (
            isinstance(request_timeout, bool)
            or not isinstance(request_timeout, (int, float))
            or not request_timeout > 0
        ):
            raise InvalidConfigError(f"request_timeout must be positive, got {request_timeout!r}")
        self.duplicate_window_ms = duplicate_window_ms
        self.dedupe_window_ms: float = float(duplicate_window_ms)
        self.history_size = history_size
        self.replicas = replicas
        self.request_timeout = float(request_timeout)
        self.connect_options: dict[str, Any] = dict(connect_options)
        self.shown = ",".join(redact_url(s) for s in server_list)
        """The servers as shown in messages: passwords hidden."""

        self._nc: Client | None = None
        self._owned = False
        self._timeouts = 0
        self._reconnects: set[asyncio.Task[None]] = set()
        self._ready = False
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._subjects: dict[str, tuple[str, str]] = {}
        self._needs: dict[str, int] = {}
        self._job_history: dict[str, int] = {}
        self._stream_limit = 0
        self._reconciled = False
        self._pipeline = Pipeline()
        self._instances: dict[str, str] = {}
        self._won: dict[int, str] = {}
        """Sequence -> token of claims this backend stored (the newest ``MEMORY``)."""
        self._unsure: dict[str, str] = {}
        """Message id -> token of claim publishes that got no answer (yet)."""

    # Construction --------------------------------------------------------

    @classmethod
    def from_url(cls, url: str, **options: Any) -> NatsBackend:
        """``nats://[user:pass@]host[:port][,host2...][?options]``.

        Query options ``stream``, ``prefix``, ``duplicate_window_ms``,
        ``history_size``, ``replicas`` and ``request_timeout`` are the
        backend's; ``name``, ``connect_timeout``, ``user_credentials`` (or
        ``creds``), ``nkeys_seed``, ``token``, ``tls_ca_file``,
        ``tls_cert_file``, ``tls_key_file``, ``tls_hostname``, ... pass to the
        driver. Anything else is an ``InvalidConfigError``.
        """
        servers, kwargs = parse_url(url, options)
        backend = cls(servers if len(servers) > 1 else servers[0], **kwargs)
        return backend

    def __repr__(self) -> str:
        return f"NatsBackend({self.shown!r}, stream={self.stream!r}, prefix={self.prefix!r})"

    # Job checks ------------------------------------------------------------

    def check_job(self, limits: JobLimits) -> None:
        """Refuse what NATS cannot do safely, and learn the job's period.

        Job names must be letters, digits, ``_`` and ``-`` (``InvalidJobError``);
        ``history_ttl`` and lease options are refused (``UnsupportedError``);
        ``jitter + max_late`` must be below the duplicate window
        (``DedupeWindowError``); ``history_size`` may not exceed the
        backend's stream-wide limit (``UnsupportedError``), except the job
        option's default, 1000, which simply gets the stream's limit.
        """
        job = check_job_name(limits.job)
        if limits.history_ttl_ms is not None:
            raise UnsupportedError(
                f"job {job!r}: history_ttl is not supported by the NATS backend"
                " (history is trimmed by count only: history_size)"
            )
        lease = limits.lease_options_given()
        if lease:
            raise UnsupportedError(
                f"job {job!r}: option(s) {', '.join(lease)} need leases; the NATS backend has none"
            )
        if limits.jitter_ms + limits.max_late_ms >= self.dedupe_window_ms:
            raise DedupeWindowError(
                f"job {job!r}: jitter ({limits.jitter_ms} ms) + max_late ({limits.max_late_ms} ms)"
                f" must be below the stream's duplicate window ({self.duplicate_window_ms} ms)"
            )
        self._check_history_size(job, limits.history_size)
        self._needs[job] = claims_needed(self.dedupe_window_ms, limits.period_ms)
        self._job_history[job] = min(limits.history_size, self.history_size)

    def _check_history_size(self, job: str, history_size: int) -> None:
        # The job option's default (1000) is not a request: a job that leaves it
        # alone gets the stream-wide limit. JobLimits cannot tell an explicit 1000
        # from the default, so an explicit 1000 is taken as the default too.
        if history_size > self.history_size and history_size != _JOB_HISTORY_DEFAULT:
            raise UnsupportedError(
                f"job {job!r}: history_size {history_size} is above the stream-wide limit"
                f" {self.history_size}; NATS keeps history per subject for the whole stream:"
                f" use NatsBackend(history_size={history_size})"
            )

    def per_subject_limit(self) -> int:
        """The stream's ``max_msgs_per_subject``: ``history_size``, raised for the fastest job."""
        return max([self.history_size, *self._needs.values()])

    # Connection and stream ---------------------------------------------------

    def _init_lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock = asyncio.Lock()
            self._lock_loop = loop
        return self._lock

    async def init(self) -> None:
        """Connect, create or update the stream and check the store format. Idempotent."""
        nc = self._nc
        if self._ready and nc is not None and not nc.is_closed:
            return
        async with self._init_lock():
            nc = self._nc
            if self._ready and nc is not None and not nc.is_closed:
                return
            self._ready = False
            nc = await self._connect()
            try:
                with self._driver_errors("start"):
                    await self._retrying(self._ensure_stream)
                    await self._retrying(self._check_format)
            except BaseException:
                await self._drop_connection()
                raise
            self._ready = True

    async def _connect(self) -> Client:
        """The user's connection, or a new one of ours (closed by :meth:`close`)."""
        if self.connection is not None:
            nc = self.connection
            if nc.is_closed or not (nc.is_connected or nc.is_reconnecting):
                raise BackendUnavailableError(
                    "the NATS connection passed as connection= is not connected"
                )
            self._nc, self._owned = nc, False
            return nc
        current = self._nc
        if current is not None and not current.is_closed:
            return current
        options = dict(self.connect_options)
        # Fail fast at start: each server is tried twice, then NoServersError. Once
        # connected, the client reconnects for ever (the scheduler keeps retrying
        # through an outage), unless the user chose otherwise.
        runtime_attempts = options.pop("max_reconnect_attempts", -1)
        runtime_wait = options.pop("reconnect_time_wait", 2)
        user_error_cb = options.pop("error_cb", None)
        last_error: list[BaseException] = []

        async def error_cb(error: Exception) -> None:
            last_error.append(error)
            del last_error[:-1]
            log.debug("anarchon: NATS %s: %r", self.shown, error)
            if user_error_cb is not None:
                await user_error_cb(error)

        options.setdefault("connect_timeout", min(2.0, max(self.request_timeout, 0.5)))
        # nats-py's defaults (a PING every 2 min, 2 unanswered) keep a silently dead
        # connection for minutes; these notice it within about 15 s.
        options.setdefault("ping_interval", DEFAULT_PING_INTERVAL_S)
        options.setdefault("max_outstanding_pings", DEFAULT_MAX_OUTSTANDING_PINGS)
        options.setdefault("name", "anarchon")
        nc = Client()
        try:
            await nc.connect(
                self.servers,
                error_cb=error_cb,
                max_reconnect_attempts=1,
                reconnect_time_wait=0,
                **options,
            )
        except Exception as error:
            cause = last_error[-1] if last_error else error
            with contextlib.suppress(Exception):  # best effort on a failed client
                await nc.close()
            raise BackendUnavailableError(
                f"cannot connect to NATS at {self.shown}: {type(cause).__name__}: {cause}"
            ) from cause
        nc.options["max_reconnect_attempts"] = runtime_attempts
        nc.options["reconnect_time_wait"] = runtime_wait
        self._nc, self._owned = nc, True
        return nc

    async def _drop_connection(self) -> None:
        nc, owned = self._nc, self._owned
        self._nc, self._owned, self._ready = None, False, False
        await self._pipeline.close()
        if nc is not None and owned and not nc.is_closed:
            try:
                await nc.close()
            except Exception as error:  # pragma: no cover - closing a broken client
                log.debug("anarchon: closing NATS connection failed: %r", error)

    async def close(self) -> None:
        """Close the connection if the backend opened it; a user's ``connection`` stays open."""
        await self._drop_connection()

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
                            f"JetStream does not answer at {self.shown}: is it enabled"
                            " (nats-server -js) and does the cluster have a leader?"
                        ) from cause
                    raise
                log.debug("anarchon: JetStream not ready at %s: %s", self.shown, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _unavailable(self, error: BaseException, what: str) -> BackendUnavailableError:
        if isinstance(error, (nats.errors.TimeoutError, asyncio.TimeoutError)):
            return self._no_answer(what)
        return BackendUnavailableError(
            f"NATS at {self.shown} is unavailable ({what}): {type(error).__name__}: {error}"
        )

    def _answered(self) -> None:
        """A request was answered: the connection works."""
        self._timeouts = 0

    def _timed_out(self) -> None:
        """A request timed out; after a few in a row, force a reconnect.

        A connection that died silently answers nothing until nats-py's PING
        check gives up on it; requests that keep timing out are a sign
        enough: drop it now and reconnect (only a connection the backend
        opened).

        Not while the connection is heard from: a request that times out while
        other answers arrive on the same connection (a loaded server, a chunk
        of hundreds of pipelined claims) is slowness, and a reconnect would
        only drop every answer in flight. nats-py's reconnect also cancels its
        reader without waiting for it, so a reconnect forced in the middle of
        a stream of answers could parse a half-read message (seen as claim
        answers that were not JSON, 4 processes of 5,000 jobs on 2 cores).
        """
        if time.monotonic() - self._pipeline.heard_at < self.request_timeout:
            return
        self._timeouts += 1
        if self._timeouts < RECONNECT_AFTER_TIMEOUTS:
            return
        self._timeouts = 0
        nc = self._nc
        if nc is None or not self._owned or not nc.is_connected:
            return
        log.info(
            "anarchon: NATS %s: %d requests in a row timed out; reconnecting",
            self.shown,
            RECONNECT_AFTER_TIMEOUTS,
        )
        task = asyncio.get_running_loop().create_task(
            nc._process_op_err(nats.errors.StaleConnectionError())
        )
        self._reconnects.add(task)
        task.add_done_callback(self._reconnects.discard)

    async def _client(self) -> Client:
        nc = self._nc
        if nc is None or not self._ready:
            await self.init()
            nc = self._nc
            assert nc is not None
        elif nc.is_closed:
            if not self._owned:
                raise BackendUnavailableError(
                    "the NATS connection passed as connection= has been closed"
                )
            self._ready = False
            await self.init()
            nc = self._nc
            assert nc is not None
        return nc

    async def _request(
        self,
        nc: Client,
        subject: str,
        payload: bytes,
        what: str,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """A request whose answer is a JSON object; connection failures become unavailable."""
        try:
            reply = await nc.request(
                subject, payload, timeout=self.request_timeout, headers=headers
            )
        except _UNREACHABLE as error:
            raise self._unavailable(error, what) from error
        return self._json(reply.data, what)

    async def _api(
        self, nc: Client, op: str, request: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A JetStream API call; raises ``APIError`` (503 answers: unavailable)."""
        body = await self._request(
            nc, f"{_API}.{op}", b"" if request is None else _dumps(request), op.split(".")[0]
        )
        error = _api_error(body)
        if error is not None:
            if error.code == 503:
                raise BackendUnavailableError(
                    f"JetStream at {self.shown} is unavailable ({op}): {error.description}"
                ) from error
            raise error
        return body

    async def _ensure_stream(self) -> None:
        """Create the stream if missing; bring an existing one to ours (docs/backends/nats.md).

        An existing stream is changed only by a backend that knows its jobs
        (``check_job`` or ``prepare_job`` ran): a process that only reads
        history, such as ``anarchon history``, knows no job periods and must not
        lower a limit a fast job of the fleet needs. Such a backend reconciles
        the stream on its first ``prepare_job`` instead.
        """
        nc = self._nc
        assert nc is not None
        await self._api(nc, "INFO")  # JetStream is enabled for this account
        self._reconciled = False
        limit = self.per_subject_limit()
        info = await self._stream_info(nc)
        if info is None:
            config = new_stream_config(
                self.stream, self.prefix, self.duplicate_window_ms, limit, self.replicas
            )
            try:
                await self._api(nc, f"STREAM.CREATE.{self.stream}", config)
                self._stream_limit = limit
                self._reconciled = True
                log.info("anarchon: created JetStream stream %s (%s>)", self.stream, self.prefix)
                return
            except APIError as error:
                if error.err_code != _ERR_STREAM_NAME_IN_USE:
                    raise InvalidConfigError(
                        f"cannot create stream {self.stream!r} on {self.shown}: {error.description}"
                    ) from error
            info = await self._stream_info(nc)  # another instance created it meanwhile
            if info is None:  # pragma: no cover - deleted again in between
                raise BackendUnavailableError(f"stream {self.stream!r} vanished while creating it")
        if self._job_history:
            await self._update_stream(nc, info["config"], limit)
            self._reconciled = True
        else:
            current = int(info["config"].get("max_msgs_per_subject") or -1)
            self._stream_limit = current if current > 0 else _UNLIMITED

    async def _stream_info(self, nc: Client) -> dict[str, Any] | None:
        try:
            return await self._api(nc, f"STREAM.INFO.{self.stream}")
        except APIError as error:
            if error.err_code == _ERR_STREAM_NOT_FOUND:
                return None
            raise

    async def _update_stream(self, nc: Client, current: dict[str, Any], limit: int) -> None:
        plan = plan_stream_update(
            current,
            prefix=self.prefix,
            window_ms=self.duplicate_window_ms,
            per_subject=limit,
            replicas=self.replicas,
        )
        if plan.changes:
            try:
                await self._api(nc, f"STREAM.UPDATE.{self.stream}", plan.config)
            except APIError as error:
                raise InvalidConfigError(
                    f"cannot update stream {self.stream!r} on {self.shown}"
                    f" ({'; '.join(plan.changes)}): {error.description}"
                ) from error
            log.info(
                "anarchon: updated JetStream stream %s: %s", self.stream, "; ".join(plan.changes)
            )
        self._stream_limit = int(plan.config.get("max_msgs_per_subject") or limit)

    async def _reconcile(self, raise_only: bool) -> None:
        """Apply the stream rules now (``raise_only``: just raise a too small per-subject limit)."""
        nc = await self._client()
        async with self._init_lock():
            needed = self.per_subject_limit()
            if raise_only and self._stream_limit >= needed:
                return
            info = await self._stream_info(nc)
            if info is None:
                raise BackendUnavailableError(f"stream {self.stream!r} is gone from {self.shown}")
            current = int(info["config"].get("max_msgs_per_subject") or -1)
            if raise_only and (current == -1 or current >= needed):
                self._stream_limit = _UNLIMITED if current == -1 else current
                return
            await self._update_stream(nc, info["config"], needed)
            self._reconciled = True

    async def _check_format(self) -> None:
        """Refuse a newer store format; write ours if there is none."""
        nc = self._nc
        assert nc is not None
        subject = f"{self.prefix}{FORMAT_TOKEN}"
        for _ in range(3):
            stored = await self._get_message(nc, {"last_by_subj": subject})
            if stored is not None:
                data = stored.data
                try:
                    found = int(json.loads(data)["format"])
                except (ValueError, KeyError, TypeError) as error:
                    raise StoreFormatError(
                        f"stream {self.stream!r} has an unreadable store format marker on"
                        f" {subject}: {data[:100]!r}"
                    ) from error
                if found > STORE_FORMAT:
                    raise StoreFormatError(
                        f"stream {self.stream!r} holds store format {found}; this version of"
                        f" anarchon-nats reads format {STORE_FORMAT} at most: upgrade anarchon-nats"
                    )
                return
            marker = _dumps({"format": STORE_FORMAT, "writer": "anarchon-nats"})
            body = await self._request(
                nc, subject, marker, "format marker", headers={_EXPECTED_LAST_SUBJECT_SEQ: "0"}
            )
            problem = _api_error(body)
            if problem is None:
                return
            if problem.err_code != _ERR_WRONG_LAST_SEQUENCE:  # else: written by another instance
                if problem.code == 503:
                    raise BackendUnavailableError(
                        f"JetStream at {self.shown} is unavailable: {problem.description}"
                    ) from problem
                raise problem
        raise StoreFormatError(f"could not read or write the store format marker on {subject}")

    async def _get_message(self, nc: Client, request: dict[str, Any]) -> _Stored | None:
        """``STREAM.MSG.GET`` (served by the stream leader): the stored message, or None."""
        try:
            body = await self._api(nc, f"STREAM.MSG.GET.{self.stream}", request)
        except APIError as error:
            if error.err_code == _ERR_NOT_FOUND_MSG or error.code == 404:
                return None
            raise
        return _stored(body)

    # Jobs ----------------------------------------------------------------------

    def _job_subjects(self, job: str) -> tuple[str, str]:
        subjects = self._subjects.get(job)
        if subjects is None:
            check_job_name(job)
            subjects = (f"{self.prefix}{job}.claims", f"{self.prefix}{job}.results")
            self._subjects[job] = subjects
        return subjects

    async def prepare_job(self, job: str, history_size: int) -> None:
        """Check the job's name and history size; apply the stream rules if not done yet.

        The first job prepared on a backend whose ``init()`` knew no jobs brings
        an existing stream to our settings; later ones raise the per-subject
        limit when a faster job needs more.
        """
        self._job_subjects(job)
        self._check_history_size(job, history_size)
        self._job_history[job] = min(history_size, self.history_size)
        await self._client()
        with self._driver_errors("stream update"):
            if not self._reconciled:
                await self._reconcile(raise_only=False)
            elif self.per_subject_limit() > self._stream_limit:
                await self._reconcile(raise_only=True)

    # Errors --------------------------------------------------------------------

    def is_transient(self, error: BaseException) -> bool:
        """True for errors worth retrying: connection lost or closed, timeouts, 503 answers.

        nats-py's connection, reconnecting and timeout errors, "no responders"
        (JetStream without a leader: an election or a restart) and JetStream's
        503 answers are transient, and so is ``BackendUnavailableError``, which
        the backend raises for all of them. Everything else (refused requests,
        foreign data, configuration) reaches the user.
        """
        return is_transient_error(error)

    def _answer_error(self, problem: APIError, what: str) -> BackendUnavailableError | BackendError:
        """A JetStream error answer: 503 is an outage, anything else is refused for good."""
        if problem.code == 503:
            error: BackendUnavailableError | BackendError = BackendUnavailableError(
                f"JetStream at {self.shown} is unavailable ({what}): {problem.description}"
            )
        else:
            error = BackendError(
                f"JetStream at {self.shown} refused the {what} on stream {self.stream!r}:"
                f" {problem.description or 'error'} (code {problem.code},"
                f" err_code {problem.err_code})"
            )
        error.__cause__ = problem
        return error

    @contextlib.contextmanager
    def _driver_errors(self, what: str) -> Iterator[None]:
        """Driver errors that escape as they are become coded: outage or ``BackendError``."""
        try:
            yield
        except APIError as error:
            raise self._answer_error(error, what) from error
        except _UNREACHABLE as error:
            raise self._unavailable(error, what) from error
        except nats.errors.Error as error:
            raise BackendError(
                f"NATS at {self.shown} failed the {what}: {type(error).__name__}: {error}"
            ) from error

    def _json(self, data: bytes, what: str) -> dict[str, Any]:
        """A JetStream answer as a JSON object, or ``BackendError`` (something else answered)."""
        try:
            body = json.loads(data) if data else {}
        except ValueError as error:
            raise BackendError(
                f"NATS at {self.shown} answered the {what} with something that is not"
                f" JetStream's: {data[:80]!r}"
            ) from error
        if not isinstance(body, dict):
            raise BackendError(f"NATS at {self.shown} answered the {what} with {data[:80]!r}")
        return body

    def _no_answer(self, what: str) -> BackendUnavailableError:
        self._timed_out()
        return BackendUnavailableError(
            f"NATS at {self.shown} did not answer the {what}: timeout after"
            f" {self.request_timeout:g} s"
        )

    def _answer(self, msg: Msg | None, what: str) -> dict[str, Any]:
        """One pipelined answer as a JSON object; no answer, no responders: unavailable."""
        if msg is None:
            raise self._no_answer(what)
        self._answered()
        if not msg.data and msg.headers:
            status = msg.headers.get(_STATUS)
            if status == "503":
                raise BackendUnavailableError(
                    f"NATS at {self.shown} has no responders for the {what} on {msg.subject}:"
                    f" is stream {self.stream!r} there and does it have a leader?"
                )
            if status is not None:
                raise BackendError(
                    f"NATS at {self.shown} answered the {what} with status {status}"
                    f" {msg.headers.get('Description', '')}".rstrip()
                )
        return self._json(msg.data, what)

    async def _send(self, nc: Client, requests: Sequence[Request], what: str) -> list[Msg | None]:
        """Pipelined requests (see :class:`~anarchon_nats._pipeline.Pipeline`)."""
        with self._driver_errors(what):
            return await self._pipeline.requests(nc, requests, self.request_timeout)

    # Fleet registry and controls (subjects: anarchon_nats._fleet) --------------

    async def declare(self, declarations: Sequence[Declaration], ttl_ms: int) -> None:
        """Publish each declaration to its subject; purge the subjects of expired ones."""
        nc = await self._client()
        with self._driver_errors("fleet registry"):
            await asyncio.gather(
                *(
                    self._publish(
                        nc,
                        _fleet.declaration_subject(self.prefix, d.job, d.instance_id),
                        _fleet.declaration_payload(d, ttl_ms),
                        "fleet registry",
                    )
                    for d in declarations
                )
            )
            _, expired = await self._declared(nc)
            for subject in expired:
                try:
                    await self._api(nc, f"STREAM.PURGE.{self.stream}", {"filter": subject})
                except APIError as error:  # e.g. a stream that denies purges: read filters them
                    log.debug("anarchon: purging %s failed: %s", subject, error)

    async def declarations(self, job: str | None = None) -> list[Declaration]:
        """Every unexpired declaration (of ``job``, or of all jobs)."""
        nc = await self._client()
        with self._driver_errors("fleet registry"):
            live, _ = await self._declared(nc)
        return [d for d in live if job is None or d.job == job]

    async def set_control(self, control: JobControl) -> None:
        """Publish the job's control (its stored time is ``updated_at``)."""
        nc = await self._client()
        with self._driver_errors("fleet-wide controls"):
            await self._publish(
                nc,
                _fleet.control_subject(self.prefix, control.job),
                _fleet.control_payload(control),
                "fleet-wide controls",
            )

    async def controls(self) -> dict[str, JobControl]:
        """Every job's newest control."""
        nc = await self._client()
        with self._driver_errors("fleet-wide controls"):
            found = await self._newest(nc, _fleet.filters(self.prefix)[1])
        controls = [_fleet.control_of(self.stream, s, data, ms) for s, data, ms in found]
        return {c.job: c for c in controls}

    async def _declared(self, nc: Client) -> tuple[list[Declaration], list[str]]:
        """Unexpired declarations, and the subjects of expired ones (by the newest stored time)."""
        found = await self._newest(nc, _fleet.filters(self.prefix)[0])
        if not found:
            return [], []
        now = await self.now_ms()
        live: list[Declaration] = []
        expired: list[str] = []
        for subject, data, ms in found:
            entry = _fleet.declaration_of(self.stream, subject, data, ms)
            if entry.expires_at > now:
                live.append(entry)
            else:
                expired.append(subject)
        return live, expired

    async def _newest(self, nc: Client, wildcard: str) -> list[tuple[str, bytes, int]]:
        """The newest message of each subject matching ``wildcard``: (subject, data, stored ms)."""
        info = await self._api(nc, f"STREAM.INFO.{self.stream}", {"subjects_filter": wildcard})
        subjects = sorted((info.get("state") or {}).get("subjects") or {})
        stored = await asyncio.gather(
            *(self._get_message(nc, {"last_by_subj": subject}) for subject in subjects)
        )
        out: list[tuple[str, bytes, int]] = []
        for subject, message in zip(subjects, stored, strict=True):
            if message is None:  # purged in between
                continue
            try:
                ms = int(parse_stamp_ms(message.time))
            except ValueError:
                raise ForeignDataError(
                    f"stream {self.stream!r}: the message on {subject!r} has no stored time",
                    key=subject,
                ) from None
            out.append((subject, message.data, ms))
        return out

    # Clock ---------------------------------------------------------------------

    async def now_ms(self) -> int:
        """The server's clock: the time JetStream stamps on a message it stores.

        Publishes an empty message to ``<prefix>_clock`` and reads it back by
        sequence from the stream leader (two round trips). The stamp is taken
        while the publish is in flight, so the stamp plus the time the read
        back took is at most the leader's clock when this call returns: the
        scheduler anchors a reading at the reply's arrival and must never be
        ahead (docs/concepts.md, "The store clock").
        """
        nc = await self._client()
        subject = f"{self.prefix}{CLOCK_TOKEN}"
        with self._driver_errors("clock"):
            for _ in range(3):
                sent = await self._publish(nc, subject, b"", "clock")
                acked = time.monotonic()
                stored = await self._get_message(nc, {"seq": sent})
                done = time.monotonic()
                if stored is not None:
                    break
            else:
                raise BackendUnavailableError(
                    f"the clock message on {subject} of stream {self.stream!r} vanished"
                    " before it could be read"
                )
        if stored.subject != subject:
            raise ForeignDataError(
                f"stream {self.stream!r}: the clock message at sequence {sent} is on"
                f" {stored.subject!r}, not {subject!r}",
                key=subject,
            )
        try:
            stamp = parse_stamp_ms(stored.time)
        except ValueError as error:
            raise BackendError(
                f"JetStream at {self.shown} gave the clock message an unreadable time"
                f" {stored.time[:80]!r}"
            ) from error
        return math.floor(stamp + (done - acked) * 1000)

    # Claims --------------------------------------------------------------------

    def _instance_json(self, instance_id: str) -> str:
        """``instance_id`` as a JSON string (kept for the few ids a backend sees)."""
        text = self._instances.get(instance_id)
        if text is None:
            text = json.dumps(instance_id)
            if len(self._instances) < 64:
                self._instances[instance_id] = text
        return text

    def _claim_request(self, input: ClaimInput, at: int | None = None) -> Request:
        """``(subject, payload, headers)`` of a scheduled claim (``at``: default now)."""
        job = input.job
        subject = (self._subjects.get(job) or self._job_subjects(job))[0]
        instance = self._instance_json(input.instance_id)
        token = input.token
        token = f'"{token}"' if token.isalnum() else json.dumps(token)
        # The same JSON as _dumps() of the record, written directly (the hot path).
        payload = (
            f'{{"slot":{int(input.slot)},"token":{token},"instance_id":{instance},'
            f'"at":{_wall_ms() if at is None else at},"manual":false}}'
        ).encode()
        return subject, payload, {_MSG_ID: f"{self._id_prefix}{job}:{input.slot}"}

    def _claim_verdict(self, ack: dict[str, Any]) -> tuple[int, int]:
        """A claim's acknowledgement: ``(0, seq)`` stored (won), ``(1, seq)`` a duplicate
        of the claim stored at ``seq``, ``(-1, 0)`` ask again."""
        problem = api_error(ack)
        if problem is None:
            seq = int(ack.get("seq") or 0)
            if seq and not ack.get("duplicate"):
                return 0, seq  # the stored original: this claim won
            # seq 0 without an error: a 2.9 cluster answering a duplicate of a
            # claim still in flight. Ask again.
            return (1, seq) if seq else (-1, 0)
        if problem.err_code == _ERR_DUPLICATE_IN_PROCESS:
            return -1, 0  # a clustered stream has the first claim with this id in flight
        raise self._answer_error(problem, "claim")

    def _remember(self, seq: int, token: str) -> None:
        won = self._won
        won[seq] = token
        if len(won) > MEMORY:
            del won[next(iter(won))]

    def _owner_check(self, subject: str, seq: int, stored: _Stored, token: str) -> bool:
        """Whether the stored claim at ``seq`` carries ``token``; foreign data raises."""
        if stored.subject != subject:
            raise ForeignDataError(
                f"stream {self.stream!r}: the message id of a claim on {subject!r} is held by"
                f" sequence {seq} on {stored.subject!r}, which anarchon did not write"
                " (another publisher uses anarchon's message ids)",
                key=stored.subject,
            )
        try:
            row = json.loads(stored.data)
            stored_token = row["token"] if isinstance(row, dict) else None
        except (ValueError, KeyError):
            stored_token = None
        if not isinstance(stored_token, str):
            raise ForeignDataError(
                f"stream {self.stream!r}: sequence {seq} on {subject!r} is not an anarchon"
                f" claim record: {stored.data[:80]!r}",
                key=subject,
            )
        return stored_token == token

    def _claim_gone(self, seq: int) -> bool:
        # The claim is remembered but its message is gone (deleted or purged by
        # hand): we cannot prove it is ours, and a false answer never runs a slot twice.
        log.warning(
            "anarchon: claim at %s seq %d is remembered but its message is gone; not running it",
            self.stream,
            seq,
        )
        return False

    async def claim(self, input: ClaimInput) -> bool:
        """Publish the claim with ``Nats-Msg-Id: <job>:<slot>``; the first stored one wins.

        (With a prefix other than ``cron.`` the id is ``<prefix><job>:<slot>``.)
        A duplicate acknowledgement names the stored claim's sequence; the
        answer is true only when that claim carries this token (a retried
        claim), as described at :meth:`claim_many`.
        """
        return (await self.claim_many([input]))[0]

    async def claim_many(self, inputs: Sequence[ClaimInput]) -> list[bool]:
        """``claim()`` for each item: the chunk's publishes pipelined, their acks awaited together.

        Chunks of :data:`BATCH_CHUNK` claims are published back to back on the
        one connection. A stored acknowledgement wins. A duplicate names the
        sequence of the stored claim, and is true only if that claim carries
        this token: the backend remembers the claims it stored (the newest
        :data:`MEMORY`) and the publishes it got no answer to. A duplicate of
        a remembered claim is answered from memory; a duplicate of a claim this
        backend may have published unanswered (a retry after a timeout or a
        dropped connection) is read back (``STREAM.MSG.GET`` by sequence,
        pipelined) and its token compared, and a message there that anarchon
        did not write raises ``ForeignDataError``; any other duplicate is
        another instance's claim: false, without a read. Answers are in request
        order. If any item failed, the first error is raised once its chunk
        has ended (items are repeat-safe).
        """
        if not inputs:
            return []
        nc = self._nc
        if nc is None or not self._ready or nc.is_closed:
            nc = await self._client()
        answers: list[bool] = []
        for start in range(0, len(inputs), BATCH_CHUNK):
            answers.extend(await self._claim_chunk(nc, inputs[start : start + BATCH_CHUNK]))
        return answers

    async def _claim_chunk(self, nc: Client, chunk: Sequence[ClaimInput]) -> list[bool]:
        at = _wall_ms()
        requests = [self._claim_request(input, at) for input in chunk]
        ids = [headers[_MSG_ID] for _s, _p, headers in requests if headers is not None]
        unsure = self._unsure
        # A publish of ours this backend never heard back about may be the stored claim.
        maybe_ours = [msg_id in unsure for msg_id in ids]
        for msg_id, input in zip(ids, chunk, strict=True):
            unsure[msg_id] = input.token
        while len(unsure) > MEMORY:
            del unsure[next(iter(unsure))]
        won = [False] * len(chunk)
        errors: list[BaseException | None] = [None] * len(chunk)
        answered = [False] * len(chunk)
        pending = list(range(len(chunk)))
        delay = 0.005
        deadline = 0.0
        try:
            while pending:
                replies = await self._send(nc, [requests[i] for i in pending], "claim")
                again: list[int] = []
                reads: list[tuple[int, int]] = []
                for i, msg in zip(pending, replies, strict=True):
                    if msg is None:
                        errors[i] = self._no_answer("claim")
                        continue
                    stored = _STORED_ACK.fullmatch(msg.data)
                    try:
                        kind, seq = (
                            (0, int(stored.group(1)))
                            if stored is not None
                            else self._claim_verdict(self._answer(msg, "claim"))
                        )
                    except (BackendError, BackendUnavailableError) as error:
                        errors[i] = error
                        answered[i] = not isinstance(error, BackendUnavailableError)
                        continue
                    if kind < 0:
                        again.append(i)
                        continue
                    answered[i] = True
                    token = chunk[i].token
                    if kind == 0:
                        won[i] = True
                        self._remember(seq, token)
                        continue
                    owner = self._won.get(seq)
                    if owner is not None:
                        won[i] = owner == token
                    elif maybe_ours[i]:
                        reads.append((i, seq))
                    # else: a claim this backend never published: another instance's.
                if reads:
                    owned = await self._owns_many(
                        nc, [(requests[i][0], seq, chunk[i].token) for i, seq in reads]
                    )
                    for (i, seq), answer in zip(reads, owned, strict=True):
                        if isinstance(answer, BaseException):
                            errors[i] = answer
                            answered[i] = isinstance(answer, ForeignDataError)
                        else:
                            won[i] = answer
                            if answer:
                                self._remember(seq, chunk[i].token)
                if again:
                    now = time.monotonic()
                    if not deadline:
                        deadline = now + self.request_timeout
                    elif now > deadline:
                        for i in again:
                            errors[i] = BackendUnavailableError(
                                f"claim of {chunk[i].job}:{chunk[i].slot} is still in process"
                                f" on {self.shown}; retry"
                            )
                        break
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.1)
                pending = again
        finally:
            for i, msg_id in enumerate(ids):
                if answered[i] and unsure.get(msg_id) == chunk[i].token:
                    del unsure[msg_id]
        for failure in errors:
            if failure is not None:
                raise failure
        return won

    async def _owns_many(
        self, nc: Client, items: Sequence[tuple[str, int, str]]
    ) -> list[bool | BaseException]:
        """:meth:`_owns` for each ``(subject, seq, token)``, the reads pipelined."""
        answers: list[bool | BaseException] = [False] * len(items)
        todo = list(range(len(items)))
        get = f"{_API}.STREAM.MSG.GET.{self.stream}"
        for attempt in range(3):
            replies = await self._send(
                nc, [(get, _dumps({"seq": items[i][1]}), None) for i in todo], "claim"
            )
            missing: list[int] = []
            for i, msg in zip(todo, replies, strict=True):
                subject, seq, token = items[i]
                try:
                    body = self._answer(msg, "claim")
                    problem = api_error(body)
                    if problem is not None:
                        if problem.err_code == _ERR_NOT_FOUND_MSG or problem.code == 404:
                            missing.append(i)
                            continue
                        raise self._answer_error(problem, "claim")
                    answers[i] = self._owner_check(subject, seq, _stored(body), token)
                except (BackendError, BackendUnavailableError, ForeignDataError) as error:
                    answers[i] = error
            todo = missing
            if not todo:
                break
            if attempt < 2:
                await asyncio.sleep(0.02 * (attempt + 1))
        for i in todo:
            answers[i] = self._claim_gone(items[i][1])
        return answers

    async def record_claims(self, inputs: Sequence[ClaimInput]) -> None:
        """Nothing to do: on NATS the claim itself is the history record."""
        return None

    async def record_manual_run(self, input: ClaimInput) -> int | None:
        """Publish a manual claim record: no ``Nats-Msg-Id``, so it is never de-duplicated."""
        nc = await self._client()
        subject = self._job_subjects(input.job)[0]
        payload = _dumps(
            {
                "slot": input.slot,
                "token": input.token,
                "instance_id": input.instance_id,
                "at": _wall_ms(),
                "manual": True,
            }
        )
        await self._publish(nc, subject, payload, "manual run")
        return None

    async def _publish(self, nc: Client, subject: str, payload: bytes, what: str) -> int:
        body = await self._request(nc, subject, payload, what)
        error = _api_error(body)
        if error is not None:
            raise self._answer_error(error, what)
        return int(body.get("seq") or 0)

    def _result_request(self, job: str, result: StoredResult) -> Request:
        subject = (self._subjects.get(job) or self._job_subjects(job))[1]
        return subject, result_json(result).encode(), None

    async def save_result(
        self,
        job: str,
        result: StoredResult,
        history_size: int,
        history_ttl_ms: int | None = None,
    ) -> None:
        """Publish the result to ``<prefix><job>.results`` (trimmed by the per-subject limit)."""
        nc = self._nc
        if nc is None or not self._ready or nc.is_closed:
            nc = await self._client()
        subject, payload, _headers = self._result_request(job, result)
        await self._publish(nc, subject, payload, "result")

    async def save_results(self, writes: Sequence[ResultWrite]) -> None:
        """``save_result()`` for each item: chunks of publishes pipelined, acks awaited together.

        A result is repeat-safe: history keeps one record per token, so a
        result published twice (a batch retried after a lost answer) shows once.
        """
        if not writes:
            return
        nc = self._nc
        if nc is None or not self._ready or nc.is_closed:
            nc = await self._client()
        for start in range(0, len(writes), BATCH_CHUNK):
            chunk = writes[start : start + BATCH_CHUNK]
            requests = [self._result_request(w.job, w.result) for w in chunk]
            first: BaseException | None = None
            for msg in await self._send(nc, requests, "result"):
                if msg is not None and _STORED_ACK.fullmatch(msg.data):
                    continue
                try:
                    problem = api_error(self._answer(msg, "result"))
                    if problem is not None:
                        raise self._answer_error(problem, "result")
                except (BackendError, BackendUnavailableError) as error:
                    first = first or error
            if first is not None:
                raise first

    # History -------------------------------------------------------------------

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job`` on every instance, newest first.

        Reads the job's claims and results subjects and merges them with
        :func:`anarchon.build_history`. A job registered here with a
        ``history_size`` below the stream-wide limit shows at most that many.
        """
        claims_subject, results_subject = self._job_subjects(job)
        nc = await self._client()
        with self._driver_errors("history"):
            messages = await self._read_subjects(
                nc, f"{self.prefix}{job}.*", (claims_subject, results_subject)
            )
        return self._history_of(job, messages, limit)

    async def history_many(self, jobs: Sequence[str], limit: int) -> dict[str, list[RunRecord]]:
        """The history of each of ``jobs``, read through one consumer for all of them.

        A few jobs are read one by one (:meth:`history`); from
        :data:`_MANY_JOBS` on, one consumer delivers every job's claims and
        results subjects at once, and the messages of the jobs asked for are
        kept. It reads up to the messages the consumer's stream copy held
        when it was created: in a cluster, a replica a moment behind the
        leader may miss the newest few (:meth:`history` waits for them).
        """
        names = list(dict.fromkeys(jobs))
        if len(names) < _MANY_JOBS:
            return await super().history_many(names, limit)
        subjects = {name: self._job_subjects(name) for name in names}
        nc = await self._client()
        with self._driver_errors("history"):
            messages = await self._read_all_jobs(nc)
        by_subject: dict[str, list[tuple[str, bytes]]] = {}
        for subject, data in messages:
            by_subject.setdefault(subject, []).append((subject, data))
        return {
            name: self._history_of(
                name, by_subject.get(claims, []) + by_subject.get(results, []), limit
            )
            for name, (claims, results) in subjects.items()
        }

    def _history_of(
        self, job: str, messages: Sequence[tuple[str, bytes]], limit: int
    ) -> list[RunRecord]:
        """``job``'s history from its claims and results messages (any order)."""
        claims_subject, results_subject = self._job_subjects(job)
        claims: list[ClaimRecord] = []
        results: list[StoredResult] = []
        for subject, data in messages:
            try:
                row = json.loads(data)
                if subject == claims_subject:
                    claims.append(
                        ClaimRecord(
                            job=job,
                            slot=int(row["slot"]),
                            token=str(row["token"]),
                            instance_id=str(row["instance_id"]),
                            at=int(row["at"]),
                            manual=bool(row.get("manual", False)),
                        )
                    )
                elif subject == results_subject:
                    results.append(
                        StoredResult(
                            slot=int(row["slot"]),
                            token=str(row["token"]),
                            instance_id=str(row["instance_id"]),
                            status=str(row["status"]),
                            started_at=_opt_int(row.get("started_at")),
                            finished_at=_opt_int(row.get("finished_at")),
                            error=None if row.get("error") is None else str(row["error"]),
                            attempt=int(row.get("attempt") or 1),
                            manual=bool(row.get("manual", False)),
                            reason=None if row.get("reason") is None else str(row["reason"]),
                        )
                    )
            except (ValueError, KeyError, TypeError, AttributeError) as error:
                raise ForeignDataError(
                    f"stream {self.stream!r}: a message on {subject!r} is not an anarchon"
                    f" {'claim' if subject == claims_subject else 'result'} record:"
                    f" {data[:80]!r}",
                    key=subject,
                ) from error
        cap = self._job_history.get(job, self.history_size)
        return build_history(job, claims, results, min(limit, cap))

    async def _read_subjects(
        self, nc: Client, filter_subject: str, subjects: Sequence[str]
    ) -> list[tuple[str, bytes]]:
        """Every stored message on ``filter_subject``, oldest first, with an ephemeral consumer.

        The newest sequence of each of ``subjects`` is asked of the stream leader
        first, and the consumer is read until it has delivered it: in a cluster
        the consumer may live on a replica that is a moment behind, and history
        must show the claims this instance has just made.
        """
        target = 0
        for subject in subjects:
            last = await self._last_sequence(nc, subject)
            target = max(target, last)
        if not target:
            return []
        out: list[tuple[str, bytes]] = []
        async with self._history_consumer(nc, filter_subject) as (consumer, _pending):
            await self._pull(nc, consumer, target, out)
        return out

    async def _read_all_jobs(self, nc: Client) -> list[tuple[str, bytes]]:
        """Every message under the prefix (each job's claims and results), through one consumer.

        Filtered on ``<prefix>>``: a wildcard per job token makes the server
        match each message against the stream's subject tree (slow with
        thousands of jobs); the caller keeps what it asked for.
        """
        out: list[tuple[str, bytes]] = []
        async with self._history_consumer(nc, f"{self.prefix}>") as (consumer, pending):
            if pending:
                await self._pull(nc, consumer, 0, out, count=pending)
        return out

    @contextlib.asynccontextmanager
    async def _history_consumer(
        self, nc: Client, filter_subject: str
    ) -> AsyncIterator[tuple[str, int]]:
        """A short-lived in-memory consumer on ``filter_subject``: (its name, messages pending)."""
        created = await self._api(
            nc,
            f"CONSUMER.CREATE.{self.stream}",
            {
                "stream_name": self.stream,
                "config": {
                    "deliver_policy": "all",
                    "ack_policy": "none",
                    "replay_policy": "instant",
                    "filter_subject": filter_subject,
                    "inactive_threshold": 30_000_000_000,
                    "mem_storage": True,
                    "num_replicas": 1,
                    "max_waiting": 1,
                },
            },
        )
        consumer = str(created["name"])
        try:
            yield consumer, int(created.get("num_pending") or 0)
        finally:
            try:
                await self._api(nc, f"CONSUMER.DELETE.{self.stream}.{consumer}")
            except (APIError, BackendUnavailableError) as error:  # it expires by itself
                log.debug("anarchon: deleting history consumer %s failed: %s", consumer, error)

    async def _last_sequence(self, nc: Client, subject: str) -> int:
        """The stream sequence of the newest message on ``subject`` (0: none), from the leader."""
        try:
            body = await self._api(nc, f"STREAM.MSG.GET.{self.stream}", {"last_by_subj": subject})
        except APIError as error:
            if error.err_code == _ERR_NOT_FOUND_MSG or error.code == 404:
                return 0
            raise
        return int(body["message"].get("seq") or 0)

    async def _pull(
        self,
        nc: Client,
        consumer: str,
        target: int,
        out: list[tuple[str, bytes]],
        *,
        count: int | None = None,
    ) -> None:
        """Pull from ``consumer`` until the message with stream sequence ``target`` arrived.

        With ``count``: until ``count`` messages arrived instead.
        """
        inbox = nc.new_inbox()
        try:
            sub = await nc.subscribe(inbox, pending_msgs_limit=4 * _HISTORY_BATCH + 16)
        except _UNREACHABLE as error:
            raise self._unavailable(error, "history") from error
        next_subject = f"{_API}.CONSUMER.MSG.NEXT.{self.stream}.{consumer}"
        request = _dumps({"batch": _HISTORY_BATCH, "no_wait": True})
        deadline = time.monotonic() + self.request_timeout
        seen = 0
        wanted = len(out) + count if count is not None else None

        def short() -> bool:
            return seen < target if wanted is None else len(out) < wanted

        try:
            while short():
                try:
                    await nc.publish(next_subject, request, reply=inbox)
                except _UNREACHABLE as error:
                    raise self._unavailable(error, "history") from error
                got = 0
                while got < _HISTORY_BATCH:
                    try:
                        msg: Msg = await sub.next_msg(timeout=self.request_timeout)
                    except nats.errors.ConnectionClosedError as error:
                        if _being_cancelled():
                            raise asyncio.CancelledError from error
                        raise self._unavailable(error, "history") from error
                    except _UNREACHABLE as error:
                        raise self._unavailable(error, "history") from error
                    headers = msg.headers or {}
                    status = headers.get("Status")
                    if status is not None and not msg.data:
                        if status == "100":  # idle heartbeat / flow control
                            continue
                        # 404/408: nothing more right now; 503: a just-created consumer on
                        # a clustered stream has no leader yet. Pull again until the deadline.
                        if status in ("404", "408", "503"):
                            break
                        raise APIError(code=int(status), description=headers.get("Description", ""))
                    out.append((msg.subject, msg.data))
                    got += 1
                    seen = max(seen, msg.metadata.sequence.stream)
                if short() and got < _HISTORY_BATCH:
                    # The replica holding the consumer has not stored the newest
                    # messages yet (a cluster): wait a moment and pull again.
                    if time.monotonic() > deadline:
                        log.debug(
                            "anarchon: history of %s read up to seq %d of %d",
                            consumer,
                            seen,
                            target,
                        )
                        return
                    await asyncio.sleep(0.01)
        finally:
            try:
                await sub.unsubscribe()
            except Exception as error:  # pragma: no cover - connection already gone
                log.debug("anarchon: unsubscribe failed: %r", error)


def _being_cancelled() -> bool:
    """True when the current task has been asked to cancel (Python 3.11+; else False).

    nats-py's ``Subscription.next_msg`` raises ``ConnectionClosedError`` in place
    of the ``CancelledError`` it receives once the connection is closed (the
    CLI closes its backend, then ``asyncio.run`` cancels the reads still
    running). A cancelled task must end cancelled: one that ends with an
    error instead is an error nobody awaits ("Task exception was never
    retrieved").
    """
    task = asyncio.current_task()
    cancelling: Callable[[], int] | None = getattr(task, "cancelling", None)
    return cancelling is not None and cancelling() > 0


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)
