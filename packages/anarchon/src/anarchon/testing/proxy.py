"""Deprecated path of :mod:`anarchon.testing.scenarios.proxy`."""

from anarchon.testing._moved import warn_moved
from anarchon.testing.scenarios.proxy import *  # noqa: F403

warn_moved(__name__, "anarchon.testing.scenarios.proxy")
