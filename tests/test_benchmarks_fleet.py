"""``benchmarks/fleet/fleet.py`` keeps working: a ``--quick`` run end to end, and its tally.

Timing is never asserted (figures depend on the machine); the structure of the
output, that every job-slot of the window ran, and that none ran twice are.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fleet import Shape  # type: ignore[import-not-found,unused-ignore]
from fleet_common import Tally, aligned_start, percentile  # type: ignore[import-not-found,unused-ignore]

ROOT = Path(__file__).resolve().parents[1]


def test_shapes_parse_and_bad_ones_are_refused() -> None:
    assert Shape.parse("4x5000@5") == Shape(4, 5000, 5.0)
    assert Shape.parse("1\u00d710,000@10s") == Shape(1, 10_000, 10.0)
    assert str(Shape(2, 200, 1.0)) == "2x200@1s"
    for bad in ("4x5000", "0x10@1", "2x0@1", "x@1"):
        with pytest.raises(Exception, match="shape"):
            Shape.parse(bad)


def test_tally_counts_duplicates_missed_and_ignores_slots_outside_the_window() -> None:
    tally = Tally(jobs=2, slots=[1000, 2000])
    tally.add([(0, 1000, 5.0), (1, 1000, 7.0), (0, 2000, 1.0), (0, 2000, 9.0), (1, 3000, 50.0)])
    assert tally.expected == 4
    assert tally.distinct == 3
    assert tally.duplicates == 1  # (0, 2000) twice
    assert tally.missed == 1  # (1, 2000) never
    assert tally.lateness() == (5.0, 9.0, 9.0)  # the start of slot 3000 is not counted
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0


def test_the_window_starts_on_a_slot_boundary_after_one_warm_up_burst() -> None:
    start = aligned_start(now_s=1003.2, startup_s=0.5, every_s=5.0)
    assert start == 1010.0
    assert start % 5.0 == 0
    assert start - 5.0 >= 1003.2 + 0.5


@pytest.mark.slow
def test_a_quick_run_on_sqlite_reports_every_figure_and_no_duplicates(tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fleet" / "fleet.py"),
            "--quick",
            "--stores",
            "sqlite",
            "--no-peer",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    for header in ("slots/s", "CPU µs/slot", "p50 ms", "p99 ms", "max ms", "rt/slot", "dup"):
        assert header in text
    assert "ratios: backend claim_many / raw batched" in text
    report = json.loads(out.read_text())
    assert [entry["store"] for entry in report] == ["sqlite"]
    entry = report[0]
    fleet = entry["anarchon"]
    assert fleet["error"] == ""
    assert fleet["processes"] == 2
    assert fleet["expected"] == fleet["jobs"] * fleet["window_slots"] > 0
    assert fleet["duplicates"] == 0
    # Missed slots depend on timing (a loaded machine, a debug build): only the sum is exact.
    assert fleet["distinct"] + fleet["missed"] == fleet["expected"]
    assert fleet["distinct"] > 0
    assert len(fleet["cpu_us_per_slot"]) == 2
    assert all(cpu > 0 for cpu in fleet["cpu_us_per_slot"])
    p50, p99, top = fleet["lateness_ms"]
    assert 0 <= p50 <= p99 <= top
    assert fleet["store_figures"]["round_trips"] > 0  # statements traced in the workers
    assert fleet["store_figures"]["xacts"] > 0
    sides = {side["name"]: side for side in entry["reference"]}
    assert set(sides) == {"backend", "raw batched", "raw single"}
    for side in sides.values():
        assert side["error"] == "", side
        assert side["items"] > 0
        assert side["cpu_us"] > 0
    assert "BEGIN IMMEDIATE" in sides["raw batched"]["how"]
    assert sides["backend"]["how"].startswith("RunStore.claim_many")
    assert set(entry["ratios"]) >= {"backend_vs_raw_batched_rate", "fleet_cpu_vs_raw_batched_cpu"}
