"""Scheduler events: ``scheduler.on(kind, callback)`` and the bus that delivers them.

Delivery is off the hot path: :meth:`EventBus.emit` appends to a bounded
queue (nothing at all happens when nobody listens to that kind); one task
per scheduler drains it. Async callbacks are awaited by that task, one after
the other; sync callbacks run in one worker thread of the bus (a batch of
events per hop), so neither a slow callback nor a raising one can delay a
claim, a heartbeat or a result. A callback that raises is logged once (at
ERROR, with its traceback) and keeps being called. When the queue is full
(:data:`QUEUE_LIMIT` events waiting, e.g. behind a callback that blocks),
new events are dropped and counted in :attr:`EventBus.dropped`. The
subscriptions are read once per kind for each batch the task takes.
Exporters (:meth:`EventBus.on_fields`, the metrics) are not queued: they
update in-memory figures when the event is emitted.

See docs/fleet.md, "Events".
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import datetime
import inspect
import logging
import zoneinfo
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from anarchon.errors import InvalidConfigError

__all__ = [
    "EVENT_KINDS",
    "QUEUE_LIMIT",
    "Event",
    "EventBus",
    "EventKind",
    "FieldsListener",
    "Listener",
    "slot_iso",
]

EventKind = Literal[
    "run_started",
    "run_finished",
    "skipped",
    "taken_over",
    "lease_lost",
    "handed_over",
    "store_unavailable",
    "store_recovered",
    "schedule_drift",
    "member_joined",
    "member_left",
]

EVENT_KINDS: frozenset[str] = frozenset(
    (
        "run_started",
        "run_finished",
        "skipped",
        "taken_over",
        "lease_lost",
        "handed_over",
        "store_unavailable",
        "store_recovered",
        "schedule_drift",
        "member_joined",
        "member_left",
    )
)
"""Every kind ``scheduler.on()`` accepts."""

QUEUE_LIMIT = 100_000
"""Events waiting for delivery at most; later ones are dropped (and counted) until there is room."""

FLUSH_ON_STOP_S = 2.0
"""``stop()`` waits this long at most for queued events to be delivered."""


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened on a scheduler.

    ``job``, ``slot`` (epoch ms), ``scheduled_at`` (the slot as an aware
    datetime in the job's ``zone``) and ``attempt`` are None for store events.
    The kind-specific fields are None where they do not apply.
    """

    kind: str
    """One of :data:`EVENT_KINDS`."""
    job: str | None
    slot: int | None
    zone: str
    """The IANA zone of the job's schedule (UTC for interval jobs)."""
    instance: str
    """The instance id of the scheduler that emitted the event."""
    attempt: int | None
    at_ms: int
    """Store time (ms since the epoch) when it happened."""
    status: str | None = None
    """``run_finished``: ok, error, timeout or cancelled."""
    duration_ms: int | None = None
    """``run_finished``: how long the handler ran."""
    error: str | None = None
    """``run_finished`` with status error: ``Type: message``; store events: the store error."""
    reason: str | None = None
    """``skipped``: overlap, late, paused, skip_next or claim_not_durable; ``lease_lost``: why."""
    lateness_ms: int | None = None
    """``run_started``: start minus slot (ms)."""
    claim_latency_ms: float | None = None
    """``run_started``: the claim's round trip to the store (ms)."""
    store: str | None = None
    """``store_unavailable``/``store_recovered``: the backend's name."""
    details: dict[str, Any] | None = None
    """``schedule_drift``: e.g. the fingerprints and how many instances hold each."""
    member: str | None = None
    """``member_joined``/``member_left``: the other instance's id."""

    @property
    def scheduled_at(self) -> datetime.datetime | None:
        """The slot as an aware datetime in the job's zone (None for store events)."""
        return None if self.slot is None else _scheduled_at(self.slot, self.zone)


Listener = Callable[[Event], Awaitable[None] | None]
"""A callback: ``def f(event) -> None`` or ``async def f(event) -> None``."""


def slot_iso(slot: int, zone: str = "UTC") -> str:
    """A slot (epoch ms) as an ISO 8601 time in ``zone`` (ms precision)."""
    return _scheduled_at(slot, zone).isoformat(timespec="milliseconds")


def _zone(name: str) -> datetime.tzinfo:
    if name == "UTC":
        return datetime.timezone.utc
    try:
        return zoneinfo.ZoneInfo(name)  # cached by zoneinfo
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return datetime.timezone.utc


