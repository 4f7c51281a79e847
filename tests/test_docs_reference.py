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


def _nav_pages(items: list[object], section: str = "") -> list[tuple[str, str, str]]:
    """(section, title, page) of every page in mkdocs.yml's nav, in order."""
    pages: list[tuple[str, str, str]] = []
    for item in items:
        assert isinstance(item, dict)
        for title, value in item.items():
            if isinstance(value, list):
                pages += _nav_pages(value, title)
            else:
                pages.append((section, title, value))
    return pages


def test_the_home_page_table_lists_the_nav() -> None:
    """docs/index.md's page table names every page of the nav but Home, in nav order."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    expected = [page for page in _nav_pages(nav) if page[2] != "index.md"]
    row = re.compile(r"^\| ([^|]*?) *\| \[([^\]]+)\]\(([^)]+)\) \|", re.MULTILINE)
    listed = [m.groups() for m in row.finditer((ROOT / "docs" / "index.md").read_text())]
    assert listed == expected


def test_the_error_table_has_every_error_class() -> None:
    """docs/concepts.md, "Errors": one row per error class, with its code."""
    from anarchon import errors

    text = (ROOT / "docs" / "concepts.md").read_text()
    rows = {
        m.group(2): m.group(1)
        for m in re.finditer(r"^\| `(ANARCHON_\w+)` \| `(\w+Error)` \|", text, re.MULTILINE)
    }
    classes = {
        name: getattr(errors, name).code for name in errors.__all__ if name != "AnarchonError"
    }
    assert rows == classes
