"""Fault scenarios (anarchon.testing.scenarios.faults) on NATS JetStream: claims without leases.

NATS claims each slot exactly once and has no leases (docs/leases.md): nothing
takes a crashed instance's run over, so a ``kill -9`` loses the run it was
executing, as documented. The count says so (``unfinished``); everything else
stays clean: no slot runs twice, none is missed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from anarchon.testing.scenarios import faults

# The scenario tier (docs/development.md): which slot a kill -9 lands in is timing, and a
# claim-only store has no take-over to check; the gate's kill -9 tests are on lease stores.
pytestmark = pytest.mark.scenario


def test_kill9_loses_the_running_slot_and_nothing_else(nats_url: str, tmp_path: Path) -> None:
    report = faults.kill9_takeover(nats_url, tmp_path=tmp_path, after_s=4.0)
    print(report.summary())
    assert report.slots > 0, report.summary()
    assert report.recovery_s is None, "a claim-only backend took a run over"
    assert report.fault_slot in report.unfinished, report.summary()
    assert len(report.unfinished) <= 2, report.summary()  # the victim's running slots
    assert report.duplicates == {}, report.summary()
    assert report.zombies == [], report.summary()
    assert report.overlaps == [], report.summary()
    assert report.lost == [], report.summary()
    assert report.missed == [], report.summary()