def _scheduled_at(slot: int, zone: str) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(slot / 1000, tz=_zone(zone))


FieldsListener = Callable[[str, "str | None", "dict[str, Any]"], None]
"""``callback(kind, job, fields)``: an exporter's view of an event, without the :class:`Event`."""

_Pending = tuple[str, int, "str | None", "int | None", "int | None", str, "dict[str, Any]"]
"""A queued event: ``(kind, at_ms, job, slot, attempt, zone, fields)``; the Event is built on delivery."""


class _Subscription:
    __slots__ = ("callback", "fields_only", "is_async", "kind")

    def __init__(self, kind: str, callback: Any, fields_only: bool = False) -> None:
        self.kind = kind
        self.callback = callback
        self.fields_only = fields_only
        self.is_async = inspect.iscoroutinefunction(callback) or inspect.iscoroutinefunction(
            getattr(callback, "__call__", None)  # noqa: B004 - async __call__ of an object
        )


class EventBus:
    """Subscriptions and the delivery queue of one scheduler."""

    def __init__(self, instance_id: str, log: logging.Logger) -> None:
        self.instance_id = instance_id
        self.log = log
        self._subs: dict[str, list[_Subscription]] = {}
        self._split: dict[str, tuple[tuple[_Subscription, ...], bool]] = {}
        """Per kind: the ``on_fields`` subscriptions (called at emit) and whether any other is queued."""
        self._queue: collections.deque[_Pending] = collections.deque()
        self._wake: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None
        self._failed: set[int] = set()
        self.dropped = 0
        """Events dropped because the queue was full."""
        self.failures = 0
        """Callback calls that raised."""

    # Subscriptions -------------------------------------------------------

    def on(self, kind: str, callback: Listener) -> Callable[[], None]:
        """Call ``callback(event)`` for every event of ``kind``; returns a function that unsubscribes."""
        return self._subscribe(_Subscription(kind, callback))

    def on_fields(self, kind: str, callback: FieldsListener) -> Callable[[], None]:
        """For exporters: ``callback(kind, job, fields)`` for every event of ``kind``.

        Called on the event loop when the event is emitted (no queue, no
        thread hop, no :class:`Event` built for it), so it must take
        microseconds and never block, as the metrics exporters do (a counter
        or a histogram updated in memory). Guarded: an exception is logged
        once. Returns an unsubscribe function.
        """
        return self._subscribe(_Subscription(kind, callback, fields_only=True))

    def _subscribe(self, sub: _Subscription) -> Callable[[], None]:
        kind, callback = sub.kind, sub.callback
        if kind not in EVENT_KINDS:
            raise InvalidConfigError(
                f"unknown event kind {kind!r}; the kinds are {', '.join(sorted(EVENT_KINDS))}"
            )
        if not callable(callback):
            raise InvalidConfigError(f"event callback must be callable, got {callback!r}")
        self._subs.setdefault(kind, []).append(sub)
        self._split_kind(kind)

        def unsubscribe() -> None:
            subs = self._subs.get(kind)
            if subs is not None and sub in subs:
                subs.remove(sub)
                if not subs:
                    del self._subs[kind]
                self._split_kind(kind)

        return unsubscribe

    def _split_kind(self, kind: str) -> None:
        """Cache ``(fields-only subscriptions, any queued one)`` of ``kind`` for :meth:`emit`."""
        subs = self._subs.get(kind)
        if not subs:
            self._split.pop(kind, None)
            return
        inline = tuple(sub for sub in subs if sub.fields_only)
        self._split[kind] = (inline, len(inline) < len(subs))

    def wants(self, kind: str) -> bool:
        """True when someone listens to ``kind`` (emitters may skip building the event)."""
        return kind in self._subs

    # Emitting ------------------------------------------------------------

    def emit(
        self,
        kind: str,
        at_ms: int,
        job: str | None = None,
        slot: int | None = None,
        attempt: int | None = None,
        zone: str = "UTC",
        **fields: Any,
    ) -> None:
        """Deliver an event of ``kind`` (a no-op when nobody listens to it). Call on the scheduler's loop.

        ``on_fields`` subscribers are called now; the event is queued for the others.
        """
        split = self._split.get(kind)
        if split is None:
            return
        inline, queued = split
        for sub in inline:
            try:
                sub.callback(kind, job, fields)
            except Exception as error:
                self._failed_once(sub, error)
        if not queued:
            return
        if len(self._queue) >= QUEUE_LIMIT:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % QUEUE_LIMIT == 0:
                self.log.warning(
                    "anarchon: event queue full (%d waiting); %d event(s) dropped so far",
                    QUEUE_LIMIT,
                    self.dropped,
                )
            return
        queue = self._queue
        was_empty = not queue
        queue.append((kind, at_ms, job, slot, attempt, zone, fields))
        # The delivery task waits only on an empty queue: wake it for the first event only.
        wake = self._wake
        if was_empty and wake is not None:
            wake.set()
            assert self._idle is not None
            self._idle.clear()

    # Delivery ------------------------------------------------------------

    def start(self) -> None:
        """Start the delivery task on the running loop (``Scheduler.start()`` does)."""
        if self._task is not None and not self._task.done():
            return
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        if self._queue:
            self._wake.set()
        else:
            self._idle.set()
        self._task = asyncio.get_running_loop().create_task(self._drain(), name="anarchon-events")

    async def stop(self, timeout: float = FLUSH_ON_STOP_S) -> None:
        """Deliver what is queued (waiting ``timeout`` at most), then end the delivery task."""
        task = self._task
        if task is None:
            return
        assert self._idle is not None
        if not task.done():
            try:
                await asyncio.wait_for(self._idle.wait(), timeout)
            except asyncio.TimeoutError:
                self.log.warning(
                    "anarchon: %d event(s) not delivered on stop (callbacks too slow)",
                    len(self._queue),
                )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self._task = None
        self._wake = None
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.shutdown(wait=False)

    async def _drain(self) -> None:
        wake, idle = self._wake, self._idle
        assert wake is not None
        assert idle is not None
        loop = asyncio.get_running_loop()
        while True:
            await wake.wait()
            wake.clear()
            while self._queue:
                batch = list(self._queue)
                self._queue.clear()
                sync_calls: list[tuple[_Subscription, Event]] = []
                # The subscriptions are read once per batch and kind (not per event).
                subs_of: dict[str, list[_Subscription]] = {}
                for kind, at_ms, job, slot, attempt, zone, fields in batch:
                    subs = subs_of.get(kind)
                    if subs is None:
                        subs = subs_of[kind] = list(self._subs.get(kind, ()))
                    event: Event | None = None
                    for sub in subs:
                        if sub.fields_only:
                            continue  # called when the event was emitted
                        if event is None:
                            event = Event(
                                kind, job, slot, zone, self.instance_id, attempt, at_ms, **fields
                            )
                        if sub.is_async:
                            try:
                                await sub.callback(event)
                            except asyncio.CancelledError:
                                raise
                            except Exception as error:
                                self._failed_once(sub, error)
                        else:
                            sync_calls.append((sub, event))
                if sync_calls:
                    if self._thread is None:
                        self._thread = concurrent.futures.ThreadPoolExecutor(
                            1, thread_name_prefix="anarchon-events"
                        )
                    await loop.run_in_executor(self._thread, self._call_sync, sync_calls)
            idle.set()

    def _call_sync(self, calls: Sequence[tuple[_Subscription, Event]]) -> None:
        for sub, event in calls:
            try:
                sub.callback(event)
            except Exception as error:
                self._failed_once(sub, error)

    def _failed_once(self, sub: _Subscription, error: Exception) -> None:
        self.failures += 1
        key = id(sub)
        if key in self._failed:
            return
        self._failed.add(key)
        self.log.error(
            "anarchon: event callback %r for %s on %s raised (logged once per callback): %s: %s",
            sub.callback,
            sub.kind,
            self.instance_id,
            type(error).__name__,
            error,
            exc_info=error,
        )


NO_EVENTS = EventBus("", logging.getLogger("anarchon.scheduler"))
"""The bus of a part built without a scheduler: nobody listens, every emit is a no-op."""


def job_zone(job: Any) -> str:
    """The IANA zone a job's slots are shown in (a cron job's ``tz``; UTC otherwise)."""
    return str(getattr(job.schedule, "tz", "UTC"))


def log_extra(
    job: str, slot: int, attempt: int | None, instance: str, zone: str = "UTC"
) -> dict[str, Any]:
    """The ``extra=`` fields of a log record about one run (JSON formatters and structlog read them)."""
    return {
        "job": job,
        "slot": slot,
        "slot_at": slot_iso(slot, zone),
        "attempt": attempt,
        "instance": instance,
    }
