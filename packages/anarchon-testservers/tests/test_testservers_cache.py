"""The server provisioning of the test fixtures: the cache, and the mirror read from apt.

The servers themselves are provisioned and started by every backend's tests; these
tests cover what those cannot see: a build that dies leaves nothing half-made, a
finished one is reused, overrides are checked, and ``scripts/lib/debian-apt.sh``
takes the Debian archive from the machine's apt configuration (here a made-up one,
under ``$DEBIAN_APT_ROOT``, with hosts under the reserved ``.invalid`` domain).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import anarchon_testservers.cache as server_cache
import pytest

ROOT = server_cache.REPO


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("ANARCHON_SERVER_CACHE", str(root))
    return root


def test_cache_root_is_the_configured_folder(cache: Path) -> None:
    assert server_cache.cache_root() == cache
    assert cache.is_dir()


def test_a_finished_build_is_reused(cache: Path) -> None:
    calls: list[Path] = []

    def build(folder: Path) -> None:
        calls.append(folder)
        (folder / "bin").mkdir()

    first = server_cache.provisioned("thing", build)
    second = server_cache.provisioned("thing", build)
    assert first == second == cache / "thing"
    assert calls == [cache / "thing"]
    assert (first / "bin").is_dir()


def test_a_failed_build_leaves_nothing_and_is_tried_again(cache: Path) -> None:
    def broken(folder: Path) -> None:
        (folder / "half").write_text("made")
        raise server_cache.ProvisionError("the download failed")

    with pytest.raises(server_cache.ProvisionError, match="the download failed"):
        server_cache.provisioned("thing", broken)
    assert not (cache / "thing").exists()
    # a folder left by a killed build (no completion mark) is built again
    (cache / "thing").mkdir()
    (cache / "thing" / "stale").write_text("x")
    folder = server_cache.provisioned("thing", lambda f: (f / "fresh").write_text("y"))
    assert sorted(p.name for p in folder.iterdir()) == [".complete", "fresh"]


def test_an_override_that_is_not_executable_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANARCHON_VALKEY_SERVER", str(tmp_path / "missing"))
    with pytest.raises(server_cache.ProvisionError, match="ANARCHON_VALKEY_SERVER"):
        server_cache.valkey_server()
    monkeypatch.setenv("ANARCHON_PG_BIN", str(tmp_path))
    with pytest.raises(server_cache.ProvisionError, match="has no initdb"):
        server_cache.postgres_bindir()


def test_a_failing_install_script_fails_loudly(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANARCHON_REDIS_SERVER", raising=False)
    monkeypatch.setattr(server_cache, "REPO", cache / "no-repo")
    with pytest.raises(server_cache.ProvisionError, match=r"scripts/install-redis\.sh failed"):
        server_cache.redis_server()
    assert not (cache / "redis-debian").exists()


def _mirror(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"source {ROOT / 'scripts/lib/debian-apt.sh'} && debian_mirror"],
        env={"DEBIAN_APT_ROOT": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


def _machine(root: Path, codename: str = "bookworm") -> Path:
    (root / "etc/apt/sources.list.d").mkdir(parents=True)
    (root / "etc/os-release").write_text(f'ID=debian\nVERSION_CODENAME="{codename}"\n')
    return root / "etc/apt"


def test_mirror_from_deb822_sources(tmp_path: Path) -> None:
    apt = _machine(tmp_path)
    (apt / "sources.list.d/debian.sources").write_text(
        "Types: deb\n"
        "URIs: http://security.invalid/debian-security\n"
        "Suites: bookworm-security\n"
        "Components: main\n"
        "\n"
        "# a disabled copy\n"
        "Types: deb\n"
        "URIs: http://disabled.invalid/debian\n"
        "Suites: bookworm\n"
        "Components: main\n"
        "Enabled: no\n"
        "\n"
        "Types: deb deb-src\n"
        "URIs: http://mirror.invalid/debian http://second.invalid/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main contrib\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    (apt / "sources.list.d/other.sources").write_text(
        "Types: deb\nURIs: http://vendor.invalid/apt\nSuites: nodistro\nComponents: main\n"
    )
    done = _mirror(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "http://mirror.invalid/debian\t/usr/share/keyrings/debian-archive-keyring.gpg\n"
    )


def test_mirror_from_one_line_sources_list(tmp_path: Path) -> None:
    apt = _machine(tmp_path)
    (apt / "sources.list").write_text(
        "# deb http://old.invalid/debian bookworm main\n"
        "deb http://vendor.invalid/apt cloud-sdk main\n"
        "deb [arch=amd64 signed-by=/etc/apt/keyrings/debian.gpg] http://mirror.invalid/debian "
        "bookworm main non-free-firmware\n"
    )
    done = _mirror(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "http://mirror.invalid/debian\t/etc/apt/keyrings/debian.gpg\n"


def test_no_debian_archive_is_an_error(tmp_path: Path) -> None:
    apt = _machine(tmp_path, codename="trixie")
    (apt / "sources.list").write_text("deb http://mirror.invalid/debian bookworm main\n")
    done = _mirror(tmp_path)
    assert done.returncode == 1
    assert "no Debian archive for trixie" in done.stderr


def test_the_scripts_name_no_package_host() -> None:
    for script in [*ROOT.glob("scripts/*.sh"), *ROOT.glob("scripts/lib/*.sh")]:
        text = script.read_text()
        assert "debian.org" not in text, script
        assert "http://" not in text.replace("http://mirror", ""), script
