"""Lease claims on Redis: one by one vs batched, server time and round trips per job-slot.

    uv run python benchmarks/claims/claims_redis.py [--jobs 2000] [--rounds 5] [--seconds 2]
                                             [--kind redis|valkey|both] [--url redis://host:port/0]

Starts its own throw-away server (Debian's redis-server, or valkey-server;
no persistence, like the plain anchors in ``shared/notes/stores.md``) unless
``--url`` names one. Two tables:

1. **Sequential claims** (as before): one claim at a time on a new slot of
   one job, through ``backend.runs.claim`` (**backend**) and the same script
   sent raw with ``EVALSHA`` through the same driver (**raw**); claims/s, p50
   and p99. Rounds alternate which side goes first.
2. **Job-slots** (what a scheduler does when ``--jobs`` jobs fall due together,
   ``--rounds`` times, one slot per job per round): claim, finish and store
   the result of every job-slot, and measure

   - claims/s of the claim phase;
   - the server's µs per job-slot from ``INFO commandstats`` (``CONFIG
     RESETSTAT`` first; every lease call is a script, so this is the usec of
     ``evalsha`` plus any command sent outside a script) and, beside it, the
     server process's CPU (``used_cpu_user + used_cpu_sys``, network I/O
     included);
   - round trips per job-slot (calls the client sent: commands and pipelines).

   Sides: **single** (``runs.claim``, ``runs.finish``, ``backend.save_result``
   for each job-slot, one at a time), **batched** (``runs.claim_many``,
   ``runs.finish_many``, ``backend.save_results`` over all of a round's
   job-slots) and **raw batched** (the backend's batch claim script sent with
   ``EVALSHA`` through the same driver, one call per chunk of 500, the calls in
   one pipeline as the backend sends them; claims only, so its server time
   and round trips count the claim alone: the physical reference for the
   batched claim).

The targets (docs/backends/redis.md): the server's time ≤ 20 µs per job-slot
for claim + finish + result, and the batched claim ≥ 70 % of the raw one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import redis_server_cpu, timed_sequential
from anarchon.types import ResultWrite, RunClaim, RunFinish, StoredResult
from anarchon_redis import RedisBackend, ValkeyBackend, _lua
from anarchon_redis._batch import CHUNK
from anarchon_redis._lease import LeaseRuntime
from anarchon_redis.backend import RedisBackendBase
from anarchon_testservers.redis import start_server

LEASE_MS = 30_000
HISTORY_SIZE = 1000
BASE_SLOT = 1_700_000_000_000


# Round-trip counting -----------------------------------------------------------------


def _counting_client(kind: str, url: str) -> tuple[Any, list[int]]:
    """A driver client that counts what it sends: one per command, one per pipeline."""
    trips = [0]
    if kind == "redis":
        import redis.asyncio as aio
        from redis.asyncio.client import Pipeline

        base: Any = aio.Redis
        pipe_base: Any = Pipeline
    else:
        import valkey.asyncio as vaio
        from valkey.asyncio.client import Pipeline as VPipeline

        base = vaio.Valkey
        pipe_base = VPipeline

    class CountingPipeline(pipe_base):  # type: ignore[misc,valid-type]
        async def execute(self, raise_on_error: bool = True) -> Any:
            trips[0] += 1
            return await super().execute(raise_on_error=raise_on_error)

    class CountingClient(base):  # type: ignore[misc,valid-type]
        async def execute_command(self, *args: Any, **options: Any) -> Any:
            trips[0] += 1
            return await super().execute_command(*args, **options)

        def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
            return CountingPipeline(
                self.connection_pool, self.response_callbacks, transaction, shard_hint
            )

    return CountingClient.from_url(url), trips


# Server statistics -------------------------------------------------------------------


async def _reset_stats(admin: Any) -> dict[str, float]:
    await admin.execute_command("CONFIG", "RESETSTAT")
    return await _cpu(admin)


async def _cpu(admin: Any) -> dict[str, float]:
    return {"cpu": await redis_server_cpu(admin)}


async def _server_usec(admin: Any) -> float:
    """usec of the commands clients sent (scripts include the commands they run)."""
    stats = await admin.info("commandstats")
    scripted = 0.0
    direct = 0.0
    for name, row in stats.items():
        command = name.removeprefix("cmdstat_")
        if command in ("info", "config"):
            continue
        if command in ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall"):
            scripted += float(row["usec"])
    # Commands run by scripts are counted in their own rows too; the lease strategy
    # sends nothing outside scripts, so the script rows are the whole server time.
    return scripted + direct


# 1. Sequential claims ------------------------------------------------------------------


async def _backend_side(backend: RedisBackendBase, seconds: float) -> tuple[float, float, float]:
    runs = backend.runs
    assert runs is not None
    job = f"bench-{uuid.uuid4().hex[:8]}"
    prefix = uuid.uuid4().hex[:8]

    async def call(i: int) -> None:
        claim = RunClaim(
            job, BASE_SLOT + i * 1000, f"{prefix}{i}", "bench-backend", LEASE_MS, 3, True, None
        )
        outcome = await runs.claim(claim)
        if outcome.kind != "won":
            raise AssertionError(outcome)

    return await timed_sequential(call, seconds)


async def _raw_side(
    client: Any, runtime: LeaseRuntime, seconds: float
) -> tuple[float, float, float]:
    job = f"bench-{uuid.uuid4().hex[:8]}"
    keys = runtime.keys(job)
    keep = runtime.keep_ms(job)
    prefix = uuid.uuid4().hex[:8]
    sha = _lua.LEASE_CLAIM.sha
    execute = client.execute_command

    async def call(i: int) -> None:
        reply = await execute(
            "EVALSHA",
            sha,
            len(keys),
            *keys,
            1,  # one profile: the settings the claims of a call share
            "bench-raw",
            LEASE_MS,
            3,
            1,
            1,
            HISTORY_SIZE,
            keep,
            "",
            "",
            0,  # overlap_wait
            BASE_SLOT + i * 1000,  # the claim: slot, token, deadline, profile
            f"{prefix}{i}",
            "",
            1,
        )
        if type(reply[0]) is not int:  # won, attempt 1: the lease's end
            raise AssertionError(reply)

    return await timed_sequential(call, seconds)


async def sequential(kind: str, url: str, seconds: float, rounds: int) -> dict[str, Any]:
    backend = _backend(kind, url)
    client, _trips = _counting_client(kind, url)
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


# 2. Job-slots ------------------------------------------------------------------------


def _backend(kind: str, source: Any) -> RedisBackendBase:
    if kind == "redis":
        return RedisBackend(source, prefix="bench:")
    return ValkeyBackend(source, prefix="bench:")


def _claims(jobs: list[str], slot: int, tag: str) -> list[RunClaim]:
    return [
        RunClaim(job, slot, f"{tag}-{i}", "bench", LEASE_MS, 3, True, None, True, HISTORY_SIZE)
        for i, job in enumerate(jobs)
    ]


def _result(claim: RunClaim) -> StoredResult:
    return StoredResult(claim.slot, claim.token, "bench", "ok", claim.slot, claim.slot + 1)


async def _single_round(backend: RedisBackendBase, claims: list[RunClaim]) -> float:
    runs = backend.runs
    assert runs is not None
    t0 = time.perf_counter()
    for claim in claims:
        if (await runs.claim(claim)).kind != "won":
            raise AssertionError(claim)
    claimed = time.perf_counter() - t0
    for claim in claims:
        if not await runs.finish(claim.job, claim.slot, claim.token, "ok"):
            raise AssertionError(claim)
        await backend.save_result(claim.job, _result(claim), HISTORY_SIZE)
    return claimed


async def _batched_round(backend: RedisBackendBase, claims: list[RunClaim]) -> float:
    runs = backend.runs
    assert runs is not None
    t0 = time.perf_counter()
    outcomes = await runs.claim_many(claims)
    claimed = time.perf_counter() - t0
    if any(o.kind != "won" for o in outcomes):
        raise AssertionError([o for o in outcomes if o.kind != "won"][:3])
    finishes = [RunFinish(c.job, c.slot, c.token, "ok") for c in claims]
    writes = [ResultWrite(c.job, _result(c), HISTORY_SIZE) for c in claims]
    # As the scheduler does: a finish and its result in one step where the store offers it.
    finished = await runs.finish_and_save_many(finishes, writes)
    if finished is None:
        finished = await runs.finish_many(finishes)
        await backend.save_results(writes)
    if not all(finished):
        raise AssertionError("a finish was refused")
    return claimed


def claim_call(runtime: LeaseRuntime, part: list[RunClaim]) -> tuple[list[Any], list[Any]]:
    """``(KEYS, ARGV)`` of one batch claim call, in the backend's layout (run_batched, profiles)."""
    keys: list[Any] = []
    items: list[Any] = []
    profiles: dict[tuple[Any, ...], int] = {}
    for c in part:
        keys.extend(runtime.keys(c.job))
        items.extend(runtime.claim_args(c))
        items.append(profiles.setdefault(runtime.claim_profile(c), len(profiles) + 1))
    return keys, [len(profiles), *(v for p in profiles for v in p), *items]


