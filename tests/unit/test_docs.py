"""The README is a landing page whose links resolve; every reference page is in the MkDocs nav."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _nav_pages(nav: list[object]) -> set[str]:
    pages: set[str] = set()
    for entry in nav:
        if isinstance(entry, dict):
            for value in entry.values():
                pages |= _nav_pages(value) if isinstance(value, list) else {str(value)}
        else:
            pages.add(str(entry))
    return pages


def test_readme_links_resolve_to_files_in_the_repository() -> None:
    text = (ROOT / "README.md").read_text()
    targets = [t for t in LINK.findall(text) if "://" not in t and not t.startswith("#")]
    assert targets, "the README should link to the reference docs"
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_readme_stays_a_landing_page_with_the_two_setup_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "make demo" in text and "make test" in text
    assert len(text.splitlines()) < 200, "move reference material into docs/"


def test_every_docs_page_is_in_the_mkdocs_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages == _nav_pages(config["nav"])
