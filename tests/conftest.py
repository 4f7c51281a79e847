"""Cross-package tests: a Redis to run on (tests/support/ is on pytest's pythonpath)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anarchon_testservers.redis import Server, start_server


@pytest.fixture
def redis() -> Iterator[Server]:
    """A throw-away redis-server of its own (the wheel tests install into clean venvs)."""
    server = start_server("redis")
    try:
        yield server
    finally:
        server.stop()
