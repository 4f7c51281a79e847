"""The package builds of test_packaging.py and test_wheels.py, started when the session begins.

Both builds compile the Rust core (``uv build`` from the sdist; three cross
builds in scripts/build-wheels.sh): minutes of CPU on 2 cores, while most of
the suite waits on servers and timers. So ``tests/conftest.py`` starts them
in the background as soon as collection ends, at the lowest CPU priority
(``nice -n 19``: a test that needs the CPU gets it first), and runs their
tests last; each module's fixture then waits for its build (:func:`result`).
A session that selects neither module starts neither build.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fast_build import build_env

ROOT = Path(__file__).resolve().parents[2]

BUILDS: dict[str, tuple[str, list[str]]] = {
    # name -> (the test module that needs it, the command; the output folder is appended)
    "dist": ("test_packaging.py", ["uv", "build", "--all-packages", "--out-dir"]),
    "wheelhouse": (
        "test_wheels.py",
        ["bash", str(ROOT / "scripts" / "build-wheels.sh"), "--out"],
    ),
}


@dataclass
class Build:
    """One build running in its own process group, writing into ``out``."""

    name: str
    out: Path
    process: subprocess.Popen[str]
    output: str | None = field(default=None)

    def wait(self, timeout_s: float) -> Path:
        """Wait for the build; its folder, or a failed test with the build's output."""
        if self.output is None:
            try:
                stdout, stderr = self.process.communicate(timeout=timeout_s)
            except BaseException:
                self.kill()
                raise
            self.output = stdout[-4000:] + stderr[-4000:]
        if self.process.returncode != 0:
            pytest.fail(f"the {self.name} build failed:\n{self.output}", pytrace=False)
        return self.out

    def kill(self) -> None:
        """End the build and everything it started (maturin, cargo, zig)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


_STASH = pytest.StashKey[dict[str, Build]]()


def start(config: pytest.Config, name: str) -> Build:
    """Start build ``name`` in the background (once per session) and return it."""
    builds = config.stash.setdefault(_STASH, {})
    if name not in builds:
        out = Path(tempfile.mkdtemp(prefix=f"anarchon-{name}-"))
        _module, command = BUILDS[name]
        process = subprocess.Popen(
            ["nice", "-n", "19", *command, str(out)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: kill() ends cargo and zig too
            env=build_env(),  # without LTO: see tests/support/fast_build.py
        )
        builds[name] = Build(name, out, process)
    return builds[name]


def result(config: pytest.Config, name: str, timeout_s: float) -> Path:
    """The output folder of build ``name`` (started now if the session did not start it)."""
    return start(config, name).wait(timeout_s)


def finish(config: pytest.Config) -> None:
    """End of the session: stop builds still running and remove their folders."""
    for build in config.stash.get(_STASH, {}).values():
        build.kill()
        shutil.rmtree(build.out, ignore_errors=True)
