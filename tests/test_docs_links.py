"""The README and docs/ link only to files of the project that exist, at headings that exist, and
never outside it (no ../shared): an administrator following a link lands somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs_examples import ROOT, pages

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    headings = re.findall(r"^#+\s+(.*)$", FENCE.sub("", page.read_text()), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text()))


@pytest.mark.parametrize("page", pages(), ids=[p.name for p in pages()])
def test_every_link_lands(page: Path) -> None:
    for link in links(page):
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.is_relative_to(ROOT), f"{page.name}: {link} points outside the project"
        assert target.exists(), f"{page.name}: {link}: no such file"
        if anchor and target.suffix == ".md":
            assert anchor in anchors(target), f"{page.name}: {link}: no such heading"


def test_the_readme_top_leads_to_the_slurm_guide() -> None:
    top = "\n".join((ROOT / "README.md").read_text().splitlines()[:6])
    assert "](docs/slurm.md)" in top
    guide = (ROOT / "docs" / "slurm.md").read_text()
    first = re.findall(r"^## (.*)$", guide, re.MULTILINE)[0]
    assert "Fail-safe and rollback" in first and "](slurm-failsafe.md)" in guide


def test_the_readme_fits_on_a_few_screens_and_keeps_the_set_up() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    assert "pip install -e . && uvicorn app.main:app" in readme
    assert "pip install -e '.[test]' && python -m pytest" in readme
    assert "Python 3.11 or later" in readme
