"""Claims per second through ``NatsBackend.claim``/``claim_many`` vs raw ``js.publish`` with ``Nats-Msg-Id``.

    uv run --no-sync python benchmarks/claims/claims_nats.py            # starts its own nats-server
    uv run --no-sync python benchmarks/claims/claims_nats.py --url nats://127.0.0.1:4222
    uv run --no-sync python benchmarks/claims/claims_nats.py --only batched --chunk 500
    uv run --no-sync python benchmarks/claims/claims_nats.py --only clock

Both sides talk to the same nats-server (JetStream, file store) over
127.0.0.1, each on its own stream with the same settings (the backend creates
both). Every claim is a new ``(job, slot)``, so every publish is stored (the
winning path). Methods:

- ``backend``: ``await backend.claim(ClaimInput(...))`` — JSON claim record,
  de-duplicated publish, ack parsed;
- ``raw``: ``await js.publish(subject, token, headers={"Nats-Msg-Id": id})``
  with nats-py's JetStream context — the floor for this client.

Each is run sequentially (one claim at a time) and with ``--tasks`` concurrent
tasks on one connection. Rounds are interleaved (backend, raw, backend, raw,
...) so drift on a shared machine hits both alike; the table shows the median
claims/s over the rounds (min-max), the median of the rounds' p50 and p99
latencies, and the ratio backend/raw of the medians (target: >= 80 %).

The batched part (``--only batched``) claims chunks of ``--chunk`` new slots
one chunk after the other, through the same driver on the same connection:

- ``claim_many``: ``await backend.claim_many(chunk)`` (pipelined publishes,
  acks awaited together, answers checked);
- ``claim_many lose``: the same chunks again from a second backend with other
  tokens: every claim is a duplicate, read back and its token compared;
- ``raw js``: ``asyncio.gather`` of ``js.publish`` with ``Nats-Msg-Id`` for the
  chunk (nats-py's JetStream API, pipelined the ordinary way);
- ``raw pub``: ``nc.publish`` of the chunk back to back with replies on one
  wildcard inbox subscription, the acks' JSON parsed (the floor for this driver).

It prints claims/s, the client's CPU per claim (``time.process_time``: this
process only; the server is another process), chunk latency p50/p99, and the
ratios claim_many / raw js and claim_many / raw pub (target: >= 70 %).
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
import nats.aio.msg
from anarchon.types import ClaimInput
from anarchon_nats import NatsBackend
from anarchon_testservers.nats import (
    find_nats_server,
    server_version,
    start_server,
)

Claim = Callable[[int], Awaitable[object]]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def _measure(claim: Claim, seconds: float, tasks: int) -> tuple[float, list[float]]:
    """Run ``claim(i)`` for ``seconds`` from ``tasks`` tasks; claims/s and per-claim ms."""
    latencies: list[float] = []
    counter = iter(range(10**12))
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop:
            i = next(counter)
            started = time.perf_counter()
            await claim(i)
            latencies.append((time.perf_counter() - started) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    elapsed = time.perf_counter() - began
    return len(latencies) / elapsed, latencies


async def main(url: str, seconds: float, rounds: int, tasks: int) -> bool:
    tag = uuid.uuid4().hex[:6]
    backend = NatsBackend(url, stream=f"BENCH{tag.upper()}", prefix=f"bench{tag}.")
    raw_side = NatsBackend(url, stream=f"RAW{tag.upper()}", prefix=f"raw{tag}.")
    await backend.init()
    await raw_side.init()  # the same stream settings for the raw side
    nc = await nats.connect(url)
    js = nc.jetstream()
    base = (time.time_ns() // 1_000_000 // 1000) * 1000
    job = "bench"
    raw_subject = f"raw{tag}.{job}.claims"
    slots = iter(range(10**12))

    async def through_backend(_i: int) -> object:
        slot = base + next(slots)
        won = await backend.claim(ClaimInput(job, slot, uuid.uuid4().hex, "bench-instance"))
        assert won
        return won

    async def raw(_i: int) -> object:
        slot = base + next(slots)
        token = uuid.uuid4().hex.encode()
        ack = await js.publish(raw_subject, token, headers={"Nats-Msg-Id": f"{job}:{slot}"})
        assert not ack.duplicate
        return ack

    methods: dict[str, Claim] = {"backend": through_backend, "raw": raw}
    modes = [("sequential", 1), (f"{tasks} tasks", tasks)]
    # Warm-up: connections, JIT-free but caches and the server's first blocks.
    for claim in methods.values():
        await _measure(claim, 0.5, 1)

    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for r in range(rounds):
        for mode, concurrency in modes:
            order = list(methods.items())
            if r % 2:
                order.reverse()
            for name, claim in order:
                rate, lat = await _measure(claim, seconds, concurrency)
                results.setdefault((mode, name), []).append(
                    (rate, _percentile(lat, 0.5), _percentile(lat, 0.99))
                )
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr)

    await nc.close()
    await backend.close()
    await raw_side.close()

    print()
    print(f"{'mode':<12} {'method':<8} {'claims/s (min-max)':>26} {'p50 ms':>8} {'p99 ms':>8}")
    ok = True
    for mode, _c in modes:
        medians = {}
        for name in methods:
            rows = results[(mode, name)]
            rates = [row[0] for row in rows]
            p50 = statistics.median(row[1] for row in rows)
            p99 = statistics.median(row[2] for row in rows)
            medians[name] = statistics.median(rates)
            span = f"{medians[name]:,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
            print(f"{mode:<12} {name:<8} {span:>26} {p50:>8.3f} {p99:>8.3f}")
        ratio = medians["backend"] / medians["raw"]
        verdict = "PASS" if ratio >= 0.8 else "MISS"
        ok = ok and ratio >= 0.8
        print(f"{mode:<12} {'ratio':<8} {f'{ratio:.1%} of raw':>26}   target >= 80 %: {verdict}")
    return ok


async def _measure_batches(
    run_chunk: Callable[[], Awaitable[object]], seconds: float, chunk: int
) -> tuple[float, list[float], float]:
    """Run chunks back to back for ``seconds``: claims/s, chunk ms, client CPU µs per claim."""
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    cpu = time.process_time()
    began = time.perf_counter()
    while time.perf_counter() < stop:
        started = time.perf_counter()
        if await run_chunk() is False:
            break  # nothing more to claim
        latencies.append((time.perf_counter() - started) * 1000)
    elapsed = time.perf_counter() - began
    claims = len(latencies) * chunk
    return claims / elapsed, latencies, (time.process_time() - cpu) / claims * 1e6


async def batched(url: str, seconds: float, rounds: int, chunk: int) -> bool:
    tag = uuid.uuid4().hex[:6]
    backend = NatsBackend(url, stream=f"BATCH{tag.upper()}", prefix=f"batch{tag}.")
    loser = NatsBackend(url, stream=f"BATCH{tag.upper()}", prefix=f"batch{tag}.")
    raw_side = NatsBackend(url, stream=f"RAWB{tag.upper()}", prefix=f"rawb{tag}.")
    await backend.init()
    await loser.init()
    await raw_side.init()
    nc = await nats.connect(url)
    js = nc.jetstream()
    base = (time.time_ns() // 1_000_000 // 1000) * 1000
    jobs = [f"job{k}" for k in range(10)]
    raw_subjects = [f"rawb{tag}.{job}.claims" for job in jobs]
    counter = iter(range(10**12))
    claimed: list[list[ClaimInput]] = []

    def next_chunk() -> list[ClaimInput]:
        out = []
        for _ in range(chunk):
            i = next(counter)
            out.append(ClaimInput(jobs[i % 10], base + i, uuid.uuid4().hex, "bench-instance"))
        return out

    async def claim_many() -> None:
        items = next_chunk()
        answers = await backend.claim_many(items)
        assert all(answers)
        claimed.append(items)

    async def claim_many_lose() -> bool:
        if not claimed:
            return False
        others = [ClaimInput(c.job, c.slot, "other", "loser") for c in claimed.pop()]
        answers = await loser.claim_many(others)
        assert not any(answers)
        return True

    async def raw_js() -> None:
        ids = [next(counter) for _ in range(chunk)]
        acks = await asyncio.gather(
            *(
                js.publish(
                    raw_subjects[i % 10],
                    uuid.uuid4().hex.encode(),
                    headers={"Nats-Msg-Id": f"{jobs[i % 10]}:{base + i}"},
                )
                for i in ids
            )
        )
        assert not any(ack.duplicate for ack in acks)

    inbox = nc.new_inbox()
    replies: dict[int, bytes] = {}
    arrived = asyncio.Event()
    expected = [0]

    async def on_reply(msg: nats.aio.msg.Msg) -> None:
        replies[int(msg.subject.rsplit(".", 1)[1])] = msg.data
        if len(replies) == expected[0]:
            arrived.set()

    await nc.subscribe(f"{inbox}.>", cb=on_reply)

    async def raw_pub() -> None:
        replies.clear()
        arrived.clear()
        expected[0] = chunk
        for _ in range(chunk):
            i = next(counter)
            await nc.publish(
                raw_subjects[i % 10],
                uuid.uuid4().hex.encode(),
                reply=f"{inbox}.{i}",
                headers={"Nats-Msg-Id": f"{jobs[i % 10]}:{base + i}"},
            )
        await asyncio.wait_for(arrived.wait(), 10)
        assert not any(json.loads(data).get("duplicate") for data in replies.values())

    methods: dict[str, Callable[[], Awaitable[object]]] = {
        "claim_many": claim_many,
        "claim_many lose": claim_many_lose,
        "raw js": raw_js,
        "raw pub": raw_pub,
    }
    for run in methods.values():  # warm-up
        await _measure_batches(run, 0.3, chunk)
    results: dict[str, list[tuple[float, float, float, float]]] = {}
    for r in range(rounds):
        order = list(methods.items())
        if r % 2:
            order.reverse()
        for name, run in order:
            if name == "claim_many lose":
                continue  # right after claim_many, below, so it has chunks to lose
            rate, lat, cpu = await _measure_batches(run, seconds, chunk)
            results.setdefault(name, []).append(
                (rate, _percentile(lat, 0.5), _percentile(lat, 0.99), cpu)
            )
            if name == "claim_many":
                rate, lat, cpu = await _measure_batches(claim_many_lose, seconds / 2, chunk)
                results.setdefault("claim_many lose", []).append(
                    (rate, _percentile(lat, 0.5), _percentile(lat, 0.99), cpu)
                )
        print(f"  batched round {r + 1}/{rounds} done", file=sys.stderr)
    await nc.close()
    await backend.close()
    await loser.close()
    await raw_side.close()

    print()
    print(f"batched: chunks of {chunk} claims, one chunk after the other, one connection")
    print(
        f"{'method':<16} {'claims/s (min-max)':>26} {'CPU µs/claim':>13}"
        f" {'chunk p50 ms':>13} {'chunk p99 ms':>13}"
    )
    medians: dict[str, float] = {}
    for name in methods:
        rows = results[name]
        rates = [row[0] for row in rows]
        medians[name] = statistics.median(rates)
        span = f"{medians[name]:,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
        p50 = statistics.median(row[1] for row in rows)
        p99 = statistics.median(row[2] for row in rows)
        cpu = statistics.median(row[3] for row in rows)
        print(f"{name:<16} {span:>26} {cpu:>13.1f} {p50:>13.2f} {p99:>13.2f}")
    ok = True
    for raw in ("raw js", "raw pub"):
        ratio = medians["claim_many"] / medians[raw]
        verdict = "PASS" if ratio >= 0.7 else "MISS"
        ok = ok and ratio >= 0.7
        print(f"claim_many / {raw:<8} {ratio:>8.1%}   target >= 70 %: {verdict}")
    return ok


async def clock(url: str, readings: int = 500) -> None:
    """``now_ms()``: its latency, and how far it is from this machine's clock (same host)."""
    backend = NatsBackend(url, stream=f"CLOCK{uuid.uuid4().hex[:6].upper()}", prefix="clock.")
    await backend.init()
    for _ in range(20):
        await backend.now_ms()
    latencies: list[float] = []
    errors: list[float] = []
    for _ in range(readings):
        started, before = time.perf_counter(), time.time() * 1000
        now = await backend.now_ms()
        after = time.time() * 1000
        latencies.append((time.perf_counter() - started) * 1000)
        errors.append(abs(now - (before + after) / 2))
    await backend.close()
    print()
    print(
        f"clock: now_ms() p50 {_percentile(latencies, 0.5):.3f} ms,"
        f" p99 {_percentile(latencies, 0.99):.3f} ms; |server - local| (same host)"
        f" p50 {_percentile(errors, 0.5):.3f} ms, p99 {_percentile(errors, 0.99):.3f} ms,"
        f" max {max(errors):.3f} ms over {readings} readings"
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="an existing nats-server with JetStream (default: start one)")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one measurement")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per method")
    parser.add_argument("--tasks", type=int, default=64, help="concurrent tasks in the second mode")
    parser.add_argument("--chunk", type=int, default=500, help="claims per chunk (batched part)")
    parser.add_argument(
        "--only", choices=["single", "batched", "clock"], help="run one part only (default: all)"
    )
    args = parser.parse_args()

    server = root = None
    url = args.url
    if url is None:
        binary = find_nats_server()
        server, root = start_server()
        url = server.url
        print(f"started {server_version(binary)} at {url} (JetStream, file store)")
    print(
        f"python {sys.version.split()[0]}, nats-py {version('nats-py')}, {os.cpu_count()} CPUs;"
        f" {args.rounds} rounds x {args.seconds:g} s per method and mode"
    )
    try:
        if args.only in (None, "single"):
            asyncio.run(main(url, args.seconds, args.rounds, args.tasks))
        if args.only in (None, "batched"):
            asyncio.run(batched(url, args.seconds, args.rounds, args.chunk))
        if args.only in (None, "clock"):
            asyncio.run(clock(url))
    finally:
        if server is not None:
            server.kill()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    cli()
