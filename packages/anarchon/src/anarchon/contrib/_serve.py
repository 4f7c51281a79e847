"""Run a :class:`~anarchon.SyncScheduler` in the foreground until SIGTERM or SIGINT, then hand over.

Shared by ``manage.py anarchon`` and ``flask anarchon run``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

from anarchon.sync import SyncScheduler

__all__ = ["serve_until_signal"]


def serve_until_signal(scheduler: SyncScheduler, say: Callable[[str], None] = print) -> None:
    """Start ``scheduler``, wait for SIGTERM/SIGINT, then stop it with hand-over.

    Must run in the main thread (signal handlers are installed there).
    """
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        scheduler.start()
        say(
            f"anarchon: running {len(scheduler.jobs)} job(s) as {scheduler.instance_id};"
            " SIGTERM or Ctrl-C stops with hand-over"
        )
        while not stop.wait(0.2):
            pass
        say("anarchon: stopping with hand-over")
    finally:
        scheduler.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
