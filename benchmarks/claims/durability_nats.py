"""Cost per claim of ``durability``: ``fast`` vs ``replicated`` beside the raw publish.

    uv run --no-sync python benchmarks/claims/durability_nats.py             # R3 on 3 nodes, and R1
    uv run --no-sync python benchmarks/claims/durability_nats.py --rounds 5 --seconds 2

Starts a 3-node JetStream cluster (file store, loopback routes) and, for the
single-server comparison, one more server. Every claim is a new
``(job, slot)`` (the winning path). Methods, each on its own stream with the
same settings:

- ``raw``: ``js.publish(subject, token, headers={"Nats-Msg-Id": id})`` with
  nats-py's JetStream context: the floor for this client;
- ``fast``: ``backend.claim()`` of ``NatsBackend(durability="fast")``: the
  de-duplicated publish of a JSON claim record;
- ``replicated``: ``backend.claim()`` of ``NatsBackend(durability="replicated")``:
  the compare-and-set publish on the slot's own subject. On the single server
  (which cannot hold 3 replicas) the same claim is driven through the
  backend's claims part with ``cas=True``: ``cas (R1)``.

Each runs sequentially (one claim at a time) and with ``--tasks`` concurrent
tasks on one connection, then batched (``claim_many`` of ``--chunk`` slots,
against gathered raw publishes). Rounds are interleaved; the tables show the
median claims/s over the rounds, the median p50 latency and the ratio to
``raw`` (claims/s of raw / claims/s of the method = the cost per claim in
raw publishes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from importlib.metadata import version

import nats
from anarchon.types import ClaimInput
from anarchon_nats import NatsBackend
from anarchon_nats._claims import Claims
from anarchon_testservers.nats import find_nats_server, server_version, start_cluster, start_server

Step = Callable[[int], Awaitable[object]]


def _p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


async def _measure(step: Step, seconds: float, tasks: int, per_step: int) -> tuple[float, float]:
    """Run ``step`` for ``seconds`` from ``tasks`` tasks: claims/s and p50 ms per step."""
    latencies: list[float] = []
    counter = iter(range(10**12))
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop:
            started = time.perf_counter()
            await step(next(counter))
            latencies.append((time.perf_counter() - started) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    return len(latencies) * per_step / (time.perf_counter() - began), _p50(latencies)


async def _ready(url: str) -> None:
    nc = await nats.connect(url)
    try:
        for _ in range(300):
            try:
                reply = await nc.request("$JS.API.INFO", b"", timeout=1)
                if "error" not in json.loads(reply.data):
                    return
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                pass
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


async def compare(
    urls: list[str], replicas: int, seconds: float, rounds: int, tasks: int, chunk: int
) -> dict[str, dict[str, tuple[float, float]]]:
    """Medians per mode and method: ``{mode: {method: (claims/s, p50 ms)}}``."""
    for url in urls:
        await _ready(url)
    tag = uuid.uuid4().hex[:6]
    base = (time.time_ns() // 1_000_000 // 1000) * 1000
    slots = iter(range(10**12))

    def backend(name: str, durability: str = "fast") -> NatsBackend:
        return NatsBackend(
            urls,
            stream=f"{name.upper()}{tag.upper()}",
            prefix=f"{name}{tag}.",
            replicas=None if durability == "replicated" else replicas,
            durability=durability,
        )

    fast = backend("fast")
    raw_side = backend("raw")
    cas_backend = backend("cas", "replicated" if replicas >= 3 else "fast")
    for b in (fast, raw_side, cas_backend):
        await b.init()
    cas_claims = cas_backend._claims if replicas >= 3 else Claims(cas_backend._store, cas=True)
    nc = await nats.connect(urls[0])
    js = nc.jetstream()
    raw_subject = f"raw{tag}.bench.claims"

    def claim_input(job: str) -> ClaimInput:
        return ClaimInput(job, base + next(slots), uuid.uuid4().hex, "bench")

    async def raw(_i: int) -> object:
        slot = base + next(slots)
        ack = await js.publish(
            raw_subject, uuid.uuid4().hex.encode(), headers={"Nats-Msg-Id": f"bench:{slot}"}
        )
        assert not ack.duplicate
        return ack

    async def through_fast(_i: int) -> object:
        won = await fast.claim(claim_input("bench"))
        assert won
        return won

    async def through_cas(_i: int) -> object:
        (won,) = await cas_claims.claim_many([claim_input("bench")])
        assert won
        return won

    async def raw_batch(_i: int) -> object:
        acks = await asyncio.gather(*(raw(0) for _ in range(chunk)))
        return acks

    async def fast_batch(_i: int) -> object:
        won = await fast.claim_many([claim_input("batch") for _ in range(chunk)])
        assert all(won)
        return won

    async def cas_batch(_i: int) -> object:
        won = await cas_claims.claim_many([claim_input("batch") for _ in range(chunk)])
        assert all(won)
        return won

    cas_name = "replicated" if replicas >= 3 else "cas (R1)"
    modes: list[tuple[str, int, int, dict[str, Step]]] = [
        ("sequential", 1, 1, {"raw": raw, "fast": through_fast, cas_name: through_cas}),
        (
            f"{tasks} tasks",
            tasks,
            1,
            {"raw": raw, "fast": through_fast, cas_name: through_cas},
        ),
        (
            f"batch {chunk}",
            1,
            chunk,
            {"raw": raw_batch, "fast": fast_batch, cas_name: cas_batch},
        ),
    ]
    for _mode, _tasks, per, methods in modes:  # warm-up
        for step in methods.values():
            await _measure(step, 0.3, 1, per)
    found: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in range(rounds):
        for mode, concurrency, per, methods in modes:
            order = list(methods.items())
            if r % 2:
                order.reverse()
            for name, step in order:
                rate, p50 = await _measure(step, seconds, concurrency, per)
                found.setdefault(mode, {}).setdefault(name, []).append((rate, p50))
        print(f"  R{replicas}: round {r + 1}/{rounds} done", file=sys.stderr)
    await nc.close()
    for b in (fast, raw_side, cas_backend):
        await b.close()
    return {
        mode: {
            name: (
                statistics.median(row[0] for row in rows),
                statistics.median(row[1] for row in rows),
            )
            for name, rows in methods.items()
        }
        for mode, methods in found.items()
    }


def show(title: str, table: dict[str, dict[str, tuple[float, float]]]) -> None:
    print()
    print(title)
    print(f"{'mode':<12} {'method':<12} {'claims/s':>10} {'p50 ms':>9} {'cost (raw = 1)':>15}")
    for mode, methods in table.items():
        raw_rate = methods["raw"][0]
        for name, (rate, p50) in methods.items():
            print(f"{mode:<12} {name:<12} {rate:>10,.0f} {p50:>9.3f} {raw_rate / rate:>15.2f}")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per method")
    parser.add_argument("--tasks", type=int, default=64, help="concurrent tasks in the second mode")
    parser.add_argument("--chunk", type=int, default=500, help="claims per claim_many call")
    parser.add_argument("--skip-single", action="store_true", help="only the 3-node cluster")
    args = parser.parse_args()
    binary = find_nats_server()
    print(
        f"{server_version(binary)}; python {sys.version.split()[0]}, nats-py {version('nats-py')},"
        f" {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f};"
        f" {args.rounds} rounds x {args.seconds:g} s per method and mode"
    )
    cluster = start_cluster(3)
    try:
        table = asyncio.run(
            compare(cluster.urls, 3, args.seconds, args.rounds, args.tasks, args.chunk)
        )
    finally:
        cluster.stop()
    show("3-node cluster, R3 streams (fast with replicas=3, replicated)", table)
    if not args.skip_single:
        server, root = start_server()
        try:
            single = asyncio.run(
                compare([server.url], 1, args.seconds, args.rounds, args.tasks, args.chunk)
            )
        finally:
            server.kill()
            shutil.rmtree(root, ignore_errors=True)
        show("one server, R1 streams (the compare-and-set claim driven white-box)", single)
    print(f"\nload after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    cli()
