"""Two OS processes on Redis (lease and stream-id), steered by the CLI (anarchon.testing.scenarios.control)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.scenarios.control import run_control_scenario
from anarchon_testservers.redis import Server


@pytest.mark.scenario
@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["lease", "stream-id"])
def test_redis_two_processes_status_pause_resume_skip_drift(
    redis_server: Server, tmp_path: Path, strategy: str
) -> None:
    sep = "&" if "?" in redis_server.url else "?"
    url = f"{redis_server.url}{sep}strategy={strategy}&prefix=ctl{uuid.uuid4().hex[:6]}:"
    run_control_scenario(url, tmp_path)


def test_a_control_stored_before_paused_at_and_resumed_at_still_loads() -> None:
    from anarchon.errors import ForeignDataError
    from anarchon_redis._fleet import control_of

    old = control_of("k", "here", "j", '{"p":1,"u":null,"at":1700000000000,"by":"cli"}')
    assert (old.paused, old.updated_at, old.updated_by) == (True, 1_700_000_000_000, "cli")
    assert (old.paused_at, old.resumed_at) == (None, None)
    new = control_of("k", "here", "j", '{"p":0,"u":5,"at":6,"by":null,"pa":2,"ra":3}')
    assert (new.skip_until, new.paused_at, new.resumed_at) == (5, 2, 3)
    with pytest.raises(ForeignDataError):
        control_of("k", "here", "j", '{"p":0,"u":5,"at":6,"by":null,"pa":"x"}')
