"""Cross-package tests: the helpers in tests/support/ are importable by name; a Redis to run on."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_ROOT / "tests" / "support"))
sys.path.insert(0, str(_ROOT / "packages" / "anarchon-redis" / "tests"))

from redis_servers import Server, start_server  # type: ignore[import-not-found]  # noqa: E402


@pytest.fixture
def redis() -> Iterator[Server]:
    """A throw-away redis-server of its own (the wheel tests install into clean venvs)."""
    server = start_server("redis")
    try:
        yield server
    finally:
        server.stop()
