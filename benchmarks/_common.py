"""What the benchmarks repeat: CPU accounting, sequential timing, ratio tables, a wave's ends.

A benchmark in a folder of ``benchmarks/`` imports this module after putting
``benchmarks/`` on ``sys.path`` (its first lines do). The fleet's worker
processes (``fleet/fleet_common.py``) do not use it: the APScheduler peer runs
in a virtual environment of its own, with the standard library only.
"""

from __future__ import annotations

import math
import resource
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from anarchon.types import ResultWrite, RunClaim, RunFinish, StoredResult

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    """User + system CPU of this process so far (every thread), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def redis_server_cpu(admin: Any) -> float:
    """The Redis or Valkey server's CPU so far (``used_cpu_user + used_cpu_sys``), in seconds."""
    info = await admin.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def timed_sequential(
    call: Callable[[int], Awaitable[Any]], seconds: float, warmup: int = 200
) -> tuple[float, float, float]:
    """(calls/s, p50 ms, p99 ms) of ``call(i)`` repeated one after the other for ``seconds``.

    ``warmup`` calls with negative ``i`` go first (connection, script cache, allocator).
    """
    for i in range(warmup):
        await call(-1 - i)
    latencies: list[float] = []
    perf = time.perf_counter
    start = perf()
    stop = start + seconds
    i = 0
    while True:
        t0 = perf()
        await call(i)
        t1 = perf()
        latencies.append(t1 - t0)
        i += 1
        if t1 >= stop:
            break
    elapsed = perf() - start
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    return len(latencies) / elapsed, p50, p99


def ratio(a: float, b: float) -> float:
    """``a / b``, or NaN when either is NaN or ``b`` is zero."""
    return a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table, cells right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])


def elf_sections(path: Path) -> set[str]:
    """Section names of a 64-bit little-endian ELF file (empty if not one).

    ``".debug_info"`` among them marks a debug (dev profile) build of ``anarchon._core``.
    """
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return set()
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    strtab_off = struct.unpack_from("<Q", data, shoff + shstrndx * shentsize + 0x18)[0]
    names = set()
    for i in range(shnum):
        name_off = struct.unpack_from("<I", data, shoff + i * shentsize)[0]
        start = strtab_off + name_off
        names.add(data[start : data.index(b"\0", start)].decode("ascii", "replace"))
    return names


def ok_ends(
    claims: Sequence[RunClaim], instance: str, history_size: int
) -> tuple[list[RunFinish], list[ResultWrite]]:
    """The finish and the stored ``ok`` result of each won claim (1 ms runs), as a wave ends."""
    finishes = [RunFinish(c.job, c.slot, c.token, "ok") for c in claims]
    writes = [
        ResultWrite(
            c.job, StoredResult(c.slot, c.token, instance, "ok", c.slot, c.slot + 1), history_size
        )
        for c in claims
    ]
    return finishes, writes
