"""What one lease job-slot costs the Redis server, step by step (claim, losing claims, finish, result).

    uv run --frozen --no-sync python benchmarks/claims/redis_job_slot.py [--jobs 2000] [--rounds 4]
                                                [--instances 1] [--kind redis] [--two-step]

Starts a throw-away server (``anarchon_testservers.redis.start_server``), prepares
``--jobs`` jobs, then for each round claims one new slot of every job in one
``runs.claim_many`` (the winning instance), claims it again from
``--instances - 1`` other instances (each answered ``running``: what a
fleet's losers cost), then finishes every run and stores its result in one
``runs.finish_and_save_many`` (what the scheduler sends; ``--two-step``:
``runs.finish_many`` then ``save_results``, as before it existed). Before each step ``CONFIG RESETSTAT``;
after it ``INFO commandstats`` and ``INFO cpu``. Printed per step and per
job-slot: the server's CPU (``used_cpu_user + used_cpu_sys``, networking
included) and each command's calls and ``usec`` (``evalsha`` includes the
commands the scripts run, listed beside it). The first round, which creates
the keys, is not counted. Target (docs/backends/redis.md): claim + finish +
result ≤ 20 µs of server time per job-slot.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import ok_ends, redis_server_cpu
from anarchon.types import RunClaim, RunFinish
from anarchon_redis import RedisBackend, ValkeyBackend
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import start_server

BASE_SLOT = 1_700_000_000_000
LEASE_MS = 60_000
HISTORY_SIZE = 1000


async def _commands(admin: Any) -> dict[str, tuple[int, int]]:
    info = await admin.info("commandstats")
    out = {}
    for name, value in info.items():
        command = name.removeprefix("cmdstat_")
        if command not in ("config|resetstat", "info"):
            out[command] = (int(value["calls"]), int(value["usec"]))
    return out


def _claims(jobs: list[str], slot: int, tag: str, instance: str) -> list[RunClaim]:
    return [
        RunClaim(job, slot, f"{tag}-{i}", instance, LEASE_MS, 3, False, None, True, HISTORY_SIZE)
        for i, job in enumerate(jobs)
    ]


async def measure(kind: str, jobs: int, rounds: int, instances: int, two_step: bool) -> None:
    """Run the rounds on a fresh server and print the per-step table."""
    server = start_server(kind)
    try:
        admin = aio.Redis.from_url(server.redis_url if kind == "valkey" else server.url)
        backend: RedisBackendBase = (
            RedisBackend(server.url, prefix="slot:")
            if kind == "redis"
            else ValkeyBackend(server.url, prefix="slot:")
        )
        await backend.init()
        runs = backend.runs
        assert runs is not None
        names = [f"job-{uuid.uuid4().hex[:6]}-{j}" for j in range(jobs)]
        for name in names:
            await backend.prepare_job(name, HISTORY_SIZE)
        steps: dict[str, dict[str, Any]] = {}
        for r in range(rounds + 1):
            slot = BASE_SLOT + r * 1000
            won = _claims(names, slot, f"w{r}", "winner")

            async def claim(won: list[RunClaim] = won) -> None:
                outcomes = await runs.claim_many(won)
                if any(o.kind != "won" for o in outcomes):
                    raise AssertionError(outcomes[:2])

            async def lose(slot: int = slot, r: int = r) -> None:
                for k in range(1, instances):
                    lost = await runs.claim_many(_claims(names, slot, f"l{k}-{r}", f"other{k}"))
                    if any(o.kind != "running" for o in lost):
                        raise AssertionError(lost[:2])

            async def finish(won: list[RunClaim] = won) -> None:
                done = await runs.finish_many(
                    [RunFinish(c.job, c.slot, c.token, "ok") for c in won]
                )
                if not all(done):
                    raise AssertionError("a finish was refused")

            async def finish_and_save(won: list[RunClaim] = won) -> None:
                done = await runs.finish_and_save_many(*ok_ends(won, "winner", HISTORY_SIZE))
                if done is None or not all(done):
                    raise AssertionError("a finish was refused")

            async def save(won: list[RunClaim] = won) -> None:
                await backend.save_results(ok_ends(won, "winner", HISTORY_SIZE)[1])

            plan: list[tuple[str, Callable[[], Awaitable[None]]]] = [("claim", claim)]
            if instances > 1:
                plan.append((f"{instances - 1} losing claims", lose))
            if two_step:
                plan += [("finish", finish), ("result", save)]
            else:
                plan.append(("finish + result", finish_and_save))
            for name, step in plan:
                await admin.config_resetstat()
                cpu0 = await redis_server_cpu(admin)
                await step()
                commands = await _commands(admin)
                cpu1 = await redis_server_cpu(admin)
                if r == 0:
                    continue  # the keys were created: not the steady state
                row = steps.setdefault(name, {"cpu": 0.0, "commands": {}})
                row["cpu"] += cpu1 - cpu0
                for command, (calls, usec) in commands.items():
                    total = row["commands"].setdefault(command, [0, 0])
                    total[0] += calls
                    total[1] += usec
        await backend.close()
        await admin.aclose()
    finally:
        server.stop()
    slots = jobs * rounds
    print(
        f"{kind}: {jobs} jobs due together x {rounds} rounds, {instances} instance(s); per job-slot"
    )
    print(f"{'step':18s} {'server CPU us':>14s}   commands (calls, usec)")
    total = 0.0
    for name, row in steps.items():
        cpu_us = row["cpu"] * 1e6 / slots
        total += cpu_us
        listed = ", ".join(
            f"{c} {calls / slots:.3f}x {usec / slots:.1f}us"
            for c, (calls, usec) in sorted(row["commands"].items())
            if c != "time"
        )
        print(f"{name:18s} {cpu_us:14.1f}   {listed}")
    print(f"{'total':18s} {total:14.1f}   (target, one instance: <= 20 us)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--instances", type=int, default=1, help="claims per job-slot (1 wins)")
    parser.add_argument("--kind", choices=("redis", "valkey"), default="redis")
    parser.add_argument(
        "--two-step", action="store_true", help="finish_many, then save_results (the old path)"
    )
    args = parser.parse_args()
    asyncio.run(measure(args.kind, args.jobs, args.rounds, args.instances, args.two_step))


if __name__ == "__main__":
    main()
