"""Deprecated path of :mod:`anarchon.testing.scenarios.slow_link`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.slow_link import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.slow_link")
