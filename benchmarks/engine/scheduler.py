"""10,000 interval jobs in one process for 20 s: anarchon (memory backend) vs APScheduler 3.

Prints CPU time per 1,000 runs and peak RSS for each, and their ratio. Each
side runs in its own subprocess so that RSS and CPU are its own.

Run against a release build of the engine:

    (cd packages/anarchon && uv run --no-sync maturin develop --uv --release)
    uv run --no-sync python benchmarks/engine/scheduler.py [--jobs 10000] [--seconds 20] [--interval 5]
        [--events]

``--events`` also runs anarchon with events and metrics on (Prometheus metrics
attached, so every run emits ``run_started``/``run_finished``) and prints its
CPU per run beside the figure without them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import cpu_seconds


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _anarchon(
    jobs: int, seconds: float, interval: float, events: bool = False
) -> dict[str, float]:
    from anarchon import MemoryBackend, RunContext, Scheduler

    runs = 0

    async def handler(ctx: RunContext) -> None:
        nonlocal runs
        runs += 1

    scheduler = Scheduler(MemoryBackend(), instance_id="bench")
    for n in range(jobs):
        scheduler.every(f"job-{n}", interval, handler, history_size=10)
    if events:
        from anarchon.metrics.prometheus import attach
        from prometheus_client import CollectorRegistry

        attach(scheduler, registry=CollectorRegistry())
    async with scheduler:
        await asyncio.sleep(interval + 2.5)  # warm-up: every job has fired once
        cpu0, runs0 = cpu_seconds(), runs
        await asyncio.sleep(seconds)
        cpu1, runs1 = cpu_seconds(), runs
    return {"runs": runs1 - runs0, "cpu_s": cpu1 - cpu0, "peak_rss_mb": _peak_rss_mb()}


async def _apscheduler(jobs: int, seconds: float, interval: float) -> dict[str, float]:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    runs = 0

    async def handler() -> None:
        nonlocal runs
        runs += 1

    scheduler = AsyncIOScheduler()
    for n in range(jobs):
        scheduler.add_job(handler, "interval", seconds=interval, id=f"job-{n}", jitter=2)
    scheduler.start()
    await asyncio.sleep(interval + 2.5)  # warm-up: every job has fired once
    cpu0, runs0 = cpu_seconds(), runs
    await asyncio.sleep(seconds)
    cpu1, runs1 = cpu_seconds(), runs
    scheduler.shutdown(wait=False)
    return {"runs": runs1 - runs0, "cpu_s": cpu1 - cpu0, "peak_rss_mb": _peak_rss_mb()}


def _child(which: str, jobs: int, seconds: float, interval: float) -> None:
    if which == "apscheduler":
        result = asyncio.run(_apscheduler(jobs, seconds, interval))
    else:
        result = asyncio.run(_anarchon(jobs, seconds, interval, events=which == "anarchon-events"))
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--interval", type=float, default=5.0, help="seconds between slots of each job"
    )
    parser.add_argument(
        "--events", action="store_true", help="also measure anarchon with events and metrics on"
    )
    parser.add_argument(
        "--child", choices=["anarchon", "anarchon-events", "apscheduler"], help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.jobs, args.seconds, args.interval)
        return
    print(
        f"{args.jobs} jobs every {args.interval:g}s, measured for {args.seconds:g}s, one process each"
    )
    results: dict[str, dict[str, float]] = {}
    children = ["anarchon", "apscheduler"] + (["anarchon-events"] if args.events else [])
    for which in children:
        t0 = time.perf_counter()
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                which,
                "--jobs",
                str(args.jobs),
                "--seconds",
                str(args.seconds),
                "--interval",
                str(args.interval),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        results[which] = json.loads(out.stdout.strip().splitlines()[-1])
        results[which]["wall_s"] = time.perf_counter() - t0
    header = f"{'scheduler':<26}{'runs':>9}{'CPU ms / 1000 runs':>20}{'peak RSS MB':>13}"
    print(header)
    print("-" * len(header))
    per_k = {}
    for which, label in (
        ("anarchon", "anarchon (memory)"),
        ("apscheduler", "APScheduler 3 AsyncIO"),
        ("anarchon-events", "anarchon + events/metrics"),
    ):
        if which not in results:
            continue
        r = results[which]
        per_k[which] = 1000 * r["cpu_s"] * 1000 / max(r["runs"], 1)
        print(f"{label:<26}{int(r['runs']):>9}{per_k[which]:>20.1f}{r['peak_rss_mb']:>13.1f}")
    ratio = per_k["anarchon"] / per_k["apscheduler"]
    print(
        f"CPU per run, anarchon / APScheduler: {ratio:.2f}  (target <= 0.50: {'PASS' if ratio <= 0.5 else 'MISS'})"
    )
    if "anarchon-events" in per_k:
        overhead = per_k["anarchon-events"] / per_k["anarchon"] - 1
        print(
            f"events/metrics overhead in CPU per run: {overhead:+.1%}"
            f"  (target <= +10%: {'PASS' if overhead <= 0.10 else 'MISS'})"
        )
    print(
        "note: APScheduler runs in-process only (no coordination); anarchon claims each slot in its store"
    )


if __name__ == "__main__":
    main()
