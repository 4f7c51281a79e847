"""Redis lease job-slots: the per-item scripts of an earlier commit vs today's batches, same server.

    uv run python benchmarks/claims_redis_before.py [--ref 7a38558] [--jobs 2000] [--rounds 7]

``--ref`` names the commit whose ``anarchon_redis/_lua.py`` holds the old
scripts (read with ``git show``; default: the last commit before the batch
scripts). **before** sends what that commit's backend sent for each job-slot:
three ``EVALSHA`` (claim, finish, save), one at a time, through redis-py;
**after** runs ``runs.claim_many``, ``runs.finish_many`` and
``backend.save_results`` over all of a round's job-slots. Rounds interleave
the two, on one throw-away redis-server; the table gives medians (and the
least) per job-slot of claims/s, ``INFO commandstats`` usec of the scripts,
and the server process's CPU (``used_cpu_user + used_cpu_sys``).

On a shared, loaded machine ``commandstats`` counts the time the server was
preempted inside a long script too; the CPU column does not (``--server-nice
-10`` lets the server run when it is ready, so both come close).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from typing import Any

import claims_redis as bench
import redis.asyncio as aio
from anarchon_testservers.redis import start_server

HERE = os.path.dirname(os.path.abspath(__file__))

LUA_PATH = "packages/anarchon-redis/src/anarchon_redis/_lua.py"


def _old_scripts(ref: str) -> Any:
    source = subprocess.run(
        ["git", "show", f"{ref}:{LUA_PATH}"], capture_output=True, text=True, check=True, cwd=HERE
    ).stdout
    path = os.path.join(tempfile.mkdtemp(prefix="anarchon-old-lua-"), "old_lua.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("old_lua", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _result_json(slot: int, token: str) -> str:
    return json.dumps(
        {
            "slot": slot,
            "token": token,
            "instance_id": "bench",
            "status": "ok",
            "started_at": slot,
            "finished_at": slot + 1,
            "error": None,
            "attempt": 1,
            "manual": False,
            "reason": None,
        },
        separators=(",", ":"),
        sort_keys=True,
    )


async def _before_round(client: Any, old: Any, keys: Any, names: list[str], slot: int) -> float:
    execute = client.execute_command
    tag = uuid.uuid4().hex[:6]
    t0 = time.perf_counter()
    for j, job in enumerate(names):
        k = keys(job)
        args = (slot, f"{tag}{j}", "bench", 30_000, 3, 1, "", 1, 1000, 604_800_000, "")
        reply = await execute("EVALSHA", old.LEASE_CLAIM.sha, 5, *k, *args)
        if reply[0] != b"won":
            raise AssertionError(reply)
    claimed = time.perf_counter() - t0
    for j, job in enumerate(names):
        k = keys(job)
        token = f"{tag}{j}"
        if await execute("EVALSHA", old.LEASE_FINISH.sha, 2, k[0], k[1], slot, token, "ok") != 1:
            raise AssertionError(job)
        result = _result_json(slot, token)
        await execute("EVALSHA", old.LEASE_SAVE.sha, 5, *k, slot, token, result, "ok", 0, 1000, "")
    return claimed


async def compare(url: str, ref: str, jobs: int, rounds: int) -> None:
    old = _old_scripts(ref)
    admin = aio.Redis.from_url(url)
    for script in (old.LEASE_CLAIM, old.LEASE_FINISH, old.LEASE_SAVE):
        await admin.script_load(script.source)
    client = aio.Redis.from_url(url)
    backend = bench._backend("redis", url)
    await backend.init()
    runtime = backend._runtime
    before_names = [f"before-{uuid.uuid4().hex[:6]}-{j}" for j in range(jobs)]
    after_names = [f"after-{uuid.uuid4().hex[:6]}-{j}" for j in range(jobs)]
    rows: dict[str, list[tuple[float, float, float]]] = {
        f"before ({ref}, one by one)": [],
        "after (batched)": [],
    }
    try:
        for r in range(rounds + 1):  # round 0 creates the keys: not measured
            for side in rows:
                slot = bench.BASE_SLOT + r * 1000
                cpu0 = await bench._reset_stats(admin)
                if side.startswith("before"):
                    claim_s = await _before_round(
                        client,
                        old,
                        runtime.keys,  # type: ignore[attr-defined]
                        before_names,
                        slot,
                    )
                else:
                    claims = bench._claims(after_names, slot, f"a{r}")
                    claim_s = await bench._batched_round(backend, claims)
                usec = await bench._server_usec(admin)
                cpu1 = await bench._cpu(admin)
                if r:
                    cpu = (cpu1["cpu"] - cpu0["cpu"]) * 1e6 / jobs
                    rows[side].append((jobs / claim_s, usec / jobs, cpu))
    finally:
        await backend.close()
        await client.aclose()
        await admin.aclose()
    print(f"{jobs} jobs due together x {rounds} rounds; per job-slot: claim + finish + result")
    print(
        f"{'side':<30} {'claims/s':>9} {'commandstats us':>16} {'(min)':>7} {'server cpu us':>14} {'(min)':>7}"
    )
    for side, found in rows.items():
        rate = statistics.median(x[0] for x in found)
        usec = [x[1] for x in found]
        cpu = [x[2] for x in found]
        print(
            f"{side:<30} {rate:>9.0f} {statistics.median(usec):>16.1f} {min(usec):>7.1f}"
            f" {statistics.median(cpu):>14.1f} {min(cpu):>7.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="7a38558", help="the commit with the old scripts")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--server-nice",
        type=int,
        default=0,
        help="niceness of the throw-away server (e.g. -10 on a shared machine, as root)",
    )
    args = parser.parse_args()
    server = start_server("redis")
    if args.server_nice and server.process is not None:
        os.setpriority(os.PRIO_PROCESS, server.process.pid, args.server_nice)
    try:
        asyncio.run(compare(server.url, args.ref, args.jobs, args.rounds))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
