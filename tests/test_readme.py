"""What a newcomer's README must hold (issue 33, req. 8): a table of contents naming every
section, the way to a clean fleet in its first lines, no pointer to a file a clone lacks."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_the_contents_list_every_section_with_a_working_anchor() -> None:
    headings = re.findall(r"^#{2,3} (.+)$", README, re.M)
    contents = README.split("Contents:", 1)[1].split("\n## ", 1)[0]
    links = re.findall(r"- \[(.+?)\]\(#([^)]+)\)", contents)
    assert [title for title, _ in links] == headings

    def anchor(title: str) -> str:  # GitHub's: lower case, punctuation dropped, spaces to hyphens
        return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")

    assert [target for _, target in links] == [anchor(title) for title in headings]


def test_the_first_lines_say_how_to_start_clean_and_nothing_points_outside_the_clone() -> None:
    assert "make up FRESH=1" in "\n".join(README.splitlines()[:15])
    assert "DESIGN.md" not in README
    for target in re.findall(r"\]\(((?:docs|config|deploy)/[^)#]+)\)", README):
        assert (Path(__file__).resolve().parents[1] / target).exists(), target
