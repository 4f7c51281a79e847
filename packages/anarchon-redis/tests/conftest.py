"""Fixtures of the anarchon-redis tests: real redis-server and valkey-server processes.

One server of each kind per session, started on 127.0.0.1 and a free port.
The binaries are provisioned into a cache outside the clone
(``anarchon_testservers.cache``); one that cannot be provisioned fails the
tests loudly; they are never skipped.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from anarchon_testservers.redis import (
    Cluster,
    SentinelGroup,
    Server,
    start_cluster,
    start_replica,
    start_sentinels,
    start_server,
)


def _start(kind: str) -> Server:
    try:
        return start_server(kind)
    except RuntimeError as error:
        pytest.fail(
            f"cannot start {kind}-server for the anarchon-redis tests: {error}", pytrace=False
        )


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Server]:
    """One throw-away redis-server (Debian's) for the whole session."""
    server = _start("redis")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis86_server() -> Iterator[Server]:
    """One throw-away Redis >= 8.6 (Debian experimental, private loader) for the session."""
    server = _start("redis86")
    try:
        found = server.version.partition("v=")[2].split()[0]
        major, minor = (int(p) for p in found.split(".")[:2])
        if (major, minor) < (8, 6):
            pytest.fail(f"redis86-server is {found}, not >= 8.6", pytrace=False)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[Server]:
    """One throw-away valkey-server for the whole session."""
    server = _start("valkey")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["redis", "valkey"])
def server(request: pytest.FixtureRequest) -> Server:
    """Each test once per server kind."""
    fixture = "redis_server" if request.param == "redis" else "valkey_server"
    found: Server = request.getfixturevalue(fixture)
    return found


@pytest.fixture
def prefix() -> str:
    """A key prefix no other test uses."""
    return f"t{uuid.uuid4().hex[:10]}:"


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Cluster]:
    """A real 3-node Redis Cluster (Debian's redis-server, no replicas) for the session."""
    try:
        cluster = start_cluster(3)
    except RuntimeError as error:
        pytest.fail(f"cannot start a Redis Cluster: {error}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass
class Replicated:
    """A primary, one replica and 3 Sentinels watching the primary (service ``anarchon``)."""

    primary: Server
    replica: Server
    sentinels: SentinelGroup


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[Replicated]:
    """A redis-server primary with a replica and 3 Sentinels, for the session (never failed over)."""
    try:
        primary = start_server("redis")
        replica = start_replica(primary)
        sentinels = start_sentinels(primary, wait_peers=False)
    except RuntimeError as error:
        pytest.fail(f"cannot start a Sentinel group: {error}", pytrace=False)
    try:
        yield Replicated(primary, replica, sentinels)
    finally:
        for server in (primary, replica, *sentinels.sentinels):
            server.stop()
