"""Real processes on Redis: a one-off run declared by 4 processes runs once (both strategies),
and a ``kill -9`` during a retry's backoff is taken over (docs/one-off-runs.md, docs/retries.md)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.scenarios.one_off import run_one_off_fleet, run_retry_kill9
from anarchon_testservers.redis import Server


@pytest.mark.scenario
@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["lease", "stream-id"])
def test_one_off_four_processes_redis(redis_server: Server, strategy: str, tmp_path: Path) -> None:
    url = f"{redis_server.url}?strategy={strategy}&prefix=once{uuid.uuid4().hex[:6]}:"
    run_one_off_fleet(url, tmp_path, processes=4)


@pytest.mark.slow
def test_kill9_during_a_retry_redis(redis_server: Server, tmp_path: Path) -> None:
    url = f"{redis_server.url}?strategy=lease&prefix=retry{uuid.uuid4().hex[:6]}:"
    run_retry_kill9(url, tmp_path)
