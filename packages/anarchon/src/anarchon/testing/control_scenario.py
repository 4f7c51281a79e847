"""Deprecated path of :mod:`anarchon.testing.scenarios.control`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.control import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.control")
