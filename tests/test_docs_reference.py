"""The API reference (docs/reference/) documents every public name; nothing cites an external spec.

Public names are the ``__all__`` of each package; each must appear in its
reference page as a mkdocstrings directive (``::: package.Name`` or the module
path it lives at) and in the table of docs/reference/index.md.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
PAGES = {
    "anarchon": "anarchon.md",
    "anarchon.testing": "testing.md",
    "anarchon.web": "web.md",
    "anarchon_redis": "redis.md",
    "anarchon_nats": "nats.md",
    "anarchon_sql": "sql.md",
}
DIRECTIVE = re.compile(r"^::: ([\w.]+)$", re.MULTILINE)
# documented by the package's own module docstring (``::: anarchon.testing``) or not an object
NOT_DIRECTIVES = {"__version__"}


def _documented(page: str) -> set[str]:
    return {
        target.rsplit(".", 1)[-1] for target in DIRECTIVE.findall((REFERENCE / page).read_text())
    }


@pytest.mark.parametrize(("module", "page"), PAGES.items())
def test_every_public_name_is_in_the_reference(module: str, page: str) -> None:
    public = set(importlib.import_module(module).__all__) - NOT_DIRECTIVES
    missing = sorted(public - _documented(page))
    assert not missing, f"docs/reference/{page} lacks {missing}"


@pytest.mark.parametrize("module", PAGES)
def test_every_public_name_is_in_the_table(module: str) -> None:
    table = (REFERENCE / "index.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith(f"| `{module}` |"))
    listed = set(re.findall(r"`(\w+)`", row))
    public = set(importlib.import_module(module).__all__)
    subclasses = {n for n in public if n.endswith("Error")}  # "AnarchonError and its subclasses"
    missing = sorted(public - listed - (subclasses - {"AnarchonError"}))
    assert not missing, f"docs/reference/index.md, row {module}, lacks {missing}"


SPEC_CITATION = "SPEC " + "\u00a7"  # spelled so that this file does not cite it


def test_no_spec_section_is_cited() -> None:
    """The repository stands alone: code and docs cite docs/ pages, not sections of a spec it lacks."""
    cited = []
    for folder in ("packages", "rust-core", "docs", "tests", "benchmarks", "scripts", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in {".py", ".rs", ".md", ".sh", ".toml", ".pyi"}:
                continue
            if any(part in {".venv", "target", "node_modules"} for part in path.parts):
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if SPEC_CITATION in line:
                    cited.append(f"{path.relative_to(ROOT)}:{number}")
    for number, line in enumerate((ROOT / "README.md").read_text().splitlines(), 1):
        if SPEC_CITATION in line:
            cited.append(f"README.md:{number}")
    assert not cited, cited


CITATION = re.compile(r"docs/([\w./-]+\.md)(?:,? \"([^\"]+)\")?")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)


def _headings(page: Path) -> set[str]:
    return {h.replace("`", "").strip().lower() for h in HEADING.findall(page.read_text())}


def test_cited_docs_pages_and_sections_exist() -> None:
    """Every ``docs/<page>.md`` cited in code names a page, and ``docs/<page>.md, "Section"`` a heading."""
    broken = []
    for folder in ("packages", "rust-core", "tests", "benchmarks", "scripts", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in {".py", ".rs", ".pyi", ".sh"} or ".venv" in path.parts:
                continue
            text = path.read_text(errors="replace")
            for match in CITATION.finditer(text):
                page, section = ROOT / "docs" / match.group(1), match.group(2)
                where = f"{path.relative_to(ROOT)}: docs/{match.group(1)}"
                if not page.is_file():
                    broken.append(f"{where} (no such page)")
                elif section is not None and section.lower() not in _headings(page):
                    broken.append(f'{where}, "{section}" (no such heading)')
    assert not broken, "\n".join(sorted(set(broken)))
