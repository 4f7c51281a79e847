"""Separate OS processes on one nats-server: every slot of a 200 ms job runs exactly once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from anarchon.types import RunRecord
from anarchon_nats import NatsBackend

WORKER = str(Path(__file__).with_name("nats_worker.py"))
PROCESSES = 8
WINDOW_S = 20.0
"""The common window in which all processes run (at least this long)."""
PERIOD_MS = 200


def _lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def _history(backend: NatsBackend, job: str, limit: int) -> list[RunRecord]:
    async def read() -> list[RunRecord]:
        await backend.init()
        try:
            return await backend.history(job, limit)
        finally:
            await backend.close()

    return asyncio.run(read())


@pytest.mark.slow
def test_eight_processes_run_each_slot_once(nats_url: str, tmp_path: Path) -> None:
    stream, prefix = f"FLEET{uuid.uuid4().hex[:6].upper()}", f"fleet{uuid.uuid4().hex[:6]}."
    job = "every-200ms"
    startup_s = 8.0
    until_ms = int((time.time() + startup_s + WINDOW_S + 2.0) * 1000)
    outs = [tmp_path / f"worker-{i}.txt" for i in range(PROCESSES)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                WORKER,
                nats_url,
                stream,
                prefix,
                f"proc-{i}",
                job,
                str(until_ms),
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for i, out in enumerate(outs)
    ]
    try:
        for proc in procs:
            proc.wait(timeout=startup_s + WINDOW_S + 40)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    errors = [p.stderr.read().decode() if p.stderr else "" for p in procs]
    for proc, err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err[-3000:]

    starts, stops, runs = [], [], []
    for out in outs:
        for fields in _lines(out):
            if fields[0] == "start":
                starts.append(int(fields[1]))
            elif fields[0] == "stop":
                stops.append(int(fields[1]))
            elif fields[0] == "run":
                runs.append((int(fields[1]), fields[2]))
    assert len(starts) == PROCESSES
    assert len(stops) == PROCESSES
    # Slots well inside the time every process was running.
    first = (max(starts) // PERIOD_MS + 3) * PERIOD_MS
    last = (min(stops) // PERIOD_MS - 3) * PERIOD_MS
    assert last - first >= WINDOW_S * 1000 - 2000, (
        f"processes ran together for only {(last - first) / 1000:.1f} s"
    )
    window = list(range(first, last + 1, PERIOD_MS))

    ran = Counter(slot for slot, _instance in runs if first <= slot <= last)
    duplicates = {slot: n for slot, n in ran.items() if n > 1}
    missed = [slot for slot in window if ran[slot] == 0]
    assert not duplicates, f"slots run more than once: {duplicates}"
    assert not missed, f"{len(missed)} slots never ran: {missed[:10]}"
    instances = {instance for slot, instance in runs if first <= slot <= last}
    assert len(instances) >= 2, "one process won everything: the race was not exercised"

    records = _history(NatsBackend(nats_url, stream=stream, prefix=prefix), job, 2000)
    in_window = [r for r in records if first <= r.slot <= last]
    per_slot = Counter(r.slot for r in in_window)
    assert sorted(per_slot) == window, "history does not have every slot of the window"
    assert set(per_slot.values()) == {1}, "history has a slot twice"
    assert {r.status for r in in_window} == {"ok"}
    by_slot = dict(runs)
    assert all(r.instance_id == by_slot[r.slot] for r in in_window)
