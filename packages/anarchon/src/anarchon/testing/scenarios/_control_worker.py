"""A worker process of the fleet-control scenario (:mod:`anarchon.testing.scenarios.control`).

``python -m anarchon.testing.scenarios._control_worker --backend URL --instance ID --job NAME
--every MS --drift-job NAME --drift-every MS [--catch-up MS] --out FILE`` runs two
jobs until SIGTERM and appends one JSON line per run (its slot, ``catch_up_of``,
and the wall-clock start and end of its handler) and per drift warning to
``FILE``. ``--catch-up`` is given to the first job on backends with leases
(with ``overlap=True``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
from typing import Any, TextIO

from anarchon import RunContext, Scheduler
from anarchon.errors import UnsupportedError


def _write(out: TextIO, **row: object) -> None:
    out.write(json.dumps(row) + "\n")
    out.flush()


async def main(args: argparse.Namespace, out: TextIO) -> None:
    """Run the worker until SIGTERM, appending its records to ``out``."""
    # No claim ahead: a slot claimed ahead keeps the controls read at its claim (a skip or
    # pause stored within its lead does not stop it; see docs/fleet.md,
    # "Pause, resume and skip"), and the CLI under load cannot be aimed within a 250 ms lead.
    options: dict[str, Any] = {"control_cache": 0, "fleet_refresh": "1s"}
    try:
        scheduler = Scheduler(args.backend, instance_id=args.instance, claim_ahead=0, **options)
    except UnsupportedError:  # a backend without leases never claims ahead
        scheduler = Scheduler(args.backend, instance_id=args.instance, **options)

    async def tick(ctx: RunContext) -> None:
        start = time.time_ns() // 1_000_000
        await asyncio.sleep(0.05)  # a live interval to compare across processes
        _write(
            out,
            event="run",
            job=ctx.job,
            slot=ctx.slot,
            instance=ctx.instance_id,
            catch_up_of=ctx.catch_up_of,
            start=start,
            end=time.time_ns() // 1_000_000,
        )

    if args.catch_up and scheduler.leases:
        # overlap=True: the catch-up run and the slot due beside it both run (with the
        # default overlap=False a store that does not wait would skip that slot as overlap).
        scheduler.every(
            args.job, f"{args.every}ms", tick, catch_up=f"{args.catch_up}ms", overlap=True
        )
    else:
        scheduler.every(args.job, f"{args.every}ms", tick)
    scheduler.every(args.drift_job, f"{args.drift_every}ms", tick)
    warn = scheduler._on_drift

    def on_drift(job: str, fingerprints: dict[str, int]) -> None:
        _write(out, event="drift", job=job, fingerprints=fingerprints, instance=args.instance)
        warn(job, fingerprints)

    scheduler._on_drift = on_drift  # type: ignore[method-assign]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await scheduler.start()
    _write(out, event="started", instance=args.instance, leases=scheduler.leases)
    await stop.wait()
    await scheduler.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for name in ("--backend", "--instance", "--job", "--drift-job", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--every", type=int, required=True)
    parser.add_argument("--drift-every", type=int, required=True)
    parser.add_argument("--catch-up", type=int, default=0)
    parsed = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    with open(parsed.out, "a", encoding="utf-8") as records:
        asyncio.run(main(parsed, records))
