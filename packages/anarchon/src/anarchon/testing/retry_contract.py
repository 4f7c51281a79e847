"""Deprecated path of :mod:`anarchon.testing.contracts.retry`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.contracts.retry import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.contracts.retry")
