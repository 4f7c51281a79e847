"""Slot-engine benchmark: anarchon against croniter and croniter-rs, in one run.

Prints three tables:

(a) ns per next slot for the ten expressions of shared/notes/cron-libraries.md
    (``Cron.next_after`` per call from Python, croniter ``get_next(float)``,
    croniter-rs ``get_next(float)``), with the ratios anarchon-vs-croniter and
    anarchon-vs-croniter-rs;
(b) the next slot of 100,000 jobs (mixed expressions and zones): one
    ``_core.next_after_many`` call against croniter and croniter-rs called per job;
(c) a 100,000-job ``_core.Timetable``: time per wake-up when few jobs are due,
    a full scan (``scan_due_count``) for comparison, and the resident memory.

Targets (informative, PASS/MISS): >= 50x croniter and no slower than croniter-rs
per call; batch of 100k < 50 ms; wake-up < 1 ms; 100k jobs < 150 MB.

Run it against a RELEASE build of the engine (``uv run`` builds a debug one):

    cd packages/anarchon && uv run --no-sync maturin develop --uv --release && cd ../.. \\
        && uv run --no-sync python benchmarks/engine/slots.py

``--quick`` runs croniter on 10,000 jobs instead of 100,000 in (b) and
extrapolates (and shortens the other loops). The next plain ``uv run`` puts the
debug build back by itself.

croniter-rs has no time zones (it drops tzinfo and works on wall-clock time), so
its figures for the New York expressions are for naive wall-clock times.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

import anarchon
import croniter_rs
import psutil
from _common import elf_sections, table
from anarchon import Cron, Every, _core
from croniter import croniter

UTC = "UTC"
NY = "America/New_York"


@dataclass(frozen=True)
class Expr:
    label: str
    expression: str
    tz: str
    count: int  # consecutive next slots per measurement

    @property
    def six(self) -> bool:
        return len(self.expression.split()) == 6


EXPRESSIONS = [
    Expr("every min", "* * * * *", UTC, 10_000),
    Expr("*/5", "*/5 * * * *", UTC, 10_000),
    Expr("daily", "0 3 * * *", UTC, 10_000),
    Expr("weekdays", "0 9 * * 1-5", UTC, 10_000),
    Expr("list+step", "15,45 */2 * * *", UTC, 10_000),
    Expr("monthly", "0 0 1 * *", UTC, 10_000),
    Expr("Feb 29", "0 0 29 2 *", UTC, 500),  # 10,000 would pass year 9999
    Expr("NY gap", "30 2 * * 0", NY, 10_000),
    Expr("NY fold", "30 1 * * *", NY, 10_000),
    Expr("6-field", "*/10 * * * * *", UTC, 10_000),
]

ZONES = [UTC, NY, "Europe/Athens", "Australia/Lord_Howe", "Europe/London", "Asia/Kolkata"]
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
START_MS = int(START.timestamp() * 1000)
JOBS = 100_000

TARGET_VS_CRONITER = 50.0
TARGET_VS_CRONITER_RS = 1.0
TARGET_BATCH_MS = 50.0
TARGET_WAKEUP_MS = 1.0
TARGET_MEMORY_MB = 150.0


# --------------------------------------------------------------------------- helpers


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def fmt_ns(ns: float) -> str:
    return f"{ns:,.0f}"


def fmt_ratio(x: float) -> str:
    return f"{x:,.1f}x"


def best_of(repeats: int, fn: Callable[[], float]) -> float:
    """The fastest of ``repeats`` runs of ``fn`` (which returns seconds)."""
    return min(fn() for _ in range(repeats))


def rss_bytes() -> int:
    return int(psutil.Process().memory_info().rss)


def check_build() -> bool:
    """Warn loudly when the extension looks like a debug (dev profile) build."""
    path = Path(_core.__file__ or "")
    debug_info = ".debug_info" in elf_sections(path) if path.is_file() else False
    every = Every("10s")
    calls = 200_000

    def run() -> float:
        f = every.next_after
        t0 = time.perf_counter()
        for i in range(calls):
            f(i)
        return time.perf_counter() - t0

    per_call_ns = best_of(3, run) / calls * 1e9
    size_mb = path.stat().st_size / 1e6 if path.is_file() else 0.0
    print(f"anarchon {anarchon.__version__}: {path} ({size_mb:.1f} MB)")
    print(f"Every.next_after: {per_call_ns:.0f} ns per call; DWARF debug info: {debug_info}")
    slow = per_call_ns > 350
    if debug_info or slow:
        bar = "!" * 78
        print(
            f"\n{bar}\n"
            "WARNING: anarchon._core looks like a DEBUG (dev profile) build "
            f"({'debug info present' if debug_info else ''}"
            f"{', ' if debug_info and slow else ''}"
            f"{'slow calls' if slow else ''}).\n"
            "The figures below are NOT representative. Build a release first:\n"
            "  cd packages/anarchon && uv run --no-sync maturin develop --uv --release "
            "&& cd ../.. && uv run --no-sync python benchmarks/engine/slots.py\n"
            f"{bar}\n"
        )
        return False
    return True


# --------------------------------------------------------------------------- (a) per call


def per_call_anarchon(e: Expr) -> float:
    cron = Cron(e.expression, tz=e.tz)

    def run() -> float:
        nxt = cron.next_after
        t = START_MS
        t0 = time.perf_counter()
        for _ in range(e.count):
            t = nxt(t)  # type: ignore[assignment]
        return time.perf_counter() - t0

    return best_of(5, run) / e.count * 1e9


def per_call_croniter(e: Expr, count: int) -> float:
    kwargs = {"second_at_beginning": True} if e.six else {}

    def run() -> float:
        it = croniter(e.expression, START.astimezone(ZoneInfo(e.tz)), **kwargs)
        nxt = it.get_next
        t0 = time.perf_counter()
        for _ in range(count):
            nxt(float)
        return time.perf_counter() - t0

    return best_of(2, run) / count * 1e9


def per_call_croniter_rs(e: Expr) -> float:
    kwargs = {"second_at_beginning": True} if e.six else {}

    def run() -> float:
        # no time zones: naive wall-clock time
        it = croniter_rs.croniter(e.expression, START.replace(tzinfo=None), **kwargs)
        nxt = it.get_next
        t0 = time.perf_counter()
        for _ in range(e.count):
            nxt(float)
        return time.perf_counter() - t0

    return best_of(5, run) / e.count * 1e9


def part_a(quick: bool) -> None:
    print("\n(a) ns per next slot, consecutive slots from 2026-01-01 (Python call per slot)")
    rows = []
    ratios_c: list[float] = []
    ratios_rs: list[float] = []
    ours_all: list[float] = []
    for e in EXPRESSIONS:
        ours = per_call_anarchon(e)
        theirs = per_call_croniter(e, min(e.count, 300 if quick else 2_000))
        rs = per_call_croniter_rs(e)
        ratios_c.append(theirs / ours)
        ratios_rs.append(rs / ours)
        ours_all.append(ours)
        ok = theirs / ours >= TARGET_VS_CRONITER and rs / ours >= TARGET_VS_CRONITER_RS
        rows.append(
            [
                e.label,
                e.expression,
                "NY" if e.tz == NY else "UTC",
                fmt_ns(ours),
                fmt_ns(theirs),
                fmt_ns(rs) + (" (naive)" if e.tz != UTC else ""),
                fmt_ratio(theirs / ours),
                fmt_ratio(rs / ours),
                verdict(ok),
            ]
        )
    rows.append(
        [
            "median",
            "",
            "",
            fmt_ns(statistics.median(ours_all)),
            "",
            "",
            fmt_ratio(statistics.median(ratios_c)),
            fmt_ratio(statistics.median(ratios_rs)),
            verdict(
                min(ratios_c) >= TARGET_VS_CRONITER and min(ratios_rs) >= TARGET_VS_CRONITER_RS
            ),
        ]
    )
    print(
        table(
            [
                "case",
                "expression",
                "tz",
                "anarchon ns",
                "croniter ns",
                "croniter-rs ns",
                "vs croniter",
                "vs croniter-rs",
                "target",
            ],
            rows,
        )
    )
    print(
        f"targets: >= {TARGET_VS_CRONITER:.0f}x croniter and >= {TARGET_VS_CRONITER_RS:.0f}x "
        "croniter-rs per call (ratio = their time / anarchon's).\n"
        "croniter-rs has no time zones: it computes NY rows in naive wall-clock time, so its "
        "NY figures skip the DST work."
    )


# --------------------------------------------------------------------------- (b) 100k jobs


def job_mix(n: int) -> list[tuple[str, str]]:
    """(expression, zone) of job i: expressions in rotation, zones rotated per round."""
    out = []
    for i in range(n):
        e = EXPRESSIONS[i % len(EXPRESSIONS)]
        tz = e.tz if e.tz != UTC else ZONES[(i // len(EXPRESSIONS)) % len(ZONES)]
        out.append((e.expression, tz))
    return out


def part_b(quick: bool) -> None:
    print(f"\n(b) next slot of {JOBS:,} jobs (10 expressions x {len(ZONES)} zones, mixed)")
    mix = job_mix(JOBS)

    gc.collect()
    t0 = time.perf_counter()
    schedules = [_core.Schedule.cron(expr, tz) for expr, tz in mix]
    parse_s = time.perf_counter() - t0

    def batch() -> float:
        t0 = time.perf_counter()
        _core.next_after_many(schedules, START_MS)
        return time.perf_counter() - t0

    batch_s = statistics.median(batch() for _ in range(7))

    def per_job() -> float:
        t0 = time.perf_counter()
        for s in schedules:
            s.next_after(START_MS)
        return time.perf_counter() - t0

    per_job_s = statistics.median(per_job() for _ in range(3))

    # croniter: one parsed object per (expression, zone), re-seeded for each job (warm)
    n_croniter = 10_000 if quick else JOBS
    pool: dict[tuple[str, str], croniter] = {}
    seeds: dict[str, datetime] = {tz: START.astimezone(ZoneInfo(tz)) for tz in ZONES}
    for expr, tz in set(mix):
        kwargs = {"second_at_beginning": True} if len(expr.split()) == 6 else {}
        pool[(expr, tz)] = croniter(expr, seeds[tz], **kwargs)
    t0 = time.perf_counter()
    for expr, tz in mix[:n_croniter]:
        it = pool[(expr, tz)]
        it.set_current(seeds[tz])
        it.get_next(float)
    croniter_s = (time.perf_counter() - t0) * JOBS / n_croniter

    # croniter-rs: one object per expression (no zones), re-seeded for each job
    rs_pool = {}
    naive = START.replace(tzinfo=None)
    for e in EXPRESSIONS:
        kwargs = {"second_at_beginning": True} if e.six else {}
        rs_pool[e.expression] = croniter_rs.croniter(e.expression, naive, **kwargs)
    t0 = time.perf_counter()
    for expr, _ in mix:
        it = rs_pool[expr]
        it.set_current(naive)
        it.get_next(float)
    rs_s = time.perf_counter() - t0

    rows = [
        ["anarchon, next_after_many (one call)", f"{batch_s * 1e3:,.1f}", "1.0x", ""],
        [
            "anarchon, next_after per job (Python loop)",
            f"{per_job_s * 1e3:,.1f}",
            fmt_ratio(per_job_s / batch_s),
            "",
        ],
        [
            "croniter, get_next per job (warm)"
            + (f" [{n_croniter:,} run, x{JOBS // n_croniter} extrapolated]" if quick else ""),
            f"{croniter_s * 1e3:,.0f}",
            fmt_ratio(croniter_s / batch_s),
            "",
        ],
        [
            "croniter-rs, get_next per job (warm, no zones)",
            f"{rs_s * 1e3:,.1f}",
            fmt_ratio(rs_s / batch_s),
            "",
        ],
        ["anarchon, parsing the 100k schedules (cold)", f"{parse_s * 1e3:,.1f}", "", ""],
    ]
    rows[0][3] = verdict(batch_s * 1e3 < TARGET_BATCH_MS)
    print(table(["what", "ms", "vs batch", f"target < {TARGET_BATCH_MS:.0f} ms"], rows))


# --------------------------------------------------------------------------- (c) timetable


def part_c(quick: bool) -> None:
    print(f"\n(c) a {JOBS:,}-job Timetable (jitter 2 s), mixed cron and interval schedules")
    pool: list[_core.Schedule] = []
    for e in EXPRESSIONS:
        for tz in ZONES if e.tz == UTC else [e.tz]:
            pool.append(_core.Schedule.cron(e.expression, tz))
    pool += [_core.Schedule.every(ms) for ms in (10_000, 60_000, 300_000, 3_600_000)]
    names = [f"job-{i:06d}" for i in range(JOBS)]
    gc.collect()
    rss0 = rss_bytes()
    table_ = _core.Timetable("bench-host:4242:abcd")
    t0 = time.perf_counter()
    for i, name in enumerate(names):
        table_.add(name, pool[i % len(pool)], 2_000, START_MS)
    add_s = time.perf_counter() - t0
    gc.collect()
    memory_mb = (rss_bytes() - rss0) / 1e6

    # wake-ups as the scheduler does them: sleep to next_wakeup(), take what is due
    wakeups = 5_000 if quick else 20_000
    due_total = 0
    now = START_MS
    t0 = time.perf_counter()
    for _ in range(wakeups):
        at = table_.next_wakeup()
        assert at is not None
        due_total += len(table_.due(at))
        now = at
    wake_s = (time.perf_counter() - t0) / wakeups

    # small fixed steps (1 ms), most of them with nothing due
    steps = 5_000 if quick else 20_000
    step_due = 0
    t0 = time.perf_counter()
    for k in range(1, steps + 1):
        step_due += len(table_.due(now + k))
    step_s = (time.perf_counter() - t0) / steps
    now += steps

    def scan() -> float:
        t0 = time.perf_counter()
        table_.scan_due_count(now)
        return time.perf_counter() - t0

    scan_s = statistics.median(scan() for _ in range(21))

    rows = [
        [
            "wake-up: next_wakeup() + due(at)",
            f"{wake_s * 1e6:,.2f}",
            f"{due_total / wakeups:.1f} jobs due per wake-up",
            verdict(wake_s * 1e3 < TARGET_WAKEUP_MS),
        ],
        [
            "due(now) every 1 ms",
            f"{step_s * 1e6:,.2f}",
            f"{step_due / steps:.1f} jobs due per step",
            verdict(step_s * 1e3 < TARGET_WAKEUP_MS),
        ],
        [
            "full scan: scan_due_count(now)",
            f"{scan_s * 1e6:,.1f}",
            f"{scan_s / max(wake_s, 1e-12):,.0f}x a wake-up",
            "",
        ],
        ["add 100k jobs", f"{add_s * 1e6 / JOBS:,.2f}", f"{add_s * 1e3:,.0f} ms in all", ""],
    ]
    print(table(["operation", "us per call", "note", f"< {TARGET_WAKEUP_MS:.0f} ms"], rows))
    print(
        f"resident memory of the timetable: {memory_mb:,.1f} MB for {len(table_):,} jobs "
        f"(RSS delta) -> {verdict(memory_mb < TARGET_MEMORY_MB)} (target < "
        f"{TARGET_MEMORY_MB:.0f} MB)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="croniter on 10k jobs (extrapolated), shorter loops"
    )
    args = parser.parse_args(argv)
    print(
        f"Python {sys.version.split()[0]} on {os.cpu_count()} CPUs; "
        f"croniter {_version('croniter')}, croniter-rs {_version('croniter-rs')}"
    )
    release = check_build()
    part_a(args.quick)
    part_b(args.quick)
    part_c(args.quick)
    if not release:
        print("\nWARNING: debug build measured; see the warning at the top.")
    return 0


def _version(dist: str) -> str:
    return version(dist)


if __name__ == "__main__":
    sys.exit(main())
