"""Deprecated path of :mod:`anarchon.testing.scenarios.fault_worker` (still a worker entry point: ``python -m`` runs it)."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.fault_worker import *  # noqa: F403
from anarchon.testing.scenarios.fault_worker import main

if __name__ == "__main__":  # a worker process: no warning in its output
    raise SystemExit(main())
else:
    warn_moved(__name__, "anarchon.testing.scenarios.fault_worker")
