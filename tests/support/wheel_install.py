"""Install built wheels into a clean virtual environment with no Rust, and run a job there.

Shared by test_packaging.py (the gate: the wheels of ``uv build``) and
test_wheels.py (the scenario tier: the manylinux wheel of scripts/build-wheels.sh).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import venv
from pathlib import Path
from typing import Any

JOB = textwrap.dedent(
    """
    import asyncio, json, sys, time

    import anarchon, anarchon._core
    from anarchon import RunContext, Scheduler

    ran = []
    scheduler = Scheduler(backend=sys.argv[1], instance_id="from-the-wheel")

    @scheduler.every("wheel-tick", "1s")
    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.slot)

    async def main() -> None:
        deadline = time.monotonic() + 60
        async with scheduler:
            while len(ran) < 2 and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
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


def path_without_rust() -> str:
    """``PATH`` without the folders that hold cargo, rustc or rustup."""
    keep = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if entry and not any(
            os.path.exists(os.path.join(entry, tool)) for tool in ("cargo", "rustc", "rustup")
        ):
            keep.append(entry)
    return os.pathsep.join(keep)


def install_and_run(wheels: Path, tmp_path: Path, redis_url: str) -> tuple[Path, dict[str, Any]]:
    """``pip install "anarchon[redis]"`` from ``wheels`` only, then a 1 s job on ``redis_url``.

    Returns the installed core's dist-info folder and what the job printed
    (its core's path, the backend's name, runs, history records).
    """
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, clear=True)
    python = env_dir / "bin" / "python"
    path = path_without_rust()
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
            str(wheels),
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
    ran = subprocess.run(
        [str(python), "-c", JOB, redis_url],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    result: dict[str, Any] = json.loads(ran.stdout.strip().splitlines()[-1])
    assert result["core"].startswith(str(env_dir))
    assert result["backend"] == "redis"
    assert result["ran"] >= 2
    assert result["history"] == result["ran"]
    keys = subprocess.run(
        [
            str(python),
            "-c",
            f"import redis; print(len(redis.Redis.from_url({redis_url!r}).keys('*')))",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert int(keys.stdout) > 0  # the claims are in the real server
    return dist_info, result
