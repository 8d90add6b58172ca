"""Every `docs/<page>.md#<anchor>` the code cites, and every link between the README, CONTRIBUTING and docs/, leads
to a page that exists and to a heading on it (GitHub's anchor of the heading)."""

import re
import unicodedata
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".git", ".venv", "var", "node_modules", "staticfiles", "build", "dist", "artifacts", "__pycache__"}
CODE_SUFFIXES = {".py", ".html", ".js", ".css", ".toml", ".yml", ".yaml", ".sh", ".txt", ".cfg"}
CODE_NAMES = {"Makefile", "Dockerfile", "run"}
# A citation in code or prose: `docs/merge-semantics.md#primary-key-tables`, `docs/api.md#write-strategies`.
CITATION = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)#([\w-]+)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        if path.is_file() and not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts):
            found.append(path)
    return found


def _markdown() -> list[Path]:
    return sorted(p for p in _files() if p.suffix == ".md")


def _code() -> list[Path]:
    return sorted(p for p in _files() if p.suffix in CODE_SUFFIXES or p.name in CODE_NAMES)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text as rendered (no markup), lower case, only letters, digits, `-` and `_`
    kept, spaces made `-`."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)  # code spans keep their text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"[*_]{2}(.+?)[*_]{2}", r"\1", text)  # bold
    text = unicodedata.normalize("NFC", text.strip().lower())
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """The heading anchors of a Markdown page (repeated headings get -1, -2, ... as on GitHub); none in code blocks."""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fenced or not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def _prose(page: Path) -> str:
    """A Markdown page without its fenced code blocks."""
    lines, fenced = [], False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return "\n".join(lines)


def _broken(target: Path, anchor: str | None) -> str | None:
    if not target.exists():
        return "no such file"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"no heading #{anchor} (headings: {', '.join(sorted(anchors(target)))})"
    return None


def _citations_in_code() -> list[tuple[str, Path, str]]:
    """(where, page, anchor): a citation in code names a page from the repository's root."""
    cited = []
    for path in _code():
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for page, anchor in CITATION.findall(line):
                cited.append((f"{path.relative_to(ROOT)}:{lineno}", ROOT / page, anchor))
    return cited


def _references_in_markdown() -> list[tuple[str, Path, str | None]]:
    """(where, target, anchor): a link is relative to its page; a citation in prose that starts with `docs/` is
    from the root (as in code), any other from the page's folder."""
    found = []
    for page in _markdown():
        where = str(page.relative_to(ROOT))
        text = _prose(page)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            found.append((f"{where} link {target}", (page.parent / file) if file else page, anchor or None))
        for cited, anchor in CITATION.findall(LINK.sub("", text)):
            base = ROOT if cited.startswith("docs/") else page.parent
            found.append((f"{where} cites {cited}#{anchor}", base / cited, anchor))
    return found


def test_the_slug_is_githubs():
    assert slug("Concurrent writes and `lakeui_check`") == "concurrent-writes-and-lakeui_check"
    assert slug("Other engines: the Iceberg REST catalog, and Arrow reads") == (
        "other-engines-the-iceberg-rest-catalog-and-arrow-reads"
    )
    assert slug("4.2 Databases (rule table)") == "42-databases-rule-table"
    assert slug("review_rows.py: what a reviewer waits for") == "review_rowspy-what-a-reviewer-waits-for"


def test_repeated_headings_and_code_blocks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Notes\n\n```sh\n# not a heading\n```\n\n## Notes\n### Notes\n")
    assert anchors(page) == {"notes", "notes-1", "notes-2"}


def test_the_scans_find_what_they_must():
    """The citations the code is known to make are found: a test that finds nothing would pass on anything."""
    cited = {(page.relative_to(ROOT).as_posix(), anchor) for _, page, anchor in _citations_in_code()}
    assert ("docs/merge-semantics.md", "primary-key-tables") in cited
    assert ("docs/architecture.md", "layers") in cited
    assert len(cited) > 20
    assert len(_references_in_markdown()) > 50


@pytest.mark.parametrize("scan", [_citations_in_code, _references_in_markdown], ids=["code", "markdown"])
def test_every_cited_page_and_heading_exists(scan):
    broken = [f"{where}: {problem}" for where, target, anchor in scan() if (problem := _broken(target, anchor))]
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_front_door():
    readme = ROOT / "README.md"
    assert readme.stat().st_size < 20_000
    text = readme.read_text()
    assert text.index("make run") < text.index("## ") and text.index("make test") < text.index("## ")


def test_the_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    unlisted = [p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md" and f"({p.name})" not in index]
    assert not unlisted, f"docs/README.md does not list {unlisted}"
