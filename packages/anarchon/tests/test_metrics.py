"""Metrics fed from events: Prometheus scraped over HTTP, OpenTelemetry read with the SDK's in-memory reader."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import Callable

from anarchon import Event, MemoryBackend, RunContext, Scheduler
from anarchon.metrics import otel as anarchon_otel
from anarchon.metrics import prometheus as anarchon_prometheus
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families


async def _workload(attach: Callable[[Scheduler], object]) -> tuple[list[Event], Scheduler]:
    """One run each of ok, error and timeout (hourly jobs, the current slot claimable now),
    and a 300 ms job whose 1 s runs make the next slots skip for overlap."""
    scheduler = Scheduler(MemoryBackend(), instance_id="m1")
    seen: list[Event] = []
    for kind in ("run_started", "run_finished", "skipped"):
        scheduler.on(kind, seen.append)
    attach(scheduler)

    async def good(ctx: RunContext) -> None:
        return None

    async def bad(ctx: RunContext) -> None:
        raise RuntimeError("boom")

    async def slow(ctx: RunContext) -> None:
        await asyncio.sleep(30)

    async def busy(ctx: RunContext) -> None:
        await asyncio.sleep(1)

    hourly = {"jitter": 0, "max_late": "2h"}
    scheduler.every("good", "1h", good, **hourly)
    scheduler.every("bad", "1h", bad, **hourly)
    scheduler.every("slow", "1h", slow, timeout="200ms", **hourly)
    scheduler.every("busy", "300ms", busy, jitter=0, overlap=False)
    await scheduler.start()
    for _ in range(600):
        done = {e.job for e in seen if e.kind == "run_finished"}
        skips = [e for e in seen if e.kind == "skipped" and e.reason == "overlap"]
        if {"good", "bad", "slow", "busy"} <= done and len(skips) >= 2:
            break
        await asyncio.sleep(0.05)
    await scheduler.stop()
    return list(seen), scheduler


def _expected(seen: list[Event]) -> tuple[dict[tuple[str, str], int], int, int]:
    runs: dict[tuple[str, str], int] = {}
    for e in seen:
        if e.kind == "run_finished":
            assert e.job is not None
            assert e.status is not None
            runs[(e.job, e.status)] = runs.get((e.job, e.status), 0) + 1
    skips = sum(1 for e in seen if e.kind == "skipped" and e.reason == "overlap")
    started = sum(1 for e in seen if e.kind == "run_started")
    return runs, skips, started


async def test_prometheus_endpoint_holds_the_counters() -> None:
    registry = CollectorRegistry()
    seen, scheduler = await _workload(lambda s: anarchon_prometheus.attach(s, registry=registry))
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        port = server.server_address[1]

        def scrape() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
                return str(reply.read().decode())

        text = await asyncio.to_thread(scrape)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    runs, skips, started = _expected(seen)
    assert runs[("good", "ok")] == 1
    assert runs[("bad", "error")] == 1
    assert runs[("slow", "timeout")] == 1
    assert skips >= 2
    for (job, status), count in runs.items():
        assert samples[("anarchon_runs_total", (("job", job), ("status", status)))] == count
    assert samples[("anarchon_skips_total", (("job", "busy"), ("reason", "overlap")))] == skips
    history = await scheduler.history("busy", limit=1000)
    assert skips == sum(1 for r in history if r.status == "skipped" and r.reason == "overlap")
    assert samples[("anarchon_run_duration_seconds_count", (("job", "good"),))] == 1
    slow_sum = samples[("anarchon_run_duration_seconds_sum", (("job", "slow"),))]
    assert 0.2 <= slow_sum < 30  # cancelled at its 200 ms timeout
    lateness = sum(
        v
        for (name, _labels), v in samples.items()
        if name == "anarchon_start_lateness_seconds_count"
    )
    assert lateness == started
    claims = sum(
        v
        for (name, _labels), v in samples.items()
        if name == "anarchon_claim_latency_seconds_count"
    )
    assert claims == started


async def test_otel_metrics_in_the_sdk_reader() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    seen, _scheduler = await _workload(lambda s: anarchon_otel.attach(s, meter_provider=provider))
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, dict[tuple[tuple[str, object], ...], object]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "anarchon"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    labels = tuple(sorted(point.attributes.items())) if point.attributes else ()
                    value = getattr(point, "value", None)
                    if value is None:
                        value = point.count  # type: ignore[union-attr]
                    points.setdefault(metric.name, {})[labels] = value
    runs, skips, started = _expected(seen)
    assert runs[("slow", "timeout")] == 1
    for (job, status), count in runs.items():
        assert points["anarchon.runs"][(("job", job), ("status", status))] == count
    assert points["anarchon.skips"][(("job", "busy"), ("reason", "overlap"))] == skips
    assert points["anarchon.run.duration"][(("job", "bad"),)] == 1
    assert sum(points["anarchon.run.start_lateness"].values()) == started  # type: ignore[arg-type]
    provider.shutdown()
