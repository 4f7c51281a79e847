"""Deprecated path of :mod:`anarchon.testing.scenarios.one_off` (still a worker entry point: ``python -m`` runs it)."""

import sys

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.one_off import *  # noqa: F403
from anarchon.testing.scenarios.one_off import main

if __name__ == "__main__":  # a worker process: no warning in its output
    main(sys.argv[1:])
else:
    warn_moved(__name__, "anarchon.testing.scenarios.one_off")
