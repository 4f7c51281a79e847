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
(``true``, ``2``) and strings otherwise (``5s``). Its scheduler has
``candidates=None`` (every process races for every slot) unless
``--scheduler-option candidates=K`` says otherwise (docs/scaling.md,
"Candidates"). Its log goes to stderr.

For other checks (a server restart while the fleet runs, a custom handler
duration), :func:`start_fleet` returns the running :class:`Fleet`; its
:meth:`Fleet.wait` gives the :class:`FleetResult` to inspect.
"""

from __future__ import annotations

from anarchon.testing.fleet._harness import (
    Fleet,
    FleetSpec,
    read_history,
    run_fleet,
    start_fleet,
)
from anarchon.testing.fleet._records import (
    EDGE_SLOTS,
    FleetResult,
    FleetRun,
    job_names,
    parse_records,
)
from anarchon.testing.fleet._worker import main

__all__ = [
    "EDGE_SLOTS",
    "Fleet",
    "FleetResult",
    "FleetRun",
    "FleetSpec",
    "job_names",
    "main",
    "parse_records",
    "read_history",
    "run_fleet",
    "start_fleet",
]
