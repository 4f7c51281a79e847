"""anarchon in a Django project (docs/django.md).

Add ``"anarchon.contrib.django"`` to ``INSTALLED_APPS`` and describe the
scheduler in settings::

    ANARCHON = {
        "BACKEND_URL": "redis://cache:6379/0",  # default: $ANARCHON_BACKEND_URL
        "JOBS": ["myapp.jobs"],                 # modules that declare the jobs
        "AUTOSTART": False,                     # True: start in the web process
        "OPTIONS": {"stop_grace": "10s"},       # more Scheduler(...) options
    }

The jobs modules declare jobs on :data:`scheduler`, a
:class:`~anarchon.SyncScheduler` built from those settings on first use::

    from anarchon.contrib.django import scheduler

    @scheduler.every("cleanup", "5m")
    def cleanup(ctx): ...

``python manage.py anarchon`` runs it until SIGTERM, with hand-over.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from anarchon.errors import InvalidConfigError
from anarchon.sync import SyncScheduler

__all__ = ["get_scheduler", "load_jobs", "settings_of_anarchon"]

_KNOWN = {"BACKEND_URL", "JOBS", "AUTOSTART", "INSTANCE_ID", "OPTIONS"}
_lock = threading.RLock()
_scheduler: SyncScheduler | None = None
_loaded = False


def settings_of_anarchon() -> dict[str, Any]:
    """``settings.ANARCHON``, checked: unknown keys and wrong types raise InvalidConfigError."""
    from django.conf import settings

    given = getattr(settings, "ANARCHON", {})
    if not isinstance(given, dict):
        raise InvalidConfigError(f"settings.ANARCHON must be a dict, got {type(given).__name__}")
    unknown = sorted(set(given) - _KNOWN)
    if unknown:
        raise InvalidConfigError(
            f"settings.ANARCHON: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN))}"
        )
    jobs = given.get("JOBS", [])
    if isinstance(jobs, str):
        jobs = [jobs]
    if not isinstance(jobs, (list, tuple)) or not all(isinstance(j, str) for j in jobs):
        raise InvalidConfigError(
            "settings.ANARCHON['JOBS'] must be a module path or a list of them"
        )
    options = given.get("OPTIONS", {})
    if not isinstance(options, dict):
        raise InvalidConfigError("settings.ANARCHON['OPTIONS'] must be a dict of Scheduler options")
    return {
        "BACKEND_URL": given.get("BACKEND_URL"),
        "JOBS": list(jobs),
        "AUTOSTART": bool(given.get("AUTOSTART", False)),
        "INSTANCE_ID": given.get("INSTANCE_ID"),
        "OPTIONS": dict(options),
    }


def get_scheduler() -> SyncScheduler:
    """The project's scheduler, built from ``settings.ANARCHON`` on first call."""
    global _scheduler
    with _lock:
        if _scheduler is None:
            config = settings_of_anarchon()
            _scheduler = SyncScheduler(
                config["BACKEND_URL"], instance_id=config["INSTANCE_ID"], **config["OPTIONS"]
            )
        return _scheduler


def load_jobs() -> SyncScheduler:
    """Import the ``JOBS`` modules once (they declare jobs on :data:`scheduler`); return it."""
    global _loaded
    with _lock:
        scheduler = get_scheduler()
        if not _loaded:
            for module in settings_of_anarchon()["JOBS"]:
                try:
                    importlib.import_module(module)
                except ImportError as error:
                    raise InvalidConfigError(
                        f"settings.ANARCHON['JOBS']: cannot import {module!r}: {error}"
                    ) from error
            _loaded = True
        return scheduler


def __getattr__(name: str) -> Any:
    if name == "scheduler":
        return get_scheduler()
    raise AttributeError(f"module 'anarchon.contrib.django' has no attribute {name!r}")
