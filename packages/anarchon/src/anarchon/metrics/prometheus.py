"""Prometheus metrics of a scheduler (extra ``anarchon[prometheus]``), fed from its events.

>>> from anarchon import Scheduler
>>> from anarchon.metrics.prometheus import attach
>>> from prometheus_client import CollectorRegistry
>>> registry = CollectorRegistry()
>>> metrics = attach(Scheduler(backend="memory://"), registry=registry)

Expose ``registry`` (or the default one) as usual: ``prometheus_client.start_http_server``
in a plain process, ``prometheus_client.make_asgi_app`` mounted in FastAPI
(docs/operations.md, "Metrics").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from anarchon.errors import UnsupportedError
from anarchon.metrics._feed import attach_sink

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise UnsupportedError(
        "anarchon.metrics.prometheus needs prometheus-client: pip install 'anarchon[prometheus]'"
    ) from error

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["PrometheusMetrics", "attach"]

_SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)


class PrometheusMetrics:
    """The instruments, registered once in ``registry``; feed several schedulers with :meth:`attach`.

    Names (with the default ``namespace="anarchon"``):
    ``anarchon_runs_total{job,status}``, ``anarchon_run_duration_seconds{job}``,
    ``anarchon_start_lateness_seconds{job}``, ``anarchon_claim_latency_seconds``,
    ``anarchon_skips_total{job,reason}``, ``anarchon_takeovers_total{job}``,
    ``anarchon_lease_losses_total{job}``, ``anarchon_store_errors_total{store}``.
    """

    def __init__(self, registry: CollectorRegistry, namespace: str = "anarchon") -> None:
        self.registry = registry

        def histogram(name: str, doc: str) -> Histogram:
            return Histogram(
                name, doc, ["job"], namespace=namespace, registry=registry, buckets=_SECONDS_BUCKETS
            )

        self.runs = Counter(
            "runs", "Runs ended and recorded, by job and status", ["job", "status"],
            namespace=namespace, registry=registry,
        )  # fmt: skip
        self.duration = histogram("run_duration_seconds", "How long each run's handler ran")
        self.lateness = histogram("start_lateness_seconds", "Run start minus its slot")
        self.claim_latency = Histogram(
            "claim_latency_seconds",
            "Round trip of the claim that won a run (all jobs: a store figure)",
            namespace=namespace,
            registry=registry,
            buckets=_SECONDS_BUCKETS,
        )
        self._children: dict[tuple[str, ...], Any] = {}
        self.skips = Counter(
            "skips", "Slots skipped, by job and reason", ["job", "reason"],
            namespace=namespace, registry=registry,
        )  # fmt: skip
        self.takeovers = Counter(
            "takeovers", "Runs this instance took over (attempt > 1)", ["job"],
            namespace=namespace, registry=registry,
        )  # fmt: skip
        self.lease_losses = Counter(
            "lease_losses", "Runs here that lost their lease", ["job"],
            namespace=namespace, registry=registry,
        )  # fmt: skip
        self.store_errors = Counter(
            "store_errors", "Store outages begun (transient errors), by store", ["store"],
            namespace=namespace, registry=registry,
        )  # fmt: skip

    def attach(self, scheduler: Scheduler) -> Callable[[], None]:
        """Feed these metrics from ``scheduler``'s events; returns a function that detaches."""
        return attach_sink(scheduler, self)

    # Sink ------------------------------------------------------------------

    def _child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, cached (``labels()`` validates and locks on every call)."""
        key = (str(id(metric)), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def run_finished(self, job: str, status: str, duration_s: float | None) -> None:
        """Count one run; observe its duration."""
        self._child(self.runs, job, status).inc()
        if duration_s is not None:
            self._child(self.duration, job).observe(duration_s)

    def run_started(self, job: str, lateness_s: float, claim_latency_s: float | None) -> None:
        """Observe the start lateness and the claim latency."""
        self._child(self.lateness, job).observe(lateness_s)
        if claim_latency_s is not None:
            self.claim_latency.observe(claim_latency_s)

    def skipped(self, job: str, reason: str) -> None:
        """Count one skip."""
        self._child(self.skips, job, reason).inc()

    def taken_over(self, job: str) -> None:
        """Count one takeover."""
        self._child(self.takeovers, job).inc()

    def lease_lost(self, job: str) -> None:
        """Count one lease loss."""
        self._child(self.lease_losses, job).inc()

    def store_error(self, store: str) -> None:
        """Count one store outage."""
        self._child(self.store_errors, store).inc()


_by_registry: dict[int, PrometheusMetrics] = {}


def attach(
    scheduler: Scheduler, registry: CollectorRegistry | None = None, namespace: str = "anarchon"
) -> PrometheusMetrics:
    """Feed Prometheus metrics from ``scheduler`` (default registry unless given).

    The instruments are made once per registry and namespace, so several
    schedulers of one process may attach to the same registry.
    """
    chosen = REGISTRY if registry is None else registry
    key = hash((id(chosen), namespace))
    metrics = _by_registry.get(key)
    if metrics is None or metrics.registry is not chosen:
        metrics = _by_registry[key] = PrometheusMetrics(chosen, namespace)
    metrics.attach(scheduler)
    return metrics
