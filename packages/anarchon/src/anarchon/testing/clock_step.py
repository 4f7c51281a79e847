"""Deprecated path of :mod:`anarchon.testing.scenarios.clock_step`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.clock_step import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.clock_step")
