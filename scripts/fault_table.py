"""Run every fault scenario of ``anarchon.testing.scenarios.faults`` on every store; print a markdown table.

    uv run --frozen python scripts/fault_table.py                 # the whole matrix (~15 min)
    uv run --frozen python scripts/fault_table.py --stores sqlite,nats --scenarios kill9

Servers are started by the workspace's test servers
(``anarchon_testservers``): throw-away, on 127.0.0.1, on free
ports, removed at the end. Each row is one run of one scenario on one store;
the counts are those of :class:`anarchon.testing.scenarios.fault_report.FaultReport`
(its docstring defines them). ``scripts/scenarios.py`` writes the table to
docs/scenarios.md; docs/faults.md, "What we test" says how to read it. Rows that do not apply are left out and named below the table (no
proxy in front of a file, no server to restart).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from anarchon.testing.scenarios import faults
from anarchon.testing.scenarios.fault_report import FaultReport

STORES = ("redis-lease", "redis-stream-id", "postgres", "sqlite", "nats")
SCENARIOS = (
    "kill9",
    "sigstop-plain",
    "sigstop-guarded",
    "sigstop-naive",
    "blackhole",
    "handover",
    "blocking-stop",
    "restart",
)
LABELS = {
    "kill9": "`kill -9` of the runner",
    "sigstop-plain": "SIGSTOP past the lease, SIGCONT (unguarded handler)",
    "sigstop-guarded": "SIGSTOP past the lease, SIGCONT (fenced, `still_owner()`)",
    "sigstop-naive": "SIGSTOP past the lease, SIGCONT (fenced, no `still_owner()`)",
    "blackhole": "blackhole proxy for lease + 1 s, heal",
    "handover": "`stop()` of the runner (hand-over)",
    "blocking-stop": "sync handler blocking 8 s, `stop()` after 2 s",
    "restart": "store restart mid-run",
}
STORE_LABELS = {
    "redis-lease": "Redis `lease`",
    "redis-stream-id": "Redis `stream-id`",
    "postgres": "PostgreSQL",
    "sqlite": "SQLite",
    "nats": "NATS",
}


UrlMaker = Callable[[Path], str]


@dataclass
class Target:
    """A store to run on: a fresh URL per run, and servers it can restart (with their URLs)."""

    url: UrlMaker
    networked: bool
    restarts: dict[str, tuple[UrlMaker, Callable[[], object]]]


def _redis_url(server: object, strategy: str) -> UrlMaker:
    def url(tmp: Path) -> str:
        prefix = f"f{uuid.uuid4().hex[:8]}:"
        return f"{server.url}?strategy={strategy}&prefix={prefix}"  # type: ignore[attr-defined]

    return url


@contextmanager
def _targets(stores: list[str]) -> Iterator[dict[str, Target]]:
    found: dict[str, Target] = {}
    with ExitStack() as stack:
        if any(s.startswith("redis") for s in stores):
            from anarchon_testservers.redis import start_server

            shared = start_server("redis")
            stack.callback(shared.stop)
            # The restart rows run on servers of their own: one persists every write, one nothing.
            kept = start_server("redis", appendonly=True)
            stack.callback(kept.stop)
            lost = start_server("redis")
            stack.callback(lost.stop)
            restarts = {
                "appendonly yes (fsync always)": (_redis_url(kept, "lease"), kept.restart),
                "no persistence": (_redis_url(lost, "lease"), lost.restart),
            }
            found["redis-lease"] = Target(_redis_url(shared, "lease"), True, restarts)
            found["redis-stream-id"] = Target(_redis_url(shared, "stream-id"), True, {})
        if "postgres" in stores:
            from anarchon_testservers.postgres import start_postgres

            pg = start_postgres()
            stack.callback(pg.stop)

            def pg_url(tmp: Path) -> str:
                return f"{pg.dsn}?table_prefix=f{uuid.uuid4().hex[:8]}_"

            found["postgres"] = Target(pg_url, True, {"": (pg_url, pg.restart)})
        if "sqlite" in stores:
            found["sqlite"] = Target(lambda tmp: f"sqlite:///{tmp / 'store.db'}", False, {})
        if "nats" in stores:
            from anarchon_testservers.nats import start_server as start_nats

            nats, root = start_nats()
            stack.callback(shutil.rmtree, root, ignore_errors=True)
            stack.callback(nats.kill)

            def nats_url(tmp: Path) -> str:
                return nats.url

            def nats_restart() -> None:
                nats.kill()
                nats.start()

            found["nats"] = Target(
                nats_url, True, {"JetStream file store": (nats_url, nats_restart)}
            )
        yield found


Run = Callable[[Path], FaultReport]


def _restart_run(url: UrlMaker, restart: Callable[[], object]) -> Run:
    def run(tmp: Path) -> FaultReport:
        return faults.store_restart(url(tmp), tmp_path=tmp, restart=restart)

    return run


def _runs(target: Target, scenario: str) -> list[tuple[str, Run]]:
    """``(row label, run)`` for one scenario on one store; empty when it does not apply."""
    if scenario == "blackhole" and not target.networked:
        return []
    if scenario == "restart":
        rows: list[tuple[str, Run]] = []
        for name, (url, restart) in target.restarts.items():
            label = LABELS[scenario] + (f", {name}" if name else "")
            rows.append((label, _restart_run(url, restart)))
        return rows
    call: Callable[..., FaultReport]
    if scenario.startswith("sigstop-"):
        call = partial(faults.sigstop_past_lease, handler=scenario.removeprefix("sigstop-"))
    else:
        call = faults.SCENARIOS[scenario]
    return [(LABELS[scenario], lambda tmp: call(target.url(tmp), tmp_path=tmp))]


def _row(label: str, store: str, report: FaultReport) -> str:
    recovery = "-" if report.recovery_s is None else f"{report.recovery_s:.2f} s"
    cells = [
        label,
        STORE_LABELS[store],
        str(len(report.duplicates)),
        str(len(report.zombies)),
        str(len(report.overlaps)),
        str(len(report.fenced_commits_by_stale)),
        str(report.refused_writes),
        str(len(report.lost)),
        str(len(report.missed)),
        str(len(report.unfinished)),
        recovery,
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| scenario | store | duplicates | zombies | overlaps | stale fenced commits | refused writes"
    " | lost | missed | unfinished | recovery |\n|---|---|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    """Run the chosen scenarios on the chosen stores; print the table (and each summary to stderr)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = parser.parse_args(argv)
    stores = [s for s in args.stores.split(",") if s]
    scenarios = [s for s in args.scenarios.split(",") if s]
    for name in stores:
        if name not in STORES:
            parser.error(f"unknown store {name!r}; one of {', '.join(STORES)}")
    for name in scenarios:
        if name not in SCENARIOS:
            parser.error(f"unknown scenario {name!r}; one of {', '.join(SCENARIOS)}")
    rows: list[str] = []
    skipped: list[str] = []
    with _targets(stores) as targets:
        for scenario in scenarios:
            for store in stores:
                runs = _runs(targets[store], scenario)
                if not runs:
                    skipped.append(f"{LABELS[scenario]} on {STORE_LABELS[store]}")
                for label, run in runs:
                    with tempfile.TemporaryDirectory(prefix="anarchon-faults-") as tmp:
                        started = time.monotonic()
                        try:
                            report = run(Path(tmp))
                        except Exception as error:  # a row that could not run says so
                            print(f"{STORE_LABELS[store]}: {label}: {error!r}", file=sys.stderr)
                            rows.append(
                                f"| {label} | {STORE_LABELS[store]} | did not run: {error} |"
                            )
                            continue
                        took = time.monotonic() - started
                    print(
                        f"{STORE_LABELS[store]}: {report.summary()} [{took:.0f} s]", file=sys.stderr
                    )
                    rows.append(_row(label, store, report))
    print(HEADER)
    print("\n".join(rows))
    if skipped:
        print("\nNot applicable: " + "; ".join(skipped) + ".")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
