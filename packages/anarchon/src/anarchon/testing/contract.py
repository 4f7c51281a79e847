"""Deprecated path of :mod:`anarchon.testing.contracts.backend`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.contracts.backend import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.contracts.backend")
