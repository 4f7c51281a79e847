"""Portable wheels: scripts/build-wheels.sh, auditwheel, and an install with no Rust.

One build of ``scripts/build-wheels.sh``, started in the background when the session
begins (tests/support/background_builds.py), makes the wheels (maturin --zig for manylinux
x86_64/aarch64 and musllinux x86_64, checked there by ``auditwheel show``; the backend
packages' wheels and the sdists). The tests look at what it made, ask auditwheel again
on their own, and install the manylinux x86_64 wheel with the backend wheels into a
clean virtual environment with ``pip install --find-links ... "anarchon[redis]"``, with
no Rust toolchain on PATH, then run a job there against a real Redis.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "packages" / "anarchon-redis" / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "support"))

import background_builds  # noqa: E402
from redis_servers import Server, start_server  # type: ignore[import-not-found]  # noqa: E402

# Three cold builds take minutes on 2 cores; the module fixture's time counts
# against the first test's timeout.
pytestmark = pytest.mark.timeout(2400)


AUDITWHEEL = "auditwheel==6.8.2"
# platform -> (wheel platform tag, ELF e_machine of the extension)
PLATFORMS = {
    "manylinux-x86_64": ("manylinux_2_17_x86_64", 62),
    "manylinux-aarch64": ("manylinux_2_17_aarch64", 183),
    "musllinux-x86_64": ("musllinux_1_2_x86_64", 62),
}
BACKENDS = sorted(p.name for p in (ROOT / "packages").iterdir() if p.name != "anarchon")


@pytest.fixture(scope="module")
def wheelhouse(request: pytest.FixtureRequest) -> Path:
    # started in the background when the session began (tests/support/background_builds.py)
    return background_builds.result(request.config, "wheelhouse", timeout_s=2000)


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


def _path_without_rust() -> str:
    keep = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and not any(
            os.path.exists(os.path.join(entry, tool)) for tool in ("cargo", "rustc", "rustup")
        ):
            keep.append(entry)
    return os.pathsep.join(keep)


@pytest.fixture
def redis() -> Iterator[Server]:
    server = start_server("redis")
    try:
        yield server
    finally:
        server.stop()


JOB = textwrap.dedent(
    """
    import asyncio, json, sys

    import anarchon, anarchon._core
    from anarchon import RunContext, Scheduler

    ran = []
    scheduler = Scheduler(backend=sys.argv[1], instance_id="from-the-wheel")

    @scheduler.every("wheel-tick", "1s")
    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    async def main() -> None:
        async with scheduler:
            await asyncio.sleep(3.5)
        history = await scheduler.history("wheel-tick", limit=20)
        print(json.dumps({
            "core": anarchon._core.__file__,
            "version": anarchon.__version__,
            "backend": scheduler.backend.name,
            "ran": len(ran),
            "history": len(history),
        }))

    asyncio.run(main())
    """
)


def test_install_without_rust_and_run_a_job_on_redis(
    wheelhouse: Path, tmp_path: Path, redis: Server
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, clear=True)
    python = env_dir / "bin" / "python"
    path = _path_without_rust()
    assert shutil.which("cargo", path=path) is None
    assert shutil.which("rustc", path=path) is None
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CARGO", "RUSTUP", "UV_"))},
        "PATH": path,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    installed = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--only-binary",
            "anarchon,anarchon-redis",
            "--find-links",
            str(wheelhouse),
            "anarchon[redis]",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site = subprocess.run(
        [str(python), "-c", "import anarchon, sys; print(anarchon.__file__)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dist_info = next(Path(site).parent.parent.glob("anarchon-*.dist-info"))
    assert "Tag: cp310-abi3-manylinux_2_17_x86_64" in (dist_info / "WHEEL").read_text()

    ran = subprocess.run(
        [str(python), "-c", JOB, redis.url],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["core"].startswith(str(env_dir))
    assert result["backend"] == "redis"
    assert result["ran"] >= 2
    assert result["history"] == result["ran"]
    keys = subprocess.run(
        [
            str(python),
            "-c",
            f"import redis; print(len(redis.Redis.from_url({redis.url!r}).keys('*')))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(keys.stdout) > 0  # the claims are in the real server
