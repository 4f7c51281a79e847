"""Fault scenarios: real scheduler processes on one store, a fault, and an honest count.

Each scenario starts two worker processes (:mod:`anarchon.testing.scenarios.fault_worker`)
that run one interval job on the same store URL, injects a fault into the
one running a handler, and returns a :class:`~anarchon.testing.scenarios.fault_report.FaultReport`
counting what went wrong, measured from files the handlers write (its
docstring defines every count: duplicates, zombies, overlaps, fenced commits
by stale attempts, refused writes, lost, missed, unfinished, recovery).

Scenarios:

- :func:`kill9_takeover`: ``kill -9`` of the runner; the other instance takes
  the run over when its lease expires.
- :func:`sigstop_past_lease`: SIGSTOP the runner past its lease, until the
  other instance has begun the slot, then SIGCONT. With ``handler="guarded"``
  the handler is the fenced example of docs/leases.md; with ``"naive"`` it
  writes through the same fence without asking ``still_owner()``.
- :func:`blackhole_then_heal`: a :class:`~anarchon.testing.scenarios.proxy.FaultProxy`
  between one instance and the store blackholes for lease + 1 s, then heals.
- :func:`handover_on_stop`: SIGTERM (``stop()``) of the runner of a handler
  longer than ``stop_grace``: it is cancelled and handed over.
- :func:`store_restart`: the caller's ``restart()`` stops and starts the
  store server while handlers run.
- :func:`blocking_handler_at_stop`: a sync handler blocking 8 s, ``stop()``
  2 s into it: no other instance may start the slot while the thread lives.

They need no pytest; call them from a plain (sync) test and assert on the report::

    report = kill9_takeover("redis://127.0.0.1:6379/0", tmp_path=tmp_path)
    assert report.clean, report.summary()
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from anarchon.backend.registry import resolve_backend
from anarchon.testing.fleet import read_history
from anarchon.testing.scenarios.fault_report import (
    Attempt,
    FaultReport,
    attempts,
    build_report,
    lines,
)
from anarchon.testing.scenarios.proxy import FaultProxy

__all__ = [
    "SCENARIOS",
    "FaultReport",
    "Workload",
    "blackhole_then_heal",
    "blocking_handler_at_stop",
    "handover_on_stop",
    "kill9_takeover",
    "proxied_url",
    "sigstop_past_lease",
    "store_restart",
]

TICK_MS = 100


@dataclass(frozen=True)
class Workload:
    """The job both workers run and how their schedulers are set up."""

    handler: str = "plain"
    handler_ms: int = 1200
    every_ms: int = 1000
    max_late: str | None = None
    lease_ms: int = 1500
    heartbeat_ms: int = 500
    stop_grace_s: float = 1.0
    leases: bool = True
    """False on a backend without leases (claim-only): no lease options are passed."""

    def args(self) -> list[str]:
        """The worker's command-line arguments for this workload."""
        out = ["--handler", self.handler, "--handler-ms", str(self.handler_ms)]
        if not self.leases:
            out.append("--no-lease")
        out += ["--every-ms", str(self.every_ms), "--lease-ms", str(self.lease_ms)]
        out += ["--heartbeat-ms", str(self.heartbeat_ms), "--stop-grace", str(self.stop_grace_s)]
        if self.max_late:
            out += ["--max-late", self.max_late]
        return out


DEFAULT = Workload()

SPACED = Workload(every_ms=4000, handler_ms=3000)
"""Runs that never overlap and outlive a lease, for the faults that cut a worker off the store.

A blackhole or a store restart keeps every finish of the cut-off worker from
the store. A run that completes meanwhile, inside its lease, is run again by
the backup: the at-least-once edge of leases
(docs/faults.md, "Fault scenarios"), not what these scenarios measure. Faulted at most
``_FRESH_MS`` after its run began, a worker holds one run, which its lease
outlives only if the fault heals in time: the run that is hit is the one
measured."""

