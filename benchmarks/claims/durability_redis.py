"""What ``durability="replicated"`` costs per claim on Redis, beside the raw claim and raw ``WAIT``.

    uv run --no-sync python benchmarks/claims/durability_redis.py             # own primary + replica
    uv run --no-sync python benchmarks/claims/durability_redis.py --claims 2000 --rounds 5

It starts a redis-server primary and one replica (``--replicaof``) on
127.0.0.1. Every claim is a new ``(job, slot)`` (the winning path; a new job
per call), one call at a time (``single``) and in calls of ``--chunk`` claims
(``batch``). The claim path does not use the Rust core, so an editable build
measures the same as a release build. Methods:

- ``raw evalsha``: redis-py ``evalsha`` of the lease claim script, with the
  arguments the backend sends (the floor of a claim);
- ``raw evalsha+wait``: the same script and ``WAIT 1 <timeout>`` in one
  non-transactional pipeline (the floor of a replicated claim);
- ``fast``: ``RedisRunStore.claim``/``claim_many``, ``durability="fast"``;
- ``replicated``: the same, ``durability="replicated"`` (``WAIT 1 500``).

Rounds are interleaved so drift on a shared machine hits every method alike;
the table shows the median microseconds per claim over the rounds and the
ratios replicated/fast, fast/raw evalsha and replicated/raw evalsha+wait.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio
from anarchon.types import RunClaim
from anarchon_redis import RedisBackend
from anarchon_redis._lua import LEASE_CLAIM
from anarchon_testservers.redis import start_replica, start_server

Step = Callable[[int], Awaitable[None]]


def _claims(job: str, first: int, count: int) -> list[RunClaim]:
    return [
        RunClaim(job, first + i, uuid.uuid4().hex, "bench", 60_000, overlap=True)
        for i in range(count)
    ]


async def main(args: argparse.Namespace) -> None:
    primary = start_server("redis")
    replica = start_replica(primary)
    try:
        await run(primary.url, args)
    finally:
        replica.stop()
        primary.stop()


async def run(url: str, args: argparse.Namespace) -> None:
    prefix = f"bench{uuid.uuid4().hex[:6]}:"
    fast = RedisBackend(url, prefix=prefix)
    replicated = RedisBackend(url, prefix=prefix, durability="replicated")
    raw = redis.asyncio.Redis.from_url(url)
    await fast.init()
    await replicated.init()
    assert fast.runs is not None
    assert replicated.runs is not None
    runtime = fast._runtime
    counter = iter(range(10**12))

    def raw_call(claims: list[RunClaim]) -> tuple[list[str], list[Any]]:
        keys: list[str] = []
        items: list[Any] = []
        for c in claims:
            keys.extend(runtime.keys(c.job))  # type: ignore[attr-defined]
            items.extend(runtime.claim_args(c))  # type: ignore[attr-defined]
            items.append(1)
        profile = runtime.claim_profile(claims[0])  # type: ignore[attr-defined]
        return keys, [1, *profile, *items]

    async def raw_evalsha(claims: list[RunClaim]) -> None:
        keys, argv = raw_call(claims)
        await raw.evalsha(LEASE_CLAIM.sha, len(keys), *keys, *argv)

    async def raw_wait(claims: list[RunClaim]) -> None:
        keys, argv = raw_call(claims)
        async with raw.pipeline(transaction=False) as pipe:
            pipe.evalsha(LEASE_CLAIM.sha, len(keys), *keys, *argv)
            pipe.execute_command("WAIT", 1, 500)
            replies = await pipe.execute()
        assert int(replies[1]) >= 1

    async def fast_claim(claims: list[RunClaim]) -> None:
        assert fast.runs is not None
        outcomes = await fast.runs.claim_many(claims)
        assert all(o.kind == "won" for o in outcomes)

    async def replicated_claim(claims: list[RunClaim]) -> None:
        assert replicated.runs is not None
        outcomes = await replicated.runs.claim_many(claims)
        assert all(o.kind == "won" for o in outcomes), outcomes[:1]

    methods: dict[str, Callable[[list[RunClaim]], Awaitable[None]]] = {
        "raw evalsha": raw_evalsha,
        "raw evalsha+wait": raw_wait,
        "fast": fast_claim,
        "replicated": replicated_claim,
    }
    for mode, size in (("single", 1), ("batch", args.chunk)):
        times: dict[str, list[float]] = {m: [] for m in methods}
        for _round in range(args.rounds):
            for name, method in methods.items():
                calls = max(1, args.claims // size)
                # A job per call: a claim rewrites the job's list of runs in progress, so
                # thousands of live runs in one job would measure that list, not the claim.
                batches = [_claims(f"{mode}-{next(counter)}", 0, size) for _ in range(calls)]
                began = time.perf_counter()
                for batch in batches:
                    await method(batch)
                took = time.perf_counter() - began
                times[name].append(took / (calls * size) * 1e6)
        med = {m: statistics.median(t) for m, t in times.items()}
        print(f"\n{mode} ({size} claim(s) per call), median us/claim over {args.rounds} rounds")
        for name, value in med.items():
            print(f"  {name:18s} {value:9.1f}")
        print(f"  replicated / fast               {med['replicated'] / med['fast']:.2f}")
        print(f"  fast / raw evalsha              {med['fast'] / med['raw evalsha']:.2f}")
        print(
            f"  replicated / raw evalsha+wait   {med['replicated'] / med['raw evalsha+wait']:.2f}"
        )
    await raw.aclose()
    await fast.close()
    await replicated.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--claims", type=int, default=1000, help="claims per method per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=100, help="claims per call in the batch part")
    asyncio.run(main(parser.parse_args()))
