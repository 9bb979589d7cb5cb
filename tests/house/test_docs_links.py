"""The README is the front door and fits on a screen or two; every relative link in it, in
CHANGELOG.md and in docs/ leads to a file that exists, and every #anchor to a heading of that
file."""

import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(path: Path, *, keep_code: bool = False) -> list[str]:
    """The page's lines outside fenced code blocks; inline code spans blanked unless kept."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line if keep_code else CODE_SPAN.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").lower()
    kept = "".join(
        ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in ("L", "N", "M")
    )
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor on the page, repeats numbered as GitHub numbers them."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(path, keep_code=True):  # a heading may hold code
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    """The targets of the page's links and images that point inside the repository."""
    return [
        target
        for line in prose_lines(path)
        for target in LINK.findall(line)
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I)  # http:, https:, mailto: …
    ]


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / file_part).resolve() if file_part else path
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no heading #{anchor} in {destination.name}")
    return broken


def test_the_readme_fits_on_a_screen_or_two():
    """At most 250 lines: what it is, a picture, the commands and a map of docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_every_relative_link_resolves_to_a_file_and_heading():
    """A link in README.md, CHANGELOG.md or docs/*.md names a file that exists, and its #anchor
    a heading."""
    broken = {
        str(page.relative_to(ROOT)): problems for page in PAGES if (problems := broken_links(page))
    }
    assert broken == {}


def test_the_readme_links_every_page_of_docs():
    """The README's map of docs/ names every page there, so none is left unfound."""
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in relative_links(README)}
    assert [page.name for page in PAGES[1:] if page.resolve() not in linked] == []


def test_the_checker_finds_a_broken_file_and_a_broken_anchor(tmp_path):
    """What the checks above rely on: a missing file, a missing heading and a link inside code
    are told apart, and headings get GitHub's anchors."""
    (tmp_path / "other.md").write_text("# Other\n\n## Long conversations: the window, `cost`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#long-conversations-the-window-cost) [gone](missing.md)\n"
        "[no heading](other.md#nowhere) [web](https://example.com/x) `[code](nothing.md)`\n"
        "```\n[fenced](nothing.md)\n```\n[here](#page)\n\n# Page\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no heading #nowhere in other.md",
    ]
    assert slug("Single sign-on (OIDC)") == "single-sign-on-oidc"
