"""Portable wheels: scripts/build-wheels.sh, auditwheel, and an install with no Rust.

One build of ``scripts/build-wheels.sh`` (tests/support/wheel_builds.py) makes the
wheels (maturin --zig for manylinux x86_64/aarch64 and musllinux x86_64, checked there by ``auditwheel show``; the backend
packages' wheels and the sdists). The tests look at what it made, ask auditwheel again
on their own, and install the manylinux x86_64 wheel with the backend wheels into a
clean virtual environment with ``pip install --find-links ... "anarchon[redis]"``, with
no Rust toolchain on PATH, then run a job there against a real Redis.
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path

import pytest
import wheel_builds
from anarchon_testservers.redis import Server
from wheel_install import install_and_run

ROOT = Path(__file__).resolve().parent.parent

# Three cold cross builds take minutes on 2 cores: the scenario tier
# (scripts/scenarios.py), not the gate; test_packaging.py installs the native
# wheel in the gate. The module fixture's time counts against the first test's timeout.
pytestmark = [pytest.mark.scenario, pytest.mark.timeout(2400)]


AUDITWHEEL = "auditwheel==6.8.2"
# platform -> (wheel platform tag, ELF e_machine of the extension)
PLATFORMS = {
    "manylinux-x86_64": ("manylinux_2_17_x86_64", 62),
    "manylinux-aarch64": ("manylinux_2_17_aarch64", 183),
    "musllinux-x86_64": ("musllinux_1_2_x86_64", 62),
}
# The published backend packages: not the core (built per platform) and not
# anarchon-testservers (development only, never built into the wheelhouse).
BACKENDS = sorted(
    p.name
    for p in (ROOT / "packages").iterdir()
    if p.name not in ("anarchon", "anarchon-testservers")
)


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scripts/build-wheels.sh: the core for every Linux platform, the pure wheels, sdists."""
    return wheel_builds.build(tmp_path_factory, "wheelhouse", timeout_s=2000)


def _core_wheel(wheelhouse: Path, tag: str) -> Path:
    found = sorted(wheelhouse.glob(f"anarchon-*-cp310-abi3-*{tag}*.whl"))
    assert len(found) == 1, [p.name for p in wheelhouse.iterdir()]
    return found[0]


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_core_wheel_is_abi3_for_its_platform(wheelhouse: Path, platform: str) -> None:
    tag, machine = PLATFORMS[platform]
    wheel = _core_wheel(wheelhouse, tag)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "anarchon/_core.abi3.so" in names
        header = archive.read("anarchon/_core.abi3.so")[:20]
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert header[:4] == b"\x7fELF"
    assert int.from_bytes(header[18:20], "little") == machine
    assert b"Requires-Python: >=3.10" in metadata


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_auditwheel_reports_the_wheel_compliant(
    wheelhouse: Path, platform: str, tmp_path: Path
) -> None:
    tag, _ = PLATFORMS[platform]
    wheel = _core_wheel(wheelhouse, tag)
    args = ["--ldpaths", str(tmp_path)] if tag.startswith("musllinux") else []
    done = subprocess.run(
        ["uv", "tool", "run", "--from", AUDITWHEEL, "auditwheel", "show", *args, str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    report = " ".join(done.stdout.split())
    found = re.search(r'consistent with the following platform tag: "([a-z0-9_]+)"', report)
    assert found is not None, report
    reported = found.group(1)
    if tag.startswith("manylinux"):
        glibc = re.fullmatch(r"manylinux_(\d+)_(\d+)_\w+", reported)
        assert glibc is not None, reported
        assert (int(glibc.group(1)), int(glibc.group(2))) <= (2, 17), reported
        assert reported.endswith(platform.split("-")[1])
    else:
        assert reported == "musllinux_1_2_x86_64"
    # nothing to graft: only the platform's own libc (and for glibc its libpthread, libdl)
    assert "external shared libraries are required" not in report, report
    assert "will need to be eliminated" not in report, report


def test_backend_wheels_are_pure_and_sdists_exist(wheelhouse: Path) -> None:
    for package in BACKENDS:
        stem = package.replace("-", "_")
        wheels = list(wheelhouse.glob(f"{stem}-*.whl"))
        assert [w.name.rsplit("-", 3)[1:] for w in wheels] == [["py3", "none", "any.whl"]]
        assert list(wheelhouse.glob(f"{stem}-*.tar.gz")), package
    assert list(wheelhouse.glob("anarchon-*.tar.gz"))


def test_install_without_rust_and_run_a_job_on_redis(
    wheelhouse: Path, tmp_path: Path, redis: Server
) -> None:
    dist_info, _result = install_and_run(wheelhouse, tmp_path, redis.url)
    assert "Tag: cp310-abi3-manylinux_2_17_x86_64" in (dist_info / "WHEEL").read_text()
