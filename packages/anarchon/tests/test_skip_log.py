"""Overlap skips are logged once per job per minute, with a count (anarchon._scheduler.skip_log)."""

from __future__ import annotations

import logging

import pytest
from anarchon._scheduler.skip_log import SkipLog
from anarchon.testing import FakeClock


def test_skips_are_aggregated_per_job_per_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    log = logging.getLogger("anarchon.test-skips")
    skips = SkipLog(clock, log)
    caplog.set_level(logging.INFO, logger="anarchon.test-skips")
    for slot in range(100):  # one skip per second for 100 s, on two jobs
        skips.skipped("a", slot * 1000)
        skips.skipped("b", slot * 1000)
        clock.advance("1s")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines  # each job: its first skip, then one line after a minute
    assert [line.split(":")[1].strip() for line in lines] == ["a", "b", "a", "b"]
    assert "a: 1 slot(s) skipped (latest 0)" in lines[0]
    assert "a: 60 slot(s) skipped (latest 60000)" in lines[2]
    assert skips.pending("a") == 39
    assert skips.pending("never") == 0
