"""Deprecated path of :mod:`anarchon.testing.contracts.fleet`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.contracts.fleet import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.contracts.fleet")
