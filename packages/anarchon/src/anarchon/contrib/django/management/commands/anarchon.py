"""``python manage.py anarchon``: run the project's scheduler until SIGTERM, with hand-over."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from anarchon.contrib._serve import serve_until_signal
from anarchon.contrib.django import load_jobs
from anarchon.errors import AnarchonError


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no type hints
    """Run the jobs declared by ``settings.ANARCHON['JOBS']`` until SIGTERM or Ctrl-C."""

    help = "Run the anarchon scheduler until SIGTERM/SIGINT; running jobs are handed over."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            scheduler = load_jobs()
            serve_until_signal(scheduler, lambda line: self.stdout.write(line))
        except AnarchonError as error:
            raise CommandError(str(error)) from error
