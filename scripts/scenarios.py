"""The scenario tier: capacity, long waits and injected faults, with their figures.

The gate (``uv run pytest``) leaves out every test marked ``scenario``: fleets
of thousands of jobs, clock steps and skew, slow links, the cross-built
wheels. This command runs them, then the fault table
(``scripts/fault_table.py``) and the network-fault table
(``scripts/network_faults.py``), and writes what it measured to
``docs/scenarios.md`` with the date, the commit and the machine's load::

    uv run --frozen python scripts/scenarios.py                      # everything, ~25 min
    uv run --frozen python scripts/scenarios.py --parts faults       # one part; the others stay
    uv run --frozen python scripts/scenarios.py --parts tests -- -k nats   # pytest arguments

Each part runs in its own process, one after the other, alone on the machine
(``-n 0``: a capacity test shares the CPU with nothing of ours). The page keeps
the sections of the parts not run this time. The exit status is 1 when a
scenario test failed, a fault row could not run, or a fault row counts a
duplicate; the page is written either way.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "scenarios.md"
PARTS = ("tests", "faults", "network")
TITLES = {
    "tests": "Scenario tests (`pytest -m scenario`)",
    "faults": "Fault table (`scripts/fault_table.py`)",
    "network": "Network faults (`scripts/network_faults.py`)",
}
INTRO = """# Scenario results

Written by `uv run --frozen python scripts/scenarios.py`: the capacity, timing
and fault scenarios that are not part of the test gate ([Faults and what we
test](faults.md#what-we-test) says what each one injects and how its
counts are defined). Each section says when, on which commit and on what load
it was measured; rerun a part with `--parts tests|faults|network`.
"""


@dataclass
class Section:
    """One part's measured table, with where and when it was measured."""

    part: str
    body: str
    failed: bool


def _commit() -> str:
    """The commit measured: ``-dirty`` when a file other than the page itself has changed."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", ".", f":!{PAGE.relative_to(ROOT)}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (head or "unknown") + ("-dirty" if changed else "")


def _stamp(seconds: float, load_before: float) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_after = os.getloadavg()[0]
    return (
        f"Measured {now} on commit `{_commit()}`, {os.cpu_count()} cores, load average"
        f" {load_before:.2f} before and {load_after:.2f} after; took {seconds:.0f} s."
    )


def _run(command: list[str], log: Path) -> tuple[int, str]:
    """Run ``command`` from the repository root; its stdout, stderr teed to ``log``."""
    print("$", " ".join(command), file=sys.stderr, flush=True)
    with log.open("w") as errors:
        done = subprocess.run(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=errors, text=True, check=False
        )
    sys.stderr.write(log.read_text()[-3000:])
    return done.returncode, done.stdout


def _test_name(classname: str, name: str) -> str:
    """``test_module.py::Class::test`` from JUnit's dotted class name (package folders dropped)."""
    parts = classname.split(".")
    modules = [i for i, part in enumerate(parts) if part.startswith("test_")]
    if not modules:
        return f"{classname}::{name}"
    at = modules[-1]
    return "::".join([f"{parts[at]}.py", *parts[at + 1 :], name])


def _tests(work: Path, extra: list[str]) -> Section:
    """``pytest -m scenario``, one row per test: outcome and seconds."""
    junit = work / "scenarios.xml"
    started, load = time.monotonic(), os.getloadavg()[0]
    code, out = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "scenario",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
            *extra,
        ],
        work / "tests.log",
    )
    sys.stderr.write(out[-3000:])
    rows = ["| test | outcome | seconds |", "|---|---|---|"]
    counts: dict[str, int] = {}
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    outcome = "skipped"
            counts[outcome] = counts.get(outcome, 0) + 1
            name = _test_name(case.get("classname", ""), case.get("name", ""))
            rows.append(f"| `{name}` | {outcome} | {float(case.get('time') or 0):.1f} |")
    summary = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "none ran"
    took = time.monotonic() - started
    body = f"{_stamp(took, load)} {summary}.\n\n" + "\n".join(rows)
    return Section("tests", body, failed=code != 0)


def _table(part: str, script: str, work: Path) -> tuple[int, str, str]:
    """Run ``scripts/<script>``: its exit code, its markdown table, and the stamp above it."""
    started, load = time.monotonic(), os.getloadavg()[0]
    code, out = _run([sys.executable, str(ROOT / "scripts" / script)], work / f"{part}.log")
    return code, out.strip(), _stamp(time.monotonic() - started, load)


def _faults(work: Path) -> Section:
    """The fault table, as ``scripts/fault_table.py`` prints it; a duplicate fails it."""
    code, table, stamp = _table("faults", "fault_table.py", work)
    failed = code != 0 or "did not run" in table
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 2 and cells[2].isdigit() and int(cells[2]) > 0:
            failed = True  # a duplicate
    return Section("faults", f"{stamp}\n\n{table}", failed)


def _network(work: Path) -> Section:
    """The network-fault table, as ``scripts/network_faults.py`` prints it."""
    code, table, stamp = _table("network", "network_faults.py", work)
    return Section("network", f"{stamp}\n\n{table}", code != 0 or "FAILED" in table)


def _sections(page: str) -> dict[str, str]:
    """The body of each part's section on the page as it is."""
    found: dict[str, str] = {}
    for part, title in TITLES.items():
        match = re.search(
            rf"^## {re.escape(title)}\n\n(.*?)(?=^## |\Z)", page, re.MULTILINE | re.DOTALL
        )
        if match:
            found[part] = match.group(1).strip()
    return found


def render(bodies: dict[str, str]) -> str:
    """The whole page from each part's body (a part never measured says so)."""
    out = [INTRO]
    for part, title in TITLES.items():
        out.append(f"## {title}\n\n{bodies.get(part, 'Not measured yet.')}\n")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for, update their sections of the page; 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--parts", default=",".join(PARTS), help="comma-separated: " + ",".join(PARTS)
    )
    parser.add_argument("pytest_args", nargs="*", help="after --: passed to pytest (tests part)")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    for part in parts:
        if part not in PARTS:
            parser.error(f"unknown part {part!r}; one of {', '.join(PARTS)}")
    bodies = _sections(PAGE.read_text()) if PAGE.exists() else {}
    failed: list[str] = []
    with tempfile.TemporaryDirectory(prefix="anarchon-scenarios-") as tmp:
        work = Path(tmp)
        for part in parts:
            if part == "tests":
                section = _tests(work, args.pytest_args)
            elif part == "faults":
                section = _faults(work)
            else:
                section = _network(work)
            bodies[part] = section.body
            if section.failed:
                failed.append(part)
            PAGE.write_text(render(bodies))
            print(f"\n== {TITLES[part]}\n{section.body}\n", flush=True)
    if failed:
        print(f"scenarios: failed: {', '.join(failed)} (see {PAGE})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
