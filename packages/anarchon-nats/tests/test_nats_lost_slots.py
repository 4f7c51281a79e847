"""What a fleet on a 3-node JetStream cluster loses when the stream leader is killed.

docs/faults.md, "A restart of the store": a slot claimed ahead holds a short
lease, and retries wake when the store answers again (here: once the
surviving nodes have elected a new stream leader).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from anarchon.errors import BackendUnavailableError
from anarchon.testing.scenarios.lost_slots import restart_store_fleet
from anarchon.types import ClaimInput
from anarchon_nats import NatsBackend
from anarchon_testservers.nats import NatsCluster, start_cluster

pytestmark = pytest.mark.scenario


@pytest.fixture
def own_cluster() -> Iterator[NatsCluster]:
    """A 3-node cluster for one test that kills its stream leader."""
    try:
        cluster = start_cluster(3)
    except RuntimeError as error:
        pytest.fail(f"cannot start a nats-server cluster: {error}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


async def _leader(urls: list[str], stream: str, timeout: float = 30.0) -> str:
    """The name of the stream's leader, asked of the first node that answers."""
    deadline = time.monotonic() + timeout
    while True:
        for url in urls:
            try:
                nc = await nats.connect(url, connect_timeout=1, max_reconnect_attempts=0)
            except Exception:  # a node that is down
                continue
            try:
                reply = await nc.request(f"$JS.API.STREAM.INFO.{stream}", b"", timeout=2)
                body: dict[str, Any] = json.loads(reply.data)
                leader = (body.get("cluster") or {}).get("leader")
                if "error" not in body and leader:
                    return str(leader)
            except (nats.errors.Error, asyncio.TimeoutError):
                pass
            finally:
                await nc.close()
        if time.monotonic() > deadline:
            raise RuntimeError(f"stream {stream} has no leader")
        await asyncio.sleep(0.1)


async def _answers(urls: list[str], stream: str, prefix: str, timeout: float = 60.0) -> None:
    """Block until a fresh client's claim through the surviving nodes succeeds."""
    deadline = time.monotonic() + timeout
    while True:
        probe = NatsBackend(
            urls,
            stream=stream,
            prefix=prefix,
            durability="replicated",
            request_timeout=0.5,
            connect_timeout=0.5,
            reconnect_time_wait=0.05,
        )
        try:
            await probe.init()
            slot = time.time_ns() // 1_000_000
            await probe.claim(ClaimInput("up-probe", slot, uuid.uuid4().hex, "probe"))
            return
        except BackendUnavailableError:
            if time.monotonic() > deadline:
                raise
        finally:
            with contextlib.suppress(Exception):  # closing a client that never connected
                await probe.close()
        await asyncio.sleep(0.02)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_killing_the_stream_leader_loses_no_slot_to_a_delayed_finish(
    own_cluster: NatsCluster, tmp_path: Path
) -> None:
    """200 one-second jobs on 2 processes, stream R3; the stream leader is ``kill -9``ed:
    no slot due after the store answers again is lost, none runs twice, and every job runs
    again within 1 s of the store answering a claim through a fresh client."""
    cluster = own_cluster
    tag = uuid.uuid4().hex[:8]
    stream, prefix = f"L{tag.upper()}", f"l{tag}."
    hosts = ",".join(u.removeprefix("nats://") for u in cluster.urls)
    url = f"nats://{hosts}?stream={stream}&prefix={prefix}&durability=replicated"
    by_name = {s.name: s for s in cluster.servers}
    killed: list[str] = []

    def down() -> None:
        leader = asyncio.run(_leader(cluster.urls, stream))
        by_name[leader].kill()
        killed.append(leader)

    def up() -> None:
        alive = [s.url for s in cluster.servers if s.name not in killed]
        asyncio.run(_answers(alive, stream, prefix))

    report = restart_store_fleet(url, tmp_path=tmp_path, down=down, up=up, outage_s=0.0)
    print(f"killed leader {killed}: {report.summary()}")
    assert report.lost_after == 0, report.summary()
    assert report.twice == 0, report.summary()
    assert report.resumed_within_ms <= 1_000, report.summary()
