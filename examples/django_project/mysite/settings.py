"""Settings of the example project: only what anarchon needs, plus a URL for the runs view."""

import os

SECRET_KEY = "example-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["anarchon.contrib.django"]
ROOT_URLCONF = "mysite.urls"
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True

ANARCHON = {
    # Every instance of the project points at the same store; e.g. "redis://cache:6379/0".
    "BACKEND_URL": os.environ.get("ANARCHON_BACKEND_URL", "sqlite:///anarchon-jobs.db"),
    "JOBS": ["mysite.jobs"],
    "INSTANCE_ID": os.environ.get("ANARCHON_INSTANCE_ID"),  # default: host:pid:random
    "AUTOSTART": os.environ.get("ANARCHON_AUTOSTART") == "1",  # start in the web process
    "OPTIONS": {"lease": "6s", "heartbeat": "1s", "stop_grace": "1s"},
}
