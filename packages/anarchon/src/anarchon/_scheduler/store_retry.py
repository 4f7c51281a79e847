"""The store retry policy (docs/concepts.md, "Errors"): what is retried, what reaches you.

Every store call of the scheduler goes through :class:`StorePolicy`:

- at most ``max_in_flight`` store operations are in flight at once (a batch
  call is one operation), whatever the driver's pool size;
- an error for which ``backend.is_transient(error)`` is True is retried with
  backoff, and an outage is logged once, when it starts, and once when it ends;
- every other error is raised to the caller unchanged, with its code;
- a retry waiting in backoff is woken as soon as any call to the store
  succeeds after a failure (:meth:`StorePolicy.recovered`), and while calls
  wait in backoff one of them tries again at least every
  :data:`PROBE_S`, so a store that answers again is noticed within that
  time, not after the longest backoff;
- an attempt sent while an outage lasts and still unanswered when another
  call succeeds is cut short and sent again at once with the same request
  (as after a timeout): a request the store dropped while it was down (a
  JetStream stream without a leader answers nothing) does not hold its
  caller for a whole per-call timeout after the store answers again, and
  such an attempt waits at most :data:`OUTAGE_ATTEMPT_S` before it is sent
  again, so a store whose every answer was dropped is probed that often too;
- every attempt runs under a per-call timeout (:attr:`StorePolicy.call_timeout_s`,
  cut short by the call's deadline): a call that times out counts as a
  transient error and is retried with the same request (the same tokens).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from anarchon.backend.base import Backend
from anarchon.errors import AnarchonError
from anarchon.events import NO_EVENTS, EventBus

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "GAVE_UP",
    "PROBE_S",
    "CallTimeoutError",
    "StorePolicy",
    "describe_error",
]

T = TypeVar("T")

GAVE_UP: Any = object()
"""Returned by :meth:`StorePolicy.call` when its deadline passed before the store answered."""

_HAS_TIMEOUT = sys.version_info >= (3, 11)
_FIRST_DELAY_S = 0.05
_MAX_DELAY_S = 5.0
_LOGGED_ONCE_LIMIT = 1000

PROBE_S = 0.25
"""While calls wait in backoff, one of them tries again at least this often (the probe)."""


OUTAGE_ATTEMPT_S = 0.5
"""The per-call timeout of an attempt sent while an outage lasts (when shorter)."""


DEFAULT_CALL_TIMEOUT_S = 10.0
"""Per-call timeout of a scheduler without leases (with leases: one heartbeat interval)."""


class CallTimeoutError(TimeoutError):
    """A store call that did not answer within its per-call timeout (a transient error)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer within {seconds:g} s (timeout)")
        self.seconds = seconds


class CallCutShortError(CallTimeoutError):
    """A call still unanswered when another call succeeded after an outage: sent again at once.

    Not a failure of its own: it starts no outage and waits no backoff.
    """

    def __init__(self) -> None:
        TimeoutError.__init__(self, "cut short: the store answered another call")
        self.seconds = 0.0


def describe_error(error: BaseException) -> str:
    """What was observed: a timeout, a refused or reset connection, else ``Type: message``."""
    if isinstance(error, CallTimeoutError):
        return str(error)
    if isinstance(error, ConnectionRefusedError):
        return f"connection refused: {error}"
    if isinstance(error, ConnectionResetError):
        return f"connection reset: {error}"
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)) and not str(error):
        return f"{type(error).__name__}: timed out"
    text = str(error)
    if isinstance(error, AnarchonError):
        return text
    name = type(error).__name__
    return f"{name}: {text}" if text else f"{name} (no message)"


