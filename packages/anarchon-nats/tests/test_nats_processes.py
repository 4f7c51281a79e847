"""Separate OS processes on one nats-server: every slot of a 200 ms job runs exactly once."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.fleet import run_fleet
from anarchon_nats import NatsBackend


@pytest.mark.slow
def test_eight_processes_run_each_slot_once(nats_url: str, tmp_path: Path) -> None:
    """8 processes, one 200 ms job, >= 20 s together: every slot ran exactly once.

    Exactly once and none missed, from the processes' records and from the
    stream's history (see ``anarchon.testing.fleet``). NATS has no server
    clock: the processes' start and stop times are their wall clocks.
    """
    stream, prefix = f"FLEET{uuid.uuid4().hex[:6].upper()}", f"fleet{uuid.uuid4().hex[:6]}."
    url = f"{nats_url}?stream={stream}&prefix={prefix}"
    result = run_fleet(
        url,
        tmp_path=tmp_path,
        processes=8,
        window_s=20.0,
        job="every-200ms",
        reader=NatsBackend(nats_url, stream=stream, prefix=prefix),
    )
    print(result.summary())
