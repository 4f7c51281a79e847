"""Session hooks: the package builds start in the background and their tests run last.

See tests/support/background_builds.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

import background_builds


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    by_module = {module: name for name, (module, _cmd) in background_builds.BUILDS.items()}
    building = [item for item in items if item.path.name in by_module]
    if not building or config.option.collectonly:
        return
    items[:] = [item for item in items if item.path.name not in by_module] + building
    for module in sorted({item.path.name for item in building}):
        background_builds.start(config, by_module[module])


def pytest_unconfigure(config: pytest.Config) -> None:
    background_builds.finish(config)
