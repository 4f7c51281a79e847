"""The status page (docs/fleet.md, "Status page"): a small ASGI app, ``anarchon[web]``.

:func:`create_app` builds a Starlette app that shows the jobs of the fleet,
each job's recent runs as a timeline, the live leases and pause/resume
buttons, and serves the same data as JSON under ``api/``. Mount it in a
FastAPI or Starlette app, or serve it with ``anarchon dashboard``.
"""

from __future__ import annotations

from anarchon.web.app import create_app
from anarchon.web.backend_source import BackendSource
from anarchon.web.source import StatusSource

__all__ = ["BackendSource", "StatusSource", "create_app"]
