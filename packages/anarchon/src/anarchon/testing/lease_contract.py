"""Deprecated path of :mod:`anarchon.testing.contracts.lease`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.contracts.lease import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.contracts.lease")
