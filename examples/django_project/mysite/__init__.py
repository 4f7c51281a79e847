"""An example Django project that runs anarchon jobs (docs/django.md)."""
