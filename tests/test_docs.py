"""The documentation holds together: the README stays short (what, who, the two set-up commands, links),
every relative link of the README and of docs/ reaches a file that exists (and a heading, when it names
one), and the guide's index lists each of its pages in order."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve()
        if not file.exists():
            problems.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", file.read_text(encoding="utf-8"), re.M)
            if anchor not in {_slug(h) for h in headings}:
                problems.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return problems


def test_the_readme_is_short_and_points_at_the_guide():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250, "the README is for what, who, the two commands and links"
    for needed in ("make site", "make test", "docs/guide/README.md", "docs/students.md"):
        assert needed in readme, needed


def test_every_link_of_the_documentation_resolves():
    problems = [problem for page in PAGES for problem in broken_links(page)]
    assert problems == []


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n[ok](#top) [gone](missing.md) [heading](page.md#nowhere) [web](https://x.org)\n")
    assert broken_links(page, tmp_path) == ["page.md: missing.md (no such file)",
                                            "page.md: page.md#nowhere (no such heading)"]


def test_the_guide_index_lists_every_page_in_order():
    guide = ROOT / "docs" / "guide"
    index = (guide / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in guide.glob("[0-9][0-9]-*.md"))
    linked = re.findall(r"\]\((\d\d-[\w-]+\.md)\)", index.split("## A week")[0])
    assert linked == pages
