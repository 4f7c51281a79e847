"""Deprecated path of :mod:`anarchon.testing.contracts.one_off`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.contracts.one_off import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.contracts.one_off")
