"""``latest_between`` cost: a short look-back (what ``Timetable.add`` does with
``max_late``) and wide ranges (a catch-up window, or any range at all).

The engine walks at most 64 slots forward, then bisects, so the cost stays
bounded whatever the width of the range. Before, it walked every slot of the
range: ``* * * * * *`` over one day was 86 400 ``next_after`` calls, over the
whole ``i64`` range about 3 * 10**11 (hours). Run on a release build:

    (cd packages/anarchon && uv run --frozen --no-sync maturin develop --uv --release)
    uv run --frozen --no-sync python benchmarks/latest_between.py
"""

from __future__ import annotations

import time

from anarchon import _core

NOW = 1_767_225_600_000  # 2026-01-01T00:00:00Z
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
CASES = [
    ("* * * * * *", "UTC"),
    ("*/5 * * * *", "UTC"),
    ("0 3 * * *", "Europe/Athens"),
    ("0 0 * 2 1#5", "UTC"),
]
RANGES = [
    ("look-back 60 s", NOW - 60_000, NOW),
    ("catch-up 1 day", NOW - 86_400_000, NOW),
    ("catch-up 30 days", NOW - 30 * 86_400_000, NOW),
    ("whole i64 range", I64_MIN, I64_MAX),
]


def per_call_us(schedule: _core.Schedule, start: int, end: int) -> float:
    calls, began = 0, time.perf_counter()
    while time.perf_counter() - began < 0.2:
        for _ in range(50):
            schedule.latest_between(start, end)
        calls += 50
    return (time.perf_counter() - began) / calls * 1e6


def main() -> None:
    print(f"{'expression':<16} {'tz':<14} " + " ".join(f"{label:>17}" for label, _, _ in RANGES))
    for expression, tz in CASES:
        schedule = _core.Schedule.cron(expression, tz)
        cells = [f"{per_call_us(schedule, a, b):14.2f} µs" for _, a, b in RANGES]
        print(f"{expression:<16} {tz:<14} " + " ".join(cells))
    table = _core.Timetable("bench")
    schedule = _core.Schedule.cron("* * * * * *", "UTC")
    began = time.perf_counter()
    for i in range(100_000):
        table.add(f"j{i}", schedule, 2_000, NOW, 60_000)
    print(f"Timetable.add of 100,000 jobs (look-back 60 s): {time.perf_counter() - began:.3f} s")


if __name__ == "__main__":
    main()
