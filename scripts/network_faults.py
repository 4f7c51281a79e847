"""The network-fault x store table: time to recover and slots lost, per networked store.

Starts the servers the test fixtures use (Redis 7, PostgreSQL, nats-server;
SQLite is a file), then for each store runs the checks the test suite runs
once, through ``anarchon.testing``:

- ``dead_flows``: every established connection goes silently dead, new ones
  work (``anarchon.testing.scenarios.heal``); seconds from the fault to the next run;
- ``blackhole``: nothing forwarded on any connection for 3 s, then a heal;
  seconds from the heal to the next run. Slots lost: slots due from the
  fault on that are not stored ``ok`` (with ``overlap=False``, the slots
  that fell due during the outage are skipped once the store is back: one
  run, not a burst);
- ``slow_finish``: two instances, one over a 1 s round trip, a job every 4 s
  with ``overlap=False`` (``anarchon.testing.scenarios.slow_link``), call timeout 3 s, run with the
  overlap re-check off (as a store without ``overlap_wait``) and on; slots
  lost and slots skipped as overlap;
- ``stop``: ``stop()`` with the store down (a blackhole; SQLite: locked by
  another connection), stop_grace 1 s, call timeout 1 s
  (``anarchon.testing.scenarios.stop_bound``).

Run (``scripts/scenarios.py`` runs it as a part of the scenario tier)::

    uv run --frozen python scripts/network_faults.py
    uv run --frozen python scripts/network_faults.py --stores redis postgresql --slow-seconds 30

Each check raises if it misses its bound; the table then shows the error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import sys
import tempfile
import uuid
from collections.abc import Callable
from typing import Any

from anarchon import Backend, Scheduler
from anarchon.testing.scenarios.heal import check_heals
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon.testing.scenarios.slow_link import check_slow_finish
from anarchon.testing.scenarios.stop_bound import check_stop_bound

STORES = ("redis", "postgresql", "nats", "sqlite")
FAULTS = ("dead_flows", "blackhole", "slow_finish", "stop")

CALL_TIMEOUT_S = {"redis": 1.5, "postgresql": 1.5, "nats": 1.0}


class Servers:
    """The servers of the stores asked for, started once."""

    def __init__(self, stores: list[str]) -> None:
        self.cleanup: list[Callable[[], object]] = []
        self.ports: dict[str, int] = {}
        self.pg_database = ""
        self.redis_password: str | None = None
        self.tmp = tempfile.mkdtemp(prefix="anarchon-faults-")
        self.cleanup.append(lambda: shutil.rmtree(self.tmp, ignore_errors=True))
        if "redis" in stores:
            from anarchon_testservers.redis import start_server

            redis = start_server("redis")
            self.cleanup.append(redis.stop)
            self.ports["redis"] = int(redis.port)
            self.redis_password = redis.password
        if "postgresql" in stores:
            from anarchon_testservers.postgres import start_postgres

            pg = start_postgres()
            self.cleanup.append(pg.stop)
            self.ports["postgresql"] = int(pg.port)
            self.pg_database = str(pg.database)
        if "nats" in stores:
            from anarchon_testservers.nats import start_server as start_nats

            nats, root = start_nats()
            self.cleanup.append(lambda: shutil.rmtree(root, ignore_errors=True))
            self.cleanup.append(nats.kill)
            self.ports["nats"] = int(nats.port)

    def close(self) -> None:
        for step in reversed(self.cleanup):
            step()

    def maker(self, store: str, call: float | None = None) -> Callable[[int], Backend]:
        """``make(port)``: a backend of ``store`` reaching it at 127.0.0.1:port."""
        call = CALL_TIMEOUT_S.get(store, 1.0) if call is None else call
        if store == "redis":
            from anarchon_redis import RedisBackend

            auth = f":{self.redis_password}@" if self.redis_password else ""
            return lambda port: RedisBackend(
                f"redis://{auth}127.0.0.1:{port}/0?socket_timeout={call}"
            )
        if store == "postgresql":
            from anarchon_sql import PostgresBackend

            prefix = f"nf{uuid.uuid4().hex[:6]}_"
            return lambda port: PostgresBackend(
                f"postgresql://postgres@127.0.0.1:{port}/{self.pg_database}"
                f"?call_timeout={call}&pool_size=2&table_prefix={prefix}"
            )
        if store == "nats":
            from anarchon_nats import NatsBackend

            stream, prefix = f"F{uuid.uuid4().hex[:10].upper()}", f"f{uuid.uuid4().hex[:10]}."
            return lambda port: NatsBackend(
                f"nats://127.0.0.1:{port}", stream=stream, prefix=prefix, request_timeout=call
            )
        raise ValueError(store)


async def _heal(servers: Servers, store: str, fault: str) -> str:
    from anarchon_nats.backend import RECONNECT_AFTER_TIMEOUTS

    call = CALL_TIMEOUT_S[store] * (RECONNECT_AFTER_TIMEOUTS if store == "nats" else 1)
    with FaultProxy("127.0.0.1", servers.ports[store]) as proxy:
        result = await check_heals(
            servers.maker(store), proxy, fault=fault, heartbeat_s=1.0, call_timeout_s=call
        )
    return f"recovered in {result.recovered_s:.2f} s, {result.slots_lost} slots lost"


async def _slow(servers: Servers, store: str, seconds: float) -> str:
    parts = []
    for label, wait in (("re-check off", False), ("re-check on", True)):
        # A call timeout well above the 1 s round trip (a new connection takes several).
        make = servers.maker(store, call=3.0)
        r = await check_slow_finish(
            make, "127.0.0.1", servers.ports[store], seconds=seconds, wait=wait
        )
        parts.append(
            f"{label}: {r.lost} of {r.slots} lost ({r.skipped_overlap} skipped as overlap,"
            f" {r.duplicates} twice, {r.waits} re-checks)"
        )
    return "; ".join(parts)


async def _stop(servers: Servers, store: str) -> str:
    options: dict[str, Any] = {"instance_id": "stopper", "stop_grace": "1s"}
    if store == "sqlite":
        path = os.path.join(servers.tmp, f"stop-{uuid.uuid4().hex[:6]}.db")
        locker = sqlite3.connect(path, isolation_level=None, timeout=0.1)
        scheduler = Scheduler(f"sqlite:///{path}", lease="3s", heartbeat="1s", **options)
        try:
            took = await check_stop_bound(
                scheduler, lambda: locker.execute("BEGIN EXCLUSIVE") and None
            )
        finally:
            locker.close()
        return f"stop() {took:.2f} s (bound {1 + scheduler.call_timeout_s:.1f} s)"
    with FaultProxy("127.0.0.1", servers.ports[store]) as proxy:
        backend = servers.maker(store)(proxy.port)
        if backend.runs is not None:
            options |= {"lease": "3s", "heartbeat": "1s"}
        scheduler = Scheduler(backend, **options)
        try:
            took = await check_stop_bound(scheduler, proxy.blackhole)
        finally:
            proxy.heal()  # the scheduler does not own a backend it was handed: close it here
            await asyncio.wait_for(backend.close(), 30)
    return f"stop() {took:.2f} s (bound {1 + scheduler.call_timeout_s:.1f} s)"


def _applies(store: str, fault: str) -> bool:
    if store == "sqlite":
        return fault == "stop"  # a file: no network between the scheduler and the store
    if store == "nats":
        return fault != "slow_finish"  # claim-only: no leases, no overlap check
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--slow-seconds", type=float, default=30.0)
    args = parser.parse_args()
    servers = Servers(args.stores)
    rows: list[tuple[str, str, str]] = []
    try:
        for store in args.stores:
            for fault in args.faults:
                if not _applies(store, fault):
                    continue
                if fault in ("dead_flows", "blackhole"):
                    job = _heal(servers, store, fault)
                elif fault == "slow_finish":
                    job = _slow(servers, store, args.slow_seconds)
                else:
                    job = _stop(servers, store)
                try:
                    after = asyncio.run(job)
                except AssertionError as error:
                    after = f"FAILED: {error}"
                rows.append((fault, store, after))
                print(f"{fault:12} {store:11} {after}", file=sys.stderr, flush=True)
    finally:
        servers.close()
    print("| fault | store | measured |")
    print("|---|---|---|")
    for fault, store, after in rows:
        print(f"| {fault} | {store} | {after} |")


if __name__ == "__main__":
    main()
