"""Real processes on NATS JetStream: a one-off run declared by 4 processes runs once (docs/one-off-runs.md)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.scenarios.one_off import run_one_off_fleet

# Its point is timing or an injected fault: the scenario tier (docs/development.md).
pytestmark = pytest.mark.scenario


@pytest.mark.slow
def test_one_off_four_processes_nats(nats_url: str, tmp_path: Path) -> None:
    stream, prefix = f"ONCE{uuid.uuid4().hex[:6].upper()}", f"once{uuid.uuid4().hex[:6]}."
    run_one_off_fleet(f"{nats_url}?stream={stream}&prefix={prefix}", tmp_path)
