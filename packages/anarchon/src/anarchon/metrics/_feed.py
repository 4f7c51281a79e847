"""What every metrics exporter records, and the subscriptions that feed it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["METRIC_KINDS", "Sink", "attach_sink"]

METRIC_KINDS = (
    "run_started",
    "run_finished",
    "skipped",
    "taken_over",
    "lease_lost",
    "store_unavailable",
)
"""The event kinds the metrics are computed from."""


class Sink(Protocol):
    """An exporter's instruments. Each method is called by the event delivery task, on the loop."""

    def run_finished(self, job: str, status: str, duration_s: float | None) -> None:
        """One run ended and was recorded: count it and observe its duration."""

    def run_started(self, job: str, lateness_s: float, claim_latency_s: float | None) -> None:
        """One run started: observe its lateness and its claim's round trip."""

    def skipped(self, job: str, reason: str) -> None:
        """One slot was skipped."""

    def taken_over(self, job: str) -> None:
        """This instance took over a run another instance had started."""

    def lease_lost(self, job: str) -> None:
        """A run here lost its lease."""

    def store_error(self, store: str) -> None:
        """An outage of the store began."""


def _feed(sink: Sink) -> Callable[[str, str | None, dict[str, Any]], None]:
    def record(kind: str, job: str | None, fields: dict[str, Any]) -> None:
        name = job or ""
        if kind == "run_finished":
            duration = fields.get("duration_ms")
            sink.run_finished(
                name,
                fields.get("status") or "unknown",
                None if duration is None else duration / 1000,
            )
        elif kind == "run_started":
            latency = fields.get("claim_latency_ms")
            sink.run_started(
                name,
                max(fields.get("lateness_ms") or 0, 0) / 1000,
                None if latency is None else latency / 1000,
            )
        elif kind == "skipped":
            sink.skipped(name, fields.get("reason") or "unknown")
        elif kind == "taken_over":
            sink.taken_over(name)
        elif kind == "lease_lost":
            sink.lease_lost(name)
        elif kind == "store_unavailable":
            sink.store_error(fields.get("store") or "unknown")

    return record


def attach_sink(scheduler: Scheduler, sink: Sink) -> Callable[[], None]:
    """Feed ``sink`` from ``scheduler``'s events; returns a function that detaches it."""
    record = _feed(sink)
    # on_fields: the instruments take microseconds and never block; no Event is built for them
    unsubscribes = [scheduler.events.on_fields(kind, record) for kind in METRIC_KINDS]

    def detach() -> None:
        for unsubscribe in unsubscribes:
            unsubscribe()

    return detach
