"""Deprecated path of :mod:`anarchon.testing.scenarios.faults`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.faults import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.faults")
