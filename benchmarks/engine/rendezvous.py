"""Rendezvous ranking benchmark: ``_core.rendezvous_ranks`` against a plain Python loop.

Prints, for 2, 10, 50 and 200 members:

- µs per job of one ``_core.rendezvous_ranks`` call over 100,000 jobs (k = 3),
  the ranks an instance computes when the membership changes;
- µs per job of the raw alternative, a plain Python loop scoring every
  (member, job) pair with ``hashlib.blake2b`` (8-byte digest, the fastest
  ``hashlib`` hash for short inputs), over 10,000 jobs;
- the ratio of the two;
- µs per call of ``_core.rendezvous_candidates`` (one job's candidates, for a
  status page).

Run it against a RELEASE build of the engine (``uv run`` builds a debug one):

    cd packages/anarchon && uv run --no-sync maturin develop --uv --release && cd ../.. \\
        && uv run --no-sync python benchmarks/engine/rendezvous.py
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import elf_sections, ratio, table
from anarchon import _core

MEMBER_COUNTS = (2, 10, 50, 200)
K = 3


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    """The fastest of ``repeats`` timed runs of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def python_ranks(members: Sequence[str], me: str, keys: Sequence[str], k: int) -> list[int | None]:
    """What ``rendezvous_ranks`` answers, in plain Python over ``hashlib`` (another hash)."""
    blake2b = hashlib.blake2b
    others = [m.encode() + b"\0" for m in sorted(set(members)) if m != me]
    mine = me.encode() + b"\0"
    out: list[int | None] = []
    for key in keys:
        kb = key.encode()
        own = blake2b(mine + kb, digest_size=8).digest()
        above = 0
        for m in others:
            if blake2b(m + kb, digest_size=8).digest() > own:
                above += 1
        out.append(above if above < k else None)
    return out


def every_candidates(members: Sequence[str], keys: Sequence[str]) -> list[list[str]]:
    """The candidates of each job, one call per job (as a status page asks)."""
    return [_core.rendezvous_candidates(members, key, K) for key in keys]


def warn_if_debug() -> bool:
    path = Path(_core.__file__ or "")
    debug = path.is_file() and ".debug_info" in elf_sections(path)
    if debug:
        bar = "!" * 78
        print(
            f"{bar}\nWARNING: anarchon._core is a DEBUG build ({path}); the figures are NOT\n"
            "representative. Build a release first (see this script's docstring).\n"
            f"{bar}\n"
        )
    return debug


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs ranked by the engine")
    parser.add_argument("--raw-jobs", type=int, default=10_000, help="jobs of the Python loop")
    args = parser.parse_args()
    debug = warn_if_debug()
    keys = [f"reports.nightly_{n}" for n in range(args.jobs)]
    raw_keys = keys[: args.raw_jobs]
    rows = []
    for count in MEMBER_COUNTS:
        members = [f"worker-{n}.example.internal:{8000 + n}" for n in range(count)]
        me = members[count // 2]
        engine_s = best_of(5, partial(_core.rendezvous_ranks, members, me, keys, K))
        raw_s = best_of(3, partial(python_ranks, members, me, raw_keys, K))
        candidates_s = best_of(3, partial(every_candidates, members, raw_keys))
        engine_us = engine_s / len(keys) * 1e6
        raw_us = raw_s / len(raw_keys) * 1e6
        rows.append(
            [
                f"{count}",
                f"{engine_us:.3f}",
                f"{engine_s * 1e3:.1f}",
                f"{raw_us:.1f}",
                f"{ratio(raw_us, engine_us):,.0f}x",
                f"{candidates_s / len(raw_keys) * 1e6:.2f}",
            ]
        )
    print(
        f"rendezvous_ranks over {len(keys):,} jobs (k = {K}); "
        f"the Python loop over {len(raw_keys):,} jobs\n"
    )
    print(
        table(
            [
                "members",
                "µs/job",
                "ms per call",
                "Python hashlib µs/job",
                "Python / engine",
                "candidates µs/call",
            ],
            rows,
        )
    )
    if debug:
        print("\nWARNING: debug build measured; see the warning at the top.")


if __name__ == "__main__":
    main()
