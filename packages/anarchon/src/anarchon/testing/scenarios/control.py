"""Two OS processes on one real store, steered with the CLI (docs/fleet.md).

:func:`run_control_scenario` starts two worker processes
(:mod:`anarchon.testing.scenarios._control_worker`) that share a job (every second) and
declare a second job with different schedules, then checks, through the
``anarchon`` command line:

- ``anarchon status --json`` lists the job with its next slot, its last result
  and both instances, and shows the drift of the second job;
- ``anarchon pause`` stops runs of the job on both within one wake-up (no slot
  after the moment the command returned runs; each paused slot is recorded
  once as ``skipped``/``paused``), and ``anarchon resume`` restarts them;
- the job is declared with ``catch_up`` (and ``overlap=True``) on backends
  with leases: after the
  resume exactly one run, on one of the two processes, has the slot
  ``resumed_at`` of the stored control and stands for the newest paused slot
  (``ctx.catch_up_of``), and no two handler intervals of that slot overlap;
  without leases no run has that slot;
- ``anarchon skip`` skips exactly one slot;
- both instances report ``schedule_drift`` for the second job and log the
  warning.

The assertions are causal; the time limits only bound the waiting, so a slow
machine makes the scenario slower, not flaky. Each backend's tests call it
with a URL of a fresh prefix or database.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["run_control_scenario"]

PERIOD_MS = 1_000
CATCH_UP_MS = 120_000
"""The job's ``catch_up`` on backends with leases (more than the default ``max_late``)."""
_CLI = [sys.executable, "-m", "anarchon.cli"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _cli(url: str, *args: str) -> Any:
    done = subprocess.run(
        [*_CLI, *args, "--backend", url, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"anarchon {' '.join(args)} failed: {done.stderr}"
    return json.loads(done.stdout)


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait(what: str, check: Any, timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def run_control_scenario(url: str, tmp_path: Path) -> None:
    """Run the scenario against the store at ``url`` (raises AssertionError on a failure)."""
    tag = uuid.uuid4().hex[:8]
    job, drifted = f"steer-{tag}", f"drift-{tag}"
    outs = [tmp_path / f"worker-{n}.jsonl" for n in range(2)]
    errs = [tmp_path / f"worker-{n}.err" for n in range(2)]
    instances = [f"w{n}-{tag}" for n in range(2)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = []
    for n in range(2):
        with errs[n].open("w") as err:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "anarchon.testing.scenarios._control_worker",
                        "--backend",
                        url,
                        "--instance",
                        instances[n],
                        "--job",
                        job,
                        "--every",
                        str(PERIOD_MS),
                        "--drift-job",
                        drifted,
                        "--drift-every",
                        str(PERIOD_MS * (n + 1)),  # 1 s on one, 2 s on the other
                        "--catch-up",
                        str(CATCH_UP_MS),
                        "--out",
                        str(outs[n]),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    env=env,
                )
            )
    try:
        _scenario(url, job, drifted, instances, outs, errs)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _runs(outs: list[Path], job: str) -> list[dict[str, Any]]:
    return [r for out in outs for r in _rows(out) if r["event"] == "run" and r["job"] == job]


def _scenario(
    url: str,
    job: str,
    drifted: str,
    instances: list[str],
    outs: list[Path],
    errs: list[Path],
) -> None:
    _wait(
        "both workers started",
        lambda: all(any(r["event"] == "started" for r in _rows(out)) for out in outs),
    )
    _wait("two runs of the job", lambda: len(_runs(outs, job)) >= 2)

    # status --json: the job, its next slot, its last result, both instances; the drift.
    def listed() -> Any:
        rows = {row["job"]: row for row in _cli(url, "status")}
        row = rows.get(job)
        if row is None or row["last_run"] is None or len(row["instances"]) < 2:
            return None
        return rows

    rows = _wait("status listing both instances", listed)
    row = rows[job]
    assert sorted(i["instance_id"] for i in row["instances"]) == sorted(instances)
    assert row["schedule"] == f"every {PERIOD_MS}ms"
    assert row["next_slot"] is not None
    assert row["next_slot"] > _now_ms() - 5_000
    assert row["next_slot"] % PERIOD_MS == 0
    assert row["last_run"]["status"] in ("ok", "running")
    assert row["last_run"]["instance_id"] in instances
    assert row["paused"] is False
    assert row["drift"] == {}
    assert len(rows[drifted]["drift"]) == 2, rows[drifted]
    assert sorted(rows[drifted]["drift"].values()) == [1, 1]

    # pause: no slot after the moment the command returned runs, on either worker.
    called = _now_ms()
    paused = _cli(url, "pause", job)
    assert paused["paused"] is True
    paused_at = _now_ms()
    time.sleep(3.5 * PERIOD_MS / 1000)
    # Aim the resume's store time at mid-period (the CLI reads it about as long after
    # its start as the pause did), so the slot before it was surely read as paused.
    lag = min(max(paused["paused_at"] - called, 0), PERIOD_MS)
    time.sleep(((PERIOD_MS // 2 - lag - _now_ms()) % PERIOD_MS) / 1000)
    late = [r for r in _runs(outs, job) if r["slot"] > paused_at]
    assert late == [], f"runs after pause: {late}"

    resumed = _cli(url, "resume", job)
    assert resumed["paused"] is False
    resumed_at = _now_ms()
    _wait(
        "two runs after resume",
        lambda: [r for r in _runs(outs, job) if r["slot"] > resumed_at + PERIOD_MS],
    )
    history = _cli(url, "history", job, "--limit", "200")
    skipped = [r for r in history if r["status"] == "skipped"]
    assert skipped, "no slot recorded as paused"
    assert all(r["reason"] == "paused" for r in skipped), skipped
    outside = [r for r in skipped if not paused_at - PERIOD_MS < r["slot"] <= resumed_at]
    assert outside == [], f"paused at {paused_at}, resumed at {resumed_at}: {outside}"
    assert len(skipped) >= 2  # 3.5 periods paused
    assert max(Counter(r["slot"] for r in history).values()) == 1
    _check_catch_up(url, outs, job, resumed)

    # skip: exactly one slot. Aimed at mid-period, as the resume (the workers claim at the
    # fire time, see anarchon.testing.scenarios._control_worker).
    time.sleep(((PERIOD_MS // 2 - lag - _now_ms()) % PERIOD_MS) / 1000)
    until = _cli(url, "skip", job)["skip_until"]
    assert until % PERIOD_MS == 0
    _wait(
        "runs after the skipped slot",
        lambda: [r for r in _runs(outs, job) if r["slot"] >= until + 3 * PERIOD_MS],
    )
    history = _cli(url, "history", job, "--limit", "200")
    # the slot before (after the resume), the skipped one and the two after it
    near = {
        r["slot"]: r for r in history if until - PERIOD_MS <= r["slot"] <= until + 2 * PERIOD_MS
    }
    assert sorted(near) == [until + k * PERIOD_MS for k in range(-1, 3)], sorted(near)
    assert near[until]["status"] == "skipped"
    assert near[until]["reason"] == "skip_next"
    assert all(near[s]["status"] == "ok" for s in near if s != until), near
    ran = Counter(r["slot"] for r in _runs(outs, job))
    assert until not in ran
    assert max(ran.values()) == 1, "a slot ran twice"

    # drift: both instances reported it once and logged the warning.
    for out, err, instance in zip(outs, errs, instances, strict=True):
        drift = [r for r in _rows(out) if r["event"] == "drift"]
        assert [r["job"] for r in drift] == [drifted], drift
        assert len(drift[0]["fingerprints"]) == 2
        assert "schedule drift" in err.read_text(), f"{instance} logged no drift warning"


def _check_catch_up(url: str, outs: list[Path], job: str, resumed: dict[str, Any]) -> None:
    """After the resume: one catch-up run at slot ``resumed_at`` with leases, none without."""
    leases = {r["leases"] for out in outs for r in _rows(out) if r["event"] == "started"}
    assert len(leases) == 1, leases
    slot = resumed["resumed_at"]
    assert isinstance(slot, int)
    assert resumed["paused_at"] is not None
    assert resumed["paused_at"] <= slot
    if not leases.pop():
        assert [r for r in _runs(outs, job) if r["slot"] == slot] == []
        assert [r for r in _runs(outs, job) if r["catch_up_of"] is not None] == []
        return
    # The newest slot in [paused_at, resumed_at): recorded paused, so it is caught up once
    # (unless a wake-up that lagged past the resume ran it as usual: then nothing is).
    newest = (slot - 1) // PERIOD_MS * PERIOD_MS
    assert newest >= resumed["paused_at"]  # the job was paused for several periods
    history = _cli(url, "history", job, "--limit", "200")
    own = [r for r in history if r["slot"] == newest]
    missed = bool(own) and all(r["reason"] == "paused" for r in own)
    if missed:
        _wait("the catch-up run", lambda: [r for r in _runs(outs, job) if r["slot"] == slot])
        history = _cli(url, "history", job, "--limit", "200")
    runs = [r for r in _runs(outs, job) if r["slot"] == slot]
    spans = sorted((r["start"], r["end"]) for r in runs)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, f"live handlers of slot {slot} overlap: {runs}"
    assert [r for r in _runs(outs, job) if r["catch_up_of"] is not None] == runs
    if not missed:
        assert runs == [], f"slot {newest} ran ({own}), yet was caught up: {runs}"
        return
    assert len(runs) == 1, f"catch-up runs of slot {slot}: {runs}"
    assert runs[0]["catch_up_of"] == newest, runs
    recorded = [r for r in history if r["slot"] == slot]
    assert [r["status"] for r in recorded] == ["ok"], recorded
