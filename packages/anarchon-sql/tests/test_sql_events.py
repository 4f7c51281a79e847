"""Events of real processes on SQLite match the store's history exactly.

Three scheduler processes (the worker ``sql_events_worker.py``) share one
SQLite file: A runs the hourly ``handoff`` job and is killed with ``kill -9``
(B takes over: attempt 2); B is stopped with SIGTERM and a short grace (it
hands over: C runs attempt 3); B and C also run ``ovl`` (every 1 s, each run
1.5 s, ``overlap=False``: every other slot is skipped for overlap). Every event
each process saw is then compared with the history the store holds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anarchon.testing.fleet import read_history
from anarchon_sql import SqliteBackend

WORKER = str(Path(__file__).with_name("sql_events_worker.py"))
WAIT_S = 90.0
"""Generous: the machine may be loaded; every wait ends as soon as its condition holds."""

FINAL = {"ok", "error", "timeout", "cancelled"}


def _spawn(url: str, instance: str, out: Path, jobs: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, WORKER, url, instance, str(out), jobs],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    complete = lines if path.read_text().endswith("\n") else lines[:-1]
    return [json.loads(line) for line in complete if line.strip()]


def _wait(what: str, condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {WAIT_S} s waiting for {what}")


def _has(path: Path, **fields: Any) -> Callable[[], bool]:
    return lambda: any(all(e.get(k) == v for k, v in fields.items()) for e in _events(path))


@pytest.mark.slow
def test_events_match_history_over_takeover_overlap_and_handover(tmp_path: Path) -> None:
    db = tmp_path / "events.db"
    url = f"sqlite:///{db}"
    out = {name: tmp_path / f"{name}.jsonl" for name in "abc"}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["a"] = _spawn(url, "a", out["a"], "handoff")
        _wait("a to start handoff", _has(out["a"], kind="run_started", job="handoff", attempt=1))
        procs["b"] = _spawn(url, "b", out["b"], "handoff,ovl")
        _wait("b ready", _has(out["b"], kind="ready"))
        time.sleep(1.0)  # b has claimed handoff: it is a backup now
        assert not _has(out["b"], kind="run_started", job="handoff")(), "b ran while a held it"
        os.kill(procs["a"].pid, signal.SIGKILL)
        procs["a"].wait(30)
        _wait("b to take over", _has(out["b"], kind="taken_over", job="handoff", attempt=2))
        procs["c"] = _spawn(url, "c", out["c"], "handoff,ovl")
        _wait("c ready", _has(out["c"], kind="ready"))
        time.sleep(1.0)  # c has claimed handoff: a backup of b's attempt 2
        _wait(
            "an overlap skip",
            lambda: any(_has(out[n], kind="skipped", job="ovl", reason="overlap")() for n in "bc"),
        )
        procs["b"].send_signal(signal.SIGTERM)
        _wait("b to hand over", _has(out["b"], kind="handed_over", job="handoff", attempt=2))
        _wait("b to stop", _has(out["b"], kind="stopped"))
        procs["b"].wait(30)
        _wait("c to take over", _has(out["c"], kind="taken_over", job="handoff", attempt=3))
        _wait("c to finish handoff", _has(out["c"], kind="run_finished", job="handoff"))
        procs["c"].send_signal(signal.SIGINT)
        _wait("c to stop", _has(out["c"], kind="stopped"))
        procs["c"].wait(60)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    events = [
        e for name in "abc" for e in _events(out[name]) if e["kind"] not in ("ready", "stopped")
    ]
    history = read_history(SqliteBackend(str(db)), ["handoff", "ovl"], 1000)

    def key(e: dict[str, Any]) -> tuple[str, int, int, str]:
        return (e["job"], e["slot"], e["attempt"], e["instance"])

    def of(kind: str) -> list[dict[str, Any]]:
        return [e for e in events if e["kind"] == kind]

    runs = [r for r in history if r.status != "skipped"]
    run_keys = sorted((r.job, r.slot, r.attempt, r.instance_id) for r in runs)

    # Every attempt in history was started here (or won while stopping and handed over at once).
    started = {key(e) for e in of("run_started")} | {key(e) for e in of("handed_over")}
    assert sorted(started) == run_keys
    assert len(of("run_started")) == len({key(e) for e in of("run_started")}), "a start twice"
    # Every finished attempt in history is exactly one run_finished, with its status.
    assert sorted((*key(e), e["status"]) for e in of("run_finished")) == sorted(
        (r.job, r.slot, r.attempt, r.instance_id, r.status) for r in runs if r.status in FINAL
    )
    # Every hand-over in history is one handed_over event.
    assert sorted(key(e) for e in of("handed_over")) == sorted(
        (r.job, r.slot, r.attempt, r.instance_id)
        for r in runs
        if r.status == "interrupted" and r.reason == "handed_over"
    )
    # Every attempt > 1 is a takeover seen by the instance that took it.
    assert sorted(key(e) for e in of("taken_over")) == sorted(
        (r.job, r.slot, r.attempt, r.instance_id) for r in runs if r.attempt > 1
    )
    # A lease lost in history: a's run killed with kill -9 (no event can come from a dead
    # process), or a lease_lost event of a live instance.
    finished_or_handed = {key(e) for e in of("run_finished")} | {key(e) for e in of("handed_over")}
    killed = {key(e) for e in of("run_started") if e["instance"] == "a"} - finished_or_handed
    assert sorted(killed | {key(e) for e in of("lease_lost")}) == sorted(
        (r.job, r.slot, r.attempt, r.instance_id)
        for r in runs
        if r.status == "interrupted" and r.reason == "lease_lost"
    )
    # Overlap skips: the slots history records as skipped (each instance that claimed one saw it).
    assert sorted(
        {(e["job"], e["slot"]) for e in of("skipped") if e["reason"] == "overlap"}
    ) == sorted((r.job, r.slot) for r in history if r.status == "skipped" and r.reason == "overlap")
    # The scenario happened as planned.
    handoff = sorted(
        (r.attempt, r.instance_id, r.status, r.reason) for r in runs if r.job == "handoff"
    )
    assert handoff == [
        (1, "a", "interrupted", "lease_lost"),
        (2, "b", "interrupted", "handed_over"),
        (3, "c", "ok", None),
    ]
    assert any(r.status == "skipped" for r in history if r.job == "ovl")
    assert any(r.status == "ok" for r in runs if r.job == "ovl")
    for e in events:
        if e["slot"] is not None:
            assert e["scheduled_at"].startswith("20"), e  # ISO time in the job's zone (UTC)
