"""Fault scenarios: real scheduler processes on one store, a fault, and an honest count.

Each scenario starts two worker processes (``python -m anarchon.testing.faults
worker``) that run one interval job on the same store URL, injects a fault
into one of them, and returns a :class:`FaultReport` counting what went
wrong, measured from files the handlers write (wall-clock ms):

- ``duplicates``: slots whose handler *completed* more than once;
- ``overlaps``: slots where two attempts were alive at the same time (a
  record of one attempt, its start, a tick every 100 ms or its end, falls
  inside another attempt's interval; a frozen or dead process writes no
  ticks, so it is not counted as alive);
- ``lost``: slots whose handler completed but the store's history has no
  ``ok`` result for them;
- ``missed``: slots of the observed window that no handler started (a slot
  the store recorded ``skipped`` is not missed);
- ``unfinished``: slots of the window that began but whose handler never
  completed on any instance (a crashed run nobody took over).

``recovery_s`` is the time from the fault until the other instance began the
slot the faulty instance was running (None: it never did within 15 s).

Scenarios: :func:`kill9_takeover`, :func:`sigstop_past_lease`,
:func:`blackhole_then_heal` (a :class:`~anarchon.testing.proxy.FaultProxy`
between one instance and the store). They need no pytest; call them from a
plain (sync) test and assert on the report::

    report = kill9_takeover("redis://127.0.0.1:6379/0", tmp_path=tmp_path)
    assert report.clean, report.summary()
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit, urlunsplit

from anarchon.registry import resolve_backend
from anarchon.testing.fleet import read_history
from anarchon.testing.proxy import FaultProxy

__all__ = [
    "FaultReport",
    "blackhole_then_heal",
    "kill9_takeover",
    "proxied_url",
    "sigstop_past_lease",
]

LEASE_MS = 1500
HEARTBEAT_MS = 500
EVERY_MS = 1000
HANDLER_MS = 1200
TICK_MS = 100


@dataclass
class _Attempt:
    slot: int
    attempt: int
    instance: str
    begin: int
    records: list[int] = field(default_factory=list)
    completed: bool = False

    @property
    def end(self) -> int:
        return max(self.records, default=self.begin)


@dataclass
class FaultReport:
    """What a scenario measured; ``clean`` when nothing went wrong."""

    scenario: str
    duplicates: dict[int, int] = field(default_factory=dict)
    overlaps: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    missed: list[int] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    recovery_s: float | None = None
    slots: int = 0

    @property
    def clean(self) -> bool:
        """No duplicates, overlaps, lost results or missed slots."""
        return not (self.duplicates or self.overlaps or self.lost or self.missed or self.unfinished)

    def summary(self) -> str:
        """One line per count, for an assertion message or a report table."""
        recovery = "-" if self.recovery_s is None else f"{self.recovery_s:.2f} s"
        return (
            f"{self.scenario}: {self.slots} slots observed; duplicates {len(self.duplicates)} "
            f"{sorted(self.duplicates)}; overlaps {len(self.overlaps)} {self.overlaps}; "
            f"lost results {len(self.lost)} {self.lost}; missed slots {len(self.missed)} "
            f"{self.missed}; unfinished {len(self.unfinished)} {self.unfinished}; "
            f"recovery {recovery}"
        )


def proxied_url(url: str, port: int) -> str:
    """``url`` with its host and port replaced by ``127.0.0.1:port`` (credentials kept)."""
    parts = urlsplit(url)
    auth, _, _ = parts.netloc.rpartition("@")
    netloc = f"{auth}@127.0.0.1:{port}" if auth else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _target(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"the store URL needs an explicit host and port: {parts.scheme}://...")
    return parts.hostname, parts.port


class _Workers:
    """The scenario's two worker processes and their record files."""

    def __init__(self, urls: Sequence[str], tmp_path: Path, job: str) -> None:
        self.job = job
        self.outs = [tmp_path / f"{job}-{i}.txt" for i in range(len(urls))]
        self.procs: list[subprocess.Popen[bytes]] = []
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        for i, (url, out) in enumerate(zip(urls, self.outs, strict=True)):
            args = [sys.executable, "-m", "anarchon.testing.faults", "worker"]
            args += ["--backend", url, "--instance", f"w{i}", "--job", job, "--out", str(out)]
            self.procs.append(subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL))

    def wait_started(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(_lines(out, "start") for out in self.outs):
                return
            for proc in self.procs:
                if proc.poll() is not None:
                    raise AssertionError(f"a worker exited early with code {proc.returncode}")
            time.sleep(0.05)
        raise AssertionError(f"the workers did not start within {timeout_s} s")

    def runner_of_live_slot(
        self, only: int | None = None, timeout_s: float = 10.0
    ) -> tuple[int, int]:
        """``(worker index, slot)`` of a handler running now (on worker ``only`` if given)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            attempts = _attempts(self.outs)
            now = _wall_ms()
            for a in attempts:
                index = int(a.instance[1:])
                if only is not None and index != only:
                    continue
                if not a.completed and now - a.end < 3 * TICK_MS:
                    return index, a.slot
            time.sleep(0.02)
        raise AssertionError("no handler was running")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _lines(path: Path, kind: str | None = None) -> list[list[str]]:
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if kind is None or (r and r[0] == kind)]


def _attempts(outs: Sequence[Path]) -> list[_Attempt]:
    found: dict[tuple[int, int, str], _Attempt] = {}
    for out in outs:
        for row in _lines(out):
            if row[0] not in ("begin", "tick", "end"):
                continue
            slot, attempt, instance, at = int(row[1]), int(row[2]), row[3], int(row[4])
            key = (slot, attempt, instance)
            if row[0] == "begin":
                found[key] = _Attempt(slot, attempt, instance, at)
            elif key in found:
                found[key].records.append(at)
                if row[0] == "end":
                    found[key].completed = True
    return list(found.values())


def _report(scenario: str, workers: _Workers, url: str, window: tuple[int, int]) -> FaultReport:
    attempts = _attempts(workers.outs)
    report = FaultReport(scenario)
    by_slot: dict[int, list[_Attempt]] = defaultdict(list)
    for a in attempts:
        by_slot[a.slot].append(a)
    for slot, runs in by_slot.items():
        done = sum(1 for a in runs if a.completed)
        if done > 1:
            report.duplicates[slot] = done
        for a in runs:
            others = [b for b in runs if b is not a]
            points = [a.begin, *a.records]
            if any(b.begin <= p <= b.end for b in others for p in points):
                report.overlaps.append(slot)
                break
    history = read_history(url, workers.job, 1000)
    ok = {r.slot for r in history if r.status == "ok"}
    skipped = {r.slot for r in history if r.status == "skipped"}
    report.lost = sorted(
        s for s, runs in by_slot.items() if any(a.completed for a in runs) and s not in ok
    )
    first, last = window
    expected = range(first - first % EVERY_MS + EVERY_MS, last - last % EVERY_MS, EVERY_MS)
    report.slots = len(expected)
    report.missed = [s for s in expected if s not in by_slot and s not in skipped]
    report.unfinished = [
        s for s in expected if s in by_slot and not any(a.completed for a in by_slot[s])
    ]
    report.overlaps.sort()
    return report


def _run(
    scenario: str,
    url: str,
    tmp_path: Path | str,
    fault: str,
    *,
    fault_s: float,
    before_s: float = 3.0,
    after_s: float = 8.0,
) -> FaultReport:
    job = f"fault-{scenario}-{uuid.uuid4().hex[:8]}"
    tmp = Path(tmp_path)
    proxy: FaultProxy | None = None
    urls = [url, url]
    if fault == "blackhole":
        proxy = FaultProxy(*_target(url)).start()
        urls = [url, proxied_url(url, proxy.port)]
    workers = _Workers(urls, tmp, job)
    recovery: float | None = None
    try:
        workers.wait_started()
        time.sleep(before_s)
        window_start = _wall_ms()
        victim, slot = workers.runner_of_live_slot(1 if fault == "blackhole" else None)
        pid = workers.procs[victim].pid
        fault_ms = _wall_ms()
        if fault == "kill9":
            os.kill(pid, signal.SIGKILL)
        elif fault == "sigstop":
            os.kill(pid, signal.SIGSTOP)
            time.sleep(fault_s)
            os.kill(pid, signal.SIGCONT)
        else:
            assert proxy is not None
            proxy.blackhole()
            time.sleep(fault_s)
            proxy.heal()
        recovery = _recovery(workers, fault_ms, victim, slot)
        time.sleep(after_s)
        window_end = _wall_ms() - HANDLER_MS - LEASE_MS
    finally:
        workers.stop()
        if proxy is not None:
            proxy.stop()
    report = _report(scenario, workers, url, (window_start, window_end))
    report.recovery_s = recovery
    return report


def _recovery(workers: _Workers, fault_ms: int, victim: int, slot: int) -> float | None:
    """Seconds from the fault until the other worker began the victim's running ``slot``.

    None if it did not within 15 s (the victim may have finished the slot itself).
    """
    other = f"w{1 - victim}"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        late = [
            a.begin
            for a in _attempts(workers.outs)
            if a.instance == other and a.slot == slot and a.begin > fault_ms
        ]
        if late:
            return (min(late) - fault_ms) / 1000
        time.sleep(0.02)
    return None


def kill9_takeover(url: str, *, tmp_path: Path | str) -> FaultReport:
    """``kill -9`` of the instance running a handler; the other takes over."""
    return _run("kill9", url, tmp_path, "kill9", fault_s=0.0)


def sigstop_past_lease(url: str, *, tmp_path: Path | str) -> FaultReport:
    """SIGSTOP the instance running a handler for lease + 1 s, then SIGCONT."""
    return _run("sigstop", url, tmp_path, "sigstop", fault_s=(LEASE_MS + 1000) / 1000)


def blackhole_then_heal(url: str, *, tmp_path: Path | str) -> FaultReport:
    """A blackholing proxy between one instance and the store for lease + 1 s, then heal."""
    return _run("blackhole", url, tmp_path, "blackhole", fault_s=(LEASE_MS + 1000) / 1000)


# The worker process ------------------------------------------------------------------------------


async def _work(args: argparse.Namespace, out: TextIO) -> None:
    from anarchon import RunContext, Scheduler

    backend = resolve_backend(args.backend)
    scheduler = Scheduler(
        backend,
        instance_id=args.instance,
        lease=f"{LEASE_MS}ms",
        heartbeat=f"{HEARTBEAT_MS}ms",
        stop_grace=1,
    )

    def record(kind: str, ctx: RunContext) -> None:
        out.write(f"{kind} {ctx.slot} {ctx.attempt} {ctx.instance_id} {_wall_ms()}\n")

    async def handler(ctx: RunContext) -> None:
        record("begin", ctx)
        end = time.monotonic() + HANDLER_MS / 1000
        while time.monotonic() < end:
            await asyncio.sleep(TICK_MS / 1000)
            record("tick", ctx)
        record("end", ctx)

    scheduler.every(args.job, f"{EVERY_MS}ms", handler, jitter=0, overlap=True, max_attempts=3)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with scheduler:
            out.write(f"start {_wall_ms()}\n")
            await stop.wait()
    finally:
        await backend.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m anarchon.testing.faults worker --backend URL --instance ID --job J --out PATH``."""
    parser = argparse.ArgumentParser(prog="python -m anarchon.testing.faults")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker")
    worker.add_argument("--backend", required=True)
    worker.add_argument("--instance", required=True)
    worker.add_argument("--job", required=True)
    worker.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    with open(args.out, "a", buffering=1) as out:
        asyncio.run(_work(args, out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
