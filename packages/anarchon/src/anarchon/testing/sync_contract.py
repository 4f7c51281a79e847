"""Deprecated path of :mod:`anarchon.testing.contracts.sync`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.contracts.sync import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.contracts.sync")
