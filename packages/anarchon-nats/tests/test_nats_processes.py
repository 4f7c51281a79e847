"""Separate OS processes on one nats-server: every slot of a 200 ms job runs exactly once."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from anarchon.testing.fleet import run_fleet
from anarchon_nats import NatsBackend


@pytest.mark.slow
@pytest.mark.parametrize(
    ("processes", "window_s"),
    [
        pytest.param(3, 5.0, id="3-processes"),
        pytest.param(8, 10.0, id="8-processes", marks=pytest.mark.scenario),
    ],
)
def test_processes_run_each_slot_once(
    nats_url: str, tmp_path: Path, processes: int, window_s: float
) -> None:
    """A few processes (8 in the scenario tier), one 200 ms job: every slot ran exactly once.

    Exactly once and none missed, from the processes' records and from the
    stream's history (see ``anarchon.testing.fleet``). The processes' start
    and stop times are the server's clock (``NatsBackend.now_ms()``).
    """
    stream, prefix = f"FLEET{uuid.uuid4().hex[:6].upper()}", f"fleet{uuid.uuid4().hex[:6]}."
    url = f"{nats_url}?stream={stream}&prefix={prefix}"
    result = run_fleet(
        url,
        tmp_path=tmp_path,
        processes=processes,
        window_s=window_s,
        job="every-200ms",
        reader=NatsBackend(nats_url, stream=stream, prefix=prefix),
    )
    print(result.summary())


@pytest.mark.scenario
@pytest.mark.slow
def test_skewed_instance_clocks_follow_the_server_clock(nats_url: str, tmp_path: Path) -> None:
    """Clocks 15 s ahead and 15 s behind, a 20 s duplicate window, max_late 5 s, 4 jobs.

    Each process schedules by the NATS server's clock (``now_ms()``: the time
    JetStream stamps on a stored message), so the skew changes nothing: every
    slot runs exactly once and none starts before its slot by the server's
    clock. The server runs on this machine, so its clock is the true wall
    clock the records' start times are read from.

    Which process wins a slot is a race, so this fleet need not give each skew
    a win; :func:`test_a_lone_skewed_instance_runs_every_slot_on_time` runs
    each skew alone, where it must run every slot.
    """
    stream, prefix = f"SKEW{uuid.uuid4().hex[:6].upper()}", f"skew{uuid.uuid4().hex[:6]}."
    url = f"{nats_url}?stream={stream}&prefix={prefix}&duplicate_window_ms=20000"
    result = run_fleet(
        url,
        tmp_path=tmp_path,
        processes=4,
        window_s=12.0,
        every_ms=500,
        jitter_ms=0,
        job="skewed",
        jobs=4,
        job_options={"max_late": "5s"},
        clock_skews_ms=[15_000, -15_000],
        reader=NatsBackend(nats_url, stream=stream, prefix=prefix),
    )
    early = result.early()
    lateness = sorted(r.started_ms - r.slot for r in result.runs if r.started_ms is not None)
    print(
        result.summary(),
        f"early runs: {len(early)}; start - slot ms: min {lateness[0]}, max {lateness[-1]}",
    )
    assert early == []


@pytest.mark.scenario
@pytest.mark.slow
@pytest.mark.parametrize("skew_ms", [15_000, -15_000], ids=["ahead", "behind"])
def test_a_lone_skewed_instance_runs_every_slot_on_time(
    nats_url: str, tmp_path: Path, skew_ms: int
) -> None:
    """One process, its clock 15 s off, max_late 5 s: it runs every slot, none early.

    By its own clock, a process ahead would start each run 15 s early and one
    behind would find each slot 15 s late, past ``max_late``, and skip it
    (missed slots). By the server's clock both run every slot of the window.
    """
    stream, prefix = f"LONE{uuid.uuid4().hex[:6].upper()}", f"lone{uuid.uuid4().hex[:6]}."
    result = run_fleet(
        f"{nats_url}?stream={stream}&prefix={prefix}&duplicate_window_ms=20000",
        tmp_path=tmp_path,
        processes=1,
        window_s=5.0,
        every_ms=500,
        jitter_ms=0,
        job="lone",
        job_options={"max_late": "5s"},
        clock_skews_ms=[skew_ms],
        reader=NatsBackend(nats_url, stream=stream, prefix=prefix),
    )
    print(result.summary())
    assert result.early() == []
    assert {r.instance for r in result.runs} == {"proc-0"}


@pytest.mark.scenario
@pytest.mark.slow
@pytest.mark.timeout(900)  # about 45 s of fleet, then 2,000 jobs' history read and checked
def test_four_processes_with_two_thousand_jobs_each(nats_url: str, tmp_path: Path) -> None:
    """4 processes x 2,000 jobs every 1 s, >= 10 s together: each slot once, none missed.

    8,000 job-slots fall due in the same moment every second. Every slot of
    every job runs exactly once (from the processes' records and from the
    stream's history) and no process logs an outage.
    """
    stream, prefix = f"MANY{uuid.uuid4().hex[:6].upper()}", f"many{uuid.uuid4().hex[:6]}."
    url = f"{nats_url}?stream={stream}&prefix={prefix}"
    result = run_fleet(
        url,
        tmp_path=tmp_path,
        processes=4,
        jobs=2_000,
        window_s=10.0,
        startup_s=20.0,
        every_ms=1_000,
        jitter_ms=0,
        job="many",
        reader=NatsBackend(nats_url, stream=stream, prefix=prefix),
    )
    late = sorted(r.started_ms - r.slot for r in result.runs if r.started_ms is not None)
    print(
        result.summary(),
        f"start - slot ms: p50 {late[len(late) // 2]}, p99 {late[len(late) * 99 // 100]},"
        f" max {late[-1]}",
    )
    outages = [line for err in result.stderr for line in err.splitlines() if "unreachable" in line]
    assert outages == []
