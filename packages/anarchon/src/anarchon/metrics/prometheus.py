"""Prometheus metrics of a scheduler (extra ``anarchon[prometheus]``), fed from its events.

>>> from anarchon import Scheduler
>>> from anarchon.metrics.prometheus import attach
>>> from prometheus_client import CollectorRegistry
>>> registry = CollectorRegistry()
>>> metrics = attach(Scheduler(backend="memory://"), registry=registry)

Expose ``registry`` (or the default one) as usual: ``prometheus_client.start_http_server``
in a plain process, ``prometheus_client.make_asgi_app`` mounted in FastAPI
(docs/fleet.md, "Metrics").

The figures are kept in plain dicts updated by the event delivery task (no
lock, no ``labels()`` lookup per run) and turned into metric families when
Prometheus scrapes (a custom collector).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from anarchon.errors import UnsupportedError
from anarchon.metrics._feed import attach_sink

try:
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise UnsupportedError(
        "anarchon.metrics.prometheus needs prometheus-client: pip install 'anarchon[prometheus]'"
    ) from error

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["PrometheusMetrics", "attach"]

BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
"""Upper bounds (s) of the histogram buckets (``+Inf`` is added)."""


class _Histogram:
    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*BUCKETS, float("inf")), self.counts):  # noqa: B905 - same length
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out


class PrometheusMetrics(Collector):
    """The figures of the schedulers attached, registered once in ``registry`` as a collector.

    Names (with the default ``namespace="anarchon"``):
    ``anarchon_runs_total{job,status}``, ``anarchon_run_duration_seconds{job}``,
    ``anarchon_start_lateness_seconds{job}``, ``anarchon_claim_latency_seconds``,
    ``anarchon_skips_total{job,reason}``, ``anarchon_takeovers_total{job}``,
    ``anarchon_lease_losses_total{job}``, ``anarchon_store_errors_total{store}``.
    """

    def __init__(self, registry: CollectorRegistry, namespace: str = "anarchon") -> None:
        self.registry = registry
        self.namespace = namespace
        self.runs: dict[tuple[str, ...], int] = {}
        self.duration: dict[str, _Histogram] = {}
        self.lateness: dict[str, _Histogram] = {}
        self.claim_latency = _Histogram()
        self.skips: dict[tuple[str, ...], int] = {}
        self.takeovers: dict[str, int] = {}
        self.lease_losses: dict[str, int] = {}
        self.store_errors: dict[str, int] = {}
        registry.register(self)

    def attach(self, scheduler: Scheduler) -> Callable[[], None]:
        """Feed these metrics from ``scheduler``'s events; returns a function that detaches."""
        return attach_sink(scheduler, self)

    # Sink (called on the scheduler's loop) -----------------------------------

    def run_finished(self, job: str, status: str, duration_s: float | None) -> None:
        """Count one run; observe its duration."""
        key = (job, status)
        self.runs[key] = self.runs.get(key, 0) + 1
        if duration_s is not None:
            histogram = self.duration.get(job)
            if histogram is None:
                histogram = self.duration[job] = _Histogram()
            histogram.observe(duration_s)

    def run_started(self, job: str, lateness_s: float, claim_latency_s: float | None) -> None:
        """Observe the start lateness and the claim latency."""
        histogram = self.lateness.get(job)
        if histogram is None:
            histogram = self.lateness[job] = _Histogram()
        histogram.observe(lateness_s)
        if claim_latency_s is not None:
            self.claim_latency.observe(claim_latency_s)

    def skipped(self, job: str, reason: str) -> None:
        """Count one skip."""
        key = (job, reason)
        self.skips[key] = self.skips.get(key, 0) + 1

    def taken_over(self, job: str) -> None:
        """Count one takeover."""
        self.takeovers[job] = self.takeovers.get(job, 0) + 1

    def lease_lost(self, job: str) -> None:
        """Count one lease loss."""
        self.lease_losses[job] = self.lease_losses.get(job, 0) + 1

    def store_error(self, store: str) -> None:
        """Count one store outage."""
        self.store_errors[store] = self.store_errors.get(store, 0) + 1

    # Collector (called by the scrape, in its thread) ---------------------------

    def collect(self) -> Iterator[Metric]:
        """The metric families, from a copy of the current figures."""
        ns = self.namespace

        def counter(
            name: str, doc: str, labels: list[str], values: dict[tuple[str, ...], int]
        ) -> CounterMetricFamily:
            family = CounterMetricFamily(f"{ns}_{name}", doc, labels=labels)
            for key, value in list(values.items()):
                family.add_metric(list(key), value)
            return family

        def histogram(name: str, doc: str, values: dict[str, _Histogram]) -> HistogramMetricFamily:
            family = HistogramMetricFamily(f"{ns}_{name}", doc, labels=["job"])
            for job, h in list(values.items()):
                family.add_metric([job], h.buckets(), h.total)
            return family

        yield counter(
            "runs", "Runs ended and recorded, by job and status", ["job", "status"], dict(self.runs)
        )
        yield histogram("run_duration_seconds", "How long each run's handler ran", self.duration)
        yield histogram("start_lateness_seconds", "Run start minus its slot", self.lateness)
        claims = HistogramMetricFamily(
            f"{ns}_claim_latency_seconds",
            "Round trip of the claim that won a run (all jobs: a store figure)",
        )
        claims.add_metric([], self.claim_latency.buckets(), self.claim_latency.total)
        yield claims
        yield counter(
            "skips", "Slots skipped, by job and reason", ["job", "reason"], dict(self.skips)
        )
        yield counter(
            "takeovers",
            "Runs this instance took over (attempt > 1)",
            ["job"],
            {(k,): v for k, v in list(self.takeovers.items())},
        )
        yield counter(
            "lease_losses",
            "Runs here that lost their lease",
            ["job"],
            {(k,): v for k, v in list(self.lease_losses.items())},
        )
        yield counter(
            "store_errors",
            "Store outages begun (transient errors), by store",
            ["store"],
            {(k,): v for k, v in list(self.store_errors.items())},
        )


_by_registry: dict[tuple[int, str], PrometheusMetrics] = {}


def attach(
    scheduler: Scheduler, registry: CollectorRegistry | None = None, namespace: str = "anarchon"
) -> PrometheusMetrics:
    """Feed Prometheus metrics from ``scheduler`` (default registry unless given).

    The collector is made once per registry and namespace, so several
    schedulers of one process may attach to the same registry (their figures add up).
    """
    chosen = REGISTRY if registry is None else registry
    key = (id(chosen), namespace)
    metrics = _by_registry.get(key)
    if metrics is None or metrics.registry is not chosen:
        metrics = _by_registry[key] = PrometheusMetrics(chosen, namespace)
    metrics.attach(scheduler)
    return metrics
