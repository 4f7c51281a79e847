"""Two OS processes on Redis (lease and stream-id), steered by the CLI (anarchon.testing.control_scenario)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.control_scenario import run_control_scenario
from redis_servers import Server


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["lease", "stream-id"])
def test_redis_two_processes_status_pause_resume_skip_drift(
    redis_server: Server, tmp_path: Path, strategy: str
) -> None:
    sep = "&" if "?" in redis_server.url else "?"
    url = f"{redis_server.url}{sep}strategy={strategy}&prefix=ctl{uuid.uuid4().hex[:6]}:"
    run_control_scenario(url, tmp_path)
