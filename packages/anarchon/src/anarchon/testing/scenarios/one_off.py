"""Real OS processes on one store: a one-off run runs once, and a crashed retry is taken over.

Used by each backend package's tests (docs/one-off-runs.md, docs/retries.md)::

    from anarchon.testing.scenarios.one_off import run_one_off_fleet

    def test_one_off_four_processes(redis_url, tmp_path):
        run_one_off_fleet(redis_url, tmp_path)

The worker is this module run as a script (``python -m anarchon.testing.scenarios.one_off``):

- ``once URL JOB WHEN_MS OUT INSTANCE``: declares ``at(JOB, WHEN_MS)``, runs
  until a ``OUT.stop`` file appears, and writes ``ran INSTANCE SLOT ATTEMPT``
  for each handler call;
- ``retry URL JOB OUT INSTANCE LEASE HEARTBEAT``: an hourly job whose current
  slot is claimable at once, with ``retry=Retry(3, backoff="30s")``; its first
  handler call raises, every later one succeeds (lines ``started SLOT ATTEMPT INSTANCE``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from anarchon.backend import Backend
from anarchon.backend.registry import resolve_backend
from anarchon.context import RunContext
from anarchon.retry import Retry
from anarchon.scheduler import Scheduler
from anarchon.testing.fleet import read_history
from anarchon.types import RunRecord

__all__ = ["run_one_off_fleet", "run_retry_kill9"]


def _spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "anarchon.testing.scenarios.one_off", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def _store_now(url: str) -> int:
    backend = resolve_backend(url)

    async def read() -> int:
        await backend.init()
        try:
            runs = backend.runs
            now = await (runs.now_ms() if runs is not None else backend.now_ms())
            return int(now) if now is not None else time.time_ns() // 1_000_000
        finally:
            await backend.close()

    return asyncio.run(read())


def _stop(procs: list[subprocess.Popen[bytes]], stop_file: Path) -> list[str]:
    stop_file.touch()
    errors: list[str] = []
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.returncode != 0:
            assert proc.stderr is not None
            errors.append(proc.stderr.read().decode(errors="replace")[-2000:])
    return errors


def run_one_off_fleet(
    url: str,
    tmp_path: Path,
    *,
    processes: int = 4,
    reader: Backend | str | None = None,
    lead_s: float = 4.0,
) -> list[RunRecord]:
    """``processes`` OS processes declare the same one-off run ``lead_s`` from now: it runs once.

    Asserts exactly one handler call across the processes and one ``ok``
    record in history; returns the history records.
    """
    job = f"once-{os.urandom(4).hex()}"
    when = _store_now(url) + int(lead_s * 1000)
    outs = [tmp_path / f"once-{i}.txt" for i in range(processes)]
    stop_file = tmp_path / "once.stop"
    procs = [_spawn("once", url, job, str(when), str(out), f"p{i}") for i, out in enumerate(outs)]
    try:
        deadline = time.monotonic() + lead_s + 30
        while time.monotonic() < deadline:
            if any(_lines(out) for out in outs):
                break
            if any(p.poll() is not None for p in procs):
                break
            time.sleep(0.05)
        time.sleep(2.0)  # a second run, if any, would have started by now
    finally:
        errors = _stop(procs, stop_file)
    assert not errors, f"a worker failed: {errors}"
    ran = [fields for out in outs for fields in _lines(out) if fields[0] == "ran"]
    assert len(ran) == 1, f"the one-off run ran {len(ran)} times: {ran}"
    assert int(ran[0][2]) == when
    records = read_history(reader if reader is not None else url, job, 20)
    assert [(r.slot, r.status, r.attempt, r.instance_id) for r in records] == [
        (when, "ok", 1, ran[0][1])
    ]
    return records


def _wait_line(path: Path, prefix: str, timeout: float, attempt: str | None = None) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for fields in _lines(path):
            if fields[0] == prefix and (attempt is None or fields[2] == attempt):
                return fields
        time.sleep(0.02)
    raise AssertionError(f"no {prefix!r} line in {path} after {timeout} s")


def run_retry_kill9(
    url: str,
    tmp_path: Path,
    *,
    reader: Backend | str | None = None,
    lease_ms: int = 2000,
    heartbeat_ms: int = 500,
) -> list[RunRecord]:
    """Process A fails attempt 1 and is killed (``kill -9``) in the retry's backoff; B takes over.

    History then shows attempt 1 ``error`` (A), attempt 2 ``interrupted``
    (A, ``lease_lost``) and attempt 3 ``ok`` (B).
    """
    job = f"retry-crash-{os.urandom(4).hex()}"
    out_a, out_b = tmp_path / "retry-a.txt", tmp_path / "retry-b.txt"
    lease, beat = f"{lease_ms}ms", f"{heartbeat_ms}ms"
    a = _spawn("retry", url, job, str(out_a), "runner-a", lease, beat)
    b: subprocess.Popen[bytes] | None = None
    try:
        first = _wait_line(out_a, "started", 30)
        assert first[2] == "1"
        slot = int(first[1])
        b = _spawn("retry", url, job, str(out_b), "backup-b", lease, beat)
        _wait_line(out_b, "ready", 30)
        time.sleep(1.0)  # A is in the backoff of attempt 2, B is its backup
        assert not _lines(out_b)[1:], "b ran while a held the lease"
        os.kill(a.pid, signal.SIGKILL)
        a.wait(10)
        taken = _wait_line(out_b, "started", (lease_ms + heartbeat_ms) / 1000 + 20)
        assert taken[1:] == [str(slot), "3", "backup-b"]
        deadline = time.monotonic() + 20
        records: list[RunRecord] = []
        while time.monotonic() < deadline:
            records = [
                r
                for r in read_history(reader if reader is not None else url, job, 10)
                if r.slot == slot
            ]
            if any(r.status == "ok" for r in records):
                break
            time.sleep(0.1)
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    records.sort(key=lambda r: r.attempt)
    assert [(r.attempt, r.instance_id, r.status, r.reason) for r in records] == [
        (1, "runner-a", "error", "retried"),
        (2, "runner-a", "interrupted", "lease_lost"),
        (3, "backup-b", "ok", None),
    ], records
    return records


# The worker ---------------------------------------------------------------


def _append(path: str, *fields: object) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(" ".join(str(f) for f in fields) + "\n")
        out.flush()
        os.fsync(out.fileno())


def _wait_for_file(path: Path) -> None:
    while not path.exists():
        time.sleep(0.05)


async def _once(url: str, job: str, when: int, out: str, instance: str) -> None:
    scheduler = Scheduler(url, instance_id=instance)

    def handler(ctx: RunContext) -> None:
        _append(out, "ran", instance, ctx.slot, ctx.attempt)

    scheduler.at(job, when, handler, jitter="500ms")
    await scheduler.start()
    try:
        await asyncio.to_thread(_wait_for_file, Path(out).parent / "once.stop")
    finally:
        await scheduler.stop()


async def _retry(url: str, job: str, out: str, instance: str, lease: str, beat: str) -> None:
    scheduler = Scheduler(url, instance_id=instance, lease=lease, heartbeat=beat)

    async def handler(ctx: RunContext) -> None:
        _append(out, "started", ctx.slot, ctx.attempt, instance)
        if ctx.attempt == 1:
            raise RuntimeError("first attempt fails")

    scheduler.every(
        job,
        "1h",
        handler,
        jitter=0,
        max_late="2h",
        retry=Retry(3, backoff="30s", max_backoff="30s"),
    )
    await scheduler.start()
    _append(out, "ready")
    try:
        await asyncio.sleep(120)
    finally:
        await scheduler.stop()


def main(argv: list[str]) -> None:
    """The worker's entry point (see the module docstring)."""
    mode, rest = argv[0], argv[1:]
    if mode == "once":
        url, job, when, out, instance = rest
        asyncio.run(_once(url, job, int(when), out, instance))
    elif mode == "retry":
        url, job, out, instance, lease, beat = rest
        asyncio.run(_retry(url, job, out, instance, lease, beat))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
