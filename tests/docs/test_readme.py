"""The README stays a short front page whose links land: every relative link names a file of the
repository, and a link into a docs page names a heading of that page (the site's strict build
checks the pages' own links; the README is not one of its pages)."""

import re
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slugify(title.strip(), "-") for title in HEADING.findall(text)}


def test_the_readme_is_at_most_450_lines():
    assert len(README.read_text().splitlines()) <= 450


def test_every_relative_link_of_the_readme_lands():
    links = [link for link in LINK.findall(README.read_text()) if "://" not in link]
    assert links, "the README links nowhere"
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else README
        assert target.is_file(), f"README links to {link}: no such file"
        if anchor:
            assert anchor in anchors(target), f"README links to {link}: no such heading"
