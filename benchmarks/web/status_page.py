"""What one ``GET api/status`` of the status page costs on Redis, for a fleet of N jobs.

Fills a throw-away redis-server with ``--jobs`` declared jobs (two instances
each, ``--runs`` runs each, every 10th job failing with a URL in its error,
every 7th with a run in progress), serves ``create_app(BackendSource(url))``
with uvicorn and prints, for each GET: wall time, bytes, Redis commands
(``INFO commandstats`` before and after, commands run inside scripts included)
and the Redis server's CPU::

    uv run --frozen python benchmarks/web/status_page.py                 # 2,000 jobs
    uv run --frozen python benchmarks/web/status_page.py --jobs 500 --runs 45

The scenario test ``packages/anarchon-redis/tests/test_redis_web_status.py``
asserts the bounds (under 1 s and 1 MB for 2,000 jobs).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import threading
import time

import httpx
import redis
import uvicorn
from anarchon.fleet.types import Declaration
from anarchon.types import ClaimInput, ResultWrite, StoredResult
from anarchon.web import BackendSource, create_app
from anarchon_redis import RedisBackend
from anarchon_testservers.redis import start_server

ERROR = "OperationalError: cannot reach postgresql://admin:hunter2@db.internal:5432/billing " * 4


async def fill(url: str, jobs: int, runs: int, prefix: str = "cron:") -> None:
    """``jobs`` declared jobs with ``runs`` runs each (claims and results, as a fleet writes them).

    Every 10th job fails (a URL with a password in its error), every 7th has
    its newest run in progress.
    """
    backend = RedisBackend(url, prefix=prefix)
    await backend.init()
    try:
        names = [f"job-{i:05d}" for i in range(jobs)]
        await backend.declare(
            [
                Declaration(name, instance, "f1", "every 2000ms", 0, 0)
                for name in names
                for instance in ("proc-0", "proc-1")
            ],
            ttl_ms=3_600_000,
        )
        base = 1_700_000_000_000
        for run in range(runs):
            slot = base + run * 2_000
            claims = [ClaimInput(n, slot, f"{n}-{run}", f"proc-{run % 2}", 100) for n in names]
            for start in range(0, len(claims), 1_000):
                await backend.claim_many(claims[start : start + 1_000])
            writes = [
                ResultWrite(
                    n,
                    StoredResult(
                        slot,
                        f"{n}-{run}",
                        f"proc-{run % 2}",
                        "error" if i % 10 == 0 else "ok",
                        started_at=slot,
                        finished_at=slot + 15,
                        error=ERROR if i % 10 == 0 else None,
                    ),
                    100,
                )
                for i, n in enumerate(names)
                if not (run == runs - 1 and i % 7 == 0)
            ]
            for start in range(0, len(writes), 1_000):
                await backend.save_results(writes[start : start + 1_000])
    finally:
        await backend.close()


def _counters(client: redis.Redis) -> tuple[int, float]:
    stats = client.info("commandstats")
    cpu = client.info("cpu")
    calls = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
    return calls, float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=45)
    parser.add_argument(
        "--path",
        action="append",
        help="a GET to measure (repeatable); default: page 1, again, page 40, 200 jobs",
    )
    args = parser.parse_args()
    paths = args.path or [
        "/api/status",
        "/api/status",
        "/api/status?page=40",
        "/api/status?per_page=200&page=3",
    ]
    server = start_server("redis")
    try:
        started = time.perf_counter()
        asyncio.run(fill(server.url, args.jobs, args.runs))
        print(
            f"{args.jobs:,} jobs x {args.runs} runs, filled in {time.perf_counter() - started:.1f} s"
        )
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        app = create_app(BackendSource(server.url))
        web = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=lambda: asyncio.run(web.serve()), daemon=True)
        thread.start()
        while not web.started:
            time.sleep(0.05)
        client = redis.Redis.from_url(server.redis_url)
        base = f"http://127.0.0.1:{port}"
        httpx.get(base + "/api/jobs/job-00000/active", timeout=600)  # connect, load scripts
        print(f"{'GET':<34} {'seconds':>8} {'bytes':>11} {'commands':>9} {'Redis CPU s':>11}")
        for path in paths:
            calls, cpu = _counters(client)
            t0 = time.perf_counter()
            response = httpx.get(base + path, timeout=600)
            seconds = time.perf_counter() - t0
            after_calls, after_cpu = _counters(client)
            response.raise_for_status()
            print(
                f"{path:<34} {seconds:>8.3f} {len(response.content):>11,}"
                f" {after_calls - calls:>9,} {after_cpu - cpu:>11.3f}"
            )
        client.close()
        web.should_exit = True
        thread.join(timeout=10)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
