"""Deprecated path of :mod:`anarchon.testing.scenarios.heal`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.heal import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.heal")
