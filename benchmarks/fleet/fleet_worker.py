"""One anarchon process of ``benchmarks/fleet/fleet.py`` (run by it, not by hand).

    python fleet_worker.py --kind KIND --url URL --jobs J --every-ms I --instance NAME
                           --plan PLAN.json --out FILE [--observe PARTS] [--no-gc-freeze]
                           [--claim-ahead S] [--candidates K|none]

Declares ``J`` interval jobs ``j000000`` ... every ``I`` ms with ``jitter=0``
(every other option at its default), starts the scheduler, writes
``FILE.ready``, waits for the parent's ``PLAN.json`` (``{"samples": [epoch s,
...], "stop": epoch s}``), runs until wall time ``stop``, and writes one JSON document to ``--out``: the handler
starts ``[job, slot_ms, lateness_ms]`` (lateness = handler start minus slot,
wall clock; the store is on this host), the CPU/counter samples taken at the
plan's instants (see ``fleet_common.Sampler``), and when the scheduler
was ready. The result is written before the scheduler's ``stop()``;
``FILE.stopped`` (the time) once it stopped. Warnings of the scheduler go
to stderr.

``--observe PARTS`` turns on what a team watching the fleet would (a comma
list): ``prometheus`` and ``otel`` (SDK meter provider with an in-memory
reader) metrics, ``callbacks`` (a sync and an async ``scheduler.on()``
callback for every event kind). The fleet registry is on in every run (it
cannot be turned off): declared at start and every 120 s (``fleet_refresh``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from typing import Any

import fleet_counting
from fleet_common import Sampler, read_plan, signal_ready, signal_stopped, wall_ms, write_result

OBSERVE_PARTS = ("prometheus", "otel", "callbacks")


def observe(scheduler: Any, parts: set[str]) -> dict[str, int]:
    """Turn on ``parts``: Prometheus and/or OpenTelemetry metrics, and ``callbacks`` (a sync and
    an async ``scheduler.on()`` callback for every event kind); returns the callbacks' counts."""
    from anarchon.events import EVENT_KINDS

    seen: dict[str, int] = {}
    if "callbacks" in parts:

        def count(event: Any) -> None:
            seen[event.kind] = seen.get(event.kind, 0) + 1

        async def count_async(event: Any) -> None:
            seen["async"] = seen.get("async", 0) + 1

        for kind in sorted(EVENT_KINDS):
            scheduler.on(kind, count)
            scheduler.on(kind, count_async)
    if "prometheus" in parts:
        from anarchon.metrics import prometheus
        from prometheus_client import CollectorRegistry

        prometheus.attach(scheduler, registry=CollectorRegistry())
    if "otel" in parts:
        from anarchon.metrics import otel
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        otel.attach(scheduler, MeterProvider(metric_readers=[InMemoryMetricReader()]))
    return seen


async def run(args: argparse.Namespace) -> None:
    counters = fleet_counting.install(args.kind)
    from anarchon import RunContext, Scheduler

    starts: list[tuple[int, int, float]] = []
    record = starts.append

    async def handler(ctx: RunContext) -> None:
        record((int(ctx.job[1:]), ctx.slot, wall_ms() - ctx.slot))

    began = time.time()
    scheduler = Scheduler(
        args.url,
        instance_id=args.instance,
        gc_freeze=not args.no_gc_freeze,
        **({} if args.claim_ahead is None else {"claim_ahead": args.claim_ahead}),
        **({} if args.candidates is None else {"candidates": _candidates(args.candidates)}),
    )
    every = f"{args.every_ms}ms"
    for n in range(args.jobs):
        scheduler.every(f"j{n:06d}", every, handler, jitter=0)
    parts = set() if args.observe is None else set(args.observe.split(","))
    seen = observe(scheduler, parts) if parts else {}
    async with scheduler:
        ready = time.time()
        signal_ready(args.out)
        plan = read_plan(args.plan)
        while plan is None:
            await asyncio.sleep(0.05)
            plan = read_plan(args.plan)
        sampler = Sampler([float(t) for t in plan["samples"]], counters)
        sampler.start()
        await asyncio.sleep(max(0.0, float(plan["stop"]) - time.time()))
        sampler.join(timeout=max(0.0, sampler.instants[-1] - time.time()) + 5)
        # The result is written before stop(): the parent does not wait for a slow stop.
        write_result(
            args.out,
            {
                "instance": args.instance,
                "began": began,
                "ready": ready,
                "stopping": time.time(),
                "samples": sampler.samples,
                "starts": list(starts),
                "events": dict(seen),
            },
        )
    signal_stopped(args.out)


def _candidates(value: str) -> int | None:
    """``--candidates``: a count, or ``none`` for every instance claiming every job-slot."""
    return None if value.lower() == "none" else int(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, required=True)
    parser.add_argument("--every-ms", type=int, required=True)
    parser.add_argument("--instance", required=True)
    parser.add_argument("--plan", required=True, help="the parent's plan file (JSON)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--observe", help=f"comma list of {', '.join(OBSERVE_PARTS)}")
    parser.add_argument("--no-gc-freeze", action="store_true", help="Scheduler(gc_freeze=False)")
    parser.add_argument("--claim-ahead", type=float, help="Scheduler(claim_ahead=S), seconds")
    parser.add_argument("--candidates", help="Scheduler(candidates=K); none: every instance")
    args = parser.parse_args()
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s %(message)s"
    )
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
