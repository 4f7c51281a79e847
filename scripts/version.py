"""The workspace's one version: ``[workspace.package] version`` in the root Cargo.toml.

maturin reads it for the ``anarchon`` distribution (its pyproject declares the version
``dynamic``) and compiles it into ``anarchon._core.__version__``, which
``anarchon.__version__`` re-exports. The pure-Python backend packages cannot read a
file outside their folder when built from their sdist, so they carry the version
written out; this script checks that every copy and every pin agrees with Cargo.toml:

    python scripts/version.py            # check (exit 1 and list each mismatch)
    python scripts/version.py set 0.2.0  # write the version everywhere, then re-lock

``set`` rewrites Cargo.toml, each backend's ``version``, its ``__version__`` and its
``anarchon==`` pin, and the ``anarchon`` extras' pins on the backends; then it
refreshes Cargo.lock (``cargo update --workspace``) and uv.lock (``uv lock``).
Runs on Python >= 3.10 with the standard library only.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = "anarchon"
BACKENDS = {
    "anarchon-sql": "anarchon_sql",
    "anarchon-redis": "anarchon_redis",
    "anarchon-nats": "anarchon_nats",
}
# X.Y.Z only: a pre-release is written differently in Cargo (semver 1.0.0-rc.1) and in
# Python (PEP 440 1.0.0rc1), so one string could not serve both.
VERSION = r"[0-9]+\.[0-9]+\.[0-9]+"


@dataclass(frozen=True)
class Site:
    """One place that writes the version: a file, a pattern with one group, what it is."""

    path: Path
    pattern: str
    what: str
    count: int = 1

    def found(self) -> list[str]:
        """The versions written at this site (one per match)."""
        return re.findall(self.pattern, self.path.read_text(encoding="utf-8"), re.MULTILINE)

    def write(self, version: str) -> None:
        """Replace the group of every match with ``version``."""
        text = self.path.read_text(encoding="utf-8")

        def swap(match: re.Match[str]) -> str:
            whole = match.group(0)
            start, end = match.span(1)
            offset = match.start(0)
            return whole[: start - offset] + version + whole[end - offset :]

        self.path.write_text(re.sub(self.pattern, swap, text, flags=re.MULTILINE), "utf-8")


def cargo_version(root: Path = ROOT) -> str:
    """``[workspace.package] version`` of the root Cargo.toml."""
    text = (root / "Cargo.toml").read_text(encoding="utf-8")
    section = re.search(r"^\[workspace\.package\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    if section is None:
        raise SystemExit("Cargo.toml has no [workspace.package] section")
    found = re.search(rf'^version\s*=\s*"({VERSION})"', section.group(1), re.M)
    if found is None:
        raise SystemExit("Cargo.toml's [workspace.package] has no version")
    return found.group(1)


def sites(root: Path = ROOT) -> list[Site]:
    """Every place outside Cargo.toml that writes the version out."""
    out: list[Site] = []
    core = root / "packages" / CORE / "pyproject.toml"
    for name in BACKENDS:
        # the core's extras: anarchon-sql[postgres]==X (two extras each for sql and redis)
        count = 1 if name == "anarchon-nats" else 2
        out.append(
            Site(core, rf'"{name}(?:\[[a-z,]+\])?==({VERSION})"', f"{CORE} pin on {name}", count)
        )
    for name, module in BACKENDS.items():
        folder = root / "packages" / name
        project = folder / "pyproject.toml"
        out.append(Site(project, rf'^version\s*=\s*"({VERSION})"', f"{name} version"))
        out.append(Site(project, rf'"{CORE}==({VERSION})"', f"{name} pin on {CORE}"))
        init = folder / "src" / module / "__init__.py"
        out.append(Site(init, rf'^__version__\s*=\s*"({VERSION})"', f"{module}.__version__"))
    return out


def core_is_dynamic(root: Path = ROOT) -> bool:
    """True when the core's pyproject leaves its version to maturin (Cargo.toml)."""
    text = (root / "packages" / CORE / "pyproject.toml").read_text(encoding="utf-8")
    project = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    body = project.group(1) if project else ""
    has_static = re.search(r"^version\s*=", body, re.M) is not None
    dynamic = re.search(r"^dynamic\s*=\s*\[([^\]]*)\]", body, re.M)
    return not has_static and dynamic is not None and '"version"' in dynamic.group(1)


def mismatches(root: Path = ROOT) -> list[str]:
    """Each place that disagrees with Cargo.toml, as a line to print (empty: all agree)."""
    version = cargo_version(root)
    problems = []
    if not core_is_dynamic(root):
        problems.append(
            f'packages/{CORE}/pyproject.toml: the version must be dynamic = ["version"] '
            "(maturin reads Cargo.toml)"
        )
    for site in sites(root):
        found = site.found()
        where = site.path.relative_to(root)
        if len(found) != site.count:
            problems.append(f"{where}: {site.what}: {len(found)} found, {site.count} expected")
        problems += [f"{where}: {site.what} is {v}, not {version}" for v in found if v != version]
    return problems


def write_version(version: str, root: Path = ROOT) -> None:
    """Write ``version`` to Cargo.toml and every site (the lock files are left alone)."""
    if re.fullmatch(VERSION, version) is None:
        raise SystemExit(f"not a version: {version!r} (X.Y.Z, no pre-release)")
    cargo = root / "Cargo.toml"
    text = cargo.read_text(encoding="utf-8")
    text = re.sub(
        rf'(^\[workspace\.package\]\n(?:(?!^\[).*\n)*?version\s*=\s*")({VERSION})(")',
        lambda m: m.group(1) + version + m.group(3),
        text,
        count=1,
        flags=re.M,
    )
    cargo.write_text(text, encoding="utf-8")
    for site in sites(root):
        site.write(version)


def set_version(version: str) -> None:
    """Write ``version`` everywhere, then refresh Cargo.lock and uv.lock."""
    write_version(version)
    subprocess.run(["cargo", "update", "--workspace", "--offline"], cwd=ROOT, check=True)
    subprocess.run(["uv", "lock"], cwd=ROOT, check=True)


def main(argv: list[str]) -> int:
    """``check`` (default) or ``set VERSION``."""
    if argv[:1] == ["set"] and len(argv) == 2:
        set_version(argv[1])
    elif argv not in ([], ["check"]):
        print(__doc__, file=sys.stderr)
        return 2
    problems = mismatches()
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        print(f"version: {len(problems)} place(s) disagree with Cargo.toml", file=sys.stderr)
        return 1
    print(f"version: {cargo_version()} everywhere")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
