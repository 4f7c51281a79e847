"""Deprecated path of :mod:`anarchon.testing.scenarios.stop_bound`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.stop_bound import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.stop_bound")
