"""A lost finish on Redis: a failover to an asynchronous replica that missed the last writes.

The shipped round (:mod:`anarchon.testing.scenarios.lost_finish`) on a
redis-server primary with one replica. Replication goes through a
:class:`~anarchon.testing.scenarios.proxy.FaultProxy`, so it can be cut
exactly (a blackhole: the replica misses every later write); the fleet
reaches the primary through another proxy, which the failover points at the
promoted replica. Default durability: the writes of the last 500 ms are lost.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import redis
from anarchon.testing.scenarios.lost_finish import run_lost_finish
from anarchon.testing.scenarios.proxy import FaultProxy
from anarchon_testservers.redis import start_server

pytestmark = pytest.mark.scenario


def _link_up(port: int, timeout: float = 20.0) -> None:
    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + timeout
    while client.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica never caught up"
        time.sleep(0.05)
    client.close()


def test_a_lost_finish_blocks_no_job_and_runs_no_slot_again(tmp_path: Path) -> None:
    primary = start_server("redis")
    link = FaultProxy("127.0.0.1", primary.port).start()
    replica = start_server("redis", extra=["--replicaof", "127.0.0.1", str(link.port)])
    front = FaultProxy("127.0.0.1", primary.port).start()
    try:
        _link_up(replica.port)

        def fail_over() -> None:
            primary.kill()
            promoted = redis.Redis(host="127.0.0.1", port=replica.port)
            promoted.replicaof("NO", "ONE")
            promoted.close()
            front.target_port = replica.port  # new connections reach the promoted replica

        url = f"redis://127.0.0.1:{front.port}/0?prefix=lf{uuid.uuid4().hex[:6]}:"
        report = run_lost_finish(url, tmp_path=tmp_path, cut=link.blackhole, fail_over=fail_over)
        print(report.summary())
        report.assert_healed()
    finally:
        front.stop()
        link.stop()
        replica.stop()
        primary.stop()
