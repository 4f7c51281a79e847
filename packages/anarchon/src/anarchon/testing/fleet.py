"""A multi-process exactly-once test for any backend: a "fleet" of scheduler processes.

:func:`run_fleet` starts ``processes`` separate OS processes (8 by default),
each running one :class:`~anarchon.Scheduler` on the same store with one
interval job (200 ms, jitter 50 ms), all until the same wall time. Once they
have exited it reads what each process recorded and checks that every slot of
the window in which *all* of them were running ran exactly once: none twice,
none missed, every run a first attempt, more than one process winning (so the
race was exercised) and, given a ``reader`` backend, that the store's history
has exactly the same runs::

    from anarchon.testing.fleet import run_fleet

    def test_fleet(tmp_path):
        run_fleet("my://localhost/db", tmp_path=tmp_path, reader="my://localhost/db")

``run_fleet`` is synchronous (it blocks for about ``startup_s + window_s``
seconds); call it from a plain test function, not from a running event loop.
It needs no pytest: a failed check raises :class:`AssertionError` listing the
duplicated and missed slots.

The backend is given as a URL (resolved in each process through the
``anarchon.backends`` entry points) or, for a backend that needs constructor
options, as a factory ``"module:function"`` called with ``factory_args``
keywords that returns a :class:`~anarchon.Backend`. The factory's module must
be importable in the child processes: the parent's ``sys.path`` is passed on.

Each process is the worker of this module::

    python -m anarchon.testing.fleet worker (--backend URL | --factory MOD:FUNC)
        --instance ID --job NAME --until-ms T [--until-file F] --out PATH [--every 200ms]
        [--jitter 50ms] [--handler-ms 0] [--jobs 1] [--clock-skew-ms 0]
        [--factory-arg KEY=VALUE ...] [--scheduler-option KEY=VALUE ...]
        [--job-option KEY=VALUE ...] [--log-level WARNING]

It appends to ``PATH`` ``start <store_ms>`` once its scheduler runs,
``run <slot> <attempt> <instance> <started_ms> <job>`` from each run's handler
(``started_ms``: this machine's wall clock when the handler started) and
``stop <store_ms>`` when wall time reaches ``T`` (ms since the epoch), or the
earlier time the file ``F`` names once it exists, then stops its scheduler. With ``--jobs N`` (N > 1) it runs N identical jobs named
``NAME-0`` ... ``NAME-<N-1>``; with ``--clock-skew-ms`` its scheduler reads
time through :class:`~anarchon.clock.SkewedClock` (an instance whose wall
clock is wrong; the records' ``started_ms`` stay the true time). Option values are JSON when they parse as JSON
(``true``, ``2``) and strings otherwise (``5s``). Its log goes to stderr.

For other checks (a server restart while the fleet runs, a custom handler
duration), :func:`start_fleet` returns the running :class:`Fleet`; its
:meth:`Fleet.wait` gives the :class:`FleetResult` to inspect.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import importlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from anarchon.backend import Backend
from anarchon.clock import SkewedClock
from anarchon.context import RunContext
from anarchon.registry import resolve_backend
from anarchon.scheduler import Scheduler
from anarchon.types import RunRecord

__all__ = [
    "Fleet",
    "FleetResult",
    "FleetRun",
    "parse_records",
    "read_history",
    "run_fleet",
    "start_fleet",
]

EDGE_SLOTS = 3
"""Slots left out at each end of the common window (processes starting or stopping)."""

STDERR_TAIL = 6000
"""How much of a failed process's stderr an assertion message shows."""

CLOSE_S = 10.0
"""How long a worker waits for its backend to close; longer fails the process (exit 1)."""

UNTIL_POLL_S = 0.2
"""How often a worker looks at its ``--until-file``."""

HANG_DUMP_S = 30.0
"""A worker still alive this long after its end prints its threads and tasks.

:meth:`Fleet.wait` kills workers 40 s after the fleet's end; the dump before
that says where a worker hung (a stop that did not return, a close that did
not end), in the stderr the failure shows.
"""

_WORKER = "import sys; from anarchon.testing.fleet import main; sys.exit(main())"
"""How the harness starts a worker: like ``python -m anarchon.testing.fleet`` but without
runpy's warning about a module that its package already imported."""


