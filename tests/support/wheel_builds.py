"""The package builds of test_packaging.py and test_wheels.py: one each per session.

A build runs in the foreground the first time a test asks for it (a
session-scoped fixture), never beside the tests in the background: the gate's
tests get the CPU to themselves. Under pytest-xdist (``--dist loadscope``) a
module's test functions share one worker, so each build runs once. Both builds compile the
Rust core without optimisation (:mod:`fast_build`).

==============  ============================================  =====================
build           command                                       tier
==============  ============================================  =====================
``dist``        ``uv build --all-packages`` (sdist → wheel)   the gate
``wheelhouse``  ``scripts/build-wheels.sh`` (every platform)  scenarios (cross builds)
==============  ============================================  =====================

``uv build --all-packages`` also builds the workspace's development-only member
(:data:`DEV_ONLY`, the tests' servers); its files are removed, so a build holds
what a release publishes.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest
from fast_build import build_env

ROOT = Path(__file__).resolve().parents[2]

DEV_ONLY = ("anarchon_testservers",)
"""Workspace members that are never published (their distribution names' stems)."""

BUILDS: dict[str, list[str]] = {
    # name -> the command; the output folder is appended
    "dist": ["uv", "build", "--all-packages", "--out-dir"],
    "wheelhouse": ["bash", str(ROOT / "scripts" / "build-wheels.sh"), "--out"],
}


def build(tmp_path_factory: pytest.TempPathFactory, name: str, timeout_s: float) -> Path:
    """Run build ``name`` into a fresh folder and return it; a failed test with its output."""
    out = tmp_path_factory.mktemp(name)
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            [*BUILDS[name], str(out)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group: a timeout ends cargo and zig too
            env=build_env(),  # without LTO: see tests/support/fast_build.py
        )
        try:
            code = process.wait(timeout=timeout_s)
        except BaseException:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        if code != 0:
            log.seek(0)
            output = log.read()
            shutil.rmtree(out, ignore_errors=True)
            pytest.fail(f"the {name} build failed:\n{output[-8000:]}", pytrace=False)
    for built in out.iterdir():
        if built.name.startswith(tuple(f"{stem}-" for stem in DEV_ONLY)):
            built.unlink()
    return out
