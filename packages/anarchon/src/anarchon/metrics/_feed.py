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


Record = Callable[[str, "str | None", "dict[str, Any]"], None]


def _recorders(sink: Sink) -> dict[str, Record]:
    """One recorder per event kind (the delivery task calls it for each event of that kind)."""

    def run_finished(kind: str, job: str | None, fields: dict[str, Any]) -> None:
        duration = fields.get("duration_ms")
        sink.run_finished(
            job or "",
            fields.get("status") or "unknown",
            None if duration is None else duration / 1000,
        )

    def run_started(kind: str, job: str | None, fields: dict[str, Any]) -> None:
        latency = fields.get("claim_latency_ms")
        lateness = fields.get("lateness_ms") or 0
        sink.run_started(
            job or "",
            lateness / 1000 if lateness > 0 else 0.0,
            None if latency is None else latency / 1000,
        )

    def skipped(kind: str, job: str | None, fields: dict[str, Any]) -> None:
        sink.skipped(job or "", fields.get("reason") or "unknown")

    def taken_over(kind: str, job: str | None, fields: dict[str, Any]) -> None:
        sink.taken_over(job or "")

    def lease_lost(kind: str, job: str | None, fields: dict[str, Any]) -> None:
        sink.lease_lost(job or "")

    def store_unavailable(kind: str, job: str | None, fields: dict[str, Any]) -> None:
        sink.store_error(fields.get("store") or "unknown")

    return {
        "run_started": run_started,
        "run_finished": run_finished,
        "skipped": skipped,
        "taken_over": taken_over,
        "lease_lost": lease_lost,
        "store_unavailable": store_unavailable,
    }


def attach_sink(scheduler: Scheduler, sink: Sink) -> Callable[[], None]:
    """Feed ``sink`` from ``scheduler``'s events; returns a function that detaches it."""
    recorders = _recorders(sink)
    # on_fields: the instruments take microseconds and never block; no Event is built for them
    unsubscribes = [scheduler.events.on_fields(kind, recorders[kind]) for kind in METRIC_KINDS]

    def detach() -> None:
        for unsubscribe in unsubscribes:
            unsubscribe()

    return detach
