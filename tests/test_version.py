"""One version source: the Cargo workspace version, and every package agrees with it.

``scripts/version.py`` is the check (and ``set`` the bump); these tests run it on the
repository, on a copy with a stray version, and compare what the installed packages
report at run time: ``anarchon.__version__``, ``anarchon._core.__version__``, each
distribution's metadata and the pins between them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "anarchon_version_script", ROOT / "scripts/version.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


version_script = _script()
VERSION: str = version_script.cargo_version()
BACKENDS: dict[str, str] = version_script.BACKENDS


def test_cargo_workspace_version_is_the_crates_version() -> None:
    metadata = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    crates = {p["name"]: p["version"] for p in json.loads(metadata.stdout)["packages"]}
    assert crates == {"anarchon-core": VERSION, "anarchon-py": VERSION}


def test_check_script_passes_on_the_repository() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/version.py")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"version: {VERSION} everywhere"


def test_runtime_versions_agree() -> None:
    import anarchon
    import anarchon._core

    assert anarchon.__version__ == VERSION
    assert anarchon._core.__version__ == VERSION
    assert importlib.metadata.version("anarchon") == VERSION
    for distribution, module in BACKENDS.items():
        assert importlib.metadata.version(distribution) == VERSION, distribution
        assert importlib.import_module(module).__version__ == VERSION, module


def _pins(distribution: str) -> dict[str, str]:
    """name -> the exact version pinned (== only) among the requirements of ``distribution``."""
    pins = {}
    for requirement in importlib.metadata.requires(distribution) or []:
        found = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*\(?==\s*([^\s;,)]+)", requirement)
        if found:
            pins[found.group(1).lower().replace("_", "-")] = found.group(2)
    return pins


def test_dependency_pins_name_the_same_version() -> None:
    core_pins = _pins("anarchon")
    assert core_pins == dict.fromkeys(BACKENDS, VERSION)
    for distribution in BACKENDS:
        assert _pins(distribution) == {"anarchon": VERSION}, distribution


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The files that write the version, copied with their relative paths."""
    for site in version_script.sites():
        target = tmp_path / site.path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(site.path, target)
    (tmp_path / "packages/anarchon").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "packages/anarchon/pyproject.toml", tmp_path / "packages/anarchon")
    shutil.copy(ROOT / "Cargo.toml", tmp_path / "Cargo.toml")
    assert version_script.mismatches(tmp_path) == []
    return tmp_path


def test_check_names_each_stray_copy(copy: Path) -> None:
    init = copy / "packages/anarchon-nats/src/anarchon_nats/__init__.py"
    init.write_text(init.read_text().replace(f'"{VERSION}"', '"9.9.9"'))
    pyproject = copy / "packages/anarchon-redis/pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f"anarchon=={VERSION}", "anarchon>=0.1"))
    problems = version_script.mismatches(copy)
    assert problems == [
        "packages/anarchon-redis/pyproject.toml: anarchon-redis pin on anarchon: 0 found, 1 expected",
        "packages/anarchon-nats/src/anarchon_nats/__init__.py: anarchon_nats.__version__ is 9.9.9, "
        f"not {VERSION}",
    ]


def test_check_refuses_a_static_core_version(copy: Path) -> None:
    pyproject = copy / "packages/anarchon/pyproject.toml"
    text = pyproject.read_text().replace('dynamic = ["version"]', f'version = "{VERSION}"')
    pyproject.write_text(text)
    assert version_script.mismatches(copy)[0].startswith(
        'packages/anarchon/pyproject.toml: the version must be dynamic = ["version"]'
    )


def test_write_version_moves_every_copy(copy: Path) -> None:
    version_script.write_version("2.3.4", copy)
    assert version_script.cargo_version(copy) == "2.3.4"
    assert version_script.mismatches(copy) == []
    cargo = (copy / "Cargo.toml").read_text()
    assert 'chrono = { version = "0.4"' in cargo  # dependency versions are not the crate's
    core = (copy / "packages/anarchon/pyproject.toml").read_text()
    assert core.count("==2.3.4") == 5


def test_write_version_refuses_a_non_version(copy: Path) -> None:
    with pytest.raises(SystemExit, match="not a version"):
        version_script.write_version("latest", copy)
    with pytest.raises(SystemExit, match="no pre-release"):
        version_script.write_version("1.0.0-rc.1", copy)
