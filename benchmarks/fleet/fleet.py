"""P processes x J interval jobs due together, on every store: what a due slot costs end to end.

    (cd packages/anarchon && uv run --frozen --no-sync maturin develop --uv --release)
    uv run --frozen --no-sync python benchmarks/fleet/fleet.py                  # both shapes, 4 stores
    uv run --frozen --no-sync python benchmarks/fleet/fleet.py --stores redis --shapes 1x10000@10
    uv run --frozen --no-sync python benchmarks/fleet/fleet.py --quick --stores sqlite --no-peer

Each of ``P`` OS processes (``fleet_worker.py``) declares the same ``J`` jobs
``every(I)`` with ``jitter=0`` on one store, so every job falls due at the
same instant and start lateness (handler start minus slot) is pure overhead.
After every process runs, one burst warms up, then ``--window`` seconds of
slots are measured. Printed per store and shape (see benchmarks/README.md for
the method):

- job-slots/s run, client CPU per job-slot per process, start lateness p50 /
  p99 / max, store round trips per job-slot (and the store's own figures:
  Redis commands and server µs from ``INFO commandstats``, PostgreSQL
  transactions and statement time), duplicates and missed slots, warnings;
- (a) the reference claim on the same server: the backend's batch claim and
  the raw claim through the same driver, batched and single
  (``fleet_raw.py``);
- (b) on PostgreSQL, the peer APScheduler 4.0.0a6 (SQLAlchemy data store,
  asyncpg event broker), 2 processes x J schedules, in a virtual environment
  of its own (``--peer-venv``, created with ``uv`` on first use);
- ratios: anarchon vs raw, anarchon vs APScheduler.

``--observe [PARTS]`` runs every anarchon fleet a second time with the
worker's ``--observe PARTS`` (a comma list of ``prometheus`` - the default -,
``otel`` and ``callbacks``: a sync and an async ``scheduler.on()`` callback
for every kind; the fleet registry is on in both runs, refreshed every
120 s) and prints the with/without ratio of CPU per job-slot and of lateness p99 (issue target:
within 10 %).
``--no-gc-freeze``: the workers' schedulers do not freeze the objects alive
at start (``Scheduler(gc_freeze=False)``, the behaviour before it existed).
``--claim-ahead S``: the workers' ``Scheduler(claim_ahead=S)`` (lease backends;
0 claims at the fire time, the behaviour before it existed).
``--candidates K``: the workers' ``Scheduler(candidates=K)``; ``none`` makes
every process claim every job-slot (docs/scaling.md, "Candidates").

Shapes are ``PxJ@I`` (processes x jobs @ seconds). ``--quick``: 2x200@1,
4 s window, small references: a smoke run for tests (``--json`` writes every
figure to a file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fleet_counting

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import ratio
from fleet_common import Tally, aligned_start, read_plan, window_slots, write_result
from fleet_raw import Side, reference, store_side_batch_ops
from fleet_stores import KINDS, PostgresStore, Store, open_store

HERE = Path(__file__).resolve().parent
DEFAULT_SHAPES = ("1x10000@10", "4x5000@5")
QUICK_SHAPE = "2x200@1"
PEER_VERSION = "4.0.0a6"
PEER_REQUIREMENTS = (
    f"apscheduler=={PEER_VERSION}",
    "anyio==4.4.0",  # a6 fails with current anyio
    "sqlalchemy[asyncio]>=2",
    "asyncpg",
)
PEER_PROCESSES = 2
DEFAULT_PEER_JOBS = 1000
"""APScheduler 4 added about 25 schedules per second on the loaded 2-core VM: 10,000 took minutes."""
DEFAULT_PEER_VENV = Path.home() / ".cache" / "anarchon-bench" / "apscheduler4"


@dataclass(frozen=True)
class Shape:
    """``processes`` OS processes, each with the same ``jobs`` jobs every ``every_s``."""

    processes: int
    jobs: int
    every_s: float

    @classmethod
    def parse(cls, text: str) -> Shape:
        match = re.fullmatch(
            r"\s*(\d+)\s*[x\u00d7]\s*([\d_,]+)\s*@\s*(\d+(?:\.\d+)?)\s*s?\s*", text
        )
        if not match:
            raise argparse.ArgumentTypeError(f"a shape is PxJ@I (e.g. 4x5000@5), got {text!r}")
        processes, jobs = int(match[1]), int(match[2].replace("_", "").replace(",", ""))
        every = float(match[3])
        if processes < 1 or jobs < 1 or every <= 0:
            raise argparse.ArgumentTypeError(f"shape {text!r}: every part must be positive")
        return cls(processes, jobs, every)

    def __str__(self) -> str:
        return f"{self.processes}x{self.jobs}@{self.every_s:g}s"


@dataclass
class FleetFigures:
    """What one fleet run measured (anarchon or the peer)."""

    store: str
    shape: str
    side: str
    processes: int
    jobs: int
    every_s: float
    window_slots: int
    expected: int = 0
    distinct: int = 0
    duplicates: int = 0
    missed: int = 0
    slots_per_s: float = 0.0
    offered_per_s: float = 0.0
    cpu_us_per_slot: list[float] = field(default_factory=list)
    """Per process: its CPU in the window / job-slots due in the window."""
    lateness_ms: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    store_figures: dict[str, float] = field(default_factory=dict)
    warnings: int = 0
    warning_sample: list[str] = field(default_factory=list)
    error: str = ""
    load: str = ""
    starts_recorded: int = 0
    """Every handler start the processes recorded, in the window or not (warm-up, drain)."""
    starts_before: int = 0
    """Starts of slots before the window (the warm-up burst and earlier)."""
    starts_after: int = 0
    """Starts of slots after the window (during the drain)."""
    startup_s: float = math.nan
    """The slowest process: from its start to its scheduler running (jobs declared, store ready)."""
    stop_s: float = math.nan
    """The slowest process: its scheduler's ``stop()``."""

    @property
    def cpu_us(self) -> float:
        """Mean over the processes of client CPU µs per job-slot."""
        values = self.cpu_us_per_slot
        return sum(values) / len(values) if values else math.nan

    @property
    def run_share(self) -> float:
        """Share of the window's job-slots that started."""
        return self.distinct / self.expected if self.expected else math.nan


