"""Two OS processes on one nats-server, steered by the CLI (anarchon.testing.control_scenario)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.control_scenario import run_control_scenario


@pytest.mark.slow
def test_nats_two_processes_status_pause_resume_skip_drift(nats_url: str, tmp_path: Path) -> None:
    stream, prefix = f"CTL{uuid.uuid4().hex[:6].upper()}", f"ctl{uuid.uuid4().hex[:6]}."
    sep = "&" if "?" in nats_url else "?"
    run_control_scenario(f"{nats_url}{sep}stream={stream}&prefix={prefix}", tmp_path)