class StorePolicy:
    """Bounded, retried store access for one scheduler."""

    events: EventBus = NO_EVENTS
    """Where ``store_unavailable`` and ``store_recovered`` go (set by the scheduler)."""

    def __init__(
        self,
        backend: Backend,
        log: logging.Logger,
        now_ms: Callable[[], int],
        max_in_flight: int,
        call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S,
    ) -> None:
        self.backend = backend
        self.call_timeout_s = call_timeout_s
        """The longest one store call may take before it counts as a (transient) timeout."""
        self.log = log
        self.now_ms = now_ms
        self.max_in_flight = max_in_flight
        self.gate = asyncio.Semaphore(max_in_flight)
        """Held for every store operation in flight."""
        self.stopping = False
        """Set by ``stop()``: a call without deadline gives up after about a second of outage."""
        self.outage = False
        self.recovered_at_ms = 0
        """Store time (ms) at which the last outage ended (0: none yet)."""
        self.on_recovered: Callable[[], None] | None = None
        """Called (on the scheduler's loop) when an outage ends: the finishes are re-sent."""
        self._logged: set[tuple[str, str]] = set()
        self._sleepers: set[asyncio.Future[None]] = set()
        """Retries waiting in backoff: woken at once when a call succeeds after a failure."""
        self._sent_in_outage: set[asyncio.Future[None]] = set()
        self._in_flight: set[Any] = set()
        """Timeout scopes of the calls waiting for an answer: cut short at a recovery (a store
        that dropped requests while it was down never answers those)."""
        self._cut: set[Any] = set()
        """The scopes of :attr:`_in_flight` that a recovery cut short."""
        """Attempts sent during the outage: told to give up when a call succeeds."""
        self._next_try = 0.0
        """Loop time of the soonest retry any waiting call will make (the probe)."""

    async def call(
        self,
        operation: Callable[[], Awaitable[T]],
        deadline_ms: int | None = None,
        *,
        gated: bool = True,
        max_delay_s: float = _MAX_DELAY_S,
    ) -> T:
        """Call the store, retrying transient errors with backoff.

        Returns :data:`GAVE_UP` when store time passes ``deadline_ms`` first (or
        when stopping, after about a second of outage without deadline). Errors
        that are not transient are raised at once. ``gated=False``: the
        operation holds :attr:`gate` itself (per-item fallbacks of a batch).
        ``max_delay_s`` caps the backoff (finishes: one heartbeat). The backoff
        ends early when another call succeeds (:meth:`recovered`).
        """
        max_delay_s = max(_FIRST_DELAY_S, min(max_delay_s, _MAX_DELAY_S))
        delay = _FIRST_DELAY_S
        while True:
            try:
                if gated:
                    async with self.gate:
                        result = await self._attempt(operation, deadline_ms)
                else:
                    result = await self._attempt(operation, deadline_ms)
            except asyncio.CancelledError:
                raise
            except (_SentInOutageError, CallCutShortError):
                delay = _FIRST_DELAY_S
                continue  # the store answers again: send the same request now
            except Exception as error:
                if not isinstance(error, CallTimeoutError) and not self.backend.is_transient(error):
                    raise
                self.note_outage(error)
                if deadline_ms is not None and self.now_ms() + delay * 1000 > deadline_ms:
                    gave_up: T = GAVE_UP
                    return gave_up
                if self.stopping and deadline_ms is None and delay >= 1.0:
                    self.log.error(
                        "anarchon: giving up on store %s while stopping: %s",
                        self.backend.name,
                        describe_error(error),
                    )
                    stopped: T = GAVE_UP
                    return stopped
                await self._backoff(delay)
                delay = min(delay * 2, max_delay_s)
                continue
            if self.outage:
                self.recovered()
            return result

    async def _attempt(self, operation: Callable[[], Awaitable[T]], deadline_ms: int | None) -> T:
        """One attempt; during an outage, cut short (:class:`_SentInOutageError`) by a recovery."""
        if not self.outage:
            return await self.bounded(operation(), deadline_ms)
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(
            self.bounded(operation(), deadline_ms, timeout_s=OUTAGE_ATTEMPT_S)
        )
        recovered: asyncio.Future[None] = loop.create_future()
        self._sent_in_outage.add(recovered)
        try:
            await asyncio.wait((task, recovered), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self._sent_in_outage.discard(recovered)
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.wait((task,))
        if not task.cancelled():
            task.exception()  # dropped (marked as seen): the request goes again
        raise _SentInOutageError

    def _cut_in_flight(self) -> None:
        """End every call still waiting for an answer at once (:class:`CallCutShortError`):
        each is sent again, with the same request, by its caller."""
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:
            return
        for scope in self._in_flight:
            if scope not in self._cut and not scope.expired():
                self._cut.add(scope)
                scope.reschedule(now)

    async def _backoff(self, delay: float) -> None:
        """Wait ``delay``, or less: until a call succeeds (:meth:`recovered`), and at most
        :data:`PROBE_S` when no other waiting call will try again within that time."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not now < self._next_try <= now + PROBE_S:  # nobody else probes soon: this one does
            delay = min(delay, PROBE_S)
        wake_at = now + delay
        if self._next_try <= now or wake_at < self._next_try:
            self._next_try = wake_at
        sleeper: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(delay, _wake, sleeper)
        self._sleepers.add(sleeper)
        try:
            await sleeper
        finally:
            timer.cancel()
            self._sleepers.discard(sleeper)

    def wake_retries(self) -> None:
        """Every call waiting in backoff tries again now (a call to the store just succeeded)."""
        sleepers, self._sleepers = self._sleepers, set()
        for sleeper in sleepers:
            _wake(sleeper)

    async def bounded(
        self, call: Awaitable[T], deadline_ms: int | None = None, *, timeout_s: float | None = None
    ) -> T:
        """Await one store call under the per-call timeout.

        With ``deadline_ms`` (a claim's), the timeout also ends one call timeout
        after that deadline: the store judges lateness itself, so a claim sent
        before its deadline gets its answer even if it lands after it. Raises
        :class:`CallTimeoutError` (transient) when it does not answer in time.
        ``timeout_s`` shortens the per-call timeout.
        """
        timeout = self.call_timeout_s
        if timeout_s is not None:
            timeout = min(timeout, timeout_s)
        if deadline_ms is not None:
            left = (deadline_ms - self.now_ms()) / 1000 + self.call_timeout_s
            timeout = min(timeout, max(0.05, left))
        if _HAS_TIMEOUT:  # no extra task per call, unlike wait_for before 3.12
            scope = asyncio.timeout(timeout)  # type: ignore[attr-defined,unused-ignore]
            in_flight = self._in_flight
            in_flight.add(scope)
            try:
                async with scope:
                    return await call
            except TimeoutError:
                if scope.expired():
                    if scope in self._cut:
                        raise CallCutShortError from None
                    raise CallTimeoutError(timeout) from None
                raise  # the driver's own timeout: reported as it is
            finally:
                in_flight.discard(scope)
                self._cut.discard(scope)
        try:
            return await asyncio.wait_for(call, timeout)
        except asyncio.TimeoutError:
            raise CallTimeoutError(timeout) from None

    async def complete(
        self,
        operation: Callable[[], Awaitable[None]],
        deadline_ms: int | None = None,
        *,
        gated: bool = True,
        max_delay_s: float = _MAX_DELAY_S,
    ) -> bool:
        """:meth:`call` for an operation without an answer: True once done, False if given up."""

        async def done() -> bool:
            await operation()
            return True

        answer: bool = await self.call(done, deadline_ms, gated=gated, max_delay_s=max_delay_s)
        return answer is True

    def is_transient(self, error: BaseException) -> bool:
        """The backend's verdict on ``error`` (a :class:`CallTimeoutError` always is)."""
        return isinstance(error, CallTimeoutError) or self.backend.is_transient(error)

    def note_outage(self, error: BaseException) -> None:
        """Log the start of an outage (once per outage)."""
        if isinstance(error, CallCutShortError):
            return  # the store answered another call: no outage
        if not self.outage:
            self.outage = True
            self.log.warning(
                "anarchon: store %s unreachable (%s); retrying with backoff",
                self.backend.name,
                describe_error(error),
            )
            self.events.emit(
                "store_unavailable",
                self.now_ms(),
                store=self.backend.name,
                error=describe_error(error),
            )

    def recovered(self) -> None:
        """A call succeeded after a failure: wake the retries in backoff, log the end of the outage."""
        if self._sleepers:
            self.wake_retries()
        if self._in_flight:
            self._cut_in_flight()
        if self._sent_in_outage:
            sent, self._sent_in_outage = self._sent_in_outage, set()
            for attempt in sent:
                _wake(attempt)
        if self.outage:
            self.outage = False
            self.recovered_at_ms = self.now_ms()
            self.log.info("anarchon: store %s reachable again", self.backend.name)
            self.events.emit("store_recovered", self.now_ms(), store=self.backend.name)
            if self.on_recovered is not None:
                self.on_recovered()

    def report(self, what: str, error: BaseException, *, job: str | None = None) -> None:
        """Log a permanent store error at ERROR, once per kind of failure and error."""
        key = (what if job is None else f"{what}:{job}", f"{type(error).__name__}:{error}")
        if key in self._logged:
            return
        if len(self._logged) < _LOGGED_ONCE_LIMIT:
            self._logged.add(key)
        where = f" (job {job})" if job is not None else ""
        self.log.error(
            "anarchon: store %s refused %s%s: %s",
            self.backend.name,
            what,
            where,
            describe_error(error),
            exc_info=error,
        )


class _SentInOutageError(Exception):
    """An attempt sent during an outage, unanswered when another call succeeded."""


def _wake(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():
        sleeper.set_result(None)
