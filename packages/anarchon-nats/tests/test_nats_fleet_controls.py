"""Two OS processes on one nats-server, steered by the CLI (anarchon.testing.scenarios.control)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.scenarios.control import run_control_scenario


@pytest.mark.scenario
@pytest.mark.slow
def test_nats_two_processes_status_pause_resume_skip_drift(nats_url: str, tmp_path: Path) -> None:
    stream, prefix = f"CTL{uuid.uuid4().hex[:6].upper()}", f"ctl{uuid.uuid4().hex[:6]}."
    sep = "&" if "?" in nats_url else "?"
    run_control_scenario(f"{nats_url}{sep}stream={stream}&prefix={prefix}", tmp_path)


def test_a_control_stored_before_paused_at_and_resumed_at_still_loads() -> None:
    from anarchon.errors import ForeignDataError
    from anarchon.fleet_types import JobControl
    from anarchon_nats._fleet import control_of, control_payload

    old = control_of("s", "subj", b'{"job":"j","p":1,"u":null,"by":"cli"}', 7)
    assert (old.paused, old.updated_at, old.paused_at, old.resumed_at) == (True, 7, None, None)
    stored = JobControl("j", paused_at=2, resumed_at=3)
    new = control_of("s", "subj", control_payload(stored), 9)
    assert (new.paused_at, new.resumed_at, new.updated_at) == (2, 3, 9)
    with pytest.raises(ForeignDataError):
        control_of("s", "subj", b'{"job":"j","p":0,"u":null,"by":null,"ra":"x"}', 7)
