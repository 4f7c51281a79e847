"""Deprecated path of :mod:`anarchon.testing.scenarios.fenced_effects`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.fenced_effects import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.fenced_effects")
