"""Install from built wheels, as a new user would, outside the workspace.

`uv build` builds every package: an sdist, then the wheel *from that sdist*
(so the sdist of `anarchon`, whose crate lives outside the package folder, is
proven to build). Each extra is then installed into a fresh virtual
environment from the built wheels: `anarchon[all]` with pip, the others with
`uv pip` (faster, same metadata).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import wheel_builds
from anarchon_testservers.redis import Server
from wheel_install import install_and_run

ROOT = Path(__file__).resolve().parent.parent

VERSION = re.search(
    r'^\[workspace\.package\]\n(?:.*\n)*?version = "([^"]+)"',
    (ROOT / "Cargo.toml").read_text(),
    re.MULTILINE,
).group(1)  # type: ignore[union-attr]
# extra -> (distribution it must pull, URL schemes it must register)
EXTRAS = {
    "redis": ("anarchon-redis", ["redis", "rediss"]),
    "valkey": ("anarchon-redis", ["valkey", "valkeys"]),
    "nats": ("anarchon-nats", ["nats"]),
    "postgres": ("anarchon-sql", ["postgresql", "postgres"]),
    "sqlite": ("anarchon-sql", ["sqlite"]),
}
PRESENT = {extra: spec for extra, spec in EXTRAS.items() if (ROOT / "packages" / spec[0]).is_dir()}
URLS = {
    "redis": "redis://:hunter2@127.0.0.1:1/0",
    "rediss": "rediss://127.0.0.1:1/0",
    "valkey": "valkey://127.0.0.1:1/0",
    "valkeys": "valkeys://127.0.0.1:1/0",
    "nats": "nats://127.0.0.1:1",
    "postgresql": "postgresql://u:hunter2@127.0.0.1:1/db",
    "postgres": "postgres://u:hunter2@127.0.0.1:1/db",
    "sqlite": "sqlite:///anarchon-test.db",
}
RESOLVE = """
import json, sys
from anarchon import Scheduler, AnarchonError
out = {}
for url in sys.argv[1:]:
    try:
        out[url] = ["ok", Scheduler(backend=url).backend.name]
    except AnarchonError as error:
        out[url] = [error.code, str(error)]
print(json.dumps(out))
"""


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`uv build --all-packages`: an sdist of each package, then its wheel from that sdist."""
    return wheel_builds.build(tmp_path_factory, "dist", timeout_s=900)


def _venv(path: Path, dist: Path, requirement: str, *, pip: bool = False) -> Path:
    """A fresh virtual environment with ``requirement`` installed from ``dist`` (and PyPI).

    ``pip=True``: pip installs it, as the README tells a new user. Otherwise
    ``uv pip`` (the same resolution of the same metadata, in a second rather
    than ten); ``anarchon[all]`` and the no-Rust install in test_wheels.py
    keep pip's path covered.
    """
    python = path / "bin" / "python"
    if pip:
        venv.create(path, with_pip=True, clear=True)
        command = [str(python), "-m", "pip", "install", "--quiet"]
    else:
        subprocess.run(
            ["uv", "venv", "--quiet", "--seed", "--python", sys.executable, str(path)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        command = ["uv", "pip", "install", "--quiet", "--python", str(python)]
    subprocess.run(
        [*command, "--find-links", str(dist), requirement],
        check=True,
        capture_output=True,
        timeout=600,
        cwd=path,
    )
    return python


def _resolve(python: Path, urls: list[str], cwd: Path) -> dict[str, list[str]]:
    result = subprocess.run(
        [str(python), "-c", RESOLVE, *urls], capture_output=True, text=True, check=True, cwd=cwd
    )
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _distributions(python: Path) -> set[str]:
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {row["name"].lower() for row in json.loads(listed.stdout)}


def test_every_package_builds_an_sdist_and_a_wheel(dist: Path) -> None:
    """Over 20 s: its setup is the gate's one build of every package (the Rust core from its sdist)."""
    names = {p.name for p in dist.iterdir()}
    packages = ["anarchon", *sorted({spec[0] for spec in PRESENT.values()})]
    for package in packages:
        stem = package.replace("-", "_")
        assert any(n.startswith(f"{stem}-{VERSION}") and n.endswith(".tar.gz") for n in names), (
            names
        )
        assert any(n.startswith(f"{stem}-{VERSION}") and n.endswith(".whl") for n in names), names


def test_core_alone_names_the_extra_for_each_scheme(dist: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "core", dist, "anarchon")
    assert not {spec[0] for spec in EXTRAS.values()} & _distributions(python)
    schemes = [scheme for _, (_, schemes) in EXTRAS.items() for scheme in schemes]
    answers = _resolve(python, [URLS[s] for s in schemes], tmp_path)
    for extra, (_, extra_schemes) in EXTRAS.items():
        for scheme in extra_schemes:
            code, message = answers[URLS[scheme]]
            assert code == "ANARCHON_UNKNOWN_BACKEND", (scheme, message)
            assert f'pip install "anarchon[{extra}]"' in message
            assert "hunter2" not in message
    memory = _resolve(python, ["memory://"], tmp_path)["memory://"]
    assert memory == ["ok", "memory"]
    cli = subprocess.run(
        [str(python.parent / "anarchon"), "next", "@daily", "-n", "2", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(json.loads(cli.stdout)) == 2
    demo = subprocess.run(
        [str(python.parent / "anarchon"), "demo", "--seconds", "2.5"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert 'pip install "anarchon[sqlite]"' in demo.stdout
    assert "OK: every slot ran exactly once" in demo.stdout


@pytest.mark.parametrize("extra", sorted(PRESENT))
def test_extra_pulls_its_backend(extra: str, dist: Path, tmp_path: Path) -> None:
    distribution, schemes = PRESENT[extra]
    python = _venv(tmp_path / extra, dist, f"anarchon[{extra}]")
    assert distribution in _distributions(python)
    answers = _resolve(python, [URLS[s] for s in schemes], tmp_path)
    for scheme in schemes:
        assert answers[URLS[scheme]][0] == "ok", answers[URLS[scheme]]
    listed = subprocess.run(
        [str(python.parent / "anarchon"), "backends", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    registered = {row["scheme"]: row["distribution"] for row in json.loads(listed.stdout)}
    for scheme in schemes:
        assert registered[scheme] == distribution


def test_all_pulls_every_backend(dist: Path, tmp_path: Path) -> None:
    """Up to 20 s under load: pip, not uv, installs ``anarchon[all]``, as the README says."""
    python = _venv(tmp_path / "all", dist, "anarchon[all]", pip=True)
    assert {spec[0] for spec in PRESENT.values()} <= _distributions(python)
    schemes = [scheme for _, schemes in PRESENT.values() for scheme in schemes]
    answers = _resolve(python, [URLS[s] for s in schemes], tmp_path)
    assert all(answer[0] == "ok" for answer in answers.values()), answers


def test_native_wheel_installs_without_rust_and_runs_a_job_on_redis(
    dist: Path, tmp_path: Path, redis: Server
) -> None:
    dist_info, result = install_and_run(dist, tmp_path, redis.url)
    assert f"anarchon-{VERSION}" in dist_info.name
    assert "Tag: cp310-abi3-" in (dist_info / "WHEEL").read_text()
    assert result["version"] == VERSION
