"""Integrations with web frameworks: :mod:`anarchon.contrib.django`, :mod:`anarchon.contrib.flask`."""
