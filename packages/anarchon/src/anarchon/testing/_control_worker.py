"""A worker process of the fleet-control scenario (:mod:`anarchon.testing.control_scenario`).

``python -m anarchon.testing._control_worker --backend URL --instance ID --job NAME
--every MS --drift-job NAME --drift-every MS --out FILE`` runs two jobs until
SIGTERM and appends one JSON line per run and per drift warning to ``FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from typing import TextIO

from anarchon import RunContext, Scheduler


def _write(out: TextIO, **row: object) -> None:
    out.write(json.dumps(row) + "\n")
    out.flush()


async def main(args: argparse.Namespace, out: TextIO) -> None:
    """Run the worker until SIGTERM, appending its records to ``out``."""
    scheduler = Scheduler(
        args.backend, instance_id=args.instance, control_cache=0, fleet_refresh="1s"
    )

    async def tick(ctx: RunContext) -> None:
        _write(out, event="run", job=ctx.job, slot=ctx.slot, instance=ctx.instance_id)

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
    _write(out, event="started", instance=args.instance)
    await stop.wait()
    await scheduler.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for name in ("--backend", "--instance", "--job", "--drift-job", "--out"):
        parser.add_argument(name, required=True)
    parser.add_argument("--every", type=int, required=True)
    parser.add_argument("--drift-every", type=int, required=True)
    parsed = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    with open(parsed.out, "a", encoding="utf-8") as records:
        asyncio.run(main(parsed, records))
