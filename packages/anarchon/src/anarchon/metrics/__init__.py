"""Metrics fed from scheduler events: :mod:`anarchon.metrics.prometheus` and :mod:`anarchon.metrics.otel`.

Each exporter is one call, ``attach(scheduler)``; see docs/fleet.md, "Metrics".
"""

from __future__ import annotations

from anarchon.metrics._feed import METRIC_KINDS, Sink, attach_sink

__all__ = ["METRIC_KINDS", "Sink", "attach_sink"]