async def _raw_batched_round(client: Any, runtime: LeaseRuntime, claims: list[RunClaim]) -> float:
    """The batch claim script through the driver: one EVALSHA per chunk, nothing else."""
    script = _lua.LEASE_CLAIM
    calls = []
    for start in range(0, len(claims), CHUNK):
        keys, args = claim_call(runtime, claims[start : start + CHUNK])
        calls.append((len(keys), keys, args))
    t0 = time.perf_counter()
    async with client.pipeline(transaction=False) as pipe:
        for nkeys, keys, args in calls:
            pipe.execute_command("EVALSHA", script.sha, nkeys, *keys, *args)
        replies = await pipe.execute()
    elapsed = time.perf_counter() - t0
    for reply in replies:
        if any(type(r) is not int for r in reply):
            raise AssertionError(reply[:3])
    return elapsed


async def job_slots(kind: str, url: str, jobs: int, rounds: int) -> dict[str, dict[str, float]]:
    """Per side, medians over the rounds: claims/s, server usec and CPU, round trips per job-slot.

    Each side has its own jobs; one unmeasured round first creates their keys
    (a one-time cost per job). Rounds interleave the sides, to spread the
    noise of a shared machine over all of them.
    """
    import redis.asyncio as aio

    admin = aio.Redis.from_url(url)
    sides = ["single", "batched", "raw batched"]
    rows: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    setups: dict[str, tuple[Any, list[int], RedisBackendBase, LeaseRuntime, list[str]]] = {}
    try:
        for side in sides:
            client, trips = _counting_client(kind, url)
            backend = _backend(kind, client)
            await backend.init()
            runtime = backend._runtime
            assert isinstance(runtime, LeaseRuntime)
            names = [f"bench-{uuid.uuid4().hex[:6]}-{j}" for j in range(jobs)]
            setups[side] = (client, trips, backend, runtime, names)
        for r in range(rounds + 1):
            for side in sides:
                client, trips, backend, runtime, names = setups[side]
                claims = _claims(names, BASE_SLOT + r * 1000, f"{side[0]}{r}")
                before = await _reset_stats(admin)
                trips[0] = 0
                if side == "single":
                    claim_s = await _single_round(backend, claims)
                elif side == "batched":
                    claim_s = await _batched_round(backend, claims)
                else:
                    claim_s = await _raw_batched_round(client, runtime, claims)
                sent = trips[0]
                usec = await _server_usec(admin)
                after = await _cpu(admin)
                if r == 0:
                    continue  # the keys were created: not the steady state
                rows[side].append(
                    {
                        "claims/s": jobs / claim_s,
                        "server us": usec / jobs,
                        "server cpu us": (after["cpu"] - before["cpu"]) * 1e6 / jobs,
                        "round trips": sent / jobs,
                    }
                )
    finally:
        for client, _trips, backend, _runtime, _names in setups.values():
            await backend.close()
            await client.aclose()
        await admin.aclose()
    table: dict[str, dict[str, float]] = {}
    for side, found in rows.items():
        table[side] = {key: statistics.median(row[key] for row in found) for key in found[0]}
        # The least a round took: the server preempted least (a shared machine).
        table[side]["server us min"] = min(row["server us"] for row in found)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one side's round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per side")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs due together per round")
    parser.add_argument("--kind", choices=("redis", "valkey", "both"), default="redis")
    parser.add_argument("--skip-sequential", action="store_true")
    parser.add_argument(
        "--server-nice",
        type=int,
        default=0,
        help="niceness of the throw-away server (e.g. -10 on a shared machine, as root)",
    )
    parser.add_argument(
        "--url", help="an existing server (redis:// or valkey://) instead of our own"
    )
    args = parser.parse_args()
    kinds = ["redis", "valkey"] if args.kind == "both" else [args.kind]
    if args.url:
        kinds = ["valkey" if args.url.startswith("valkey") else "redis"]
    for kind in kinds:
        server = None
        url = args.url
        if url is None:
            server = start_server(kind)
            url = server.url
            if args.server_nice and server.process is not None:
                os.setpriority(os.PRIO_PROCESS, server.process.pid, args.server_nice)
        try:
            if not args.skip_sequential:
                summary = asyncio.run(sequential(kind, url, args.seconds, args.rounds))
                print(
                    f"\nlease claims, sequential, one connection, new slot per claim;"
                    f" {args.rounds} interleaved rounds x {args.seconds:g} s per side; medians"
                )
                print(f"{'server':<16} {'side':<8} {'claims/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
                for side in ("backend", "raw"):
                    rate, p50, p99 = summary[side]
                    print(f"{summary['server']:<16} {side:<8} {rate:>9.0f} {p50:>8.3f} {p99:>8.3f}")
                print(f"{summary['server']:<16} ratio backend/raw = {summary['ratio']:.1%}")
            table = asyncio.run(job_slots(kind, url, args.jobs, args.rounds))
            print(
                f"\n{kind}: {args.jobs} jobs due together x {args.rounds} rounds (medians);"
                " claim + finish + result per job-slot (raw batched: the claim only)"
            )
            print(
                f"{'side':<12} {'claims/s':>10} {'server us/slot':>15} {'(min)':>7}"
                f" {'server cpu us':>14} {'round trips/slot':>17}"
            )
            for side, row in table.items():
                print(
                    f"{side:<12} {row['claims/s']:>10.0f} {row['server us']:>15.1f}"
                    f" {row['server us min']:>7.1f} {row['server cpu us']:>14.1f}"
                    f" {row['round trips']:>17.3f}"
                )
            if "raw batched" in table:
                ratio = table["batched"]["claims/s"] / table["raw batched"]["claims/s"]
                print(f"batched / raw batched claims/s = {ratio:.1%} (target >= 70 %)")
            batched = table["batched"]
            print(
                f"server per job-slot, batched: commandstats {batched['server us']:.1f} us"
                f" (counts waits for a core on a loaded machine), CPU"
                f" {batched['server cpu us']:.1f} us; target <= 20"
            )
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
