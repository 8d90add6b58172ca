"""Every `docs/<page>.md#<anchor>` the code cites, and every link between the README, CONTRIBUTING and docs/, leads
to a page that exists and to a heading on it (GitHub's anchor of the heading); and nothing cites a design document
that is not in the repository."""

import re
import subprocess
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
# A citation of a design document outside the repository: its file name, or a section number after its name.
OUTSIDE_DESIGN = re.compile(r"\bDESIGN(?:\.md\b|\s+(?:section\s+)?\d)|\.\./shared\b")


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


def _tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_nothing_cites_a_design_document_outside_the_repository():
    """The design is docs/ (cited as `docs/<page>.md#<anchor>`): a citation of the design document the product
    was first described in, by name or by its section numbers, leads a reader nowhere."""
    assert OUTSIDE_DESIGN.search("the target (" + "DESIGN" + ".md section 6)")
    assert OUTSIDE_DESIGN.search("merges converge, " + "DESIGN" + " 4.7")
    assert not OUTSIDE_DESIGN.search("# LakeUI design")
    tracked = _tracked()
    assert len(tracked) > 100 and ROOT / "README.md" in tracked
    citing = [
        f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}"
        for path in tracked
        if path.is_file()
        for lineno, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE_DESIGN.search(line)
    ]
    assert not citing, "\n".join(citing)


SENTENCE_END = re.compile(r"[.!?:)*`]$")
NOT_PROSE = re.compile(r"^(#|\||[-*] |\d+\. |\s|<|>)")


def _unfinished_paragraphs(text: str) -> list[str]:
    """The last line of each prose paragraph that ends without ending its sentence and is not followed by what it
    introduces (a code block or a list, as in "made on the server with" above a command)."""
    blocks, block, fenced = [], [], False
    for line in [*text.splitlines(), ""]:
        if FENCE.match(line):
            fenced = not fenced
            blocks, block = [*blocks, block, ["```"]] if block else [*blocks, ["```"]], []
        elif fenced:
            continue
        elif not line.strip():
            blocks, block = ([*blocks, block] if block else blocks), []
        else:
            block.append(line)
    unfinished = []
    for i, lines in enumerate(blocks):
        introduces = i + 1 < len(blocks) and (blocks[i + 1][0] == "```" or NOT_PROSE.match(blocks[i + 1][0]))
        prose = lines[0] != "```" and not NOT_PROSE.match(lines[0])
        if prose and not introduces and not SENTENCE_END.search(lines[-1].rstrip()):
            unfinished.append(lines[-1])
    return unfinished


def test_no_paragraph_ends_mid_sentence():
    """A page's paragraph that stops mid-sentence ("..., beside pyiceberg in") is a page cut short."""
    assert _unfinished_paragraphs("Tested here and beside pyiceberg in\n\nHow fast it is.\n") == [
        "Tested here and beside pyiceberg in"
    ]
    assert _unfinished_paragraphs("A token is made on the server with\n\n```sh\nmake token\n```\n\nDone.") == []
    unfinished = [
        f"{page.relative_to(ROOT)}: {line}"
        for page in _markdown()
        if page.parent == ROOT / "docs" or page.parent == ROOT
        for line in _unfinished_paragraphs(page.read_text())
    ]
    assert not unfinished, "\n".join(unfinished)


def test_the_iceberg_catalog_is_not_called_read_only():
    """Engines write at a branch through the Iceberg REST catalog (docs/iceberg.md): no page or comment calls the
    catalog itself read-only (a tag or a commit id is)."""
    calling = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in _tracked()
        if path.suffix in {".md", ".py"} and path.is_file()
        for line in path.read_text(errors="replace").splitlines()
        if re.search(r"Iceberg REST catalog \(read-only\)", line)
    ]
    assert not calling, "\n".join(calling)
