"""Provision headless Chromium and its driver for the browser tests (Debian's packages).

``chromium`` and ``chromium-driver`` come from the machine's own Debian mirror
(browser downloads are not reachable): when ``/usr/bin/chromium`` or
``/usr/bin/chromedriver`` is missing, :func:`chromium_paths` installs both with
``apt-get`` (as root), once per machine, under a lock. ``ANARCHON_CHROMIUM`` and
``ANARCHON_CHROMEDRIVER`` name other binaries. A browser that cannot be
provisioned raises :class:`~anarchon_testservers.cache.ProvisionError`: the tests fail, they
are never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from anarchon_testservers.cache import ProvisionError, cache_root, locked

__all__ = ["chromium_paths"]

PACKAGES = ("chromium", "chromium-driver")


def _find() -> tuple[str | None, str | None]:
    browser = os.environ.get("ANARCHON_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("ANARCHON_CHROMEDRIVER") or shutil.which("chromedriver")
    return browser, driver


def _apt(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(
        ["apt-get", *args], capture_output=True, text=True, env=env, timeout=900, check=False
    )


def chromium_paths() -> tuple[str, str]:
    """``(chromium, chromedriver)``, installing Debian's packages when they are missing."""
    browser, driver = _find()
    if browser and driver:
        return browser, driver
    if os.geteuid() != 0:
        raise ProvisionError(
            "chromium and chromedriver are missing and only root can install them:"
            f" apt-get install -y {' '.join(PACKAGES)}"
        )
    with locked(cache_root() / ".chromium.lock"):
        browser, driver = _find()
        if not (browser and driver):
            done = _apt("install", "-y", *PACKAGES)
            if done.returncode != 0:  # an old package list: refresh it once
                _apt("update")
                done = _apt("install", "-y", *PACKAGES)
            if done.returncode != 0:
                raise ProvisionError(
                    f"apt-get install {' '.join(PACKAGES)} failed:\n{done.stderr[-2000:]}"
                )
        browser, driver = _find()
    if not (browser and driver and Path(browser).exists() and Path(driver).exists()):
        raise ProvisionError("chromium or chromedriver is still missing after apt-get install")
    return browser, driver
