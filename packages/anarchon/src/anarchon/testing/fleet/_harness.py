"""Start a fleet's processes (:class:`FleetSpec`, :class:`Fleet`) and wait for what they record."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from anarchon.backend import Backend
from anarchon.backend.registry import resolve_backend
from anarchon.testing.fleet._records import (
    EDGE_SLOTS,
    STDERR_TAIL,
    FleetResult,
    job_names,
    parse_records,
)
from anarchon.types import RunRecord

__all__ = ["Fleet", "FleetSpec", "read_history", "run_fleet", "start_fleet"]

_WORKER = "import sys; from anarchon.testing.fleet import main; sys.exit(main())"
"""How the harness starts a worker: like ``python -m anarchon.testing.fleet`` but without
runpy's warning about a module that its package already imported."""


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


@dataclass(frozen=True, kw_only=True)
class FleetSpec:
    """What a fleet runs: the arguments of :func:`start_fleet` and :func:`run_fleet`.

    - ``backend``: the store's URL, or ``factory`` (``"module:function"``,
      called with the keywords ``factory_args``, values JSON-able) for a
      backend built in code. Each process builds its own.
    - ``tmp_path``: where the processes' record and stderr files go.
    - ``processes``: how many; ``window_s``: how long they all run together;
      ``startup_s``: how long the processes may take to start.
    - ``every_ms``, ``jitter_ms``: the interval job; ``handler_ms``: how long
      each run's handler sleeps after recording the run.
    - ``job``: the job name (default: a unique ``fleet-<hex>``).
    - ``scheduler_options``: keywords of each ``Scheduler`` (``lease``,
      ``heartbeat``; ``stop_grace`` defaults to 2 s); ``job_options``:
      keywords of ``every()`` (``overlap``, ``max_attempts``...).
    - ``log_level``: the workers' log level (their log is in ``FleetResult.stderr``).
    - ``env``: the processes' environment (default: this one's).
    - ``jobs``: identical jobs per process (``<job>-0`` ...; each checked).
    - ``clock_skews_ms``: process ``i`` runs with its clock shifted by
      ``clock_skews_ms[i % len]`` ms (:class:`~anarchon.clock.SkewedClock`).
    """

    backend: str | None = None
    tmp_path: Path | str
    factory: str | None = None
    factory_args: Mapping[str, object] | None = None
    processes: int = 8
    window_s: float = 20.0
    startup_s: float = 8.0
    every_ms: int = 200
    jitter_ms: int = 50
    handler_ms: int = 0
    job: str | None = None
    scheduler_options: Mapping[str, object] | None = None
    job_options: Mapping[str, object] | None = None
    log_level: str = "WARNING"
    env: Mapping[str, str] | None = None
    jobs: int = 1
    clock_skews_ms: Sequence[int] | None = None

    @property
    def margin_s(self) -> float:
        """The time a fleet runs beyond its window: slots at both edges are not checked."""
        return 2.0 + 2 * EDGE_SLOTS * self.every_ms / 1000

    def start(self) -> Fleet:
        """Start the processes and return at once (:func:`start_fleet`)."""
        if (self.backend is None) == (self.factory is None):
            raise ValueError("give either a backend URL or a factory 'module:function'")
        if self.processes < 1 or self.every_ms < 1 or self.window_s <= 0 or self.jobs < 1:
            raise ValueError("processes, every_ms, window_s and jobs must be positive")
        skews = list(self.clock_skews_ms or [0])
        if not skews:
            raise ValueError("clock_skews_ms must not be empty")
        job = self.job or f"fleet-{uuid.uuid4().hex[:8]}"
        tmp = Path(self.tmp_path)
        tmp.mkdir(parents=True, exist_ok=True)
        until_ms = int((time.time() + self.startup_s + self.window_s + self.margin_s) * 1000)
        until_file = tmp / "until.txt"
        until_file.unlink(missing_ok=True)
        common = [
            *(
                ["--backend", self.backend]
                if self.backend is not None
                else ["--factory", str(self.factory)]
            ),
            *["--job", job, "--until-ms", str(until_ms), "--until-file", str(until_file)],
            *["--every", f"{self.every_ms}ms", "--jitter", f"{self.jitter_ms}ms"],
            *["--handler-ms", str(self.handler_ms), "--log-level", self.log_level],
            *["--jobs", str(self.jobs)],
            *_options("--factory-arg", self.factory_args),
            *_options("--scheduler-option", self.scheduler_options),
            *_options("--job-option", self.job_options),
        ]
        child_env = dict(os.environ if self.env is None else self.env)
        if self.factory is not None:  # the factory's module may sit next to the tests
            paths = [p for p in sys.path if p] + [child_env.get("PYTHONPATH", "")]
            child_env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        outs = [tmp / f"worker-{i}.txt" for i in range(self.processes)]
        errs = [tmp / f"worker-{i}.err" for i in range(self.processes)]
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
            every_ms=self.every_ms,
            window_s=self.window_s,
            until_ms=until_ms,
            jobs=self.jobs,
            until_file=until_file,
        )

    def run(self, reader: Backend | str | None = None, check: bool = True) -> FleetResult:
        """Start the processes, wait for them and check exactly once (:func:`run_fleet`)."""
        with self.start() as fleet:
            fleet.end_after_start(self.startup_s, self.margin_s)
            result = fleet.wait(reader=reader)
        if check:
            result.assert_exactly_once()
        return result


def start_fleet(backend: str | None = None, **spec: Any) -> Fleet:
    """Start the fleet's processes and return at once; ``spec``: the fields of :class:`FleetSpec`.

    The processes run until ``startup_s + window_s`` seconds from now plus a
    margin, so that all of them run together for at least ``window_s`` if they
    start within ``startup_s``. Each writes ``worker-<i>.txt`` (its records) and
    ``worker-<i>.err`` (its stderr) in ``tmp_path``; its instance id is ``proc-<i>``.
    """
    return FleetSpec(backend=backend, **spec).start()


def run_fleet(
    backend: str | None = None,
    *,
    reader: Backend | str | None = None,
    check: bool = True,
    **spec: Any,
) -> FleetResult:
    """Run ``processes`` schedulers on one store for ``window_s`` together; check exactly once.

    ``backend`` and ``spec`` (``tmp_path`` is required) are the fields of
    :class:`FleetSpec`; besides them:

    - ``reader``: a backend (or URL) on the same store to read the history
      with; ``None`` skips the history checks.
    - ``check``: call :meth:`FleetResult.assert_exactly_once` before returning.

    The fleet ends ``window_s`` (plus a margin for the edge slots) after its
    last process started (:meth:`Fleet.end_after_start`). Processes still
    running 40 s after the fleet's end are killed (and fail the check).
    Returns the :class:`FleetResult`.
    """
    return FleetSpec(backend=backend, **spec).run(reader=reader, check=check)