# ----------------------------------------------------------------------------- one fleet run


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def _sleep_until(at: float) -> None:
    delay = at - time.time()
    if delay > 0:
        time.sleep(delay)


def run_fleet(
    store: Store,
    url: str,
    shape: Shape,
    *,
    side: str,
    python: str,
    worker: Path,
    window_s: float,
    ready_timeout_s: float,
    workdir: Path,
    drain_s: float,
    first_alone: bool = False,
    stop_wait_s: float = 20.0,
    extra_args: tuple[str, ...] = (),
) -> FleetFigures:
    """Start ``shape.processes`` workers on ``url``, measure one window, and tally it.

        The processes stop ``max(drain_s, I)`` after the window's last slot (less
        5 % of ``I``, before the next burst): a slot of the window not started by
        then counts as missed. Each process writes its result before its
    scheduler's ``stop()``; one still stopping ``stop_wait_s`` later is killed
    (and said so). ``first_alone``: start the others only once the first runs (APScheduler 4
        creates its schema without guarding against a concurrent creator).
    """
    every_ms = round(shape.every_s * 1000)
    count = max(1, math.ceil(window_s / shape.every_s))
    figures = FleetFigures(
        store.label, str(shape), side, shape.processes, shape.jobs, shape.every_s, count
    )
    workdir.mkdir(parents=True, exist_ok=True)
    plan_path = workdir / "plan.json"
    outs = [workdir / f"p{i}.json" for i in range(shape.processes)]
    logs = [workdir / f"p{i}.log" for i in range(shape.processes)]
    procs: list[subprocess.Popen[bytes]] = []
    deadline = time.time() + ready_timeout_s

    def wait_ready(count: int) -> None:
        while not all(Path(f"{out}.ready").exists() for out in outs[:count]):
            dead = [i for i, p in enumerate(procs) if p.poll() is not None]
            if dead:
                tail = logs[dead[0]].read_text(errors="replace")[-3000:]
                raise RuntimeError(f"process {dead[0]} exited at start:\n{tail}")
            if time.time() > deadline:
                raise RuntimeError(f"the processes were not running within {ready_timeout_s:g} s")
            time.sleep(0.05)

    try:
        for i, (out, log) in enumerate(zip(outs, logs, strict=True)):
            if i == 1 and first_alone:
                wait_ready(1)
            with open(log, "wb") as err:
                procs.append(
                    subprocess.Popen(
                        [
                            python,
                            str(worker),
                            "--kind",
                            store.kind,
                            "--url",
                            url,
                            "--jobs",
                            str(shape.jobs),
                            "--every-ms",
                            str(every_ms),
                            "--instance",
                            f"{side[:3]}-p{i}",
                            "--plan",
                            str(plan_path),
                            "--out",
                            str(out),
                            *extra_args,
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        cwd=str(HERE.parents[1]),
                    )
                )
        wait_ready(len(outs))
        first = aligned_start(time.time(), 0.5, shape.every_s)  # one warm-up burst before
        samples = [first - shape.every_s / 2, first + count * shape.every_s - shape.every_s / 2]
        last = first + (count - 1) * shape.every_s
        stop = last + max(drain_s, shape.every_s) - 0.05 * shape.every_s
        write_result(str(plan_path), {"samples": samples, "stop": stop})
        assert read_plan(str(plan_path)) is not None
        _sleep_until(samples[0])
        before = store.snapshot()
        _sleep_until(samples[1])
        after = store.snapshot()
        figures.load = _load()
        written = stop + 60
        while not all(out.exists() for out in outs):
            failed = [
                i for i, p in enumerate(procs) if p.poll() is not None and not outs[i].exists()
            ]
            if failed or time.time() > written:
                i = failed[0] if failed else 0
                tail = logs[i].read_text(errors="replace")[-3000:]
                raise RuntimeError(f"process {i} wrote no result ({procs[i].poll()}):\n{tail}")
            time.sleep(0.05)
        results = [json.loads(out.read_text()) for out in outs]
        stopped = time.time() + stop_wait_s
        for i, proc in enumerate(procs):
            try:
                proc.wait(timeout=max(0.1, stopped - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
                figures.error += f"process {i} had not stopped {stop_wait_s:g} s later (killed); "
        for i, (proc, out) in enumerate(zip(procs, outs, strict=True)):
            done = Path(f"{out}.stopped")
            if done.exists():
                results[i]["stopped"] = float(done.read_text())
            elif proc.returncode != 0 and not figures.error:
                tail = logs[i].read_text(errors="replace")[-3000:]
                figures.error += f"process {i} exited with {proc.returncode}: {tail[-300:]}; "
    except BaseException:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        raise
    every_int = round(shape.every_s * 1000)
    tally = Tally(shape.jobs, window_slots(round(first * 1000), count, every_int))
    client: dict[str, float] = {}
    for result in results:
        tally.add(result["starts"])
        s0, s1 = result["samples"][0], result["samples"][-1]
        figures.cpu_us_per_slot.append((s1["cpu"] - s0["cpu"]) * 1e6 / tally.expected)
        for key, value in s1["counters"].items():
            client[key] = client.get(key, 0.0) + value - s0["counters"].get(key, 0.0)
    figures.starts_recorded = sum(len(r["starts"]) for r in results)
    window_first, window_last = tally.slots[0], tally.slots[-1]
    figures.starts_before = sum(1 for r in results for s in r["starts"] if s[1] < window_first)
    figures.starts_after = sum(1 for r in results for s in r["starts"] if s[1] > window_last)
    figures.startup_s = max(r["ready"] - r["began"] for r in results)
    figures.stop_s = max(r.get("stopped", math.inf) - r["stopping"] for r in results)
    figures.expected, figures.distinct = tally.expected, tally.distinct
    figures.duplicates, figures.missed = tally.duplicates, tally.missed
    figures.slots_per_s = tally.distinct / (count * shape.every_s)
    figures.offered_per_s = shape.jobs / shape.every_s
    figures.lateness_ms = tally.lateness()
    figures.store_figures = store.figures(before, after, client, tally.expected)
    keep = os.environ.get("FLEET_KEEP_LOGS")
    if keep:
        for n, log in enumerate(logs):
            shutil.copy(log, Path(keep) / f"{shape.processes}x{shape.jobs}-{n}.log")
    lines = [
        line
        for log in logs
        for line in log.read_text(errors="replace").splitlines()
        if line.strip() and not line.startswith(" ")
    ]
    figures.warnings = len(lines)
    figures.warning_sample = lines[:3]
    return figures


# ----------------------------------------------------------------------------- the peer


def peer_python(venv: Path) -> str:
    """The peer venv's interpreter, creating the venv (``uv``) when it lacks APScheduler 4."""
    python = venv / "bin" / "python"
    check = [
        str(python),
        "-c",
        "import apscheduler, importlib.metadata as m;"
        " print(m.version('apscheduler'), m.version('anyio'))",
    ]
    if python.exists():
        done = subprocess.run(check, capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.split() == [PEER_VERSION, "4.4.0"]:
            return str(python)
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("uv is needed to create the peer's virtual environment")
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [uv, "venv", "--python", sys.executable, str(venv)], check=True, capture_output=True
    )
    subprocess.run(
        [uv, "pip", "install", "--python", str(python), *PEER_REQUIREMENTS],
        check=True,
        capture_output=True,
    )
    return str(python)


# ----------------------------------------------------------------------------- printing


def _f(value: float, digits: int = 0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else (f"{value:,.0f}" if value >= 100 else f"{value:.1f}")


HEADER = (
    f"{'side':<34} {'slots/s':>9} {'CPU µs/slot':>12} {'p50 ms':>8} {'p99 ms':>8}"
    f" {'max ms':>8} {'rt/slot':>8} {'srv µs/slot':>11} {'dup':>5} {'missed':>7} {'warn':>5}"
)


def print_fleet(f: FleetFigures) -> None:
    if f.error and not f.expected:
        print(f"{f.side:<34} {f.error}", flush=True)
        return
    p50, p99, top = f.lateness_ms
    sf = f.store_figures
    label = f.side if f.side == "anarchon" else f"{f.side} ({f.run_share:.0%} run)"
    print(
        f"{label:<34} {_f(f.slots_per_s):>9} {_f(f.cpu_us):>12} {_ms(p50):>8} {_ms(p99):>8}"
        f" {_ms(top):>8} {_f(sf.get('round_trips', math.nan), 2):>8}"
        f" {_f(sf.get('server_us', math.nan), 1):>11} {f.duplicates:>5} {f.missed:>7}"
        f" {f.warnings:>5}",
        flush=True,
    )
    extra = ", ".join(
        f"{k} {v:.2f}" for k, v in sf.items() if k not in ("round_trips", "server_us")
    )
    per_proc = " ".join(_f(v) for v in f.cpu_us_per_slot)
    print(
        f"{'':<4}{f.expected:,} job-slots due in {f.window_slots} slots ({f.offered_per_s:,.0f}/s"
        f" offered); CPU µs/slot per process: {per_proc}{'; ' + extra if extra else ''};"
        f" {f.starts_recorded:,} starts recorded in all ({f.starts_before:,} of earlier slots,"
        f" {f.starts_after:,} of later ones); start-up {f.startup_s:.1f} s, stop"
        f" {f'{f.stop_s:.1f} s' if math.isfinite(f.stop_s) else 'not done (killed)'}; {f.load}",
        flush=True,
    )
    for line in f.warning_sample:
        print(f"{'':<4}stderr: {line[:150]}", flush=True)
    if f.error:
        print(f"{'':<4}note: {f.error}", flush=True)


def print_side(side: Side) -> None:
    label = f"{side.name}"
    if side.error and not side.items:
        print(f"{label:<34} {side.error}  [{side.how}]", flush=True)
        return
    print(
        f"{label:<34} {_f(side.rate):>9} {_f(side.cpu_us):>12} {'':>8} {'':>8} {'':>8}"
        f" {_f(side.figures.get('round_trips', math.nan), 2):>8}"
        f" {_f(side.figures.get('server_us', math.nan), 1):>11}"
        f"   {side.items:,} claims; {side.how}",
        flush=True,
    )
    if side.error:
        print(f"{'':<4}note: {side.error}", flush=True)


def print_ratios(fleet: FleetFigures | None, sides: list[Side]) -> dict[str, float]:
    """anarchon vs the raw claim; returns them by name."""
    by = {s.name: s for s in sides if s.items}
    out: dict[str, float] = {}
    backend, batched = by.get("backend"), by.get("raw batched")
    if backend and batched:
        out["backend_vs_raw_batched_rate"] = ratio(backend.rate, batched.rate)
    if fleet is not None and batched:
        out["fleet_cpu_vs_raw_batched_cpu"] = ratio(fleet.cpu_us, batched.cpu_us)
    if fleet is not None and by.get("raw single"):
        out["fleet_cpu_vs_raw_single_cpu"] = ratio(fleet.cpu_us, by["raw single"].cpu_us)
    if out:
        text = []
        if "backend_vs_raw_batched_rate" in out:
            v = out["backend_vs_raw_batched_rate"]
            text.append(f"backend claim_many / raw batched (claims/s) = {v:.0%} (target >= 70 %)")
        if "fleet_cpu_vs_raw_batched_cpu" in out:
            text.append(
                f"anarchon CPU per job-slot / raw batched CPU per claim ="
                f" {out['fleet_cpu_vs_raw_batched_cpu']:.1f}x"
            )
        if "fleet_cpu_vs_raw_single_cpu" in out:
            text.append(f"/ raw single = {out['fleet_cpu_vs_raw_single_cpu']:.1f}x")
        print("ratios: " + "; ".join(text), flush=True)
    return out


# ----------------------------------------------------------------------------- main


def build_note() -> str:
    """Whether ``anarchon._core`` is a release build (no DWARF debug info)."""
    try:
        from anarchon import _core
        from slots import elf_sections

        path = Path(_core.__file__ or "")
        debug = ".debug_info" in elf_sections(path)
    except Exception as error:  # informative only
        return f"build: unknown ({error})"
    if debug:
        return (
            "build: DEBUG (dev profile) - figures NOT representative; build a release:"
            " (cd packages/anarchon && uv run --frozen --no-sync maturin develop --uv --release)"
        )
    return "build: release"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--stores",
        default="redis,postgres,sqlite,nats",
        help=f"comma-separated, of {', '.join(KINDS)} (memory: 1 process only)",
    )
    parser.add_argument("--shapes", nargs="+", type=Shape.parse, help="PxJ@I ...")
    parser.add_argument(
        "--candidates", help="workers use Scheduler(candidates=K); none: every instance claims"
    )
    parser.add_argument("--window", type=float, help="measured seconds per run (default 40)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SHAPE}, 4 s, small refs")
    parser.add_argument(
        "--observe",
        nargs="?",
        const="prometheus",
        help="also run with metrics/callbacks on: prometheus (the default), otel, callbacks",
    )
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="workers use Scheduler(gc_freeze=False) (the collector walks every object)",
    )
    parser.add_argument(
        "--claim-ahead", type=float, help="workers use Scheduler(claim_ahead=S) (seconds)"
    )
    parser.add_argument("--no-raw", action="store_true", help="skip the claim reference (a)")
    parser.add_argument("--no-peer", action="store_true", help="skip APScheduler 4 (b)")
    parser.add_argument("--peer-only", action="store_true", help="only APScheduler 4 (b)")
    parser.add_argument("--peer-venv", type=Path, default=DEFAULT_PEER_VENV)
    parser.add_argument(
        "--peer-jobs",
        type=int,
        default=DEFAULT_PEER_JOBS,
        help=f"cap on the peer's J (default {DEFAULT_PEER_JOBS}: it adds ~25 schedules/s here)",
    )
    parser.add_argument("--chunk", type=int, default=500, help="reference batch size")
    parser.add_argument("--raw-items", type=int, help="reference claims per side and round")
    parser.add_argument("--raw-seconds", type=float, help="reference time bound per side/round")
    parser.add_argument("--ready-timeout", type=float, default=180.0)
    parser.add_argument(
        "--drain",
        type=float,
        help="seconds after the last slot a start still counts (default 10; quick 2; >= I)",
    )
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args(argv)
    args.kinds = [k.strip() for k in args.stores.split(",") if k.strip()]
    unknown = [k for k in args.kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown store(s) {unknown} (known: {', '.join(KINDS)})")
    if args.shapes is None:
        args.shapes = (
            [Shape.parse(QUICK_SHAPE)] if args.quick else [Shape.parse(s) for s in DEFAULT_SHAPES]
        )
    if args.window is None:
        args.window = 4.0 if args.quick else 40.0
    if args.drain is None:
        args.drain = 2.0 if args.quick else 10.0
    if args.raw_seconds is None:
        args.raw_seconds = 1.0 if args.quick else 2.0
    if "memory" in args.kinds and any(s.processes > 1 for s in args.shapes):
        parser.error("memory:// is one store per process: use shapes with 1 process")
    return args


def _failed(store: Store, shape: Shape, side: str, error: Exception) -> FleetFigures:
    return FleetFigures(
        store.label,
        str(shape),
        side,
        shape.processes,
        shape.jobs,
        shape.every_s,
        0,
        error=f"failed: {error}",
    )


def bench_anarchon(
    args: argparse.Namespace,
    store: Store,
    url: str,
    shape: Shape,
    workdir: Path,
    *,
    observe: str | None = None,
) -> FleetFigures:
    """The anarchon fleet of ``shape`` on ``url``, printed (``observe``: the worker's parts on)."""
    side = f"anarchon + {observe}" if observe else "anarchon"
    try:
        fleet = run_fleet(
            store,
            url,
            shape,
            side=side,
            extra_args=(("--observe", observe) if observe else ())
            + (("--no-gc-freeze",) if args.no_gc_freeze else ())
            + (("--claim-ahead", str(args.claim_ahead)) if args.claim_ahead is not None else ())
            + (("--candidates", args.candidates) if args.candidates is not None else ()),
            python=sys.executable,
            worker=HERE / "fleet_worker.py",
            window_s=args.window,
            ready_timeout_s=args.ready_timeout,
            drain_s=args.drain,
            workdir=workdir,
        )
    except Exception as error:
        fleet = _failed(store, shape, side, error)
    print_fleet(fleet)
    return fleet


def print_observe_ratios(plain: FleetFigures, observed: FleetFigures) -> dict[str, float]:
    """With/without events, metrics and registry: CPU per job-slot and lateness p99."""
    out = {
        "observe_cpu_ratio": ratio(observed.cpu_us, plain.cpu_us),
        "observe_p99_ratio": ratio(observed.lateness_ms[1], plain.lateness_ms[1]),
    }
    print(
        f"ratios: with events/metrics / without: CPU per job-slot"
        f" {out['observe_cpu_ratio']:.2f}x, lateness p99 {out['observe_p99_ratio']:.2f}x"
        " (target <= 1.10x)",
        flush=True,
    )
    return out


def bench_reference(
    args: argparse.Namespace, store: Store, url: str, shape: Shape, fleet: FleetFigures | None
) -> dict[str, Any]:
    """(a): the backend's batch claim and the raw claims on ``url``, printed, with ratios."""
    items = args.raw_items or (min(shape.jobs, 500) if args.quick else shape.jobs)
    sides = asyncio.run(reference(store, url, items, args.chunk, args.raw_seconds))
    for side in sides:
        print_side(side)
    ops = store_side_batch_ops(store.kind, url)
    print(f"store-side claim code of the installed backend: {ops}", flush=True)
    return {
        "store_side_ops": ops,
        "reference": [asdict(s) | {"rate": s.rate, "cpu_us": s.cpu_us} for s in sides],
        "ratios": print_ratios(fleet, sides),
    }


def bench_peer(
    args: argparse.Namespace,
    store: PostgresStore,
    shape: Shape,
    n: int,
    python: str,
    workdir: Path,
    fleet: FleetFigures | None,
) -> tuple[FleetFigures, dict[str, float]]:
    """(b): APScheduler 4 with ``PEER_PROCESSES`` processes on a database of its own, printed."""
    peer_shape = Shape(PEER_PROCESSES, min(shape.jobs, args.peer_jobs), shape.every_s)
    if peer_shape.jobs < shape.jobs:
        print(
            f"peer: {peer_shape} (J capped by --peer-jobs: APScheduler 4"
            " adds schedules one transaction at a time)",
            flush=True,
        )
    side = f"APScheduler {PEER_VERSION} {peer_shape.processes}p"
    try:
        aps = run_fleet(
            store,
            store.new_database(f"peer_{n}"),
            peer_shape,
            side=side,
            python=python,
            worker=HERE / "fleet_apscheduler.py",
            window_s=args.window,
            ready_timeout_s=args.ready_timeout,
            drain_s=args.drain,
            workdir=workdir,
            first_alone=True,
        )
    except Exception as error:
        aps = _failed(store, peer_shape, side, error)
    print_fleet(aps)
    ratios: dict[str, float] = {}
    if fleet is not None and aps.expected and fleet.expected:
        ratios["fleet_cpu_vs_peer_cpu"] = r = ratio(fleet.cpu_us, aps.cpu_us)
        print(
            f"ratios: anarchon CPU per job-slot / APScheduler's = {r:.2f};"
            f" slots run: anarchon {fleet.run_share:.1%}, APScheduler {aps.run_share:.1%}",
            flush=True,
        )
    return aps, ratios


def bench_store(
    args: argparse.Namespace, kind: str, peer: str | None, tmp: Path
) -> list[dict[str, Any]]:
    """Every shape on one store (its server started and stopped here)."""
    entries: list[dict[str, Any]] = []
    store = open_store(kind)
    try:
        print(f"\n== {store.label}; round trips = {store.round_trips_are}", flush=True)
        for n, shape in enumerate(args.shapes):
            print(
                f"-- {shape}: {shape.processes} processes x {shape.jobs:,} jobs"
                f" every {shape.every_s:g} s, window {args.window:g} s",
                flush=True,
            )
            print(HEADER, flush=True)
            entry: dict[str, Any] = {"store": kind, "label": store.label, "shape": str(shape)}
            fleet: FleetFigures | None = None
            url = store.url()
            if not args.peer_only:
                fleet = bench_anarchon(args, store, url, shape, tmp / f"{kind}-{n}")
                entry["anarchon"] = asdict(fleet) | {"cpu_us": fleet.cpu_us}
                if args.observe:
                    observed = bench_anarchon(
                        args,
                        store,
                        store.url(),
                        shape,
                        tmp / f"{kind}-{n}-observe",
                        observe=args.observe,
                    )
                    entry["anarchon_observe"] = asdict(observed) | {"cpu_us": observed.cpu_us}
                    entry.setdefault("ratios", {}).update(print_observe_ratios(fleet, observed))
                if not args.no_raw and kind != "memory":
                    reference_entry = bench_reference(args, store, url, shape, fleet)
                    ratios_so_far = entry.get("ratios", {})
                    entry |= reference_entry
                    entry["ratios"] = {**ratios_so_far, **reference_entry["ratios"]}
            if peer is not None and isinstance(store, PostgresStore):
                aps, ratios = bench_peer(args, store, shape, n, peer, tmp / f"peer-{n}", fleet)
                entry["peer"] = asdict(aps) | {"cpu_us": aps.cpu_us}
                entry.setdefault("ratios", {}).update(ratios)
            entries.append(entry)
    finally:
        store.stop()
    return entries


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        f"anarchon fleet benchmark; {build_note()}; python {sys.version.split()[0]};"
        f" {os.cpu_count()} CPUs; {_load()}",
        flush=True,
    )
    fleet_counting.install("redis")  # the reference sides run in this process
    fleet_counting.install("sqlite")
    peer: str | None = None
    if "postgres" in args.kinds and not args.no_peer:
        try:
            peer = peer_python(args.peer_venv)
        except Exception as error:
            print(f"peer APScheduler {PEER_VERSION}: no venv ({error})", flush=True)
    report: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="anarchon-fleet-") as tmp:
        for kind in args.kinds:
            report += bench_store(args, kind, peer, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
