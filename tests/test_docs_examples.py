"""Every Python example in README.md and docs/ runs (each in a fresh interpreter).

A block fenced as ```` ```python ```` runs; one fenced as ```` ```py ```` is
highlighted as Python but not run (code that needs software this repository does
not depend on, such as celery beat, or a fragment). Examples that build backends
need no server: a backend connects on ``start()``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _examples() -> list[tuple[str, str]]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        name = page.relative_to(ROOT / "docs").as_posix() if page.parent != ROOT else page.name
        for number, match in enumerate(FENCE.finditer(page.read_text()), start=1):
            found.append((f"{name}#{number}", match.group(1)))
    return found


EXAMPLES = _examples()


def test_examples_were_found() -> None:
    assert len(EXAMPLES) >= 8


def test_migration_pages_run_both_sides() -> None:
    """The APScheduler page runs the peer's code too (APScheduler 3 is a dev dependency)."""
    found = dict(EXAMPLES)
    assert "from apscheduler." in found["migrating/apscheduler.md#1"]
    assert "from anarchon import" in found["migrating/apscheduler.md#2"]
    assert any(where.startswith("migrating/celery-beat.md#") for where in found)


@pytest.mark.parametrize(("where", "code"), EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_example_runs(where: str, code: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"{where} failed:\n{result.stdout}\n{result.stderr}"