_FRESH_MS = 300


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


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class _Workers:
    """The scenario's worker processes and their record files."""

    def __init__(self, urls: Sequence[str], tmp_path: Path, job: str, work: Workload) -> None:
        self.job = job
        self.work = work
        self.url = urls[0]
        """The store, directly (the second worker's URL may go through a proxy)."""
        self._stored: set[int] = set()
        """Slots whose end the store has recorded (it only grows)."""
        self.outs = [tmp_path / f"{job}-{i}.txt" for i in range(len(urls))]
        self.effects = tmp_path / f"{job}-effects.db"
        self.exited_ms: dict[int, int] = {}
        self.procs: list[subprocess.Popen[bytes]] = []
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        for i, (url, out) in enumerate(zip(urls, self.outs, strict=True)):
            args = [sys.executable, "-m", "anarchon.testing.scenarios.fault_worker"]
            args += ["--backend", url, "--instance", f"w{i}", "--job", job, "--out", str(out)]
            args += [*work.args(), "--effects", str(self.effects)]
            self.procs.append(subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL))

    def wait_started(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(lines(out, "start") for out in self.outs):
                return
            for proc in self.procs:
                if proc.poll() is not None:
                    raise AssertionError(f"a worker exited early with code {proc.returncode}")
            time.sleep(0.05)
        raise AssertionError(f"the workers did not start within {timeout_s} s")

    def runner_of_live_slot(
        self, only: int | None = None, max_age_ms: int | None = None, timeout_s: float = 15.0
    ) -> tuple[int, int]:
        """``(worker index, slot)`` of a handler running now (begun at most ``max_age_ms`` ago)."""
        # A handler in the first half of its run: the fault must land before it ends, also
        # on a loaded machine where the store read of _settled takes a while.
        limit = self.work.handler_ms // 2 if max_age_ms is None else max_age_ms
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            now = _wall_ms()
            for a in attempts(self.outs):
                index = int(a.instance[1:])
                if only is not None and index != only:
                    continue
                if now - a.begin > limit:
                    continue
                if (
                    not a.completed
                    and now - a.end < 3 * TICK_MS
                    and self._settled(index)
                    and _wall_ms() - a.begin <= limit
                ):
                    return index, a.slot
            time.sleep(0.02)
        raise AssertionError("no handler was running")

    def _settled(self, index: int) -> bool:
        """True when the store has recorded the end of every run worker ``index`` completed.

        A fault that lands between a handler's completion and its stored end
        makes the backup run that slot again: the at-least-once edge of leases
        (docs/faults.md, "Fault scenarios"), not what the scenario measures. It faults a worker
        whose earlier runs are settled, so the run it hits is the running one.
        """
        done = {a.slot for a in attempts(self.outs) if a.instance == f"w{index}" and a.completed}
        if done <= self._stored:
            return True
        self._stored |= {record.slot for record in read_history(self.url, self.job, 1000)}
        return done <= self._stored

    def wait_exit(self, index: int, timeout_s: float) -> int:
        """Wait for worker ``index`` to exit; its exit code."""
        code = self.procs[index].wait(timeout_s)
        self.exited_ms[index] = _wall_ms()
        return code

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _taken_over(workers: _Workers, fault_ms: int, victim: int, slot: int) -> list[Attempt]:
    return [
        a
        for a in attempts(workers.outs)
        if a.instance != f"w{victim}" and a.slot == slot and a.begin >= fault_ms
    ]


def _recovery(
    workers: _Workers, fault_ms: int, victim: int, slot: int, wait_s: float
) -> float | None:
    """Seconds from the fault until another worker began the victim's running ``slot``.

    None if none did within ``wait_s`` (the victim may have finished the slot itself).
    """
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        late = _taken_over(workers, fault_ms, victim, slot)
        if late:
            return (min(a.begin for a in late) - fault_ms) / 1000
        time.sleep(0.02)
    return None


Fault = Callable[[_Workers, int, int], None]
"""Injects the fault into worker ``victim`` running ``slot`` (it may block)."""


def _run(
    scenario: str,
    url: str,
    tmp_path: Path | str,
    fault: Fault,
    *,
    work: Workload = DEFAULT,
    victim: int | None = None,
    max_age_ms: int | None = None,
    proxy: FaultProxy | None = None,
    peer_proxy: FaultProxy | None = None,
    before_s: float = 3.0,
    after_s: float = 8.0,
    recovery_wait_s: float = 15.0,
) -> FaultReport:
    """Start the workers, wait ``before_s``, inject ``fault``, wait ``after_s``, count.

    The worker to fault is looked for as long as 15 slots take (at least 15 s):
    the one named by ``victim`` may lose several claims in a row.

    On a backend without leases (``runs`` is None) the workers run the job
    claim-only, and nothing takes a faulty instance's run over.
    """
    job = f"fault-{scenario}-{uuid.uuid4().hex[:8]}"
    tmp = Path(tmp_path)
    work = replace(work, leases=resolve_backend(url).runs is not None)
    urls = [
        url if peer_proxy is None else proxied_url(url, peer_proxy.port),
        url if proxy is None else proxied_url(url, proxy.port),
    ]
    workers = _Workers(urls, tmp, job, work)
    recovery: float | None = None
    index, slot, fault_ms = -1, 0, 0
    try:
        workers.wait_started()
        time.sleep(before_s)
        index, slot = workers.runner_of_live_slot(
            victim, max_age_ms, timeout_s=max(15.0, 15 * work.every_ms / 1000)
        )
        window_start = min(_wall_ms(), slot - 1)  # the victim's slot is in the window
        fault_ms = _wall_ms()
        fault(workers, index, slot)
        # Without leases nothing takes over: watch a few seconds, to see that nothing does.
        wait_s = recovery_wait_s if work.leases else min(recovery_wait_s, 3.0)
        recovery = _recovery(workers, fault_ms, index, slot, wait_s)
        time.sleep(after_s)
        window_end = _wall_ms() - work.handler_ms - work.lease_ms
    finally:
        workers.stop()
        for hop in (proxy, peer_proxy):
            if hop is not None:
                hop.stop()
    report = build_report(
        scenario,
        workers.outs,
        url,
        job,
        (window_start, window_end),
        work.every_ms,
        workers.effects,
        fault=(slot, f"w{index}", fault_ms),
    )
    report.recovery_s = recovery
    return report


def kill9_takeover(url: str, *, tmp_path: Path | str, after_s: float = 8.0) -> FaultReport:
    """``kill -9`` of the instance running a handler; the other takes over."""

    def fault(workers: _Workers, victim: int, slot: int) -> None:
        os.kill(workers.procs[victim].pid, signal.SIGKILL)

    return _run("kill9", url, tmp_path, fault, after_s=after_s)


def sigstop_past_lease(
    url: str, *, tmp_path: Path | str, handler: str = "plain", after_s: float = 8.0
) -> FaultReport:
    """SIGSTOP the runner for lease + 1 s and until another instance began its slot, then SIGCONT.

    ``handler`` is ``plain`` (does not look at its lease), ``guarded`` (the
    fenced example of docs/leases.md: registers its ``fencing_token``, asks
    ``still_owner()``, commits through the fenced UPDATE) or ``naive`` (a sync
    handler committing through the same fence without asking).
    """
    work = replace(DEFAULT, handler=handler)

    def fault(workers: _Workers, victim: int, slot: int) -> None:
        pid = workers.procs[victim].pid
        stopped_ms = _wall_ms()
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep((work.lease_ms + 1000) / 1000)
            deadline = time.monotonic() + (15 if workers.work.leases else 0)
            while time.monotonic() < deadline and not _taken_over(
                workers, stopped_ms, victim, slot
            ):
                time.sleep(0.02)
        finally:
            os.kill(pid, signal.SIGCONT)

    # Pause a handler early in its run, so that it has work left to do when it wakes up.
    return _run(
        f"sigstop-{handler}", url, tmp_path, fault, work=work, max_age_ms=500, after_s=after_s
    )


def blackhole_then_heal(url: str, *, tmp_path: Path | str, after_s: float = 8.0) -> FaultReport:
    """A blackholing proxy between one instance and the store for lease + 1 s, then heal.

    The job is :data:`SPACED`: every 4 s, a 3 s handler, faulted just after its start.
    The other instance reaches the store through a proxy that only forwards, so
    both claim over the same hops: without it, the instance behind the proxy
    lost every claim race on some stores, and there was no run to cut off.
    """
    proxy = FaultProxy(*_target(url)).start()
    peer = FaultProxy(*_target(url)).start()

    def fault(workers: _Workers, victim: int, slot: int) -> None:
        proxy.blackhole()
        time.sleep((DEFAULT.lease_ms + 1000) / 1000)
        proxy.heal()

    return _run(
        "blackhole",
        url,
        tmp_path,
        fault,
        work=SPACED,
        victim=1,
        max_age_ms=_FRESH_MS,
        proxy=proxy,
        peer_proxy=peer,
        after_s=after_s,
    )


def handover_on_stop(url: str, *, tmp_path: Path | str, after_s: float = 9.0) -> FaultReport:
    """``stop()`` (SIGTERM) of the runner of a 3 s handler with ``stop_grace`` 0.5 s: a hand-over.

    The runner's handlers are cancelled and their leases released once they
    have ended; the other instance takes them over at once (attempt 2).
    """
    work = replace(DEFAULT, handler_ms=3000, stop_grace_s=0.5)

    def fault(workers: _Workers, victim: int, slot: int) -> None:
        workers.procs[victim].terminate()
        code = workers.wait_exit(victim, 30)
        if code != 0:
            raise AssertionError(f"the stopped worker exited with code {code}")

    return _run("handover", url, tmp_path, fault, work=work, max_age_ms=1000, after_s=after_s)


def store_restart(
    url: str,
    *,
    tmp_path: Path | str,
    restart: Callable[[], object],
    name: str = "restart",
    after_s: float = 10.0,
) -> FaultReport:
    """``restart()`` (the caller's: stop the store server, start it again) while handlers run.

    ``restart`` must return once the server accepts connections again on the
    same address. What the report shows depends on what the store keeps: a
    server without persistence forgets every lease. The job is :data:`SPACED`,
    restarted just after a run's start.
    """

    def fault(workers: _Workers, victim: int, slot: int) -> None:
        restart()

    return _run(name, url, tmp_path, fault, work=SPACED, max_age_ms=_FRESH_MS, after_s=after_s)


_SCENARIO_CLEARANCE_MS = 30_000
"""How far from the job's next slot ``blocking_handler_at_stop`` must start."""


def blocking_handler_at_stop(
    url: str,
    *,
    tmp_path: Path | str,
    leases: bool = True,
    stop_grace_s: float = 1.0,
) -> FaultReport:
    """Two instances, a sync handler blocking 8 s in one call, ``stop()`` of its runner after 2 s.

    A job every 5 min whose current slot is due at once (``max_late`` 299 s),
    lease 3 s (heartbeat 1 s), ``stop_grace`` 1 s: ``stop()`` gives up on the
    thread long before it returns (docs/leases.md, "Stopping"). No other
    instance may start the slot while the runner's thread lives: the lease
    thread keeps its lease until the thread returns, and the run is finished
    with its result. ``overlaps`` counts a begin of the slot elsewhere between
    the thread's begin and its end (or the runner's exit). ``leases=False``
    runs it on a claim-only backend.
    """
    # max_late stays below NATS's default de-duplication window (300 s): a longer one is
    # refused there (ANARCHON_DEDUPE_WINDOW, docs/backends/nats.md) and the workers exit.
    work = Workload(
        handler="blocking",
        handler_ms=8000,
        every_ms=300_000,
        max_late="299s",
        lease_ms=3000,
        heartbeat_ms=1000,
        stop_grace_s=stop_grace_s,
        leases=leases,
    )
    # One slot per scenario: a next slot falling due during the stop would be claimed ahead
    # and started within stop_grace (docs/scaling.md, "Claiming ahead"), a second blocking
    # run the stop then abandons. The scenario takes about 15 s; start it clear of a boundary.
    to_boundary_ms = work.every_ms - _wall_ms() % work.every_ms
    if to_boundary_ms < _SCENARIO_CLEARANCE_MS:
        time.sleep(to_boundary_ms / 1000 + 0.5)

    def fault(workers: _Workers, victim: int, slot: int) -> None:
        begun = [a for a in attempts(workers.outs) if a.slot == slot and not a.completed]
        time.sleep(max(0.0, 2.0 - (_wall_ms() - min(a.begin for a in begun)) / 1000))
        workers.procs[victim].terminate()
        workers.wait_exit(victim, 40)
        # Let a takeover of the slot (if any) complete before the scenario ends.
        deadline = time.monotonic() + (work.handler_ms + 4000) / 1000
        while time.monotonic() < deadline:
            runs = [a for a in attempts(workers.outs) if a.slot == slot]
            if all(a.completed or a.instance == f"w{victim}" for a in runs):
                break
            time.sleep(0.05)

    return _run(
        "blocking-stop",
        url,
        tmp_path,
        fault,
        work=work,
        before_s=0.0,
        after_s=0.5,
        recovery_wait_s=0.5,
    )


SCENARIOS: dict[str, Callable[..., FaultReport]] = {
    "kill9": kill9_takeover,
    "sigstop": sigstop_past_lease,
    "blackhole": blackhole_then_heal,
    "handover": handover_on_stop,
    "restart": store_restart,
    "blocking-stop": blocking_handler_at_stop,
}
"""Every scenario by name (``scripts/fault_table.py`` runs them on each store)."""
