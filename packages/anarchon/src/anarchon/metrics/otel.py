"""OpenTelemetry metrics of a scheduler (extra ``anarchon[otel]``), fed from its events.

>>> from anarchon import Scheduler
>>> from anarchon.metrics.otel import attach
>>> metrics = attach(Scheduler(backend="memory://"))

Without ``meter_provider`` the global one is used (``opentelemetry.metrics.set_meter_provider``);
the SDK and an exporter (OTLP, Prometheus, ...) are the application's choice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from anarchon import _core
from anarchon.errors import UnsupportedError
from anarchon.metrics._feed import attach_sink

try:
    from opentelemetry import metrics as otel_metrics
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise UnsupportedError(
        "anarchon.metrics.otel needs opentelemetry-api: pip install 'anarchon[otel]'"
    ) from error

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["OtelMetrics", "attach"]


class OtelMetrics:
    """The instruments on one meter (``anarchon``).

    ``anarchon.runs{job,status}``, ``anarchon.run.duration{job}`` (s),
    ``anarchon.run.start_lateness{job}`` (s), ``anarchon.claim.latency`` (s),
    ``anarchon.skips{job,reason}``, ``anarchon.takeovers{job}``,
    ``anarchon.lease_losses{job}``, ``anarchon.store.errors{store}``.
    """

    def __init__(self, meter_provider: otel_metrics.MeterProvider | None = None) -> None:
        meter = otel_metrics.get_meter("anarchon", _core.__version__, meter_provider=meter_provider)
        self.runs = meter.create_counter("anarchon.runs", "{run}", "Runs ended and recorded")
        self.duration = meter.create_histogram(
            "anarchon.run.duration", "s", "How long each run's handler ran"
        )
        self.lateness = meter.create_histogram(
            "anarchon.run.start_lateness", "s", "Run start minus its slot"
        )
        self.claim_latency = meter.create_histogram(
            "anarchon.claim.latency", "s", "Round trip of the claim that won a run"
        )
        self.skips = meter.create_counter("anarchon.skips", "{slot}", "Slots skipped")
        self.takeovers = meter.create_counter(
            "anarchon.takeovers", "{run}", "Runs this instance took over (attempt > 1)"
        )
        self.lease_losses = meter.create_counter(
            "anarchon.lease_losses", "{run}", "Runs here that lost their lease"
        )
        self.store_errors = meter.create_counter(
            "anarchon.store.errors", "{outage}", "Store outages begun (transient errors)"
        )

    def attach(self, scheduler: Scheduler) -> Callable[[], None]:
        """Feed these instruments from ``scheduler``'s events; returns a function that detaches."""
        return attach_sink(scheduler, self)

    # Sink ------------------------------------------------------------------

    def run_finished(self, job: str, status: str, duration_s: float | None) -> None:
        """Count one run; record its duration."""
        self.runs.add(1, {"job": job, "status": status})
        if duration_s is not None:
            self.duration.record(duration_s, {"job": job})

    def run_started(self, job: str, lateness_s: float, claim_latency_s: float | None) -> None:
        """Record the start lateness and the claim latency."""
        self.lateness.record(lateness_s, {"job": job})
        if claim_latency_s is not None:
            self.claim_latency.record(claim_latency_s)

    def skipped(self, job: str, reason: str) -> None:
        """Count one skip."""
        self.skips.add(1, {"job": job, "reason": reason})

    def taken_over(self, job: str) -> None:
        """Count one takeover."""
        self.takeovers.add(1, {"job": job})

    def lease_lost(self, job: str) -> None:
        """Count one lease loss."""
        self.lease_losses.add(1, {"job": job})

    def store_error(self, store: str) -> None:
        """Count one store outage."""
        self.store_errors.add(1, {"store": store})


def attach(
    scheduler: Scheduler, meter_provider: otel_metrics.MeterProvider | None = None
) -> OtelMetrics:
    """Feed OpenTelemetry metrics from ``scheduler`` (the global meter provider unless given)."""
    metrics = OtelMetrics(meter_provider)
    metrics.attach(scheduler)
    return metrics
