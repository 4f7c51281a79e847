"""The backend's NATS connection and the JetStream requests made on it.

:class:`Connection` opens the connection (or takes the user's), makes requests
whose answers are JSON objects, one at a time or pipelined, and turns the
driver's failures and JetStream's error answers into anarchon's: an outage
(``BackendUnavailableError``) or a refusal (``BackendError``). Requests that
keep timing out while nothing is heard on the connection force a reconnect.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import nats.errors
from anarchon.errors import BackendError, BackendUnavailableError
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.errors import APIError

from anarchon_nats._errors import ERR_NOT_FOUND_MSG, UNREACHABLE, api_error
from anarchon_nats._pipeline import Pipeline, Request

__all__ = [
    "API",
    "DEFAULT_MAX_OUTSTANDING_PINGS",
    "DEFAULT_PING_INTERVAL_S",
    "RECONNECT_AFTER_TIMEOUTS",
    "STORED_ACK",
    "Connection",
    "Stored",
    "dumps",
    "stored",
]

log = logging.getLogger("anarchon.nats")

API = "$JS.API"
"""The subject prefix of JetStream API requests."""
_STATUS = "Status"
STORED_ACK = re.compile(rb'\{"stream":"[^"\\]*","seq":([1-9][0-9]*)\}')
"""A publish acknowledgement of a newly stored message (no duplicate, no error): the hot path."""

DEFAULT_PING_INTERVAL_S = 5.0
"""``ping_interval`` of connections the backend opens (nats-py: 120 s), unless given."""
DEFAULT_MAX_OUTSTANDING_PINGS = 2
"""``max_outstanding_pings`` of connections the backend opens, unless given."""
RECONNECT_AFTER_TIMEOUTS = 3
"""Requests in a row without an answer after which the backend forces a reconnect."""


def dumps(value: dict[str, Any]) -> bytes:
    """``value`` as compact JSON bytes (a request or message body)."""
    return json.dumps(value, separators=(",", ":")).encode()


class Stored(NamedTuple):
    """A message as ``STREAM.MSG.GET`` returns it."""

    subject: str
    data: bytes
    time: str


def stored(body: dict[str, Any]) -> Stored:
    """The message of a ``STREAM.MSG.GET`` answer."""
    message = body["message"]
    raw = message.get("data")
    return Stored(
        str(message.get("subject", "")),
        base64.b64decode(raw) if raw else b"",
        str(message.get("time", "")),
    )


class Connection:
    """One NATS connection (the user's, or one the backend opens) and its requests.

    ``nc`` is the connected client (None before :meth:`open` and after
    :meth:`close`); ``owned`` tells whether the backend opened it (and so
    closes it). ``stream`` is the stream's name, for requests and messages.
    """

    def __init__(
        self,
        servers: list[str],
        given: Client | None,
        stream: str,
        *,
        request_timeout: float,
        connect_options: dict[str, Any],
        shown: str,
    ) -> None:
        self.servers = servers
        self.given = given
        self.stream = stream
        self.request_timeout = request_timeout
        self.connect_options = connect_options
        self.shown = shown
        self.nc: Client | None = None
        self.owned = False
        self.pipeline = Pipeline()
        self.reconnects: set[asyncio.Task[None]] = set()
        """Forced reconnects still running."""
        self._timeouts = 0

    # Opening and closing -----------------------------------------------------

    async def open(self) -> Client:
        """The user's connection, or a new one of ours (closed by :meth:`close`)."""
        if self.given is not None:
            nc = self.given
            if nc.is_closed or not (nc.is_connected or nc.is_reconnecting):
                raise BackendUnavailableError(
                    "the NATS connection passed as connection= is not connected"
                )
            self.nc, self.owned = nc, False
            return nc
        current = self.nc
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
        self.nc, self.owned = nc, True
        return nc

    async def close(self) -> None:
        """Forget the connection; close it if the backend opened it."""
        nc, owned = self.nc, self.owned
        self.nc, self.owned = None, False
        await self.pipeline.close()
        if nc is not None and owned and not nc.is_closed:
            try:
                await nc.close()
            except Exception as error:  # pragma: no cover - closing a broken client
                log.debug("anarchon: closing NATS connection failed: %r", error)

    # Health --------------------------------------------------------------------

    def unavailable(self, error: BaseException, what: str) -> BackendUnavailableError:
        """A driver failure of the ``what`` as an outage (a timeout counts towards a reconnect)."""
        if isinstance(error, (nats.errors.TimeoutError, asyncio.TimeoutError)):
            return self.no_answer(what)
        return BackendUnavailableError(
            f"NATS at {self.shown} is unavailable ({what}): {type(error).__name__}: {error}"
        )

    def no_answer(self, what: str) -> BackendUnavailableError:
        """The ``what`` got no answer in time: an outage (and maybe a forced reconnect)."""
        self._timed_out()
        return BackendUnavailableError(
            f"NATS at {self.shown} did not answer the {what}: timeout after"
            f" {self.request_timeout:g} s"
        )

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
        if time.monotonic() - self.pipeline.heard_at < self.request_timeout:
            return
        self._timeouts += 1
        if self._timeouts < RECONNECT_AFTER_TIMEOUTS:
            return
        self._timeouts = 0
        nc = self.nc
        if nc is None or not self.owned or not nc.is_connected:
            return
        log.info(
            "anarchon: NATS %s: %d requests in a row timed out; reconnecting",
            self.shown,
            RECONNECT_AFTER_TIMEOUTS,
        )
        task = asyncio.get_running_loop().create_task(
            nc._process_op_err(nats.errors.StaleConnectionError())
        )
        self.reconnects.add(task)
        task.add_done_callback(self.reconnects.discard)

    # Answers as errors -----------------------------------------------------------

    def answer_error(self, problem: APIError, what: str) -> BackendUnavailableError | BackendError:
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
    def driver_errors(self, what: str) -> Iterator[None]:
        """Driver errors that escape as they are become coded: outage or ``BackendError``."""
        try:
            yield
        except APIError as error:
            raise self.answer_error(error, what) from error
        except UNREACHABLE as error:
            raise self.unavailable(error, what) from error
        except nats.errors.Error as error:
            raise BackendError(
                f"NATS at {self.shown} failed the {what}: {type(error).__name__}: {error}"
            ) from error

    def json(self, data: bytes, what: str) -> dict[str, Any]:
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

    def answer(self, msg: Msg | None, what: str) -> dict[str, Any]:
        """One pipelined answer as a JSON object; no answer, no responders: unavailable."""
        if msg is None:
            raise self.no_answer(what)
        self._timeouts = 0  # a request was answered: the connection works
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
        return self.json(msg.data, what)

    # Requests ------------------------------------------------------------------

    async def request(
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
        except UNREACHABLE as error:
            raise self.unavailable(error, what) from error
        return self.json(reply.data, what)

    async def api(
        self, nc: Client, op: str, request: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """A JetStream API call; raises ``APIError`` (503 answers: unavailable)."""
        body = await self.request(
            nc, f"{API}.{op}", b"" if request is None else dumps(request), op.split(".")[0]
        )
        error = api_error(body)
        if error is not None:
            if error.code == 503:
                raise BackendUnavailableError(
                    f"JetStream at {self.shown} is unavailable ({op}): {error.description}"
                ) from error
            raise error
        return body

    async def publish(self, nc: Client, subject: str, payload: bytes, what: str) -> int:
        """Publish to the stream and wait for the acknowledgement: the stored sequence."""
        body = await self.request(nc, subject, payload, what)
        error = api_error(body)
        if error is not None:
            raise self.answer_error(error, what)
        return int(body.get("seq") or 0)

    async def get_message(self, nc: Client, request: dict[str, Any]) -> Stored | None:
        """``STREAM.MSG.GET`` (served by the stream leader): the stored message, or None."""
        try:
            body = await self.api(nc, f"STREAM.MSG.GET.{self.stream}", request)
        except APIError as error:
            if error.err_code == ERR_NOT_FOUND_MSG or error.code == 404:
                return None
            raise
        return stored(body)

    async def send(self, nc: Client, requests: Sequence[Request], what: str) -> list[Msg | None]:
        """Pipelined requests (see :class:`~anarchon_nats._pipeline.Pipeline`)."""
        with self.driver_errors(what):
            return await self.pipeline.requests(nc, requests, self.request_timeout)
