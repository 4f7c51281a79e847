"""The Django app config: checks the settings and, with ``AUTOSTART``, starts in-process."""

from __future__ import annotations

import atexit
import threading
from typing import Any

from django.apps import AppConfig
from django.core.signals import request_started

from anarchon.contrib.django import load_jobs, settings_of_anarchon

_started = threading.Lock()


class AnarchonConfig(AppConfig):  # type: ignore[misc]  # Django ships no type hints
    """``anarchon.contrib.django``: settings checked at start-up; ``AUTOSTART`` on first request."""

    name = "anarchon.contrib.django"
    label = "anarchon"
    verbose_name = "anarchon scheduler"

    def ready(self) -> None:
        if settings_of_anarchon()["AUTOSTART"]:
            # On the first request, not here: management commands (migrate,
            # the runserver reloader's parent) never start a scheduler.
            request_started.connect(_autostart, dispatch_uid="anarchon-autostart")


def _autostart(**kwargs: Any) -> None:
    if not _started.acquire(blocking=False):
        return
    scheduler = load_jobs()
    scheduler.start()
    atexit.register(scheduler.stop)
