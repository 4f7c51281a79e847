"""Where the Redis claim script's time goes: the real script beside variants cut short.

    uv run --frozen --no-sync python benchmarks/claims/redis_claim_steps.py [--rounds 12] [--kind redis]

Starts a throw-away server (``anarchon_testservers.redis.start_server``) and loads the
lease claim script as the backend has it, plus variants of its source that
stop at one step: right after the ``HMGET``, right before the ``HSET``, with
the state's JSON built but no ``HSET``, and with an ``HSET`` of constant
strings. Each round sends every variant one call of ``CHUNK`` new claims in
the backend's own layout (keys, arguments, profiles) and reads the
``evalsha`` row of ``INFO commandstats`` after it. Printed: the median and
least µs per claim of each variant over the rounds (the first round, which
creates the keys, is not counted). The differences between rows are what
each step costs the server (benchmarks/README.md, "Where the Redis server
time goes").
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

import redis.asyncio as aio
from anarchon.types import RunClaim
from anarchon_redis import RedisBackend, ValkeyBackend, _lua
from anarchon_redis._batch import CHUNK
from anarchon_redis._lease import LeaseRuntime
from anarchon_testservers.redis import start_server
from claims_redis import claim_call  # type: ignore[import-not-found,unused-ignore]

BASE_SLOT = 1_700_000_000_000

_HSET = """    redis.call('HSET', state, slot_s,
               '{"a":1,"t":' .. jstr(token) .. ',"s":"running","r":' .. p.jinstance .. ',"l":'
                 .. p.lease_s .. ',"b":' .. now_s .. ',"m":' .. p.max_s .. ',"x":0}',
               '~act', new_act, '~n', count)"""
_STATE_JSON = """    local v = '{"a":1,"t":' .. jstr(token) .. ',"s":"running","r":' .. p.jinstance .. ',"l":'
                 .. p.lease_s .. ',"b":' .. now_s .. ',"m":' .. p.max_s .. ',"x":0}'"""
_AFTER_HMGET = "  local raw = got[1]\n  if not raw then\n"


def variants() -> dict[str, str]:
    """The real claim script and its cut-short variants, by name (in the order printed)."""
    real = _lua.LEASE_CLAIM.source
    for anchor in (_HSET, _AFTER_HMGET):
        if anchor not in real:
            raise SystemExit(f"the claim script changed: {anchor.strip()[:40]!r} not found")
    return {
        "returns after the HMGET": real.replace(
            _AFTER_HMGET, "  do return 0 end\n" + _AFTER_HMGET, 1
        ),
        "returns before the HSET": real.replace(_HSET, "    do return 0 end\n" + _HSET),
        "state JSON, no HSET": real.replace(_HSET, _STATE_JSON),
        "HSET of constants": real.replace(
            _HSET, "    redis.call('HSET', state, slot_s, 'v', '~act', 'a', '~n', 1)"
        ),
        "the real script": real,
    }


async def measure(kind: str, rounds: int) -> dict[str, list[float]]:
    """µs per claim of each variant, one value per counted round."""
    server = start_server(kind)
    try:
        url = server.redis_url if kind == "valkey" else server.url
        client: Any = aio.Redis.from_url(url)
        backend = (RedisBackend if kind == "redis" else ValkeyBackend)(client, prefix="steps:")
        await backend.init()
        runtime = backend._runtime
        assert isinstance(runtime, LeaseRuntime)
        shas = {name: await client.script_load(text) for name, text in variants().items()}
        found: dict[str, list[float]] = {name: [] for name in shas}
        try:
            for r in range(rounds + 1):
                for v, (name, sha) in enumerate(shas.items()):
                    slot = BASE_SLOT + r * 1000
                    claims = [
                        RunClaim(
                            f"v{v}-{j}",
                            slot,
                            f"t{r}-{v}-{j}",
                            "steps",
                            30_000,
                            3,
                            True,
                            None,
                            True,
                            1000,
                        )
                        for j in range(CHUNK)
                    ]
                    await client.execute_command("CONFIG", "RESETSTAT")
                    keys, argv = claim_call(runtime, claims)
                    await client.execute_command("EVALSHA", sha, len(keys), *keys, *argv)
                    stats = await client.info("commandstats")
                    if r:
                        found[name].append(float(stats["cmdstat_evalsha"]["usec"]) / CHUNK)
        finally:
            await backend.close()
            await client.aclose()
        return found
    finally:
        server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--kind", choices=["redis", "valkey"], default="redis")
    args = parser.parse_args()
    found = asyncio.run(measure(args.kind, args.rounds))
    print(f"{args.kind}: the lease claim script, {CHUNK} new claims per call, {args.rounds} rounds")
    print(f"{'variant':28s} {'median µs/claim':>16s} {'least':>8s}")
    for name, values in found.items():
        print(f"{name:28s} {statistics.median(values):16.2f} {min(values):8.2f}")


if __name__ == "__main__":
    main()