# Records -------------------------------------------------------------------------


@dataclass(frozen=True)
class FleetRun:
    """One run a process recorded: ``run <slot> <attempt> <instance> [<started_ms> <job>]``.

    ``started_ms`` is the recording machine's true wall clock when the handler
    started; ``job`` is None for the fleet's only job.
    """

    slot: int
    attempt: int
    instance: str
    started_ms: int | None = None
    job: str | None = None


@dataclass
class FleetResult:
    """What the processes of one fleet recorded, and the checks on it.

    ``starts`` and ``stops`` hold one store time (ms) per process that got that
    far; ``runs`` every run of every process; ``history`` the store's records
    of the job when a reader was given (else ``None``).
    """

    job: str
    processes: int
    every_ms: int
    window_s: float
    starts: list[int] = field(default_factory=list)
    stops: list[int] = field(default_factory=list)
    runs: list[FleetRun] = field(default_factory=list)
    returncodes: list[int | None] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    history: list[RunRecord] | None = None
    elapsed_s: float = 0.0
    jobs: list[str] = field(default_factory=list)
    """Every job of the fleet (empty: just ``job``)."""
    history_s: float = 0.0
    """How long reading ``history`` took (included in ``elapsed_s``)."""

    _index: tuple[tuple[int, int], dict[str, list[FleetRun]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def job_names(self) -> list[str]:
        """The fleet's jobs: ``jobs``, or ``[job]``."""
        return list(self.jobs) or [self.job]

    def runs_of(self, job: str) -> list[FleetRun]:
        """The runs of ``job`` (grouped once per state of ``runs``: thousands of jobs stay fast)."""
        key = (id(self.runs), len(self.runs))
        if self._index is None or self._index[0] != key:
            grouped: dict[str, list[FleetRun]] = {}
            for run in self.runs:
                grouped.setdefault(run.job or self.job, []).append(run)
            self._index = (key, grouped)
        return self._index[1].get(job, [])

    @property
    def window(self) -> list[int]:
        """The slots due while every process was running, ``EDGE_SLOTS`` in from each end.

        Empty when not every process wrote its ``start`` and ``stop`` lines.
        """
        if not self.starts or not self.stops:
            return []
        first = (max(self.starts) // self.every_ms + EDGE_SLOTS) * self.every_ms
        last = (min(self.stops) // self.every_ms - EDGE_SLOTS) * self.every_ms
        return list(range(first, last + 1, self.every_ms))

    @property
    def common_s(self) -> float:
        """How long the window is, in seconds (first to last slot)."""
        window = self.window
        return (window[-1] - window[0]) / 1000 if len(window) > 1 else 0.0

    def ran(self, job: str | None = None) -> Counter[int]:
        """How many times each slot of the window ran for ``job`` (default: the first job)."""
        window = self.window
        if not window:
            return Counter()
        job = job or self.job_names()[0]
        return Counter(r.slot for r in self.runs_of(job) if window[0] <= r.slot <= window[-1])

    def duplicates(self, job: str | None = None) -> dict[int, int]:
        """Slots of the window that ran more than once for ``job``, with their count."""
        return {slot: n for slot, n in sorted(self.ran(job).items()) if n > 1}

    def missed(self, job: str | None = None) -> list[int]:
        """Slots of the window that never ran for ``job``."""
        ran = self.ran(job)
        return [slot for slot in self.window if ran[slot] == 0]

    def early(self, tolerance_ms: int = 0) -> list[FleetRun]:
        """Runs whose handler started more than ``tolerance_ms`` before their slot.

        Judged by ``started_ms`` (the true wall clock of the recording machine):
        meaningful when the store's clock is this machine's, a store on this host.
        """
        return [
            r
            for r in self.runs
            if r.started_ms is not None and r.started_ms < r.slot - tolerance_ms
        ]

    def problems(self, *, min_window_s: float | None = None, min_instances: int = 2) -> list[str]:
        """Every failed check, as messages (empty when the fleet ran each slot exactly once).

        ``min_window_s`` is how long all processes must have run together
        (default: the fleet's ``window_s``); ``min_instances`` how many
        processes must have won slots of the window (capped at ``processes``).
        """
        failed = [
            f"process {i} exited with {code}:\n{self.stderr[i][-STDERR_TAIL:]}"
            for i, code in enumerate(self.returncodes)
            if code != 0
        ]
        if failed:
            return failed  # the records of a crashed fleet say nothing more
        problems: list[str] = []
        for what, seen in (("start", self.starts), ("stop", self.stops)):
            if len(seen) != self.processes:
                problems.append(f"{len(seen)} of {self.processes} processes wrote {what!r}")
        if problems:
            return problems
        needed = self.window_s if min_window_s is None else min_window_s
        if self.common_s < needed:
            spread = (max(self.starts) - min(self.starts)) / 1000
            problems.append(
                f"processes ran together for only {self.common_s:.1f} s (< {needed:.1f} s);"
                f" their starts spread over {spread:.1f} s: raise startup_s"
            )
        window = self.window
        for job in self.job_names():
            label = "" if len(self.job_names()) == 1 else f"job {job}: "
            duplicates = self.duplicates(job)
            if duplicates:
                problems.append(
                    f"{label}{len(duplicates)} slots ran more than once: "
                    + ", ".join(f"{slot} x{n}" for slot, n in list(duplicates.items())[:20])
                )
            missed = self.missed(job)
            if missed:
                problems.append(
                    f"{label}{len(missed)} of {len(window)} slots never ran: {missed[:20]}"
                )
            if len(problems) >= 20:
                problems.append("(further jobs not listed)")
                break
        retried = [r for r in self.runs if r.attempt != 1 and self._in(window, r.slot)]
        if retried:
            problems.append(f"{len(retried)} runs were not a first attempt: {retried[:10]}")
        unexplained = self._edge_retries_not_handed_over(window)
        if unexplained:
            problems.append(
                f"{len(unexplained)} runs outside the window were not a first attempt and the"
                f" history has no hand-over of the attempt before: {unexplained[:10]}"
            )
        if window:
            instances = {r.instance for r in self.runs if window[0] <= r.slot <= window[-1]}
            wanted = min(min_instances, self.processes)
            if len(instances) < wanted:
                problems.append(
                    f"only {sorted(instances)} won slots of the window: the race was not exercised"
                )
        if self.history is not None and window:
            problems.extend(self._history_problems(window))
        return problems

    @staticmethod
    def _in(window: list[int], slot: int) -> bool:
        return bool(window) and window[0] <= slot <= window[-1]

    def _edge_retries_not_handed_over(self, window: list[int]) -> list[FleetRun]:
        """Second attempts at the edges, unless history shows the attempt before handed over.

        A stopping process hands over the runs it claimed ahead and did not start
        within ``stop_grace``; a process still running takes them as the next
        attempt. Without a history the edges are not checked.
        """
        if self.history is None:
            return []
        single = self.job_names()[0] if len(self.job_names()) == 1 else None
        handed = {
            (single or r.job, r.slot, r.attempt) for r in self.history if r.reason == "handed_over"
        }
        return [
            r
            for r in self.runs
            if r.attempt != 1
            and not self._in(window, r.slot)
            and (single or r.job, r.slot, r.attempt - 1) not in handed
        ]

    def _history_problems(self, window: list[int]) -> list[str]:
        assert self.history is not None
        problems: list[str] = []
        names = self.job_names()
        by_job: dict[str, list[RunRecord]] = {}
        for record in self.history:
            if window[0] <= record.slot <= window[-1]:
                by_job.setdefault(record.job if len(names) > 1 else names[0], []).append(record)
        for job in names:
            label = "" if len(names) == 1 else f"job {job}: "
            found = [
                f"{label}{text}"
                for text in self._job_history_problems(job, window, by_job.get(job, []))
            ]
            problems.extend(found)
            if len(problems) >= 20:
                problems.append("(further jobs not listed)")
                break
        return problems

    def _job_history_problems(
        self, job: str, window: list[int], in_window: list[RunRecord]
    ) -> list[str]:
        problems: list[str] = []
        per_slot = Counter(r.slot for r in in_window)
        absent = [slot for slot in window if per_slot[slot] == 0]
        if absent:
            problems.append(f"history lacks {len(absent)} slots of the window: {absent[:20]}")
        twice = {slot: n for slot, n in sorted(per_slot.items()) if n > 1}
        if twice:
            problems.append(f"history has {len(twice)} slots more than once: {twice}")
        stray = sorted(set(per_slot) - set(window))
        if stray:
            problems.append(f"history has slots not on the schedule: {stray[:20]}")
        statuses = Counter(r.status for r in in_window)
        if set(statuses) - {"ok"}:
            problems.append(f"history has runs that did not end ok: {dict(statuses)}")
        winner = {r.slot: r.instance for r in self.runs_of(job)}
        differ = [
            (r.slot, r.instance_id, winner.get(r.slot))
            for r in in_window
            if r.instance_id != winner.get(r.slot)
        ]
        if differ:
            problems.append(
                f"history names another instance than the one that ran"
                f" (slot, history, run): {differ[:10]}"
            )
        return problems

    def assert_exactly_once(
        self, *, min_window_s: float | None = None, min_instances: int = 2
    ) -> None:
        """Raise :class:`AssertionError` listing every failed check of :meth:`problems`."""
        problems = self.problems(min_window_s=min_window_s, min_instances=min_instances)
        if problems:
            raise AssertionError(
                f"fleet {self.job!r} ({self.processes} processes, every {self.every_ms} ms):\n- "
                + "\n- ".join(problems)
            )

    def summary(self) -> str:
        """One line: processes, window, runs and winners."""
        window = set(self.window)
        winners = Counter(r.instance for r in self.runs if r.slot in window)
        jobs = "" if len(self.job_names()) == 1 else f" x {len(self.job_names())} jobs"
        return (
            f"{self.processes} processes, {len(window)} slots{jobs} in {self.common_s:.1f} s,"
            f" {len(self.runs)} runs, wins per instance {dict(sorted(winners.items()))},"
            f" {self.elapsed_s:.1f} s in all ({self.history_s:.1f} s reading history)"
        )


def parse_records(paths: Sequence[Path | str], result: FleetResult) -> FleetResult:
    """Add the ``start``/``run``/``stop`` lines of the worker files ``paths`` to ``result``.

    A missing file adds nothing (its process never started). Raises
    :class:`ValueError` for a line that is not one of the three.
    """
    for path in map(Path, paths):
        if not path.exists():
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            fields = line.split()
            if not fields:
                continue
            try:
                if fields[0] == "start" and len(fields) == 2:
                    result.starts.append(int(fields[1]))
                    continue
                if fields[0] == "stop" and len(fields) == 2:
                    result.stops.append(int(fields[1]))
                    continue
                if fields[0] == "run" and len(fields) == 4:
                    result.runs.append(FleetRun(int(fields[1]), int(fields[2]), fields[3]))
                    continue
                if fields[0] == "run" and len(fields) == 6:
                    slot, attempt, instance, started, job = fields[1:]
                    result.runs.append(
                        FleetRun(int(slot), int(attempt), instance, int(started), job)
                    )
                    continue
            except ValueError:
                pass
            raise ValueError(f"{path}:{number}: not a fleet record: {line!r}")
    return result


# Processes -----------------------------------------------------------------------


def _options(flag: str, options: Mapping[str, object] | None) -> list[str]:
    args: list[str] = []
    for key, value in (options or {}).items():
        args += [flag, f"{key}={json.dumps(value) if not isinstance(value, str) else value}"]
    return args


class Fleet:
    """Running fleet processes (see :func:`start_fleet`); a context manager that kills them."""

    def __init__(
        self,
        procs: list[subprocess.Popen[bytes]],
        outs: list[Path],
        errs: list[Path],
        *,
        job: str,
        every_ms: int,
        window_s: float,
        until_ms: int,
        jobs: int = 1,
        until_file: Path | None = None,
    ) -> None:
        self.procs = procs
        self.until_file = until_file
        self.jobs = job_names(job, jobs)
        self.outs = outs
        self.errs = errs
        self.job = job
        self.every_ms = every_ms
        self.window_s = window_s
        self.until_ms = until_ms
        self._began = time.monotonic()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill()

    def kill(self) -> None:
        """``SIGKILL`` every process still running and reap it."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def started(self) -> int:
        """How many processes have written their ``start`` line."""
        return sum(
            1
            for out in self.outs
            if out.exists()
            and any(line.startswith("start ") for line in out.read_text().splitlines())
        )

    def wait_started(self, timeout: float) -> None:
        """Block until every process runs its scheduler; AssertionError if one exits or time runs out."""
        deadline = time.monotonic() + timeout
        while self.started() < len(self.procs):
            dead = [i for i, p in enumerate(self.procs) if p.poll() is not None]
            if dead:
                i = dead[0]
                raise AssertionError(
                    f"fleet process {i} exited with {self.procs[i].returncode} before starting:\n"
                    + self.errs[i].read_text()[-STDERR_TAIL:]
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"only {self.started()} of {len(self.procs)} fleet processes started"
                    f" within {timeout} s"
                )
            time.sleep(0.05)

    def end_after_start(self, startup_s: float, margin_s: float) -> bool:
        """Once every process runs, end the fleet ``window_s + margin_s`` later; False: not all did.

        :func:`start_fleet` gives the processes ``startup_s`` to start, so
        they run until ``startup_s + window_s + margin_s`` from their launch.
        When all of them start sooner, the fleet ends sooner (through the
        workers' ``--until-file``), still with ``window_s`` together.
        """
        deadline = time.monotonic() + startup_s
        while self.started() < len(self.procs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                return False
            time.sleep(0.05)
        until_ms = int((time.time() + self.window_s + margin_s) * 1000)
        if self.until_file is None or until_ms >= self.until_ms:
            return True
        partial = self.until_file.with_suffix(".tmp")
        partial.write_text(str(until_ms))
        partial.replace(self.until_file)  # atomic: a worker never reads half a number
        self.until_ms = until_ms
        return True

    def wait(
        self, timeout: float | None = None, *, reader: Backend | str | None = None
    ) -> FleetResult:
        """Wait for the processes (killing any still running after ``timeout`` s) and read them.

        ``timeout`` defaults to 40 s past the fleet's end. With a ``reader``
        (a backend or URL on the same store) the job's history is read too.
        """
        if timeout is None:
            timeout = max(0.0, self.until_ms / 1000 - time.time()) + 40.0
        deadline = time.monotonic() + timeout
        try:
            for proc in self.procs:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    break
        finally:
            self.kill()
        result = FleetResult(
            job=self.job,
            processes=len(self.procs),
            every_ms=self.every_ms,
            window_s=self.window_s,
            returncodes=[p.returncode for p in self.procs],
            stderr=[e.read_text(errors="replace") if e.exists() else "" for e in self.errs],
            elapsed_s=time.monotonic() - self._began,
            jobs=self.jobs if len(self.jobs) > 1 else [],
        )
        parse_records(self.outs, result)
        if reader is not None:
            span_ms = self.until_ms - (min(result.starts) if result.starts else self.until_ms)
            limit = max(2000, 2 * span_ms // self.every_ms + 100)
            read_from = time.monotonic()
            result.history = read_history(reader, self.jobs, limit)
            result.history_s = time.monotonic() - read_from
            result.elapsed_s += result.history_s
        return result


def job_names(job: str, jobs: int = 1) -> list[str]:
    """The names of a fleet's jobs: ``[job]``, or ``job-0`` ... ``job-<jobs-1>``."""
    return [job] if jobs == 1 else [f"{job}-{k}" for k in range(jobs)]


def read_history(reader: Backend | str, job: str | Sequence[str], limit: int) -> list[RunRecord]:
    """The history of each job (``reader.history_many``) in a fresh event loop, in the order given."""
    backend = resolve_backend(reader)
    jobs = [job] if isinstance(job, str) else list(job)

    async def read() -> list[RunRecord]:
        await backend.init()
        try:
            found = await backend.history_many(jobs, limit)
            return [record for name in jobs for record in found[name]]
        finally:
            await backend.close()

    return asyncio.run(read())


def start_fleet(
    backend: str | None = None,
    *,
    tmp_path: Path | str,
    factory: str | None = None,
    factory_args: Mapping[str, object] | None = None,
    processes: int = 8,
    window_s: float = 20.0,
    startup_s: float = 8.0,
    every_ms: int = 200,
    jitter_ms: int = 50,
    handler_ms: int = 0,
    job: str | None = None,
    scheduler_options: Mapping[str, object] | None = None,
    job_options: Mapping[str, object] | None = None,
    log_level: str = "WARNING",
    env: Mapping[str, str] | None = None,
    jobs: int = 1,
    clock_skews_ms: Sequence[int] | None = None,
) -> Fleet:
    """Start the fleet's processes and return at once; see :func:`run_fleet` for the arguments.

    The processes run until ``startup_s + window_s`` seconds from now plus a
    margin, so that all of them run together for at least ``window_s`` if they
    start within ``startup_s``. Each writes ``worker-<i>.txt`` (its records) and
    ``worker-<i>.err`` (its stderr) in ``tmp_path``; its instance id is ``proc-<i>``.
    """
    if (backend is None) == (factory is None):
        raise ValueError("give either a backend URL or a factory 'module:function'")
    if processes < 1 or every_ms < 1 or window_s <= 0 or jobs < 1:
        raise ValueError("processes, every_ms, window_s and jobs must be positive")
    skews = list(clock_skews_ms or [0])
    if not skews:
        raise ValueError("clock_skews_ms must not be empty")
    job = job or f"fleet-{uuid.uuid4().hex[:8]}"
    tmp = Path(tmp_path)
    tmp.mkdir(parents=True, exist_ok=True)
    margin_s = _margin_s(every_ms)
    until_ms = int((time.time() + startup_s + window_s + margin_s) * 1000)
    until_file = tmp / "until.txt"
    until_file.unlink(missing_ok=True)
    common = [
        *(["--backend", backend] if backend is not None else ["--factory", str(factory)]),
        *["--job", job, "--until-ms", str(until_ms), "--until-file", str(until_file)],
        *["--every", f"{every_ms}ms", "--jitter", f"{jitter_ms}ms"],
        *["--handler-ms", str(handler_ms), "--log-level", log_level, "--jobs", str(jobs)],
        *_options("--factory-arg", factory_args),
        *_options("--scheduler-option", scheduler_options),
        *_options("--job-option", job_options),
    ]
    child_env = dict(os.environ if env is None else env)
    if factory is not None:  # the factory's module may sit next to the tests
        paths = [p for p in sys.path if p] + [child_env.get("PYTHONPATH", "")]
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    outs = [tmp / f"worker-{i}.txt" for i in range(processes)]
    errs = [tmp / f"worker-{i}.err" for i in range(processes)]
    command = [sys.executable, "-c", _WORKER, "worker"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for i, (out, err) in enumerate(zip(outs, errs, strict=True)):
            out.unlink(missing_ok=True)
            with open(err, "wb") as stderr:
                procs.append(
                    subprocess.Popen(
                        [
                            *command,
                            *["--instance", f"proc-{i}", "--out", str(out), *common],
                            *["--clock-skew-ms", str(skews[i % len(skews)])],
                        ],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=stderr,
                        env=child_env,
                        start_new_session=True,
                    )
                )
    except BaseException:
        for proc in procs:
            proc.kill()
            proc.wait()
        raise
    return Fleet(
        procs,
        outs,
        errs,
        job=job,
        every_ms=every_ms,
        window_s=window_s,
        until_ms=until_ms,
        jobs=jobs,
        until_file=until_file,
    )


def _margin_s(every_ms: int) -> float:
    """The time a fleet runs beyond its window: slots at both edges are not checked."""
    return 2.0 + 2 * EDGE_SLOTS * every_ms / 1000


def run_fleet(
    backend: str | None = None,
    *,
    tmp_path: Path | str,
    factory: str | None = None,
    factory_args: Mapping[str, object] | None = None,
    processes: int = 8,
    window_s: float = 20.0,
    startup_s: float = 8.0,
    every_ms: int = 200,
    jitter_ms: int = 50,
    handler_ms: int = 0,
    job: str | None = None,
    reader: Backend | str | None = None,
    scheduler_options: Mapping[str, object] | None = None,
    job_options: Mapping[str, object] | None = None,
    log_level: str = "WARNING",
    env: Mapping[str, str] | None = None,
    check: bool = True,
    jobs: int = 1,
    clock_skews_ms: Sequence[int] | None = None,
) -> FleetResult:
    """Run ``processes`` schedulers on one store for ``window_s`` together; check exactly once.

    - ``backend``: the store's URL, or ``factory`` (``"module:function"``,
      called with the keywords ``factory_args``, values JSON-able) for a
      backend built in code. Each process builds its own.
    - ``tmp_path``: where the processes' record and stderr files go.
    - ``every_ms``, ``jitter_ms``: the interval job; ``handler_ms``: how long
      each run's handler sleeps after recording the run.
    - ``startup_s``: how long the processes may take to start.
    - ``job``: the job name (default: a unique ``fleet-<hex>``).
    - ``reader``: a backend (or URL) on the same store to read the history
      with; ``None`` skips the history checks.
    - ``scheduler_options``: keywords of each ``Scheduler`` (``lease``,
      ``heartbeat``; ``stop_grace`` defaults to 2 s); ``job_options``:
      keywords of ``every()`` (``overlap``, ``max_attempts``...).
    - ``log_level``: the workers' log level (their log is in ``FleetResult.stderr``).
    - ``check``: call :meth:`FleetResult.assert_exactly_once` before returning.
    - ``jobs``: identical jobs per process (``<job>-0`` ...; each checked).
    - ``clock_skews_ms``: process ``i`` runs with its clock shifted by
      ``clock_skews_ms[i % len]`` ms (:class:`~anarchon.clock.SkewedClock`).

    The fleet ends ``window_s`` (plus a margin for the edge slots) after its
    last process started (:meth:`Fleet.end_after_start`). Processes still
    running 40 s after the fleet's end are killed (and fail the check).
    Returns the :class:`FleetResult`.
    """
    fleet = start_fleet(
        backend,
        tmp_path=tmp_path,
        factory=factory,
        factory_args=factory_args,
        processes=processes,
        window_s=window_s,
        startup_s=startup_s,
        every_ms=every_ms,
        jitter_ms=jitter_ms,
        handler_ms=handler_ms,
        job=job,
        scheduler_options=scheduler_options,
        job_options=job_options,
        log_level=log_level,
        env=env,
        jobs=jobs,
        clock_skews_ms=clock_skews_ms,
    )
    with fleet:
        fleet.end_after_start(startup_s, _margin_s(every_ms))
        result = fleet.wait(reader=reader)
    if check:
        result.assert_exactly_once()
    return result


# Worker --------------------------------------------------------------------------


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return key, value


def _build_backend(args: argparse.Namespace) -> Backend:
    if args.backend is not None:
        return resolve_backend(args.backend)
    module_name, sep, name = args.factory.partition(":")
    if not sep:
        raise SystemExit(f"--factory must be module:function, got {args.factory!r}")
    built = getattr(importlib.import_module(module_name), name)(**dict(args.factory_arg))
    if not isinstance(built, Backend):
        raise SystemExit(f"{args.factory} returned {type(built).__name__}, not a Backend")
    return built


def _record(out: IO[str], text: str) -> None:
    out.write(text + "\n")


async def _store_ms(backend: Backend) -> int:
    """The store's time; this machine's when the store has no clock or does not answer in 10 s.

    A transient error (the store's own timeout, on a starved machine) counts as no answer: this
    read only marks the worker's window, the scheduler's runs are what the fleet checks.
    """
    try:
        now = await asyncio.wait_for(backend.now_ms(), CLOSE_S)
    except TimeoutError:
        print(f"fleet worker: the store's clock did not answer within {CLOSE_S} s", file=sys.stderr)
        now = None
    except Exception as error:
        if not backend.is_transient(error):
            raise
        print(f"fleet worker: the store's clock did not answer: {error}", file=sys.stderr)
        now = None
    return now if now is not None else time.time_ns() // 1_000_000


async def _work(args: argparse.Namespace, out: IO[str]) -> None:
    backend = _build_backend(args)
    options: dict[str, Any] = {"stop_grace": 2, **dict(args.scheduler_option)}
    if args.clock_skew_ms:
        options["clock"] = SkewedClock(args.clock_skew_ms)
    scheduler = Scheduler(backend, instance_id=args.instance, **options)
    handler_s = args.handler_ms / 1000

    async def handler(ctx: RunContext) -> None:
        started = time.time_ns() // 1_000_000
        _record(out, f"run {ctx.slot} {ctx.attempt} {ctx.instance_id} {started} {ctx.job}")
        if handler_s:
            await asyncio.sleep(handler_s)

    for name in job_names(args.job, args.jobs):
        scheduler.every(name, args.every, handler, jitter=args.jitter, **dict(args.job_option))
    watchdog: threading.Timer | None = None
    try:
        async with scheduler:
            _record(out, f"start {await _store_ms(backend)}")
            await _sleep_until(args.until_ms / 1000, args.until_file)
            watchdog = _hang_watchdog(asyncio.get_running_loop(), time.time() + HANG_DUMP_S)
            _record(out, f"stop {await _store_ms(backend)}")
    finally:
        try:
            await asyncio.wait_for(backend.close(), CLOSE_S)
        except TimeoutError:
            print(f"fleet worker: backend.close() did not end within {CLOSE_S} s", file=sys.stderr)
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()


async def _sleep_until(until: float, until_file: str | None) -> None:
    """Sleep until wall time ``until``, or the earlier time ``until_file`` names (epoch ms)."""
    while (left := until - time.time()) > 0:
        await asyncio.sleep(min(left, UNTIL_POLL_S))
        if until_file is not None:
            until = min(until, _read_until(Path(until_file)))


def _read_until(path: Path) -> float:
    try:
        return int(path.read_text()) / 1000
    except (OSError, ValueError):
        return float("inf")  # not written yet (or half written)


def _hang_watchdog(loop: asyncio.AbstractEventLoop, at: float) -> threading.Timer:
    """A timer that, at wall time ``at``, prints every thread's stack and every task's."""

    def print_tasks() -> None:
        for task in asyncio.all_tasks(loop):
            print(f"task {task.get_name()}:", file=sys.stderr)
            task.print_stack(file=sys.stderr)

    def dump() -> None:
        print("fleet worker still alive after its end: its threads and tasks", file=sys.stderr)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        loop.call_soon_threadsafe(print_tasks)

    timer = threading.Timer(max(0.0, at - time.time()), dump)
    timer.daemon = True
    timer.start()
    return timer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m anarchon.testing.fleet",
        description="One process of an anarchon fleet test (see anarchon.testing.fleet).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="run one scheduler until --until-ms")
    where = worker.add_mutually_exclusive_group(required=True)
    where.add_argument("--backend", help="the store's URL")
    where.add_argument("--factory", help="module:function returning a Backend")
    worker.add_argument("--factory-arg", type=_key_value, action="append", default=[])
    worker.add_argument("--instance", required=True, help="the scheduler's instance_id")
    worker.add_argument("--job", required=True, help="the job's name")
    worker.add_argument("--until-ms", type=int, required=True, help="wall time to stop at")
    worker.add_argument("--until-file", help="a file that may name an earlier stop (epoch ms)")
    worker.add_argument("--out", required=True, help="the file to append records to")
    worker.add_argument("--every", default="200ms", help="the job's interval")
    worker.add_argument("--jitter", default="50ms", help="the job's jitter")
    worker.add_argument("--handler-ms", type=int, default=0, help="how long each run sleeps")
    worker.add_argument("--jobs", type=int, default=1, help="identical jobs (NAME-0 ...)")
    worker.add_argument("--clock-skew-ms", type=int, default=0, help="shift the scheduler's clock")
    worker.add_argument("--scheduler-option", type=_key_value, action="append", default=[])
    worker.add_argument("--job-option", type=_key_value, action="append", default=[])
    worker.add_argument("--log-level", default="WARNING")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``worker`` runs one fleet process. Returns the exit status."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with open(args.out, "a", buffering=1) as out:
        asyncio.run(_work(args, out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
