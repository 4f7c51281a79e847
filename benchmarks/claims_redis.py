"""Lease claims per second through ``RedisBackend`` vs the same Lua script sent raw with EVALSHA.

    uv run python benchmarks/claims_redis.py [--seconds 2] [--rounds 5] [--kind redis|valkey|both]
                                             [--url redis://host:port/0]

Starts its own throw-away server (Debian's redis-server, or valkey-server from
``scripts/install-redis.sh``; no persistence, like the plain anchors in
``shared/notes/stores.md``) unless ``--url`` names one. Each claim is one
sequential call on a new slot of one job, on one connection:

- **backend**: ``backend.runs.claim(RunClaim(...))`` — the whole path a
  scheduler takes (key building, argument packing, EVALSHA with the NOSCRIPT
  fallback, error mapping, reply to ``ClaimOutcome``);
- **raw**: ``await client.execute_command("EVALSHA", sha, 5, *keys, *args)``
  with redis-py (valkey-py for Valkey) on the same server, same script, same
  arguments, nothing else.

Rounds alternate which side goes first; the table shows the median over the
rounds of claims/s, and of each round's p50 and p99 latency. The target is a
backend/raw ratio of at least 80 %.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(
    0, os.path.join(os.path.dirname(__file__), "..", "packages", "anarchon-redis", "tests")
)

from anarchon.types import RunClaim
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis._lease import LeaseRuntime
from anarchon_redis._lua import LEASE_CLAIM
from anarchon_redis.backend import RedisBackendBase
from redis_servers import start_server  # type: ignore[import-not-found]

LEASE_MS = 30_000
HISTORY_SIZE = 1000


async def _timed(
    call: Callable[[int], Awaitable[Any]], seconds: float
) -> tuple[float, float, float]:
    """(claims/s, p50 ms, p99 ms) of ``call(i)`` repeated sequentially for ``seconds``."""
    for i in range(200):  # warm-up: connection, script cache, allocator
        await call(-1 - i)
    latencies: list[float] = []
    perf = time.perf_counter
    start = perf()
    stop = start + seconds
    i = 0
    while True:
        t0 = perf()
        await call(i)
        t1 = perf()
        latencies.append(t1 - t0)
        i += 1
        if t1 >= stop:
            break
    elapsed = perf() - start
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return len(latencies) / elapsed, p50, p99


async def _backend_side(backend: RedisBackendBase, seconds: float) -> tuple[float, float, float]:
    runs = backend.runs
    assert runs is not None
    job = f"bench-{uuid.uuid4().hex[:8]}"
    base = 1_700_000_000_000
    prefix = uuid.uuid4().hex[:8]

    async def call(i: int) -> None:
        claim = RunClaim(
            job, base + i * 1000, f"{prefix}{i}", "bench-backend", LEASE_MS, 3, True, None
        )
        outcome = await runs.claim(claim)
        if outcome.kind != "won":
            raise AssertionError(outcome)

    return await _timed(call, seconds)


async def _raw_side(
    client: Any, runtime: LeaseRuntime, seconds: float
) -> tuple[float, float, float]:
    job = f"bench-{uuid.uuid4().hex[:8]}"
    keys = runtime.keys(job)
    keep = runtime.keep_ms(job)
    base = 1_700_000_000_000
    prefix = uuid.uuid4().hex[:8]
    sha = LEASE_CLAIM.sha
    execute = client.execute_command

    async def call(i: int) -> None:
        reply = await execute(
            "EVALSHA",
            sha,
            5,
            *keys,
            base + i * 1000,
            f"{prefix}{i}",
            "bench-raw",
            LEASE_MS,
            3,
            1,
            "",
            1,
            HISTORY_SIZE,
            keep,
            "",
        )
        if reply[0] != b"won":
            raise AssertionError(reply)

    return await _timed(call, seconds)


async def bench(kind: str, url: str, seconds: float, rounds: int) -> dict[str, Any]:
    if kind == "redis":
        import redis.asyncio as driver

        backend: RedisBackendBase = RedisBackend(url, prefix="bench:")
        client = driver.Redis.from_url(url)
    else:
        import valkey.asyncio as vdriver

        backend = ValkeyBackend(url, prefix="bench:")
        client = vdriver.Valkey.from_url(url)
    await backend.init()
    runtime = backend._runtime
    assert isinstance(runtime, LeaseRuntime)
    results: dict[str, list[tuple[float, float, float]]] = {"backend": [], "raw": []}
    try:
        for r in range(rounds):
            order = ("backend", "raw") if r % 2 == 0 else ("raw", "backend")
            for side in order:
                if side == "backend":
                    results[side].append(await _backend_side(backend, seconds))
                else:
                    results[side].append(await _raw_side(client, runtime, seconds))
    finally:
        await backend.close()
        await client.aclose()
    summary: dict[str, Any] = {"server": backend.server, "rounds": rounds}
    for side, rows in results.items():
        summary[side] = tuple(statistics.median(col) for col in zip(*rows, strict=True))
        summary[f"{side}_all"] = [round(row[0]) for row in rows]
    summary["ratio"] = summary["backend"][0] / summary["raw"][0]
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one side's round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per side")
    parser.add_argument("--kind", choices=("redis", "valkey", "both"), default="both")
    parser.add_argument(
        "--url", help="an existing server (redis:// or valkey://) instead of our own"
    )
    args = parser.parse_args()
    kinds = ["redis", "valkey"] if args.kind == "both" else [args.kind]
    if args.url:
        kinds = ["valkey" if args.url.startswith("valkey") else "redis"]
    print(
        f"lease claims, sequential, one connection, new slot per claim;"
        f" {args.rounds} interleaved rounds x {args.seconds:g} s per side; medians"
    )
    print(f"{'server':<16} {'side':<8} {'claims/s':>9} {'p50 ms':>8} {'p99 ms':>8}  per round")
    for kind in kinds:
        server = None
        url = args.url
        if url is None:
            server = start_server(kind)
            url = server.url
        try:
            summary = asyncio.run(bench(kind, url, args.seconds, args.rounds))
        finally:
            if server is not None:
                server.stop()
        for side in ("backend", "raw"):
            rate, p50, p99 = summary[side]
            rounds = " ".join(str(x) for x in summary[f"{side}_all"])
            print(
                f"{summary['server']:<16} {side:<8} {rate:>9.0f} {p50:>8.3f} {p99:>8.3f}  {rounds}"
            )
        verdict = "PASS" if summary["ratio"] >= 0.8 else "MISS"
        print(
            f"{summary['server']:<16} ratio backend/raw = {summary['ratio']:.1%} (target >= 80 %: {verdict})"
        )


if __name__ == "__main__":
    main()
